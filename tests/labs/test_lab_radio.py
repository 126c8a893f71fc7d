"""HSPA with the radio on: the radio, idled before the load, adds its promotion delay to the
first handshake (first SYN to SYN-ACK = base RTT + IDLE->DCH promotion), and a load right after,
with the radio still up, does not pay it again.

Needs the data plane's radio stage (issue 3, branch `radio`); until it lands the lab applies
radio profiles without the radio and records so, and this test is skipped saying that.
"""

from __future__ import annotations

import pytest

from lab_env import DEMO
from p4netem.harness.radio import prepare_radio
from p4netem.profiles import builtin_profile


def test_radio_promotion_adds_to_the_first_handshake(weblab):
    rec = weblab.set("hspa", radio=True)
    if not rec.radio.applied:
        pytest.skip(f"radio profile applied without its radio: {rec.radio.note}")
    prof = builtin_profile("hspa")
    promotion_ms = rec.radio.promotion_s * 1000
    base_rtt_ms = (int(prof.uplink.delay) + int(prof.downlink.delay)) / 1e6
    prep = prepare_radio(weblab.lab, rec)
    assert prep.idle in ("reset", "waited")
    cold = weblab.load("h2", DEMO)
    assert cold.report["ok"], cold.report["errors"]
    excess = cold.wire.first_syn_to_synack_ms - base_rtt_ms
    assert excess == pytest.approx(promotion_ms, abs=max(50.0, 0.05 * promotion_ms))
    warm = weblab.load("h2", DEMO)
    assert warm.wire.first_syn_to_synack_ms - base_rtt_ms < 50.0
    assert cold.wire.plt_ms - warm.wire.plt_ms >= promotion_ms * 0.8
