"""HSPA with the radio on, in the lab, through the real radio stage: the radio, idled before the
load (p4netem.radio.idle through MininetLab.reset_radio, no waiting for its timers), adds its
promotion delay to the first handshake (first SYN to SYN-ACK = base RTT + IDLE->DCH promotion)
and the switch counts one promotion for the client's UE; a load right after, with the radio still
up, does not pay it again; nor does a load whose radio was woken by one ping just before
(E5's pre-woken variant)."""

from __future__ import annotations

import pytest

from lab_env import DEMO
from p4netem_studies.harness.radio import prepare_radio, wake_exchange
from p4netem.pipeline import PromotionKind
from p4netem.profiles import builtin_profile
from p4netem.radio import read_promotions


def test_radio_promotion_adds_to_the_first_handshake(weblab):
    lab = weblab.lab
    rec = weblab.set("hspa", radio=True)
    assert rec.radio.applied and rec.ues == (1,), rec
    prof = builtin_profile("hspa")
    promotion_ms = rec.radio.promotion_s * 1000
    base_rtt_ms = (int(prof.uplink.delay) + int(prof.downlink.delay)) / 1e6

    def promotions() -> int:
        return read_promotions(lab.client, rec.ues)[1].get(PromotionKind.IDLE_DCH, 0)

    prep = prepare_radio(lab, rec)
    assert prep.idle == "reset" and [i["ue"] for i in prep.idled] == [1]
    before = promotions()
    cold = weblab.load("h2", DEMO)
    assert cold.report["ok"], cold.report["errors"]
    excess = cold.wire.first_syn_to_synack_ms - base_rtt_ms
    assert excess == pytest.approx(promotion_ms, abs=max(50.0, 0.05 * promotion_ms))
    assert promotions() == before + 1
    warm = weblab.load("h2", DEMO)
    assert warm.wire.first_syn_to_synack_ms - base_rtt_ms < 50.0
    assert cold.wire.plt_ms - warm.wire.plt_ms >= promotion_ms * 0.8
    assert promotions() == before + 1
    # Pre-woken: idled, then one ping pays the promotion; the load finds the radio up.
    lab.wait_quiet(0.3)
    woke = prepare_radio(lab, rec, wake=wake_exchange(lab))
    assert woke.prewake == "ping" and woke.prewake_ms >= promotion_ms + base_rtt_ms * 0.9, woke
    assert promotions() == before + 2
    woken = weblab.load("h2", DEMO)
    assert woken.report["ok"], woken.report["errors"]
    assert woken.wire.first_syn_to_synack_ms - base_rtt_ms < 50.0
    assert promotions() == before + 2
