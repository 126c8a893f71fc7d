"""Options that could never do what they say are refused before anything runs.

- `p4netem radio watch --ue N` with N outside the switch's UE ids (`--ue -1`, `--ue 1048576`) watched
  a UE that can have no radio state: it waited until its timeout and exited 0, where `radio show`
  refuses the same id. Now exit 1, naming --ue and the switch's range.
- `p4netem timeline run --max-error -1` ran the whole timeline, writing every change, and then
  exited 1 because every change was "late". Now a usage error (exit 2) and nothing is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"


def cli(*args: str, addr: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "P4NETEM_ADDR": addr, "COLUMNS": "160"}
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_radio_watch_refuses_a_ue_the_switch_has_not(bare_switch: SwitchProcess) -> None:
    addr = bare_switch.grpc_addr
    for ue, shown in (("1048576", "[1048576]"), ("-1", "[-1]")):
        started = time.monotonic()
        r = cli("radio", "watch", "--ue", "3", "--ue", ue, "--timeout", "20", addr=addr)
        assert r.returncode == 1, r
        assert f"error: --ue: UE ids {shown} outside the switch's 0..1048575 (p4netem-switch --ue-ids)" in r.stderr, r
        assert "watching" not in r.stderr, r.stderr
        assert time.monotonic() - started < 15  # refused at once, not after the timeout
    # An id in range is watched as before (until the timeout: no traffic here).
    r = cli("radio", "watch", "--ue", "1048575", "--timeout", "0.5", addr=addr)
    assert r.returncode == 0 and "watching radio state changes" in r.stderr, r


def test_timeline_max_error_below_zero_is_a_usage_error(bare_switch: SwitchProcess, tmp_path: Path) -> None:
    addr = bare_switch.grpc_addr
    timeline = tmp_path / "t.yaml"
    timeline.write_text("steps:\n  - apply: lan\n")
    for bad in ("-1", "nan"):
        r = cli("timeline", "run", str(timeline), "--max-error", bad, addr=addr)
        assert r.returncode == 2 and "--max-error" in r.stderr, r
        assert json.loads(cli("show", "--json", addr=addr).stdout)["rules"] == []  # nothing written
    r = cli("timeline", "run", str(timeline), "--max-error", "1000", addr=addr)
    assert r.returncode == 0, r
    assert len(json.loads(cli("show", "--json", addr=addr).stdout)["rules"]) == 1
