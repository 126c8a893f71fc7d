"""RED and gentle RED on the rate queue, on real traffic: a constant overload settles with the
average queue between RED's thresholds (drops of reason aqm_drop, none at the limit, where tail drop
on the same link keeps a standing queue: tests/dataplane/test_aqm.py), and with ECN on, gentle RED
marks a real TCP flow's ECN-capable packets CE instead of dropping them."""

from __future__ import annotations

import pytest
from test_aqm import FRAME_BITS, RATE, SIZE, _tcp_bulk
from wirestats import MS, median, ms, ns_per_byte_q16, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, Aqm, DropReason

# Asserts on packet timing: run once more if it failed while the host stalled (the p4netem plugin).
pytestmark = pytest.mark.p4netem_timing

MIN_BYTES, MAX_BYTES = 30_000, 90_000  # 24 ms and 72 ms of queue at 10 Mbit/s


def _red(max_prob: float, gentle: bool) -> dict[str, int]:
    prob = round(max_prob * 2**32)
    return {"aqm": Aqm.RED, "red_min_bytes": MIN_BYTES, "red_max_bytes": MAX_BYTES, "red_max_prob": prob,
            "red_wlog": 5, "red_span_bytes": (MAX_BYTES - MIN_BYTES) * 2**32 // prob,
            "red_gentle": int(gentle), "red_idle_q48": 16_502_518_358}  # avpkt 1000 at 10 Mbit/s


def test_red_holds_the_queue_between_its_thresholds(lab: TwoHostLab) -> None:
    # 5 % more than the link carries for 5 s: the average rises until RED's drop rate matches the
    # excess (4.8 % of the packets: marks spaced uniformly in [1, 1/pb] drop 2 pb / (1 + pb), so pb
    # near 2.5 %, a quarter of the way from min to max with max_p 10 %); the queue never reaches
    # the 1000-packet limit that tail drop fills.
    offered_pps = 1.05 * RATE / FRAME_BITS
    n = int(offered_pps * 5)
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000, **_red(0.10, gentle=False))
    before = settled_counters(lab, UPLINK)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=offered_pps, size=SIZE, port=9064)
    c = settled_counters(lab, UPLINK)
    late = median([d for seq, d in zip(result.seq, result.delays_ns) if seq >= n * 3 // 5])
    aqm_drops = c.drops[DropReason.AQM_DROP] - before.drops[DropReason.AQM_DROP]
    assert aqm_drops > 0 and aqm_drops == result.lost, (aqm_drops, result.lost)
    assert c.drops[DropReason.QUEUE_FULL] == before.drops[DropReason.QUEUE_FULL]
    # The queue seen by a packet is the average's neighbourhood: between the thresholds' sojourns
    # (24..72 ms at 10 Mbit/s; the switch and veths add well under a millisecond).
    assert 20 * MS < late < 80 * MS, f"RED: median late delay {ms(late)}"
    # At least the excess (4.8 %) is dropped; more when the sender, late on a loaded machine, let
    # the queue drain and then caught up in a burst (seen: 9.8 % at load 18, with runs of drops
    # where such a burst lifted the average above max).
    assert 0.02 < result.lost / n < 0.25, (result.lost, n)


def test_gentle_red_marks_an_ecn_tcp_flow_instead_of_dropping(lab: TwoHostLab) -> None:
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000, ecn=1,
               **_red(0.02, gentle=True))
    before = settled_counters(lab, UPLINK)
    _tcp_bulk(lab, 9065, 4.0, ecn=True)
    c = settled_counters(lab, UPLINK)
    assert c.ecn_marked > before.ecn_marked, c
    assert c.drops[DropReason.AQM_DROP] == before.drops[DropReason.AQM_DROP], c.drops
    assert c.conservation_gap() == 0
