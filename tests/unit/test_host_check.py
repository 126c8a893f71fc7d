"""`p4netem host-check`: the machine's host stalls, measured by the watchers, as a table, as JSON
and as a gate (`--max-stall-ms`, exit 1). A stall is made for real with tests/tools/stallcpu.py: a
real-time busy loop above the watchers' priority holding one CPU, as a stopped virtual CPU would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the watchers need SCHED_FIFO (root)")

P4NETEM = [str(Path(sys.executable).with_name("p4netem"))]  # the venv's console script
STALL_CPU = Path(__file__).resolve().parents[1] / "tools" / "stallcpu.py"
CPU = min(os.sched_getaffinity(0))


def _check(*args: str, stall_ms: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([*P4NETEM, "host-check", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if stall_ms:
        time.sleep(1.0)  # the watchers are up (they start within ~0.1 s)
        subprocess.run([sys.executable, str(STALL_CPU), str(CPU), str(stall_ms)], check=True)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_held_cpu_shows_as_a_stall_of_that_cpu_and_fails_the_gate() -> None:
    r = _check("--seconds", "2", "--json", "--max-stall-ms", "30", stall_ms=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    m = json.loads(r.stdout)
    held = next(c for c in m["cpus"] if c["cpu"] == CPU)
    assert held["worst_ms"] >= 40 and held["late_10ms"] >= 1, m
    assert m["worst_ms"] >= held["worst_ms"] and m["late_10ms"] >= 1
    assert len(m["cpus"]) == len(os.sched_getaffinity(0)) and all(c["wakeups"] > 100 for c in m["cpus"]), m
    assert m["realtime"] is True and m["rt_period_us"] > 0


def test_the_table_says_what_a_stall_means_and_a_generous_gate_passes() -> None:
    r = _check("--seconds", "1", "--max-stall-ms", "1000")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "worst wake-up (ms late)" in r.stdout and "steal (time the hypervisor took)" in r.stdout
    # One of the two verdicts, whichever this machine earned in that second.
    assert "The machine stopped a CPU for up to" in r.stdout or "No CPU stopped for 1 ms" in r.stdout


def test_bad_options_are_usage_errors() -> None:
    r = _check("--seconds", "0")
    assert r.returncode == 2 and "--seconds" in r.stderr, r.stderr
