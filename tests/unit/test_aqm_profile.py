"""The AQM of a profile direction: schema (field-named errors with the allowed range), the table
encoding both ways, and the netem-style `codel` options (tc-codel's syntax)."""

from __future__ import annotations

import pytest

from p4netem.profiles import Profile, ProfileError
from p4netem.profiles.netem import profile_from_netem


def _down(**link) -> Profile:
    return Profile.parse({"name": "aqm", "downlink": link})


def test_codel_defaults_are_rfc_8289_and_round_trip_through_the_table() -> None:
    p = _down(rate="10Mbit", queue=1000, aqm="codel")
    params = p.downlink.to_table_params()
    assert (params["aqm"], params["codel_target_ns"], params["codel_interval_ns"], params["ecn"]) == \
        (1, 5_000_000, 100_000_000, 0)
    custom = _down(rate="10Mbit", aqm={"kind": "codel", "target": "2ms", "interval": "40ms", "ecn": True})
    back = Profile.from_table_params("aqm", custom.uplink.to_table_params(), custom.downlink.to_table_params(), None)
    assert back.downlink.aqm == custom.downlink.aqm
    # Tail drop (the default) writes zeros: old encodings are unchanged.
    plain = _down(rate="10Mbit").downlink.to_table_params()
    assert (plain["aqm"], plain["codel_target_ns"], plain["codel_interval_ns"], plain["ecn"]) == (0, 0, 0, 0)


@pytest.mark.parametrize("link, field, words", [
    ({"rate": "1Mbit", "aqm": "red"}, "downlink.aqm.kind", "allowed tail-drop, codel"),
    ({"aqm": "codel"}, "downlink.aqm", "needs a rate"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "target": "200ms"}}, "downlink.aqm.target", "below the interval"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "interval": "5s"}}, "downlink.aqm.interval", "1us..4.294967295s"),
    ({"rate": "1Mbit", "aqm": {"ecn": True}}, "downlink.aqm.ecn", "pick aqm codel"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "ecn": "yes"}}, "downlink.aqm.ecn", "true or false"),
])
def test_bad_aqm_settings_name_the_field_and_the_allowed_values(link, field, words) -> None:
    with pytest.raises(ProfileError) as err:
        _down(**link)
    assert field in str(err.value) and words in str(err.value), str(err.value)


def test_netem_codel_options() -> None:
    p, warnings = profile_from_netem("rate 10mbit limit 1000 codel target 2ms interval 50ms ecn")
    assert warnings == []
    aqm = p.downlink.aqm
    assert (aqm.kind.value, int(aqm.target), int(aqm.interval), aqm.ecn) == ("codel", 2_000_000, 50_000_000, True)
    assert p.downlink.queue.packets == 1000
    assert profile_from_netem("rate 1mbit cod")[0].uplink.aqm.kind.value == "codel"  # tc-style prefix
    assert profile_from_netem("rate 1mbit codel noecn")[0].uplink.aqm.ecn is False


@pytest.mark.parametrize("options, words", [
    ("codel", "needs rate RATE"),
    ("rate 1mbit ecn", "use codel ... ecn"),
    ("rate 1mbit codel target", "expects a time"),
    ("rate 1mbit codel target 1s", "below the interval"),
])
def test_netem_codel_refusals(options, words) -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_netem(options)
    assert words in str(err.value), str(err.value)
