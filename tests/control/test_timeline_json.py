"""`timeline run --json` and `trace run --json` give the wall-clock times that line the changes up
with packet timestamps (tcpdump's CLOCK_REALTIME): the run's `start_wall_ns` (t = 0) and, per
change, `wall_ns` (when its flip was sent). Before, only the Python API had them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def _cli(*args: str, addr: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "P4NETEM_ADDR": addr}
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=120, env=env)


def _check_times(out: dict, before: int, after: int) -> None:
    start = out["start_wall_ns"]
    assert before < start < after, (before, start, after)
    for e in out["events"]:
        late_ns = e["wall_ns"] - start - round(e["at_ms"] * 1e6)
        assert 0 <= late_ns < 50_000_000, e  # sent at its time (after it, within the run's error)


def test_run_json_has_the_wall_clock_of_t0_and_of_each_change(bare_switch: SwitchProcess, tmp_path) -> None:
    addr = bare_switch.grpc_addr
    timeline = tmp_path / "t.yaml"
    timeline.write_text("steps:\n  - apply: lan\n  - {at: 150ms, set: {delay: 5ms}}\n  - {at: 300ms, outage: 100ms}\n")
    before = time.time_ns()
    r = _cli("timeline", "run", str(timeline), "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [e["at_ms"] for e in out["events"]] == [0, 150, 300, 400]
    _check_times(out, before, time.time_ns())
    before = time.time_ns()
    r = _cli("trace", "run", "--downlink", str(TRACES / "steps-12-3mbit.trace"), "--window", "100ms", "--duration",
             "2.2s", "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [e["at_ms"] for e in out["events"]] == [0, 100, 2000]
    _check_times(out, before, time.time_ns())
