"""Bernoulli loss accuracy: PACKETS numbered datagrams through profile 1 with loss_prob = P.

measured = 1 - (distinct sequence numbers received) / (datagrams sent). Under the configured model the
number lost is Binomial(n, P), so sigma = sqrt(P (1 - P) / n) and the figure is
|measured - P| / sigma. The switch's own drop counter (reason loss_random) and the sink's count are both
recorded, so that a loss outside the switch (socket buffers) would show as a difference between them.
"""
from __future__ import annotations

import math

from p4netem import pipeline as pl

from common import send, sink
from topo import Topo

P = 0.01
PACKETS = 100_000
PPS = 25_000
FRAME = 100
PORT = 5401


def prob_u32(p: float) -> int:
    return min(0xFFFFFFFF, round(p * 2**32))


def measure(t: Topo, ctl) -> dict:
    ctl.set_impairment(1, 0, loss_prob=prob_u32(P))
    before = ctl.loss_random_drops(1, 0)
    with sink(t, t.h2, PORT, idle=1.0) as done:
        sent = send(t, t.h1, t.h2.ip, PORT, PPS * FRAME * 8, FRAME, count=PACKETS)
        rec = done()
    after = ctl.loss_random_drops(1, 0)
    ctl.set_impairment(1, 0)
    n = sent["sent"] - sent["send_errors"]
    got = len(set(rec["seq"]))
    measured = 1 - got / n
    sigma = math.sqrt(P * (1 - P) / n)
    switch_drops = None if before is None or after is None else after - before
    return {
        "loss_error_sigma": abs(measured - P) / sigma,
        "loss_measured": measured,
        "loss_config": {
            "configured": P, "loss_prob_u32": prob_u32(P), "packets_sent": n, "received": got,
            "duplicates_received": len(rec["seq"]) - got, "pps": PPS, "frame_bytes": FRAME,
            "switch_loss_random_drops": switch_drops,
            "lost_outside_switch": None if switch_drops is None else n - got - switch_drops,
            "sigma": sigma,
        },
    }


ECN_PORT = 5402
ECT0 = 2


def measure_ecn(t: Topo, ctl) -> dict:
    """netem's `ecn` (`loss 1% ecn`): the same PACKETS datagrams at P, sent ECT(0), with loss_ecn on.
    Every loss becomes a CE mark: the marks the sink sees (the TOS byte of each datagram as it
    arrived) are Binomial(n, P) like the losses above, `netem_ecn_mark_error_sigma` = |marked / n -
    P| / sigma; nothing may be lost in the switch (`netem_ecn_switch_drops`, the loss drop counters),
    and the switch's ecn_mark counter must equal the marks on the wire."""
    ctl.set_impairment(1, 0, loss_prob=prob_u32(P), loss_ecn=1)
    before = ctl.counters(1, 0)
    try:
        with sink(t, t.h2, ECN_PORT, idle=1.0) as done:
            sent = send(t, t.h1, t.h2.ip, ECN_PORT, PPS * FRAME * 8, FRAME, count=PACKETS, tos=ECT0)
            rec = done()
        ctl.wait_idle(1, 0)
        after = ctl.counters(1, 0)
    finally:
        ctl.set_impairment(1, 0)
    n = sent["sent"] - sent["send_errors"]
    tos = dict(zip(rec["seq"], rec["tos"]))
    marked = sum(1 for v in tos.values() if v >= 0 and v & 3 == 3)
    unmarked = sum(1 for v in tos.values() if v == ECT0)
    sigma = math.sqrt(P * (1 - P) / n)
    drops = sum(after.drops[r] - before.drops[r] for r in (pl.DropReason.LOSS_RANDOM, pl.DropReason.LOSS_BURST))
    return {
        "netem_ecn_mark_error_sigma": abs(marked / n - P) / sigma,
        "netem_ecn_switch_drops": drops,
        "netem_ecn_config": {
            "configured": P, "packets_sent": n, "received": len(tos), "marked_ce_on_wire": marked,
            "unmarked_ect0": unmarked, "other_tos": len(tos) - marked - unmarked,
            "switch_ecn_marks": after.ecn_marked - before.ecn_marked, "sigma": sigma,
            "lost": n - len(tos),
        },
    }
