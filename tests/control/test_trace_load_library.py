"""`p4netem trace load --profiles FILE --profile NAME` takes a base of only a queue limit and an AQM
(mm-link's `--downlink-queue=codel --downlink-queue-args=packets=100`) from a library file, as
`--profile FILE` takes it from a file of its own: such a profile is checked with the traces in place.
The library was read as `apply --profiles` reads it, every profile alone, and refused ("a queue
limit needs a rate")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "constant-6mbit.trace"
LIBRARY = """profiles:
  - {name: mm-codel, both: {queue: 100, aqm: codel, delay: 10ms}}
  - {name: mm-droptail, downlink: {queue: 50}, uplink: {rate: 1Mbit, queue: 20}}
  - {name: plain, both: {rate: 5Mbit, delay: 20ms}}
"""


def p4netem(switch: SwitchProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "P4NETEM_ADDR": switch.grpc_addr})


def test_a_queue_only_base_in_a_profiles_library_is_taken(bare_switch: SwitchProcess, tmp_path) -> None:
    library = tmp_path / "mm.yaml"
    library.write_text(LIBRARY)
    r = p4netem(bare_switch, "trace", "load", "--uplink", str(TRACE), "--downlink", str(TRACE),
                "--profiles", str(library), "--profile", "mm-codel")
    assert r.returncode == 0, r
    r = p4netem(bare_switch, "show", "--json")
    assert r.returncode == 0, r
    [rule] = json.loads(r.stdout)["rules"]
    for direction in ("uplink", "downlink"):
        link = rule[direction]
        assert "trace" in link and link["queue"] == {"packets": 100} and link["aqm"] == {"kind": "codel"}, link
        assert link["delay"] == "10ms" and "rate" not in link, link
    # Any profile of the library, whole alone or with the traces: mm-droptail's uplink has its rate.
    r = p4netem(bare_switch, "trace", "load", "--downlink", str(TRACE), "--profiles", str(library),
                "--profile", "plain")
    assert r.returncode == 1, r  # mm-codel's uplink: no trace, no rate
    r = p4netem(bare_switch, "trace", "load", "--uplink", str(TRACE), "--downlink", str(TRACE),
                "--profiles", str(library), "--profile", "mm-droptail")
    assert r.returncode == 0, r


def test_a_direction_without_a_trace_still_needs_a_rate(bare_switch: SwitchProcess, tmp_path) -> None:
    library = tmp_path / "mm.yaml"
    library.write_text(LIBRARY)
    r = p4netem(bare_switch, "trace", "load", "--downlink", str(TRACE), "--profiles", str(library),
                "--profile", "mm-codel")
    assert r.returncode == 1, r
    assert f"{library}: 2 problems" in r.stderr, r
    assert "profiles[0].uplink.queue: a queue limit needs a rate" in r.stderr, r
    # The same library read by apply, where no trace completes it, is refused as before.
    r = p4netem(bare_switch, "apply", "plain", "--profiles", str(library))
    assert r.returncode == 1 and "profiles[0].both.queue: a queue limit needs a rate" in r.stderr, r
