"""p4netem.radio without a switch: digest decoding and the energy arithmetic."""

from __future__ import annotations

import pytest

from p4netem.pipeline import PromotionKind, RadioState
from p4netem.profiles import Profile
from p4netem.radio import RadioEvent, UeRadio, estimate_energy, state_power


def ue(times: dict[RadioState, int]) -> UeRadio:
    return UeRadio(ue_id=7, state=RadioState.IDLE, since_ns=1, last_activity_ns=1, promotion_done_ns=1,
                   drx_ref_ns=0, promotion_packets=1, fach_free_ns=(0, 0), time_in_state_ns=times,
                   promotions={PromotionKind.IDLE_DCH: 1})


def test_digest_data_decodes_states_and_keeps_reserved_values():
    e = RadioEvent.from_digest_data({"ue_id": 3, "old_state": 0, "new_state": 1, "timestamp_ns": 5})
    assert (e.old, e.new) == (RadioState.IDLE, RadioState.PROMOTING)
    assert str(e) == "ue 3: IDLE -> PROMOTING at 0.000000 s"
    odd = RadioEvent.from_digest_data({"ue_id": 3, "old_state": 12, "new_state": 4, "timestamp_ns": 5})
    assert odd.old == 12 and odd.new == RadioState.CONNECTED


def test_energy_is_time_times_power_per_state():
    umts = Profile.parse({"name": "x", "radio": {"model": "umts", "power_dch": "0.9W"}}).radio
    est = estimate_energy(ue({RadioState.DCH: 2 * 10**9, RadioState.FACH: 10**9,
                              RadioState.PROMOTING: 500_000_000}), umts)
    assert est.complete
    assert est.joules[RadioState.DCH] == pytest.approx(1.8)
    assert est.total_joules == pytest.approx(1.8 + 0.46 + 0.23)
    lte = Profile.parse({"name": "x", "radio": "lte"}).radio
    power = state_power(lte)
    assert power[RadioState.CONNECTED] > power[RadioState.LONG_DRX] == power[RadioState.SHORT_DRX]
    assert estimate_energy(ue({RadioState.LONG_DRX: 10**9}), lte).total_joules == pytest.approx(1.06)


def test_energy_names_states_without_a_power_figure():
    gprs = Profile.parse({"name": "x", "radio": {"model": "gprs", "power_ready": "1W"}}).radio
    est = estimate_energy(ue({RadioState.READY: 10**9, RadioState.STANDBY: 3 * 10**9}), gprs)
    assert not est.complete and est.unknown == (RadioState.STANDBY,)
    assert est.total_joules == pytest.approx(1.0) and est.seconds[RadioState.STANDBY] == 3.0
