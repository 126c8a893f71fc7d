"""A profile that names trace cells plays only the trace the switch holds there.

`p4netem profiles from-mahimahi ... -o walk.yaml` writes a profile whose directions name trace
cells (`trace: {opportunities, period}`, cells 0). Applied by itself (`p4netem apply walk.yaml`)
on a switch that holds no trace there, it was taken: exit 0, "applied", and the switch played
zeros, a link that followed no trace and, on p4netem-switch, lost its 20 ms delay too (pings
crossed in 0.1 ms). It is refused now, each direction named, nothing written; the command the
file's comment gives (`p4netem trace load ... --profile walk.yaml`) plays it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def cli(*args: str, addr: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "P4NETEM_ADDR": addr, "COLUMNS": "160"}
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def rules(addr: str, cwd: Path) -> list[dict]:
    r = cli("show", "--json", addr=addr, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["rules"]


def test_a_profile_naming_trace_cells_the_switch_does_not_hold_is_refused(bare_switch: SwitchProcess,
                                                                          tmp_path: Path) -> None:
    addr = bare_switch.grpc_addr
    shutil.copy(TRACES / "constant-6mbit.trace", tmp_path / "up.trace")    # 1000 opportunities / 2000 ms
    shutil.copy(TRACES / "steps-12-3mbit.trace", tmp_path / "down.trace")  # 2500 opportunities / 4000 ms
    r = cli("profiles", "from-mahimahi", "mm-delay 20 mm-link up.trace down.trace", "--name", "walk",
            "-o", "walk.yaml", addr=addr, cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    # The switch holds no trace: refused, both directions named with what to run, nothing written.
    r = cli("apply", "walk.yaml", addr=addr, cwd=tmp_path)
    assert r.returncode == 1, r
    assert r.stderr.startswith("error: walk: 2 problems"), r.stderr
    assert ("uplink.trace: the switch holds no trace of 1000 opportunities over 2000 ms at cells 0..999 "
            "(cell 999 holds 0 ms, not the period)") in r.stderr, r.stderr
    assert "downlink.trace: the switch holds no trace of 2500 opportunities over 4000 ms" in r.stderr, r.stderr
    assert "p4netem trace load --uplink FILE --downlink FILE --profile PROFILE" in r.stderr, r.stderr
    assert rules(addr, tmp_path) == []

    # The command in the file's comment loads the traces and applies the file.
    [play] = [line for line in (tmp_path / "walk.yaml").read_text().splitlines()
              if line.startswith("# Play it with: ")]
    words = shlex.split(play.removeprefix("# Play it with: "))
    assert words[:3] == ["p4netem", "trace", "load"], play
    r = cli(*words[1:], addr=addr, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    [rule] = rules(addr, tmp_path)
    assert rule["uplink"]["trace"]["opportunities"] == 1000 and rule["downlink"]["trace"]["opportunities"] == 2500
    assert rule["uplink"]["delay"] == rule["downlink"]["delay"] == "20ms", rule

    # Now the uplink's trace is at cells 0..999 (as the file says), the downlink's elsewhere: the
    # file's downlink cells 0..2499 hold the two traces' timestamps, not a trace ending at 4000 ms.
    r = cli("apply", "walk.yaml", addr=addr, cwd=tmp_path)
    assert r.returncode == 1 and "uplink.trace" not in r.stderr, r
    assert "walk: downlink.trace: the switch holds no trace of 2500 opportunities over 4000 ms" in r.stderr, r
    assert rules(addr, tmp_path) == [rule]
    # A rule playing loaded traces is changed in place as any other (its cells hold its traces).
    r = cli("set", "delay=30ms", addr=addr, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    [changed] = rules(addr, tmp_path)
    assert changed["downlink"]["trace"] == rule["downlink"]["trace"] and changed["downlink"]["delay"] == "30ms"
