"""The run store (SQLite, WAL) and what resume compares: a load is never stored twice, the plan
is there before any result, a second process reads while the first writes, and every changed
field of the identity is named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from p4netem_studies.runs.identity import differences, identity
from p4netem_studies.runs.session import Session, derive_seed, job_key
from p4netem_studies.runs.store import Job, RunStore, StoreError


def _jobs(n: int) -> list[Job]:
    return [Job(job_key(f"c{i % 2}", i // 2), i, f"s{i % 2}", {"switch": derive_seed(1, str(i))},
                {"condition": f"c{i % 2}", "rep": i // 2}) for i in range(n)]


def test_plan_first_then_each_result_once(tmp_path):
    store = RunStore.create(tmp_path)
    store.write_plan(_jobs(4))
    assert [j.key for j in store.jobs()] == ["c0 #0", "c1 #0", "c0 #1", "c1 #1"]
    sid = store.begin_session("run", "test", 2)
    assert store.add_result("c1 #0", True, {"plt_ms": 1.5}, "lab0", sid, 1)
    # The same key again (a lost lab that finished after all): refused, the first one stands.
    assert not store.add_result("c1 #0", False, {"plt_ms": 9.9}, "lab1", sid, 2)
    assert [(r.key, r.ok, r.record) for r in store.results()] == [("c1 #0", True, {"plt_ms": 1.5})]
    assert not store.add_result("not planned", True, {}, "lab0", sid, 1)   # not in the plan
    assert len(store.results()) == 1
    store.close()
    with pytest.raises(StoreError, match="already holds a run"):
        RunStore.create(tmp_path)


def test_a_reader_in_another_process_sees_each_commit(tmp_path):
    store = RunStore.create(tmp_path)
    store.write_plan(_jobs(2))
    sid = store.begin_session("run", "test", 1)
    store.add_result("c0 #0", True, {"a": 1}, "lab0", sid, 1)
    # No close, no checkpoint: what a SIGKILL would leave; another process reads it.
    code = ("import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); "
            "print(db.execute('select count(*) from results').fetchone()[0])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run.db")],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1"
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_differences_name_each_changed_field():
    old = {"definition": {"repetitions": 5, "matrix": [{"a": 1}]}, "code": {"commit": "abc"}}
    new = {"definition": {"repetitions": 3, "matrix": [{"a": 1}]}, "code": {"commit": "abd"}}
    assert differences(old, new) == ["definition.repetitions: 5 -> 3",
                                     "code.commit: 'abc' -> 'abd'"]
    assert differences(old, json.loads(json.dumps(old))) == []
    ident = identity({"x": 1})
    assert set(ident) == {"definition", "code", "machine_tcp"}
    assert ident["machine_tcp"]["kernel"]
    assert "net.ipv4.tcp_allowed_congestion_control" in ident["machine_tcp"]


def test_jobs_of_a_quick_study_have_stable_keys_and_seeds():
    from p4netem_studies.experiments.definition import load_experiment
    exp = load_experiment("e5-cellular", quick=True)
    a = Session(exp.model_dump(mode="json")).jobs()
    b = Session(json.loads(json.dumps(exp.model_dump(mode="json")))).jobs()
    assert a == b and len(a) == 18 and len({j.key for j in a}) == 18
    assert len({j.seeds["switch"] for j in a}) == 18
    assert all(0 < j.spec["cpu_weight"] <= 1 for j in a)


def test_time_left_costs_each_load_at_its_own_shards_median():
    """A run stopped with only its slow shard left must not be estimated at the fast shards' pace."""
    from p4netem_studies.runs.execute import estimate_left
    jobs = _jobs(8)                               # shard s0: even seqs, s1: odd seqs
    attempts = [{"key": j.key, "outcome": "stored", "t_start": 0.0,
                 "t_end": 60.0 if j.shard == "s0" else 1.0} for j in jobs[:4]]
    done = {j.key for j in jobs[:4]}
    # Left: two s0 loads of 60 s and two s1 loads of 1 s, on 2 labs.
    assert estimate_left(jobs, done, attempts, 2) == pytest.approx((60 + 60 + 1 + 1) / 2)
    # A shard with nothing stored yet is costed at the median over all shards.
    only_s1 = [a for a in attempts if a["t_end"] == 1.0]
    assert estimate_left(jobs, {a["key"] for a in only_s1}, only_s1, 1) == pytest.approx(6 * 1.0)
    assert estimate_left(jobs, set(), [], 1) is None


def test_code_identity_hashes_the_switch_the_labs_run(tmp_path, monkeypatch):
    """With P4NETEM_SWITCH set (a worktree running another tree's build), the identity is that
    binary's, not the tree's missing or stale one: resume must notice a different switch."""
    from p4netem_studies.runs.identity import code_version
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"switch build a")
    b.write_bytes(b"switch build b")
    monkeypatch.setenv("P4NETEM_SWITCH", str(a))
    first = code_version()["switch_sha256"]
    monkeypatch.setenv("P4NETEM_SWITCH", str(b))
    second = code_version()["switch_sha256"]
    assert first and second and first != second


