"""The host-stall watchers and the p4netem plugin's p4netem_timing rerun (p4netem.lab.hoststall,
p4netem/testing/stalls.py).

A stall is made for real: a SCHED_FIFO busy loop above the watchers' priority, pinned to one CPU
for STALL_MS, keeps that CPU from them exactly as a descheduled virtual CPU would. The rerun is
checked on inner pytest sessions (pytester) whose tests make that stall and fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from p4netem.lab import hoststall
from p4netem.lab.hoststall import PRIORITY, HostStalls

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the watchers and the stall need SCHED_FIFO (root)")

STALL_MS = 40
CPU = min(os.sched_getaffinity(0))
STALL_CPU = Path(__file__).resolve().parents[1] / "tools" / "stallcpu.py"

# Source of stall(): what the inner tests call to hold CPU for STALL_MS above the watchers' priority.
STALL_SRC = textwrap.dedent(f"""
    import subprocess, sys

    def stall():
        subprocess.run([sys.executable, {str(STALL_CPU)!r}, "{CPU}", "{STALL_MS}", "{PRIORITY + 10}"], check=True)
""")
namespace: dict = {}
exec(STALL_SRC, namespace)
stall = namespace["stall"]


def test_a_cpu_held_by_a_higher_priority_task_is_seen_as_a_stall_of_that_cpu() -> None:
    with HostStalls() as w:
        time.sleep(0.05)  # the watchers are up and sleeping
        stall()
        time.sleep(0.05)
    held = max((s.late_ns for s in w.stalls if s.cpu == CPU), default=0)
    assert held >= 0.75 * STALL_MS * 1e6, (held, w.stalls)
    assert w.wakes > 0 and f"on CPU {CPU} " in w.summary(10_000_000), w.summary(10_000_000)


def _inner(pytester: pytest.Pytester, body: str, ini: str = "") -> pytest.RunResult:
    pytester.makeini(f"[pytest]\np4netem_timing_quiet_s = 0.3\n{ini}")
    pytester.makepyfile(test_inner=STALL_SRC + textwrap.dedent(body))
    return pytester.runpytest("-p", "no:cacheprovider")


# The inner test fails on its first run only (a file records that it ran).
FAILS_ONCE = """
    import pathlib
    import pytest

    @pytest.mark.p4netem_timing
    def test_timing():
        ran = pathlib.Path(__file__).with_name("ran-once")
        if not ran.exists():
            ran.write_text("")
            stall()
            assert False, "late on the first run"
"""


def test_a_marked_test_that_failed_while_the_host_stalled_runs_again_and_its_second_result_stands(
        pytester: pytest.Pytester) -> None:
    result = _inner(pytester, FAILS_ONCE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*p4netem_timing tests run again after a host stall*",
        "*test_timing: passed on its second run; the first failed (AssertionError: late on the first run*"
        f"the worst * ms on CPU {CPU}*",
    ])


def test_a_second_failure_stands_and_says_what_both_runs_saw(pytester: pytest.Pytester) -> None:
    result = _inner(pytester, """
        import pytest

        @pytest.mark.p4netem_timing
        def test_timing():
            stall()
            assert False, "late every time"
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*first run, while the host stalled*",
        "*host stalls*",
        "*test_timing: FAILED on its second run; the first failed (AssertionError: late every time*",
    ])


def test_no_rerun_below_the_stall_threshold_or_without_the_marker(pytester: pytest.Pytester) -> None:
    # The same stall, but the threshold is 10 s: the first failure stands.
    result = _inner(pytester, FAILS_ONCE, ini="p4netem_timing_stall_ms = 10000")
    result.assert_outcomes(failed=1)
    assert "run again after a host stall" not in result.stdout.str()
    # Unmarked: never rerun, whatever the host did.
    (pytester.path / "ran-once").unlink()
    unmarked = _inner(pytester, FAILS_ONCE.replace("@pytest.mark.p4netem_timing", ""))
    unmarked.assert_outcomes(failed=1)
    assert "run again after a host stall" not in unmarked.stdout.str()


def test_a_watcher_whose_parent_died_stops() -> None:
    # A killed test run must not leave real-time watchers behind.
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        import os
        w = subprocess.Popen([sys.executable, {hoststall.__file__!r}, "{CPU}", str(os.getpid()), "50", "5000000",
                              "2000000"])
        print(w.pid, flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    watcher = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(200):
        try:
            os.kill(watcher, 0)
        except ProcessLookupError:
            return
        # Reaped by init once it exits; until then it shows as alive (or a zombie).
        with open(f"/proc/{watcher}/stat") as f:
            if f.read().split(") ")[1].startswith("Z"):
                return
        time.sleep(0.05)
    pytest.fail(f"watcher {watcher} still runs 10 s after its parent died")
