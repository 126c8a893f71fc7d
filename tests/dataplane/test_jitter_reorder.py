"""Jitter and reordering: with reorder_mode 0 the profile keeps release order (jitter never
reorders); with reorder_mode 1 jitter larger than the packet spacing reorders packets, and the delay
spread matches the uniform jitter distribution."""

from __future__ import annotations

import pytest
from wirestats import MS, median, ms, percentile

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, JitterDist

# Asserts on packet timing: run once more if it failed while the host stalled (the p4netem plugin).
pytestmark = pytest.mark.p4netem_timing

DELAY = 10 * MS
JITTER = 4 * MS  # uniform in [-4, +4] ms: packets 0.5 ms apart overtake each other often
COUNT, RATE = 2000, 2000
# Jitter reorders but duplicates nothing: each probe ends once all COUNT are in (stop_when_complete).


def test_reorder_mode_0_keeps_order(lab: TwoHostLab) -> None:
    lab.impair(UPLINK, delay_ns=DELAY, jitter_ns=JITTER, jitter_dist=JitterDist.UNIFORM, reorder_mode=0)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=COUNT, rate=RATE, port=9010, stop_when_complete=True)
    assert result.lost == 0
    assert result.reordered == 0, f"{result.reordered} packets reordered with reorder_mode 0"
    # Jitter still applies: delays vary by several ms (a switch ignoring jitter would not).
    delays = result.delays_ns
    assert max(delays) - min(delays) >= 3 * MS, f"delay range only {ms(max(delays) - min(delays))}"
    assert min(delays) >= DELAY - JITTER - 0.2 * MS


def test_reorder_mode_1_reorders(lab: TwoHostLab) -> None:
    lab.impair(UPLINK, delay_ns=DELAY, jitter_ns=JITTER, jitter_dist=JitterDist.UNIFORM, reorder_mode=1)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=COUNT, rate=RATE, port=9011, stop_when_complete=True)
    assert result.lost == 0
    assert result.reordered >= COUNT // 10, f"only {result.reordered} of {COUNT} packets reordered"
    delays = result.delays_ns
    # Uniform on [delay - j, delay + j]: median = delay, interquartile range = j (quantiles, not
    # moments: host stalls put a few packets far out and would inflate a standard deviation).
    assert abs(median(delays) - DELAY) <= 2 * MS, ms(median(delays))
    iqr = percentile(delays, 75) - percentile(delays, 25)
    assert 0.75 * JITTER <= iqr <= 1.35 * JITTER, f"delay IQR {ms(iqr)}, expected {ms(JITTER)}"
    assert min(delays) >= DELAY - JITTER - 0.2 * MS, ms(min(delays))
