"""Duplication: copies arrive at the configured rate and are counted in profile_dup."""

from __future__ import annotations

from wirestats import assert_binomial, prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK


def test_duplication_rate(lab: TwoHostLab) -> None:
    p, n = 0.10, 10_000
    lab.impair(UPLINK, dup_prob=prob(p))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=5000, port=9030)
    assert result.lost == 0
    assert_binomial(result.duplicates, n, p, "duplicates on the wire")
    # A copy is never copied again: no sequence number arrives more than twice.
    seen: dict[int, int] = {}
    for s in result.seq:
        seen[s] = seen.get(s, 0) + 1
    assert max(seen.values()) <= 2
    c = settled_counters(lab, UPLINK)
    assert c.profile_dup == result.duplicates
    assert c.profile_out == result.received
