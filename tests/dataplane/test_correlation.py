"""netem's correlation and `gap` on the wire (contract "Correlation", stage 7's reorder).

- gap: with `reorder 100% gap 5` exactly every 5th packet skips the delay (tc-netem(8): "the 5th
  (10th, 15th, ...) packet is sent immediately"); the others take it.
- correlated loss: `loss 25% 50%` loses what netem's generator loses (bench/netem_corr_theory.py
  simulates the kernel's arithmetic): far less than 25 %, and a loss follows a loss much more often than the
  rate, which independent draws at either rate would not give.
- a correlation of 100 % repeats its first number (netem's rho = 2^32): every packet gets the
  same jitter, and a 50 % duplication copies every packet or none.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from wirestats import MS, percentile, prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason, JitterDist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from netem_corr_theory import losses  # noqa: E402  (netem's arithmetic, as the bench's reference)


def rate_and_repeat(lost: list[bool]) -> tuple[float, float]:
    """The loss rate and P(loss | the packet before was lost)."""
    after = [b for a, b in zip(lost, lost[1:]) if a]
    return sum(lost) / len(lost), sum(after) / len(after)


def test_gap_sends_every_fifth_packet_at_once(lab: TwoHostLab) -> None:
    lab.impair(UPLINK, delay_ns=20 * MS, reorder_prob=prob(1.0), reorder_gap=5)
    n = 100
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=500, port=9040)
    assert result.lost == 0 and result.duplicates == 0
    delay = dict(zip(result.seq, result.delays_ns))
    early = sorted(s for s, d in delay.items() if d < 10 * MS)
    assert early == list(range(4, n, 5)), early  # the 5th, 10th, ... (seq counts from 0)
    assert all(delay[s] >= 20 * MS for s in range(n) if s not in early)


def test_correlated_loss_is_netem_s(lab: TwoHostLab) -> None:
    p, corr, n = prob(0.25), prob(0.50), 30_000
    lab.impair(UPLINK, loss_prob=p, loss_corr=corr)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=7500, port=9041)
    present = set(result.seq)
    rate, repeat = rate_and_repeat([s not in present for s in range(n)])
    want_rate, want_repeat = rate_and_repeat(losses(p, corr, 400_000, random.Random(11)))
    # About 0.070 and 0.30. Standard errors at 30k packets: 0.002 for the rate (the losses
    # cluster), 0.01 for the repeat (about 2100 losses); the bounds are 5 of them. Independent
    # draws would give 0.25 / 0.25, or at the same rate 0.07 / 0.07.
    assert abs(rate - want_rate) < 0.01, f"loss {rate:.4f}, netem's {want_rate:.4f}"
    assert abs(repeat - want_repeat) < 0.05, f"P(loss | loss) {repeat:.3f}, netem's {want_repeat:.3f}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n and c.drops[DropReason.LOSS_RANDOM] == result.lost


def test_full_correlation_repeats_the_first_number(lab: TwoHostLab) -> None:
    jitter = 5 * MS
    lab.impair(UPLINK, delay_ns=20 * MS, jitter_ns=jitter, jitter_dist=JitterDist.UNIFORM, reorder_mode=1,
               delay_corr=prob(1.0), jitter_mod_recip=(1 << 64) // (2 * jitter),
               dup_prob=prob(0.5), dup_corr=prob(1.0))
    n = 400
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=400, port=9042)
    assert result.lost == 0
    # Every copy or none (independent 50 % would copy about 200).
    assert result.duplicates in (0, n), result.duplicates
    # One jitter for all: the delays' spread is the path's noise, not the +/- 5 ms of the jitter
    # (quantiles: a host stall moves a few packets, not the 10th and 90th percentiles).
    delays = result.delays_ns
    assert percentile(delays, 90) - percentile(delays, 10) < 0.5 * MS
    assert 15 * MS - 0.2 * MS <= percentile(delays, 50) < 25 * MS + 1 * MS
