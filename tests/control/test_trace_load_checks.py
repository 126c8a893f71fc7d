"""`p4netem trace load` checks the profile it will apply before it writes the traces: a base
profile that is refused once its traced direction loses its rate (an `overhead` or `bearers` need
one) left the trace written into the switch's trace registers while the command said exit 1
(docs/cli.md: an invalid profile writes nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from p4netem import pipeline as pl
from p4netem.lab import SwitchProcess
from p4netem.p4rt import P4RuntimeClient
from p4netem.p4rt.encoding import decode
from p4netem.p4rt.entries import build_register_entry

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "constant-6mbit.trace"


def test_a_refused_base_profile_writes_no_trace(bare_switch: SwitchProcess, tmp_path) -> None:
    base = tmp_path / "ov.yaml"
    base.write_text("name: ov\nboth: {rate: 10Mbit, overhead: 20}\n")
    env = {**os.environ, "P4NETEM_ADDR": bare_switch.grpc_addr}
    r = subprocess.run([str(P4NETEM), "trace", "load", "--downlink", str(TRACE), "--profile", str(base)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and "downlink.overhead: 20 bytes needs a rate" in r.stderr, r
    client = P4RuntimeClient(bare_switch.grpc_addr).connect()
    try:
        client.fetch_pipeline()
        cells = [build_register_entry(client.info, pl.TRACE_OPPORTUNITY_MS, i) for i in range(4)]
        assert [decode(e.register_entry.data.bitstring) for e in client.read(*cells)] == [0, 0, 0, 0]
    finally:
        client.close()
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
