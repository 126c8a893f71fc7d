"""netem's `ecn` on the wire (contract stage 3, set_impairment.loss_ecn).

With loss_ecn, a packet the loss model loses is marked CE instead when it is ECN-capable, as
Linux's netem_enqueue does (`if (q->ecn && INET_ECN_set_ce(skb))`), and still dropped when it is
not. The probe sets the TOS byte of its datagrams and the receiver reads each one's TOS back
(IP_RECVTOS), so the test sees every mark; a marked datagram whose IPv4 header checksum the switch
got wrong would be dropped by the receiver's kernel and show up as lost.
"""

from __future__ import annotations

import math

from wirestats import prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason

EF = 0xB8  # DSCP 46 in the TOS byte: must survive the marking untouched
ECT0, ECT1, CE = 2, 1, 3


def test_random_loss_marks_ect_and_drops_not_ect(lab: TwoHostLab) -> None:
    p, n = 0.3, 3000
    lab.impair(UPLINK, loss_prob=prob(p), loss_ecn=1)
    bound = 5 * math.sqrt(n * p * (1 - p))  # 5 standard deviations of a binomial count (~125)

    ect = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=3000, port=9043, tos=EF | ECT0)
    assert ect.lost == 0 and ect.duplicates == 0 and ect.corrupted == 0
    marked = ect.ce_marked
    assert abs(len(marked) - p * n) < bound, f"{len(marked)} marked of {n}, expected about {p * n:.0f}"
    # Only the ECN bits changed: the others arrive as sent.
    assert set(ect.tos) == {EF | ECT0, EF | CE}, set(ect.tos)
    c = settled_counters(lab, UPLINK)
    assert c.ecn_marked == len(marked) and c.dropped == 0, c
    assert c.profile_out == n

    plain = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=3000, port=9044, tos=EF)
    assert abs(plain.lost - p * n) < bound, f"{plain.lost} lost of {n}, expected about {p * n:.0f}"
    assert plain.ce_marked == [] and set(plain.tos) == {EF}
    c2 = settled_counters(lab, UPLINK)
    assert c2.drops[DropReason.LOSS_RANDOM] == plain.lost, c2
    assert c2.ecn_marked == c.ecn_marked


def test_bursty_loss_marks_in_bursts(lab: TwoHostLab) -> None:
    # Gilbert-Elliott, all of the bad state lost: loss fraction p / (p + r) = 1/6, mean burst 1/r = 4.
    p, r, n = 0.05, 0.25, 3000
    lab.impair(UPLINK, ge_p=prob(p), ge_r=prob(r), ge_loss_good=0, ge_loss_bad=prob(1.0), loss_ecn=1)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=3000, port=9045, tos=ECT1)
    assert result.lost == 0 and result.corrupted == 0
    marked = set(result.ce_marked)
    runs, prev = 0, False
    for s in range(n):
        runs += (s in marked) and not prev
        prev = s in marked
    frac, mean_run = len(marked) / n, len(marked) / max(runs, 1)
    # Standard errors at 3000 packets (about 125 bursts): 0.017 for the fraction (bursts cluster
    # the marks), 0.31 for the mean burst (geometric, variance (1 - r) / r^2 = 12); bounds 5 of them.
    # Independent marks at the same rate would give runs of 1.2.
    assert abs(frac - 1 / 6) < 0.085, f"marked fraction {frac:.3f}"
    assert abs(mean_run - 4.0) < 1.6, f"mean run of marks {mean_run:.2f}"
    c = settled_counters(lab, UPLINK)
    assert c.ecn_marked == len(marked) and c.dropped == 0, c
