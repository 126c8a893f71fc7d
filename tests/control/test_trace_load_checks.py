"""`p4netem trace load` checks the profile it will apply before it writes the traces: a base
profile that is refused once its traced direction loses its rate (an `overhead` or `bearers` need
one) left the trace written into the switch's trace registers while the command said exit 1
(docs/cli.md: an invalid profile writes nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4netem import pipeline as pl
from p4netem.cli.trace_cmd import _exact_profile
from p4netem.lab import SwitchProcess
from p4netem.p4rt import P4RuntimeClient
from p4netem.p4rt.encoding import decode
from p4netem.p4rt.entries import build_register_entry
from p4netem.profiles import ProfileError
from p4netem.profiles.link import TracePlacement
from p4netem.profiles.yaml_files import load_profile_library

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "constant-6mbit.trace"


def _trace_cells(switch: SwitchProcess) -> list[int]:
    """The first trace-opportunity register cells, as the switch holds them (all 0: no trace)."""
    client = P4RuntimeClient(switch.grpc_addr).connect()
    try:
        client.fetch_pipeline()
        cells = [build_register_entry(client.info, pl.TRACE_OPPORTUNITY_MS, i) for i in range(4)]
        return [decode(e.register_entry.data.bitstring) for e in client.read(*cells)]
    finally:
        client.close()


def test_a_refused_base_profile_writes_no_trace(bare_switch: SwitchProcess, tmp_path) -> None:
    base = tmp_path / "ov.yaml"
    base.write_text("name: ov\nboth: {rate: 10Mbit, overhead: 20}\n")
    env = {**os.environ, "P4NETEM_ADDR": bare_switch.grpc_addr}
    r = subprocess.run([str(P4NETEM), "trace", "load", "--downlink", str(TRACE), "--profile", str(base)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and "downlink.overhead: 20 bytes needs a rate" in r.stderr, r
    assert _trace_cells(bare_switch) == [0, 0, 0, 0]  # no trace written
    # The same profile with the rate it needs left to a direction without a trace is fine.
    base.write_text("name: ov\nuplink: {rate: 10Mbit, overhead: 20}\ndownlink: {delay: 5ms}\n")
    r = subprocess.run([str(P4NETEM), "trace", "load", "--downlink", str(TRACE), "--profile", str(base)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r


def test_a_base_of_a_queue_and_an_aqm_without_rate_is_taken(bare_switch: SwitchProcess, tmp_path) -> None:
    """mm-link's `--downlink-queue=codel --downlink-queue-args=packets=100`: the base holds the
    queue and the AQM, the trace is the link. Such a file alone is no whole link (a queue limit
    needs a rate), and `trace load --profile` refused it: it had to carry a rate it then dropped."""
    base = tmp_path / "mm-queue.yaml"
    base.write_text("name: mm-queue\nboth: {queue: 100, aqm: codel, delay: 10ms}\n")
    env = {**os.environ, "P4NETEM_ADDR": bare_switch.grpc_addr}
    r = subprocess.run([str(P4NETEM), "trace", "load", "--uplink", str(TRACE), "--downlink", str(TRACE),
                        "--profile", str(base)], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r
    r = subprocess.run([str(P4NETEM), "show", "--json"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r
    shown = r.stdout
    assert shown.count('"trace"') >= 2 and "codel" in shown, shown
    # A direction without a trace still needs a rate for its queue, as any profile.
    r = subprocess.run([str(P4NETEM), "trace", "load", "--downlink", str(TRACE), "--profile", str(base)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and "uplink.queue: a queue limit needs a rate" in r.stderr, r


def _shown(env: dict) -> dict:
    r = subprocess.run([str(P4NETEM), "show", "--json"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def test_a_traced_directions_rate_is_checked_not_dropped_unread(bare_switch: SwitchProcess, tmp_path) -> None:
    """The base's rate of a traced direction is left out (the trace is the link) but was never read:
    `rate: fast` passed. It is an error naming the field and the allowed rates, with nothing written;
    a valid one is taken (a whole profile is a base) with a warning that it is not used."""
    env = {**os.environ, "P4NETEM_ADDR": bare_switch.grpc_addr}
    base = tmp_path / "fast.yaml"
    library = tmp_path / "lib.yaml"

    def load(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(P4NETEM), "trace", "load", "--downlink", str(TRACE), *args],
                              capture_output=True, text=True, timeout=60, env=env)

    allowed = 'is not a rate (units: bit, kbit, Mbit, Gbit (optionally /s), or "unlimited"); allowed 1kbit..100Gbit'
    base.write_text("name: fast\nboth: {delay: 5ms, rate: 1Mbit}\ndownlink: {rate: fast, queue: 20}\n")
    r = load("--profile", str(base))
    assert r.returncode == 1 and f'{base}: downlink.rate: "fast" {allowed}' in r.stderr, r
    assert _shown(env)["rules"] == []
    assert _trace_cells(bare_switch) == [0, 0, 0, 0]  # no trace written
    # Under `both`, with both directions traced: named once, where it was written; in a --profiles
    # library, a profile that is whole only with the traces is checked the same way (same code, in process).
    placed = {d: TracePlacement(opportunities=1000, period=2000) for d in ("uplink", "downlink")}
    with pytest.raises(ProfileError) as err:
        _exact_profile({"name": "fast", "both": {"rate": "fast", "queue": 20}}, placed)
    assert [str(p) for p in err.value.problems] == [f'both.rate: "fast" {allowed} or "unlimited"'], err.value
    library.write_text("profiles:\n  - {name: mm-fast, downlink: {rate: fast, queue: 20, aqm: codel}}\n")
    with pytest.raises(ProfileError, match=r'profiles\[0\]\.downlink\.rate: "fast" is not a rate'):
        load_profile_library(library, lambda doc: _exact_profile(doc, placed))
    # A rate is taken and said to be unused; one under `both` that the untraced uplink uses is not named.
    base.write_text("name: fast\nboth: {delay: 5ms, rate: 1Mbit}\ndownlink: {rate: 2Mbit, queue: 20}\n")
    r = load("--profile", str(base))
    assert r.returncode == 0, r
    assert r.stderr.count("warning") == 1 and (f"{base}: downlink.rate: 2Mbit is not used: the trace is the link"
                                               in r.stderr), r
    [rule] = _shown(env)["rules"]
    assert "rate" not in rule["downlink"] and rule["downlink"]["queue"] == {"packets": 20}, rule
    assert rule["uplink"]["rate"] == "1Mbit", rule
