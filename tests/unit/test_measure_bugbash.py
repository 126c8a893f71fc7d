"""`p4netem measure` and `p4netem experiment` as a researcher uses them: options that were taken
and then ignored, crashed or shrank the run, a second driver on a run that was still going, the
time of a killed session, results written only at the end, the report of a stopped run. No lab
comes up here (the lab-running functions are replaced by ones that stop the command)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from p4netem.cli import app


class Reached(Exception):
    """The command got past its checks to the point where a lab would come up."""


@pytest.fixture
def no_labs(monkeypatch):
    from p4netem_studies.experiments import run as exp_run
    from p4netem_studies.harness import measure

    def reached(*_a, **_k):
        raise Reached()
    monkeypatch.setattr(measure, "run_plan", reached)
    monkeypatch.setattr(exp_run, "run_experiment", reached)


def _invoke(args):
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert "Traceback" not in res.output, res.output
    return res


def _refused(args, *needles):
    res = _invoke(args)
    assert not isinstance(res.exception, Reached), f"{args}: went on to run"
    assert res.exit_code == 2, (args, res.exit_code, res.output)
    for n in needles:
        assert n in res.output, (args, res.output)
    return res


MEASURE = ["measure", "--profile", "lan", "--protocol", "h2"]


@pytest.mark.parametrize("extra, option", [
    (["--timeout", "inf"], "--timeout"),      # was int(inf) in nginx's configuration: a traceback
    (["--silence", "inf"], "--silence"),
    (["--timeout", "nan"], "--timeout"),
    (["--timeout", "1e300"], "--timeout"),
    (["--conns-per-host", "65"], "--conns-per-host"),
    (["--conns-per-host", "2"], "--conns-per-host is for"),   # h2 alone: was ignored
    (["--dns-latency", "100ms"], "add --dns"),                # without --dns: was ignored
])
def test_measure_refuses_what_it_would_crash_on_or_ignore(no_labs, tmp_path, extra, option):
    _refused([*MEASURE, "--out", str(tmp_path / "o"), *extra], option)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("extra, named", [
    (["--cc", "cubic"], ["--cc"]),                            # ran the kernel's default
    (["--profile", "lte", "--protocol", "h2"], ["--profile", "--protocol"]),
    (["--timeout", "30", "--page", "e5-site1"], ["--timeout", "--page"]),
])
def test_a_preset_refuses_the_options_it_would_ignore(no_labs, tmp_path, extra, named):
    _refused(["measure", "--preset", "make-run", "--out", str(tmp_path / "o"), *extra],
             "--preset make-run", *named)
    # What a preset does take still goes through.
    res = _invoke(["measure", "--preset", "make-run", "--reps", "1", "--quiet",
                   "--out", str(tmp_path / "o")])
    assert isinstance(res.exception, Reached), res.output


@pytest.mark.parametrize("page, what", [
    ("uniform-2x10", "object size 10 B"),           # was "measure failed: a GIF cannot be ..."
    ("uniform-0x1000", "object count 0"),
    ("uniform-5000x1000", "object count 5000"),
    ("uniform-1x100000000000", "object size"),      # 100 GB in memory, then on disk
])
def test_uniform_pages_are_held_to_the_object_grids_range(no_labs, tmp_path, page, what):
    res = _refused([*MEASURE, "--page", page, "--out", str(tmp_path / "o")], what, page)
    assert "46 B..64 MiB" in res.output or "1..4096" in res.output
    from p4netem_studies.harness.plan import Condition
    Condition("lan", "h2", page="uniform-512x1000000")       # E4's largest page stays fine


def test_a_uniform_page_out_of_range_is_refused_before_its_model_is_built(monkeypatch):
    # uniform-100000000x100's model alone is 10^8 objects: the range comes first.
    from p4netem_studies.harness import plan

    def built(name, seed=1):
        raise AssertionError(f"{name}: model built")
    monkeypatch.setattr(plan.pages, "named", built)
    with pytest.raises(ValueError, match="object count 100000000 out of range 1..4096"):
        plan.page_model("uniform-100000000x100")


def test_the_baseline_options_are_checked_before_the_run(no_labs, tmp_path):
    """A --tolerance without '=' or a --baseline DIR without a baseline was an error only after
    the run (make-run's 8 minutes, an experiment's hours), and --tolerance without --baseline
    was ignored."""
    base = tmp_path / "base"
    base.mkdir()
    for cmd in (MEASURE, ["experiment", "run", "e1-microscape", "--quick"]):
        out = ["--out", str(tmp_path / "o")]
        _refused([*cmd, *out, "--baseline", str(base)], f"--baseline {base}", "--save-baseline")
        _refused([*cmd, *out, "--baseline", str(base), "--save-baseline", "--tolerance", "15"],
                 "--tolerance '15'")
        _refused([*cmd, *out, "--tolerance", "plt_ms_median=15"], "--tolerance needs --baseline")
        (base / "baseline.json").write_text("{not json")
        _refused([*cmd, *out, "--baseline", str(base)], "not a p4netem baseline")
        (base / "baseline.json").unlink()
        res = _invoke([*cmd, *out, "--baseline", str(base), "--save-baseline", "--tolerance",
                       "plt_ms_median=15"])
        assert isinstance(res.exception, Reached), res.output


def test_measure_will_not_write_over_an_experiments_run(no_labs, tmp_path):
    (tmp_path / "run.db").write_bytes(b"")
    _refused([*MEASURE, "--out", str(tmp_path)], "run.db")


def test_an_out_where_nothing_can_be_made_is_refused(no_labs):
    # access() says yes to root for /proc; mkdir then failed with a traceback.
    _refused([*MEASURE, "--out", "/proc/p4n-65-out"], "--out /proc/p4n-65-out")
    _refused(["experiment", "run", "e1-microscape", "--quick", "--out", "/proc/p4n-65-out"],
             "--out /proc/p4n-65-out")


@pytest.mark.parametrize("args, needle", [
    (["e2-initial-window", "--quick", "--duration", "inf"], "--duration"),   # measured for ever
    (["e2-initial-window", "--quick", "--duration", "nan"], "--duration"),
    (["e1-microscape", "--quick", "--duration", "5"], "--duration is for workload"),  # was exit 1
    (["e1-microscape", "--quick", "--seed", "7"], "--seed"),       # was a sample of one cell
    (["e1-microscape", "--quick", "--only", "client=http1.0,htttp1.1"], "htttp1.1"),
    (["e2-initial-window", "--quick", "--only", "http=1.0,1.2"], "http=1.2"),
    (["e1-microscape", "--quick", "--reps", "1001"], "--reps"),   # the definitions' 1..1000
])
def test_experiment_run_refuses_options_it_would_misread(no_labs, tmp_path, args, needle):
    _refused(["experiment", "run", *args, "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()


def test_only_names_the_values_it_has():
    from p4netem_studies.experiments.definition import load_experiment
    from p4netem_studies.experiments.pageload import build_plan
    from p4netem_studies.experiments.run import prepare
    exp = load_experiment("e1-microscape", quick=True)
    with pytest.raises(ValueError) as exc:
        build_plan(exp, only={"client": ["http1.0", "nosuch"]})
    assert "client=nosuch" in str(exc.value) and "http1.0, http1.1, pipelined" in str(exc.value)
    assert build_plan(exp, only={"client": ["http1.0"]}).conditions == 4
    # A seed with a sample (E4's own, or --sample) is what --seed is for.
    assert prepare("e4-multiplexing", quick=True, seed=7).sample.seed == 7
    assert prepare("e1-microscape", quick=True, sample=3, seed=7).sample.size == 3


# ---- the run store: a second driver, a killed session -------------------------------------------

def _stored_run(out):
    """A run directory as `experiment run` creates it, before any load."""
    from p4netem_studies.experiments.run import prepare
    from p4netem_studies.runs.execute import create
    from p4netem_studies.runs.session import Session
    exp = prepare("e1-microscape", quick=True)
    doc = {"experiment": exp.name, "source": "e1-microscape", "variant": "quick",
           "overrides": {}, "definition": exp.model_dump(mode="json")}
    return create(out, Session(definition=exp.model_dump(mode="json")), doc)


def test_resume_refuses_a_run_whose_driver_still_runs(tmp_path, monkeypatch):
    """`resume` of a run that was still going started labs of its own for every load left:
    each ran twice (24 of 36 duplicates in a quick E1), on a machine doing twice the work."""
    from p4netem_studies.experiments import run as exp_run
    from p4netem_studies.runs.store import StoreError
    _stored_run(tmp_path).close()

    def execute(*_a, **_k):
        raise StoreError("reached execute")
    monkeypatch.setattr(exp_run, "execute", execute)
    # The running driver: a process holding the run's lock (as `experiment run` does).
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(tmp_path / 'run.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.write(fd, b'pid %d (p4netem experiment run)' % os.getpid())\n"
         "print('locked', flush=True)\n"
         "time.sleep(120)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = _invoke(["experiment", "resume", str(tmp_path), "--force"])
        assert res.exit_code == 2 and "is being run by pid" in res.output, res.output
        assert "reached execute" not in res.output
    finally:
        holder.kill()
        holder.wait()
    # Its driver gone (SIGKILL too releases the lock), the resume goes on.
    res = _invoke(["experiment", "resume", str(tmp_path), "--force"])
    assert "reached execute" in res.output, res.output


def test_the_run_lock_is_one_holder_at_a_time(tmp_path):
    from p4netem_studies.runs.execute import RunInProgress, run_lock
    with run_lock(tmp_path):
        with pytest.raises(RunInProgress, match=f"pid {os.getpid()}"):
            with run_lock(tmp_path):
                pass
    with run_lock(tmp_path):      # released at the end of the first
        fd = os.open(tmp_path / "run.lock", os.O_RDONLY)
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)


def _killed_session(store, t0: float, worked_s: float) -> int:
    """A session started at t0 whose driver (a process that has ended) stored one load
    `worked_s` later and was then killed outright: no t_end, no outcome."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    sid = store.begin_session("run", "p4netem experiment run ...", 1)
    store.db.execute("UPDATE sessions SET t_start = ? WHERE id = ?", (t0, sid))
    store.set_meta(f"session_{sid}_driver", [int(dead.stdout), 1])
    key = store.jobs()[0].key
    attempt = store.start_attempt(key, "s1-lab0", sid)
    store.db.execute("UPDATE attempts SET t_start = ? WHERE id = ?", (t0 + 1, attempt))
    store.add_result(key, True, {"key": key, "rep": 0, "ok": True}, "s1-lab0", sid, 1)
    store.db.execute("UPDATE results SET t_end = ? WHERE key = ?", (t0 + worked_s, key))
    store.end_attempt(attempt, "stored")
    store.db.execute("UPDATE attempts SET t_end = ? WHERE id = ?", (t0 + worked_s, attempt))
    second = store.jobs()[1].key    # in flight when the driver died
    attempt = store.start_attempt(second, "s1-lab0", sid)
    store.db.execute("UPDATE attempts SET t_start = ? WHERE id = ?", (t0 + worked_s, attempt))
    return sid


