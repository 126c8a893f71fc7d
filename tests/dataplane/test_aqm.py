"""AQM on the rate queue, on real traffic: CoDel drops (reason aqm_drop) where tail drop lets a
standing queue build, and with ECN on it marks the ECN-capable packets of a real TCP flow CE
instead of dropping them (counted in profile_ecn_mark)."""

from __future__ import annotations

import sys
import textwrap

import pytest
from wirestats import MS, late_median_delay, ms, ns_per_byte_q16, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe
from p4netem.pipeline import UPLINK, Aqm, DropReason

# Asserts on packet timing: run once more if it failed while the host stalled (the p4netem plugin).
pytestmark = pytest.mark.p4netem_timing

RATE = 10_000_000  # bit/s
SIZE = 1000  # UDP payload bytes -> 1042-byte frames
FRAME_BITS = (SIZE + UDP_IP_ETH_OVERHEAD) * 8
CODEL = {"aqm": Aqm.CODEL, "codel_target_ns": 5 * MS, "codel_interval_ns": 100 * MS}


def _late_median_delay(lab: TwoHostLab, port: int, **aqm: int) -> tuple[float, int, object]:
    """Offer 1.05x the rate for 5 s through a 1000-packet queue; the median one-way delay of the
    packets sent in the last 2 s, the packets lost, and the counters."""
    offered_pps = 1.05 * RATE / FRAME_BITS
    n = int(offered_pps * 5)
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000, **aqm)
    # Tail drop's probe loses nothing: it ends once all n are in (stop_when_complete); CoDel's waits.
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=offered_pps, size=SIZE, port=port,
                       stop_when_complete=True)
    return late_median_delay(result, n * 3 // 5), result.lost, settled_counters(lab, UPLINK)


def test_codel_drops_the_standing_queue_tail_drop_keeps(lab: TwoHostLab) -> None:
    # Tail drop: 5 % excess for 5 s piles up about 250 ms of queue, and nothing is dropped.
    tail_delay, tail_lost, tail = _late_median_delay(lab, 9060)
    assert tail_lost == 0 and tail.dropped == 0, tail.drops
    assert tail_delay > 100 * MS, f"tail drop: median late delay {ms(tail_delay)}"
    # CoDel on the same link: drops at dequeue (aqm_drop, each one a lost packet) until the
    # sojourn is back near its 5 ms target.
    codel_delay, codel_lost, c = _late_median_delay(lab, 9061, **CODEL)
    aqm_drops = c.drops[DropReason.AQM_DROP] - tail.drops[DropReason.AQM_DROP]
    assert aqm_drops > 0 and aqm_drops == codel_lost, (aqm_drops, codel_lost)
    assert c.drops[DropReason.QUEUE_FULL] == 0
    assert codel_delay < 40 * MS, f"CoDel: median late delay {ms(codel_delay)} (tail drop {ms(tail_delay)})"
    assert codel_delay < tail_delay / 4


_SINK = textwrap.dedent("""
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
    c, _ = s.accept()
    while c.recv(1 << 16):
        pass
""")
_SOURCE = textwrap.dedent("""
    import socket, sys, time
    # Reno, not the namespace's default (BBR here): BBR paces to the link and keeps the queue
    # short, so an AQM may never see a queue worth marking (a RED test saw 0 marks); Reno fills it
    # until the AQM answers, which is what these tests are about.
    c = socket.socket()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
    # A generous timeout: a CI run at load 10 saw one sendall blocked for 10 s (no ACK progress
    # while the machine was starved); the tests are about what the AQM does, not how fast.
    c.settimeout(60)
    c.connect((sys.argv[1], int(sys.argv[2])))
    end, chunk = time.monotonic() + float(sys.argv[3]), b"x" * 65536
    while time.monotonic() < end:
        c.sendall(chunk)
    c.close()
""")


def _tcp_bulk(lab: TwoHostLab, port: int, seconds: float, ecn: bool) -> None:
    """One TCP flow h1 -> h2 for `seconds`, both ends with ECN on or off (net.ipv4.tcp_ecn)."""
    for host in (lab.h1, lab.h2):
        host.ns.run(["sysctl", "-qw", f"net.ipv4.tcp_ecn={1 if ecn else 0}"])
    sink = lab.h2.ns.popen([sys.executable, "-c", _SINK, str(port)], stdout=-1, text=True)
    assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
    source = lab.h1.ns.popen([sys.executable, "-c", _SOURCE, lab.h2.ip, str(port), str(seconds)])
    assert source.wait(timeout=seconds + 120) == 0
    sink.wait(timeout=30)


def test_ecn_marks_a_tcp_flow_instead_of_dropping(lab: TwoHostLab) -> None:
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000, ecn=1, **CODEL)
    _tcp_bulk(lab, 9062, 4.0, ecn=True)
    c = settled_counters(lab, UPLINK)
    # ECN-capable segments are marked, never dropped by the AQM (a SYN or pure ACK is not
    # ECN-capable, but those do not queue behind a 5 ms target on this link).
    assert c.ecn_marked > 0, c
    assert c.drops[DropReason.AQM_DROP] == 0, c.drops
    assert c.conservation_gap() == 0


def test_codel_drops_a_tcp_flow_without_ecn(lab: TwoHostLab) -> None:
    """The same flow without ECN: the AQM has to drop (and marks nothing)."""
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000, ecn=1, **CODEL)
    _tcp_bulk(lab, 9063, 4.0, ecn=False)
    c = settled_counters(lab, UPLINK)
    assert c.drops[DropReason.AQM_DROP] > 0, c.drops
    assert c.ecn_marked == 0, c
