"""A SIGTERM whose exception Python dropped still ends `lab up` and `measure`, with the lab removed.

Their handler (p4netem.cli.signals) raised an exception where Python ran it, at the next bytecode:
in an at-fork callback or a finalizer (a dropped subprocess.Popen's __del__, dozens in a lab's
start) Python prints it as "Exception ignored" and drops it, and the command went on: a lab stayed
up at its prompt, a measure ran all its loads and exited 0. The stop is now remembered and raised
again where these commands spend their time. Each test puts the signal exactly where Python drops
it, as the at-fork tests of `p4netem switch` (tests/control/test_switch_service.py) do.
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab_env import assert_gone

P4NETEM = str(Path(sys.executable).parent / "p4netem")

# A Python statement of the lab CLI (px), run in `lab up`'s own process: a fork whose at-fork
# callback raises SIGTERM, so the handler runs inside the callback (once: later forks go on).
_DROP_IN_A_FORK = ("px import os, signal, subprocess; os.register_at_fork(after_in_parent=lambda f=[], "
                   "s=signal: f or (f.append(1), s.raise_signal(s.SIGTERM))); "
                   "subprocess.Popen(['true'], preexec_fn=lambda: None).wait()")

# `p4netem ARGS` run by a Python whose subprocess.Popen finalizer raises SIGTERM once, the first
# time it runs while the command's own SIGTERM handler is installed and the path ARM (argv[1];
# empty: none) exists: the handler then runs inside the finalizer.
_DROP_IN_A_FINALIZER = """
import signal, subprocess, sys
from pathlib import Path
arm = sys.argv.pop(1)
finalize = subprocess.Popen.__del__
fired = []

def __del__(self, *args, **kwargs):
    try:
        if (not fired and callable(signal.getsignal(signal.SIGTERM))
                and (not arm or Path(arm).exists())):
            fired.append(True)
            signal.raise_signal(signal.SIGTERM)
    finally:
        finalize(self, *args, **kwargs)

subprocess.Popen.__del__ = __del__
from p4netem.cli import main
sys.argv[0] = "p4netem"
main()
"""


class _Output:
    """A process's output (stdout and stderr together), read as it comes."""

    def __init__(self, proc: subprocess.Popen):
        self.text = ""
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.text += line

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if m := re.search(pattern, self.text):
                return m
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in:\n{self.text}")


def _start(tmp_path: Path, argv: list[str], stdin=subprocess.DEVNULL) -> tuple[subprocess.Popen, _Output]:
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "200", "P4NETEM_RUN_DIR": str(tmp_path / "run")})
    return proc, _Output(proc)


def _lab_prefix(tmp_path: Path, proc: subprocess.Popen, out: _Output, timeout: float = 120) -> str:
    """The prefix of the lab's names: its record (run dir/PREFIX.json) is written before it builds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if records := [p for p in (tmp_path / "run").glob("p4n*.json")]:
            return records[0].stem
        time.sleep(0.01)
    raise AssertionError(f"no lab record in {tmp_path / 'run'}:\n{out.text}")


def _ended(proc: subprocess.Popen, out: _Output, timeout: float, what: str) -> int:
    """The exit code; a process still running after `timeout` is stopped by a real SIGTERM (which
    its handler raises) and the test fails."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        pytest.fail(f"{what} went on for {timeout:.0f} s after a SIGTERM Python dropped:\n{out.text}")


def test_a_sigterm_dropped_in_a_fork_ends_lab_up_at_its_prompt(tmp_path):
    """The lab CLI's command forks and the SIGTERM lands in the at-fork callback: the CLI waited at
    its prompt (standard input stays open) with the lab up, for good."""
    proc, out = _start(tmp_path, [P4NETEM, "lab", "up", "inline"], stdin=subprocess.PIPE)
    try:
        prefix = out.wait_for(r"(p4n[0-9a-z]+)client").group(1)
        out.wait_for(r"switch: p4netem gRPC")
        proc.stdin.write(_DROP_IN_A_FORK + "\n")
        proc.stdin.flush()
        code = _ended(proc, out, 60, "lab up")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    assert "Exception ignored" in out.text, out.text    # Python did drop it
    assert code == 128 + signal.SIGTERM, out.text
    assert "terminated: lab removed" in out.text, out.text
    assert_gone(prefix, [])


def test_a_sigterm_dropped_during_the_start_ends_lab_up_before_its_script(tmp_path):
    """The SIGTERM lands in a Popen's finalizer while the lab starts: `lab up` went on to run its
    --cmd (here a 10-minute sleep) and exited 0."""
    proc, out = _start(tmp_path, [sys.executable, "-c", _DROP_IN_A_FINALIZER, "", "lab", "up", "inline",
                                  "--cmd", "client sleep 600"])
    try:
        prefix = _lab_prefix(tmp_path, proc, out)
        code = _ended(proc, out, 120, "lab up")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Exception ignored" in out.text, out.text
    assert code == 128 + signal.SIGTERM, out.text
    assert "terminated: lab removed" in out.text, out.text
    assert_gone(prefix, [])
    assert not list((tmp_path / "run").glob("*.json")), "the lab's record is left"


def test_a_sigterm_dropped_during_a_load_ends_measure_with_its_partial_results(tmp_path):
    """The SIGTERM lands in a Popen's finalizer after the first load was written: measure ran the
    loads left and exited 0 as if nothing had come."""
    res = tmp_path / "res"
    loads = 8
    proc, out = _start(tmp_path, [sys.executable, "-c", _DROP_IN_A_FINALIZER, str(res / "runs.csv"), "measure",
                                  "--profile", "lan", "--protocol", "h1.1", "--plain", "--reps", str(loads),
                                  "--out", str(res)])
    try:
        prefix = _lab_prefix(tmp_path, proc, out)
        code = _ended(proc, out, 300, "measure")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Exception ignored" in out.text, out.text
    assert code == 128 + signal.SIGTERM, out.text
    assert "terminated; partial results" in out.text, out.text
    with open(res / "runs.csv") as f:
        assert 1 <= len(list(csv.DictReader(f))) < loads, out.text   # the loads done before the stop
    assert_gone(prefix, [])