def test_a_killed_session_stops_counting_where_it_died(tmp_path):
    """A run killed outright kept its session open, and every status, `took` and experiment.json
    duration after it counted up to now (253.8 s for 66 s of work, resumed 3 minutes after
    the kill; days later, days)."""
    from p4netem_studies.runs.execute import status
    store = _stored_run(tmp_path)
    try:
        t0 = time.time() - 3600
        sid = _killed_session(store, t0, worked_s=25)
        assert status(tmp_path).elapsed_s == pytest.approx(25, abs=1)       # was 3600
        from p4netem_studies.experiments.run import _duration
        from p4netem_studies.runs.execute import session_spans
        assert _duration(session_spans(store)) == pytest.approx(25, abs=1)
        # The next session (under the run's lock) closes it for good, in the store itself.
        assert store.close_killed_sessions() == [sid]
        ses = store.sessions()[0]
        assert ses["outcome"] == "killed" and ses["t_end"] == pytest.approx(t0 + 25)
        assert {a["outcome"] for a in store.attempts()} == {"stored", None}   # in flight
    finally:
        store.close()


# ---- measure's files while it runs --------------------------------------------------------------

def test_measure_writes_its_files_as_it_goes(tmp_path, monkeypatch):
    """measure wrote its files only at the end: a SIGKILL lost every load, and the files of an
    earlier run into the same --out stayed there as if they were the new run's."""
    from p4netem_studies.harness import measure
    from p4netem_studies.harness.metrics import wire_metrics
    from p4netem_studies.harness.plan import Plan, matrix
    from p4netem_studies.harness.runner import RunRecord
    monkeypatch.setattr(measure, "CHECKPOINT_S", 0.0, raising=False)   # every load, not 5 s
    plan = Plan("t", matrix(["lan"], ["h2", "h1.1"], [10]), repetitions=2)
    (tmp_path / "plot.png").write_bytes(b"an earlier run's")
    seen = []

    class KilledRunner:
        """Two loads done, then the process dies (no return, no finally of run_plan's)."""

        def __init__(self, _plan, _out, *, on_event, **_k):
            self.records, self.on_event, self.metadata = [], on_event, {}

        def run(self):
            for cond, rep in plan.schedule()[:2]:
                rec = RunRecord(cond, rep, time.time(), True, [], 12.0, None,
                                wire_metrics([], "10.0.0.1", 10), 31, 31, 1, ["h2"],
                                ["TLSv1.3"], None, 0.2)
                self.records.append(rec)
                self.on_event("done", {"record": rec})
                seen.append(json.loads((tmp_path / "results.json").read_text()))
            raise Reached()      # what a SIGKILL leaves is on disk now

        def finish_metadata(self):
            return self.metadata

    monkeypatch.setattr(measure, "Runner", KilledRunner)
    with pytest.raises(Reached):
        measure.run_plan(plan, tmp_path, verbose=False)
    assert [len(doc["runs"]) for doc in seen][-1] == 2
    assert seen[-1]["metadata"]["run"] == {"loads_planned": 4, "loads_done": 2, "complete": False}
    assert len((tmp_path / "runs.csv").read_text().splitlines()) == 1 + 2
    assert not (tmp_path / "plot.png").exists()
    assert not list(tmp_path.glob(".*.tmp"))


