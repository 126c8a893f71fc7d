"""A SIGTERM that Python dropped is raised again where a command waits (p4netem.stop_signals'
check_pending and communicate, under p4netem.cli.signals.interrupt_on_termination): the experiment
driver's loop and the wait for a page load's loader. `lab up` and `measure` end to end:
tests/labs/test_lab_stop_dropped.py.

Each runs in a fresh interpreter and puts the signal where Python drops the handler's exception: in
an at-fork callback (a Popen with a preexec_fn forks and runs them), as
tests/unit/test_run_local.py does for a parallel run's lab process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_DROP = """
import os, signal, subprocess

def drop_a_sigterm():
    # The handler runs in the at-fork callback; Python prints "Exception ignored" and goes on.
    fired = []
    def during_the_fork():
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGTERM)
    os.register_at_fork(after_in_parent=during_the_fork)
    subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
    print("went on", flush=True)
"""

# The experiment driver (runs.driver.Driver) with one lab that never comes up, as `experiment run`
# runs it (cli.signals.run_recording): the stop came during the backend's first wait, and the driver
# went on waiting for the lab for ever.
_DRIVER = _DROP + """
import sys, time
from pathlib import Path
from p4netem.cli.signals import Terminated, interrupt_on_termination
from p4netem_studies.runs.driver import Driver
from p4netem_studies.runs.store import Job, RunStore

class SilentLab:
    aborted = False
    def close(self):
        pass
    def abort(self):
        self.aborted = True

class Backend:
    waits = 0
    def start_lab(self, session, lab_id, index, shared):
        return SilentLab()
    def wait(self, labs, timeout):
        Backend.waits += 1
        if Backend.waits == 1:
            drop_a_sigterm()
        time.sleep(0.1)
        return [(lab, ("died", "aborted")) for lab in labs if lab.aborted]

store = RunStore.create(Path(sys.argv[1]))
store.write_plan([Job("load0", 0, "lan", {}, {})])
driver = Driver(store, Backend(), {}, store.begin_session("run", "test", 1), 1, run_dir=sys.argv[1])
with interrupt_on_termination():
    try:
        driver.run()
    except Terminated as exc:
        print("terminated", exc.code, "after", Backend.waits, "waits", flush=True)
"""

# The wait for a loader (web.load.run_loader): a load can take minutes; the stop came as it began.
_LOAD_WAIT = _DROP + """
import time
from p4netem.cli.signals import Terminated, interrupt_on_termination
from p4netem.stop_signals import communicate

with interrupt_on_termination():
    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, text=True)
    drop_a_sigterm()
    t0 = time.monotonic()
    try:
        communicate(proc, timeout=120)
    except Terminated as exc:
        print("terminated", exc.code, "in", round(time.monotonic() - t0), "s", flush=True)
    finally:
        proc.kill()
        proc.wait()
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                              timeout=40)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"went on for {exc.timeout} s after a SIGTERM Python dropped: {exc.stdout!r} {exc.stderr!r}")


def test_a_dropped_stop_ends_the_experiment_driver(tmp_path):
    r = _run(_DRIVER, str(tmp_path / "run"))
    assert "Exception ignored" in r.stderr, r       # Python did drop it
    lines = r.stdout.splitlines()
    assert lines[0] == "went on" and lines[1].startswith("terminated 143 after "), r


def test_a_dropped_stop_ends_the_wait_for_a_loader():
    r = _run(_LOAD_WAIT)
    assert "Exception ignored" in r.stderr, r
    lines = r.stdout.splitlines()
    assert lines[0] == "went on" and lines[1].startswith("terminated 143 in "), r
    assert int(lines[1].split()[3]) < 30, r     # looked for every second, not at the end of the 60 s load
