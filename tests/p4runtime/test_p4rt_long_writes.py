"""A long Write (a reset's wildcard zero writes over the per-UE arrays: 0.4 s idle here, 2 s and
more on a loaded host) does not hold up the switch's other RPCs. It was applied on the P4Runtime
server's one runtime worker, which also answers every connection's HTTP/2 PINGs: each reset froze
the server for its whole length, and clients with a keepalive (the web's, 1 s) dropped their
connections at every dashboard Reset (found by helper-62's soak: 503 for every reset)."""

from __future__ import annotations

import statistics
import threading
import time

from p4netem.control import Controller
from p4netem.lab import SwitchProcess
from p4netem.p4rt.client import P4RuntimeClient
from p4netem.p4rt.proto import p4runtime_pb2 as pb


def test_other_clients_are_answered_while_a_reset_writes(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        probe = P4RuntimeClient(bare_switch.grpc_addr, device_id=1, election_id=7)
        probe.connect(arbitrate=False)
        answered: list[tuple[float, float]] = []  # (sent, latency) of another client's Capabilities
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                sent = time.monotonic()
                probe._stub.Capabilities(pb.CapabilitiesRequest(), timeout=60)
                answered.append((sent, time.monotonic() - sent))
                time.sleep(0.005)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        resets: list[tuple[float, float]] = []
        try:
            for _ in range(4):
                ctl.apply("hspa")
                start = time.monotonic()
                ctl.reset()
                resets.append((start, time.monotonic()))
                time.sleep(0.05)
        finally:
            stop.set()
            poller.join(timeout=60)
            probe.close()
    during = [lat for sent, lat in answered if any(a <= sent <= b for a, b in resets)]
    reset_s = statistics.median(b - a for a, b in resets)
    # Old: a Capabilities sent during a reset waited for the rest of it (median 2.0 s of 2.0 s
    # resets, 11 answered in 8 resets); now about 0.5 ms (494 answered). Relative to the reset's
    # own length, so that a slower machine cannot make it pass or fail by itself.
    assert len(during) >= 4, (during, resets)
    assert statistics.median(during) < reset_s / 4, (statistics.median(during), reset_s, len(during))