# ---- the report of a stopped run ----------------------------------------------------------------

def test_the_report_of_an_incomplete_run_says_so(tmp_path):
    (tmp_path / "experiment.json").write_text(json.dumps({
        "experiment": "e5-cellular", "variant": "quick", "loads": {"planned": 18, "stored": 7,
                                                                    "failed": 0},
        "definition": {"analysis": "e5", "name": "e5-cellular"}}))
    (tmp_path / "e5-runs.csv").write_text("")
    res = _invoke(["experiment", "report", str(tmp_path), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    assert "an incomplete run: 7 of 18 loads stored" in res.output
    page = (tmp_path / "report.html").read_text()
    assert "An incomplete run: 7 of its 18 loads are stored" in page
    (tmp_path / "file").write_text("x")
    res = _invoke(["experiment", "report", str(tmp_path), "--out",
                   str(tmp_path / "file" / "r.html")])
    assert res.exit_code == 2 and "--out" in res.output, res.output


def test_the_report_of_a_killed_run_points_to_analyze(tmp_path):
    # A run killed outright leaves its store and no files: the report said "not an
    # experiment's result directory".
    _stored_run(tmp_path).close()
    res = _invoke(["experiment", "report", str(tmp_path)])
    assert res.exit_code == 1 and f"experiment analyze {tmp_path}" in res.output, res.output
