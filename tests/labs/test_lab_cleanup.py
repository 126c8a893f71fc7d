"""Labs leave nothing behind: no namespace, interface or process of theirs after a normal exit,
an exception inside the lab, a failed start, SIGTERM to `p4netem lab up`, or Ctrl-C (SIGINT) to
`p4netem measure`, which still writes the runs it finished. A run killed outright (SIGKILL) has no
chance to clean up: `p4netem lab clean` and the next run remove exactly its lab, never a live one,
and an owner that started its reaper (the labs of `experiment run`) has its lab removed at once."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from p4netem.lab.netns import LabError
from p4netem_studies.mininet import load_topology
from p4netem_studies.mininet.nodes import netns_pids
from child_signals import default_sigint, sigint_ignored
from lab_env import ChildOutput, alive as _alive, assert_gone as _assert_gone, netns_names as _netns_names

P4NETEM = str(Path(sys.executable).parent / "p4netem")


def _switch_pids(prefix: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"p4netem-switch.*{prefix}p"], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def test_exception_inside_the_lab_removes_everything(switch_bin):
    from p4netem_studies.mininet.lab import MininetLab
    lab = MininetLab(load_topology("cellular").expand({"ues": 2}), binary=switch_bin)
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"):
        with lab:
            lab.run("ue1", ["ping", "-c", "1", "-W", "2", lab.ip("server")])
            sleeper = subprocess.Popen(["ip", "netns", "exec", lab.ns("server"), "sleep", "60"],
                                       start_new_session=True)
            time.sleep(0.3)
            pids = [p for h in lab.topology.hosts for p in netns_pids(lab.ns(h.name))]
            pids.append(lab.switch.process.proc.pid)
            assert sleeper.pid in pids or any(_alive(p) for p in pids)
            raise RuntimeError("boom")
    sleeper.wait(5)
    assert lab.leftovers() == {}
    _assert_gone(lab.prefix, pids)


def test_failed_start_removes_everything(tmp_path):
    from p4netem_studies.mininet.lab import MininetLab
    lab = MininetLab(load_topology("inline").expand(), binary=tmp_path / "no-such-switch")
    with pytest.raises(LabError, match="not found"):
        lab.start()
    assert lab.leftovers() == {}
    _assert_gone(lab.prefix, [])


def test_sigterm_to_lab_up_removes_the_lab():
    proc = subprocess.Popen([P4NETEM, "lab", "up", "inline", "--profile", "lte", "--serve", "demo",
                             "--cmd", "client sleep 120"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        text = ChildOutput(proc).wait_for(r"serving page 'demo'", 60).string
        prefix = re.search(r"(p4n[0-9a-z]+)client", text).group(1)
        time.sleep(0.5)           # the sleep command is running in the client
        pids = [p for ns in _netns_names() if ns.startswith(prefix) for p in netns_pids(ns)]
        pids += _switch_pids(prefix)
        assert len(pids) >= 5     # shells, nginx master+worker, node-spdy x2, the switch, sleep
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    _assert_gone(prefix, pids)


def test_ctrl_c_to_measure_writes_partial_results_and_removes_the_lab(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.Popen(default_sigint([P4NETEM, "measure", "--profile", "lte", "--protocol", "h2",
                                            "--reps", "50", "--out", str(out)]), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        text = ChildOutput(proc).wait_for(r"lte\s+h2 iw10\s+#2", 90).string
        prefix = re.search(r"namespaces (p4n[0-9a-z]+)client", text).group(1)
        pids = [p for ns in _netns_names() if ns.startswith(prefix) for p in netns_pids(ns)]
        pids += _switch_pids(prefix)
        assert not sigint_ignored(proc.pid), "measure started with SIGINT ignored"
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    rows = list(csv.DictReader(open(out / "runs.csv")))
    assert 2 <= len(rows) < 50 and all(r["ok"] == "True" for r in rows)
    assert (out / "results.json").exists() and (out / "logs" / "switch.log").exists()
    _assert_gone(prefix, pids)


def _leftovers(prefix: str, pids: list[int]) -> bool:
    return any(n.startswith(prefix) for n in _netns_names()) or any(_alive(p) for p in pids)


def _without_reaper(tmp_path: Path) -> dict:
    """The environment with a `setsid` that fails first on PATH (the reaper's only use of it): a
    lab's owner runs without its reaper, as on a machine without setsid or pidfds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "setsid").write_text("#!/bin/sh\nexit 3\n")
    (bin_dir / "setsid").chmod(0o755)
    return {**os.environ, "COLUMNS": "200", "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_killed_run_is_removed_by_lab_clean_and_by_the_next_run_never_a_live_one(tmp_path, monkeypatch):
    """Issue 13, crash cleanup: `lab up` and `measure` killed with SIGKILL, their reaper unable to
    start (test_lab_killed.py has them with it), leave namespaces and servers (the switch dies
    with its owner); `p4netem lab clean`, and the next `lab up`, remove exactly those, while a lab
    whose owner (this test) lives keeps working."""
    from p4netem_studies.mininet.lab import MininetLab
    # Records of its own: any other process's clean_dead_labs (a lab starting elsewhere on the
    # machine) would otherwise remove the killed lab before this test's `lab clean` can.
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    env = _without_reaper(tmp_path)
    with MininetLab(load_topology("inline").expand()) as live:
        proc = subprocess.Popen([P4NETEM, "lab", "up", "inline", "--serve", "demo", "--cmd", "client sleep 300"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            text = ChildOutput(proc).wait_for(r"serving page 'demo'", 120).string
            prefix = re.search(r"(p4n[0-9a-z]+)client", text).group(1)
            pids = [p for ns in _netns_names() if ns.startswith(prefix) for p in netns_pids(ns)]
            pids += _switch_pids(prefix)
        finally:
            proc.kill()
            proc.wait()
        # Said once, before the lab: the lab runs on without its reaper.
        assert text.count("cannot start the lab reaper: setsid exited with status 3; if this "
                          "process is killed outright, its labs stay until the next lab starts "
                          "or `p4netem lab clean` runs") == 1, text
        time.sleep(1)
        assert _leftovers(prefix, pids), "SIGKILL left nothing: the test shows nothing"
        r = subprocess.run([P4NETEM, "lab", "clean"], capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"removed {prefix} (mininet of dead pid {proc.pid})" in r.stdout, r.stdout
        # Live labs are left alone: this test's, and any other a live process owns (in a full
        # test run, a lab fixture of the same pytest process may still be up).
        live_count = re.search(r"(\d+) live lab\(s\) left alone", r.stdout)
        assert live.prefix not in r.stdout and live_count and int(live_count.group(1)) >= 1, r.stdout
        _assert_gone(prefix, pids)
        live.run("client", ["ping", "-c", "1", "-W", "3", live.ip("server")])

        out = tmp_path / "results"
        proc = subprocess.Popen([P4NETEM, "measure", "--profile", "lte", "--protocol", "h2", "--reps", "50",
                                 "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)
        try:
            text = ChildOutput(proc).wait_for(r"lte\s+h2 iw10\s+#1", 180).string
            prefix = re.search(r"namespaces (p4n[0-9a-z]+)client", text).group(1)
            pids = [p for ns in _netns_names() if ns.startswith(prefix) for p in netns_pids(ns)]
            pids += _switch_pids(prefix)
        finally:
            proc.kill()
            proc.wait()
        time.sleep(1)
        assert _leftovers(prefix, pids)
        r = subprocess.run([P4NETEM, "lab", "up", "inline", "--cmd", "client true"], capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"removed a dead lab: {prefix} (mininet of dead pid {proc.pid})" in r.stderr, r.stderr
        assert live.prefix not in r.stderr
        _assert_gone(prefix, pids)
        live.run("client", ["ping", "-c", "1", "-W", "3", live.ip("server")])
        assert live.record is not None and live.record.path.exists()
    assert not live.record.path.exists()


def test_clean_dead_labs_checks_the_owner_by_pid_and_start_time(tmp_path, monkeypatch):
    """The library call (p4netem.lab.clean_dead_labs) on hand-made records: a lab whose owner's pid
    is alive but belongs to a later process (start time differs) is dead; a lab of a live owner is
    left alone; a sleeper in the dead lab's namespace is ended, the namespace removed."""
    from p4netem.lab import PREFIX, clean_dead_labs, unique_token
    from p4netem.lab.owner import LabRecord, Owner, start_ticks

    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    dead, live = f"{PREFIX}{unique_token()}", f"{PREFIX}{unique_token()}"
    me = Owner.current()
    # The labs' temporary directories: the dead one's goes; a live lab's stays, and so does a
    # directory a record names outside the temporary directory's own p4n-* ones.
    work = {prefix: tempfile.mkdtemp(prefix="p4n-test-") for prefix in (dead, live)}
    outside = tmp_path / "p4n-not-a-lab-dir"
    outside.mkdir()
    try:
        for prefix, owner in ((dead, Owner(me.pid, me.start + 1, me.boot)), (live, me)):
            subprocess.run(["ip", "netns", "add", f"{prefix}x"], check=True)
            LabRecord(prefix, owner, "test", path=tmp_path / "run" / f"{prefix}.json",
                      namespaces=[f"{prefix}x"], dirs=[work[prefix], str(outside)]).save()
        sleeper = subprocess.Popen(["ip", "netns", "exec", f"{dead}x", "sleep", "300"])
        deadline = time.monotonic() + 10
        while not netns_pids(f"{dead}x") and time.monotonic() < deadline:
            time.sleep(0.05)
        report = clean_dead_labs()
        assert [lab.prefix for lab in report.cleaned] == [dead] and report.live == [live]
        assert report.cleaned[0].namespaces == [f"{dead}x"] and sleeper.pid in report.cleaned[0].processes
        assert sleeper.wait(10) is not None and start_ticks(sleeper.pid) is None
        names = _netns_names()
        assert f"{dead}x" not in names and f"{live}x" in names
        assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [f"{live}.json"]
        assert not os.path.exists(work[dead]) and os.path.isdir(work[live]) and outside.is_dir()
        assert not clean_dead_labs().cleaned  # nothing twice
    finally:
        for prefix in (dead, live):
            subprocess.run(["ip", "netns", "delete", f"{prefix}x"], capture_output=True)
            shutil.rmtree(work[prefix], ignore_errors=True)


def _unused_pid_pair() -> int:
    """A pid p such that neither p nor 36 p + 1 is a live process: in base 36 (the old tokens'
    pid), p's second lab `<p>1` began p' = 36 p + 1's first, `<p>10`."""
    from p4netem.lab.owner import start_ticks
    limit = int(Path("/proc/sys/kernel/pid_max").read_text()) // 36
    return next(p for p in range(300, limit) if start_ticks(p) is None and start_ticks(36 * p + 1) is None)


def test_a_dead_lab_s_sweep_leaves_a_live_lab_whose_names_begin_with_its_prefix(tmp_path, monkeypatch):
    """Real namespaces: a dead lab's record, and a live lab whose names began with that record's
    prefix. Tokens were a base-36 pid then a counter, so pid p's second lab (`<p>1`) began pid
    36 p + 1's first (`<p>10`), and clean_dead_labs removed every namespace beginning with the dead
    lab's prefix: the live lab's too. Now tokens are fixed-width (none begins another), and a
    record's prefix that is no token of its owner (an old record, a hand-made one) sweeps only the
    names it lists."""
    from p4netem.lab import PREFIX, clean_dead_labs, netns
    from p4netem.lab.owner import LabRecord, Owner

    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    p = _unused_pid_pair()
    boot = Owner.current().boot

    def token(pid: int, n: int) -> str:
        with monkeypatch.context() as m:
            m.setattr(netns.os, "getpid", lambda: pid)
            m.setattr(netns, "_counter", itertools.count(n))
            return netns.unique_token()
    dead, live = f"{PREFIX}{token(p, 1)}", f"{PREFIX}{token(36 * p + 1, 0)}"
    old = live[:-2]           # a prefix of the live lab's names that is no token
    names = {"dead": f"{dead}y", "unlisted": f"{dead}z", "old": f"{old}q", "live": f"{live}x"}
    try:
        for name in names.values():
            subprocess.run(["ip", "netns", "add", name], check=True)
        for prefix, owner, listed in ((dead, Owner(p, -1, boot), [names["dead"]]),
                                      (old, Owner(p, -1, boot), [names["old"]]),
                                      (live, Owner.current(), [names["live"]])):
            LabRecord(prefix, owner, "test", path=tmp_path / "run" / f"{prefix}.json",
                      namespaces=listed).save()
        report = clean_dead_labs()
        left = set(_netns_names())
        assert names["live"] in left, f"the live lab's namespace {names['live']} was removed: {report}"
        assert sorted(lab.prefix for lab in report.cleaned) == sorted([dead, old]), report
        assert report.live == [live]
        # The dead labs' own: listed, or (a prefix that is its owner's token) made from its token.
        assert not {names["dead"], names["unlisted"], names["old"]} & left
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_a_mininet_lab_records_its_names_before_it_builds(switch_bin, tmp_path, monkeypatch):
    """The record lists every namespace and switch-side link the lab will make, so that the
    cleaner of a killed lab removes them by name (it swept by prefix, and prefixes were not
    prefix-free)."""
    from p4netem_studies.mininet.lab import MininetLab
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    lab = MininetLab(load_topology("inline").expand(), binary=switch_bin)
    with lab:
        saved = json.loads(lab.record.path.read_text())
        hosts = lab.topology.hosts
        assert sorted(saved["namespaces"]) == sorted(lab.ns(h.name) for h in hosts)
        assert sorted(saved["links"]) == sorted(lab._switch_intf(h.port) for h in hosts)
        assert set(saved["namespaces"]) <= set(_netns_names())
    _assert_gone(lab.prefix, [])


_STUCK_CLOSE = """
import subprocess, sys, threading
from p4netem.lab.owner import LabRecord, Owner
from p4netem_studies.runs.local import _arm_teardown_deadline

prefix = sys.argv[1]
subprocess.run(["ip", "netns", "add", prefix + "x"], check=True)
LabRecord.open(prefix, "test").add_namespace(prefix + "x")
sleeper = subprocess.Popen(["ip", "netns", "exec", prefix + "x", "sleep", "300"])
print(sleeper.pid, flush=True)
_arm_teardown_deadline(1.0)
threading.Event().wait()     # a close that never returns
"""


def test_a_lab_process_whose_close_is_stuck_removes_its_lab_at_the_deadline(tmp_path, monkeypatch):
    """A lab process of `experiment run --parallel` whose orderly close never returns (seen once:
    grpc's Channel.close waiting forever after the driver's death cut a call off) removes what its
    lab record lists when the deadline passes, and exits 143; a lab of another, live owner in the
    same directory stays."""
    from p4netem.lab import PREFIX, unique_token
    from p4netem.lab.owner import LabRecord, Owner, start_ticks
    from p4netem_studies.runs.local import FORCED_EXIT

    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    stuck, live = f"{PREFIX}{unique_token()}", f"{PREFIX}{unique_token()}"
    proc = None
    try:
        subprocess.run(["ip", "netns", "add", f"{live}x"], check=True)
        LabRecord(live, Owner.current(), "test", path=tmp_path / f"{live}.json",
                  namespaces=[f"{live}x"]).save()
        proc = subprocess.Popen([sys.executable, "-c", _STUCK_CLOSE, stuck], stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "P4NETEM_RUN_DIR": str(tmp_path)})
        sleeper = int(proc.stdout.readline())
        assert proc.wait(60) == FORCED_EXIT
        assert start_ticks(sleeper) is None
        names = _netns_names()
        assert f"{stuck}x" not in names and f"{live}x" in names
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{live}.json"]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        for prefix in (stuck, live):
            subprocess.run(["ip", "netns", "delete", f"{prefix}x"], capture_output=True)


_WATCHED = """
import subprocess, sys, threading
from p4netem.lab.owner import LabRecord
from p4netem.lab.reaper import watch_this_process

prefix, watched = sys.argv[1], sys.argv[2] == "watched"
if watched:
    watch_this_process()
    watch_this_process()     # once per process: a second call starts no second reaper
subprocess.run(["ip", "netns", "add", prefix + "x"], check=True)
LabRecord.open(prefix, "test").add_namespace(prefix + "x")
sleeper = subprocess.Popen(["ip", "netns", "exec", prefix + "x", "sleep", "300"])
print(sleeper.pid, flush=True)
threading.Event().wait()
"""


def _reapers(owner: int) -> list[int]:
    pattern = f"p4netem/lab/reaper\\.py --pidfd [0-9]+ (--start [0-9]+ )?--owner {owner}$"
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "unwatched"])
def test_a_killed_owner_s_reaper_removes_its_lab_at_once(tmp_path, monkeypatch, watched):
    """A lab owner killed outright (SIGKILL: Ray killing a lab actor, the OOM killer) that
    started its reaper (p4netem.lab.reaper, as every lab of `experiment run` does) has its lab
    removed within seconds, with no `lab clean` and no next lab; its reaper, one per owner,
    then exits. Without a reaper the lab stays (the control)."""
    from p4netem.lab import PREFIX, clean_dead_labs, unique_token
    from p4netem.lab.owner import parent_pid, start_ticks

    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    prefix = f"{PREFIX}{unique_token()}"
    proc = subprocess.Popen([sys.executable, "-c", _WATCHED, prefix,
                             "watched" if watched else "unwatched"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "P4NETEM_RUN_DIR": str(tmp_path)})
    try:
        sleeper = int(proc.stdout.readline())
        reapers = _reapers(proc.pid)
        assert len(reapers) == (1 if watched else 0), reapers
        # Not the owner's child: whatever kills the owner's children (Ray does) spares it.
        assert all(parent_pid(r) != proc.pid for r in reapers)
        proc.kill()
        proc.wait(10)
        if watched:
            _assert_gone(prefix, [sleeper, *reapers], timeout=30)
            assert not list(tmp_path.glob("p4n*.json"))
            assert f"{prefix} (test of dead pid {proc.pid}): removed 1 namespace(s)" in proc.stderr.read()
        else:
            time.sleep(3)
            assert start_ticks(sleeper) is not None and f"{prefix}x" in _netns_names()
            assert (tmp_path / f"{prefix}.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        clean_dead_labs()       # the control's lab (P4NETEM_RUN_DIR is tmp_path)
