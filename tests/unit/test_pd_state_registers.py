"""Every per-pd register of the contract is either reset when a profile id is (re)used
(switching.PD_STATE_REGISTERS) or kept on purpose, for a reason named here. A register added to
p4src without a decision fails this test (the netem correlation registers were once missed)."""

from __future__ import annotations

from p4netem import pipeline as pl
from p4netem import schema
from p4netem.control.switching import PD_STATE_REGISTERS

PD_COUNT = next(r.size for r in schema.contract().registers if r.preamble.name == pl.NEXT_FREE_NS)

KEPT = {
    # The rate queue's own accounting: packets of the id's previous use may still be queued, and
    # each takes its bytes off when it leaves; a reset would underflow them.
    pl.BACKLOG_BYTES: "queue accounting",
    pl.BACKLOG_PKTS: "queue accounting",
    # v1model's arbitration between bearers (p4src/include/bearer.p4); p4netem-switch leaves them 0,
    # and on v1model a stale holder loses the turn after the link stays free for 20 us.
    f"{pl.INGRESS}.bearer_turn": "v1model bearer arbitration",
    f"{pl.INGRESS}.bearer_last_turn": "v1model bearer arbitration",
    f"{pl.INGRESS}.bearer_pf_best": "v1model bearer arbitration",
}


def test_every_per_pd_register_is_reset_or_kept_for_a_reason() -> None:
    per_pd = {r.preamble.name for r in schema.contract().registers if r.size == PD_COUNT}
    assert pl.NEXT_FREE_NS in per_pd and len(per_pd) > 20
    reset = set(PD_STATE_REGISTERS)
    assert reset <= per_pd, reset - per_pd
    assert not reset & set(KEPT), reset & set(KEPT)
    assert per_pd - reset == set(KEPT), f"decide about: {sorted(per_pd - reset - set(KEPT))}"


def test_the_correlation_registers_are_reset() -> None:
    assert set(pl.CORR_REGISTERS) <= set(PD_STATE_REGISTERS)
    assert len(pl.CORR_REGISTERS) == 6


def test_the_pie_registers_are_reset() -> None:
    # A reused id starts PIE from its fixed point: probability 0, the update clock stopped.
    names = {f"{pl.INGRESS}.pie_{n}" for n in ("prob", "qdelay_old_ns", "burst_ns", "accu_prob", "next_ns")}
    assert set(pl.PIE_REGISTERS) == names
    assert names <= set(PD_STATE_REGISTERS)
    contract = {r.preamble.name: r for r in schema.contract().registers}
    assert all(contract[n].size == PD_COUNT and contract[n].type_spec.bitstring.bit.bitwidth == 64 for n in names)
