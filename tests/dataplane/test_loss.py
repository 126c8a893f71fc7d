"""Random (Bernoulli) and bursty (Gilbert-Elliott) loss, measured on the wire and in the counters."""

from __future__ import annotations

import math

from wirestats import assert_binomial, prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason


def test_bernoulli_loss(lab: TwoHostLab) -> None:
    p, n = 0.10, 20_000
    lab.impair(UPLINK, loss_prob=prob(p))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=5000, port=9020)
    assert_binomial(result.lost, n, p, "lost on the wire")
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n, f"switch saw {c.profile_in} of {n} packets"
    assert c.drops[DropReason.LOSS_RANDOM] == result.lost, (c.drops, result.lost)
    assert c.drops[DropReason.LOSS_BURST] == 0
    assert result.duplicates == 0 and result.reordered == 0


def test_gilbert_elliott_bursts(lab: TwoHostLab) -> None:
    """Good->bad 2%, bad->good 20%, lose every packet in the bad state and none in the good one:
    loss bursts are the bad-state sojourns, geometric with mean 1/r = 5; the loss rate is
    p / (p + r) = 9.1%."""
    p, r, n = 0.02, 0.20, 30_000
    lab.impair(UPLINK, ge_p=prob(p), ge_r=prob(r), ge_loss_good=0, ge_loss_bad=prob(1.0))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=7500, port=9021)
    bursts = result.loss_bursts()
    assert len(bursts) > 100, f"only {len(bursts)} loss bursts"
    mean_burst = sum(bursts) / len(bursts)
    # Geometric(r) lengths: variance (1 - r) / r^2; the mean of k of them has sd sqrt(var / k).
    sd = math.sqrt((1 - r) / r**2 / len(bursts))
    assert abs(mean_burst - 1 / r) <= 4 * sd, f"mean burst {mean_burst:.2f}, expected {1 / r:.2f} +- {4 * sd:.2f}"
    # Loss rate of the chain; successive states are correlated (lambda = 1 - p - r), which widens
    # the sd of the rate by sqrt((1 + lambda) / (1 - lambda)).
    pi_bad, lam = p / (p + r), 1 - p - r
    rate_sd = math.sqrt(pi_bad * (1 - pi_bad) / n * (1 + lam) / (1 - lam))
    loss_rate = result.lost / n
    assert abs(loss_rate - pi_bad) <= 4 * rate_sd, f"loss {loss_rate:.4f}, expected {pi_bad:.4f} +- {4 * rate_sd:.4f}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n
    assert c.drops[DropReason.LOSS_BURST] == result.lost
    assert c.drops[DropReason.LOSS_RANDOM] == 0
