"""A trace whose registers do not hold a consistent trace (never loaded: all zeros; a zero
`trace_period_recip`; timestamps out of order) is written by any P4Runtime client, not only the
control plane that checks it. The data plane then still sends no packet before it is ready
(pipeline contract step 6b: `begin` and `departure` are at least `ready`), so the profile's delay
is kept in full: a departure in the past used to absorb the delay (release = departure + delay
already over), and the direction's 20 ms disappeared."""

from __future__ import annotations

import pytest
from wirestats import MS, ms

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK

pytestmark = pytest.mark.p4netem_timing

DELAY = 20 * MS


def _delays(lab: TwoHostLab, port: int) -> list[int]:
    # 60 small frames 5 ms apart (300 ms): they reach the trace at every point of its 50 ms
    # period, most of them long after the (bogus) opportunity the trace offers at its start.
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=60, rate=200, port=port)
    assert result.lost == 0, result.lost
    return result.delays_ns


def _kept(delays: list[int]) -> str | None:
    """None if every frame was held its 20 ms (0.2 ms for the stamps' clock reads) and the trace,
    which has no future opportunity to offer, held them no longer (the median within 5 ms of the
    delay: a loaded host delivers a few ms late now and then); else what went wrong."""
    delays = sorted(delays)
    low, mid = delays[0], delays[len(delays) // 2]
    if low < DELAY - MS // 5:
        return f"a frame took {ms(low)} (median {ms(mid)}): the {ms(DELAY)} delay was skipped"
    if mid > DELAY + 5 * MS:
        return f"median {ms(mid)}"
    return None


def test_an_unloaded_trace_keeps_the_delay(lab: TwoHostLab) -> None:
    # A 4-opportunity trace of period 50 ms named at cells nobody wrote: every timestamp and every
    # first_at index reads 0.
    lab.impair(UPLINK, delay_ns=DELAY, trace_base=7, trace_len=4, trace_ms_base=3, trace_period_ms=50,
               trace_period_recip=2**64 // (50 * MS))
    problem = _kept(_delays(lab, 9090))
    assert problem is None, problem


def test_a_trace_without_its_reciprocal_keeps_the_delay(lab: TwoHostLab) -> None:
    # One opportunity every ms (a trace that can carry these frames at once) but trace_period_recip
    # 0: whole periods are counted as none, so after an idle time the trace's period lags behind
    # the packet; its first_at cell past the period reads 0.
    c = lab.client
    c.write_register(pl.TRACE_OPPORTUNITY_MS, 7, 1)
    c.write_register(pl.TRACE_FIRST_AT, 3, 0)
    c.write_register(pl.TRACE_FIRST_AT, 4, 0)
    lab.impair(UPLINK, delay_ns=DELAY, trace_base=7, trace_len=1, trace_ms_base=3, trace_period_ms=1,
               trace_period_recip=0)
    problem = _kept(_delays(lab, 9091))  # (an opportunity is at most 1 ms after arrival)
    assert problem is None, problem