def test_failed_loads_set_aside_run_again_and_keep_their_record(tmp_path):
    store = RunStore.create(tmp_path)
    store.write_plan(_jobs(3))
    sid = store.begin_session("run", "test", 1)
    for i, (key, ok) in enumerate((("c0 #0", True), ("c1 #0", False), ("c0 #1", False))):
        attempt = store.start_attempt(key, "lab0", sid)
        store.add_result(key, ok, {"errors": None if ok else [f"boom {i}"]}, "lab0", sid, attempt)
        store.end_attempt(attempt, "stored")
    assert store.set_aside_failed() == ["c0 #1", "c1 #0"]
    assert store.done_keys() == {"c0 #0"}           # a resume runs the two again
    outcomes = {a["key"]: a["outcome"] for a in store.attempts()}
    assert outcomes == {"c0 #0": "stored", "c1 #0": "failed-retried", "c0 #1": "failed-retried"}
    kept = [json.loads(v) for k, v in store.db.execute("SELECT key, value FROM meta")
            if k.startswith("set_aside_")]
    assert [r["record"]["errors"] for r in kept[0]] == [["boom 2"], ["boom 1"]]
    assert store.set_aside_failed() == []            # nothing failed is left
    # The retried load is stored again under its key, once.
    assert store.add_result("c1 #0", True, {"errors": None}, "lab1", sid, 9)
    assert not store.add_result("c1 #0", True, {"errors": None}, "lab1", sid, 10)


def test_recheck_fails_what_todays_checks_refuse_and_keeps_the_record(tmp_path):
    """A run stored before a check existed: `experiment recheck` applies it with the run's own
    silence_s, lists first (--dry-run changes nothing), then turns the refused ok load into a
    failed one that status lists and a resume runs again, its original record kept."""
    import os
    from pathlib import Path

    from p4netem_studies.experiments.definition import load_experiment
    exp = load_experiment("e5-cellular", quick=True)
    session = Session(exp.model_dump(mode="json"))
    store = RunStore.create(tmp_path)
    store.set_meta("session", session.to_json())
    jobs = session.jobs()
    store.write_plan(jobs)
    sid = store.begin_session("run", "test", 1)
    silence_ms = exp.silence_s * 1000
    cut_early = {"plt_ms": 3000.0, "silence_cut": True, "loader_elapsed_ms": 3000.0 + silence_ms + 1,
                 "errors": []}
    within = {"plt_ms": 3000.0, "silence_cut": True, "loader_elapsed_ms": 3000.0 + silence_ms - 1,
              "errors": []}
    uncut = {"plt_ms": 3000.0, "silence_cut": False, "loader_elapsed_ms": 60_000.0, "errors": []}
    failed = {"plt_ms": None, "errors": ["boom"]}
    for job, (ok, rec) in zip(jobs, ((True, cut_early), (True, within), (True, uncut), (False, failed))):
        store.add_result(job.key, ok, rec, "lab0", sid, 1)
    store.end_session(sid, "done")
    store.close()

    cli = [str(Path(sys.executable).parent / "p4netem"), "experiment", "recheck", str(tmp_path)]
    env = {**os.environ, "COLUMNS": "200"}
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, env=env, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "1 of 3 ok loads would become failed" in dry.stdout and jobs[0].key in dry.stdout
    store = RunStore.open(tmp_path)
    assert sum(r.ok for r in store.results()) == 3           # nothing changed
    store.close()

    done = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 3 ok loads now failed" in done.stdout
    store = RunStore.open(tmp_path)
    by_key = {r.key: r for r in store.results()}
    assert not by_key[jobs[0].key].ok and by_key[jobs[1].key].ok and by_key[jobs[2].key].ok
    assert "ended the capture's page-load time at 3.00 s" in by_key[jobs[0].key].record["errors"][0]
    kept = [json.loads(v) for k, v in store.db.execute("SELECT key, value FROM meta")
            if k.startswith("rechecked_")]
    assert kept[0]["loads"] == [{"key": jobs[0].key, "record": cut_early}]
    assert sorted(store.set_aside_failed()) == sorted([jobs[0].key, jobs[3].key])  # resume runs both
    store.close()
    again = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert "0 of 2 ok loads now failed" in again.stdout

    missing = subprocess.run([*cli[:-1], str(tmp_path / "nope")], capture_output=True, text=True,
                             env=env, timeout=120)
    assert missing.returncode == 2 and "no run store" in missing.stderr and "Traceback" not in missing.stderr
