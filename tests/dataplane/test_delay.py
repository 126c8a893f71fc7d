"""Delay: a configured constant delay shows up in one-way delays measured from kernel timestamps,
relative to a no-delay baseline measured in the same test."""

from __future__ import annotations

import pytest
from wirestats import MS, median, ms, percentile

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import DOWNLINK, UPLINK

# Asserts on packet timing: run once more if it failed while the host stalled (the p4netem plugin).
pytestmark = pytest.mark.p4netem_timing

DELAY = 20 * MS
TOLERANCE = 2 * MS  # median error allowed: a 0 or 40 ms delay (or 18/22) fails
# No profile here duplicates: each probe ends once all its datagrams are in (stop_when_complete),
# not a second later; a lost one still makes it wait.


def test_constant_delay(lab: TwoHostLab) -> None:
    base = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=400, rate=400, port=9001, stop_when_complete=True)
    lab.impair(UPLINK, delay_ns=DELAY)
    delayed = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=400, rate=400, port=9002, stop_when_complete=True)

    assert base.lost == 0 and delayed.lost == 0, (base.lost, delayed.lost)
    base_median = median(base.delays_ns)
    added = median(delayed.delays_ns) - base_median
    assert abs(added - DELAY) <= TOLERANCE, f"added delay {ms(added)}, configured {ms(DELAY)}"
    # No packet leaves before its time (the switch holds each one the full delay).
    assert min(delayed.delays_ns) >= DELAY - 0.2 * MS, f"a packet took only {ms(min(delayed.delays_ns))}"
    # A constant delay adds no jitter worth the name. (p90, not the maximum: on a busy 2-core host
    # other processes can stall the switch or the probe for milliseconds now and then.)
    spread = percentile(delayed.delays_ns, 90) - median(delayed.delays_ns)
    assert spread <= 2 * MS, f"p90 - median = {ms(spread)}"
    assert delayed.reordered == 0


def test_delay_is_per_direction(lab: TwoHostLab) -> None:
    """The uplink's delay does not apply to the downlink, and vice versa."""
    lab.impair(UPLINK, delay_ns=DELAY)
    lab.impair(DOWNLINK, delay_ns=5 * MS)
    up = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=200, rate=400, port=9003, stop_when_complete=True)
    down = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=200, rate=400, port=9004, stop_when_complete=True)
    assert abs(median(up.delays_ns) - DELAY) <= TOLERANCE, ms(median(up.delays_ns))
    assert abs(median(down.delays_ns) - 5 * MS) <= TOLERANCE, ms(median(down.delays_ns))
