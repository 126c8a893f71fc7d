"""The AQM of a profile direction (CoDel, RED; PIE's are in test_pie_profiles.py): schema (field-named errors with the allowed range), the table
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
    ({"rate": "1Mbit", "aqm": "fq_codel"}, "downlink.aqm.kind", "allowed tail-drop, codel, red, pie"),
    ({"rate": "1Mbit", "aqm": "red"}, "downlink.aqm.max", "RED needs a max threshold"),
    ({"rate": "1Mbit", "aqm": {"kind": "red", "min": "20KB", "max": "10KB"}}, "downlink.aqm.min", "below max"),
    ({"rate": "1Mbit", "aqm": {"kind": "red", "max": "1MB", "probability": "0.0001%"}}, "downlink.aqm.probability",
     "below 4 GiB"),
    ({"rate": "1Mbit", "aqm": {"kind": "red", "max": "90KB", "wlog": 30}}, "downlink.aqm.wlog", "1..23"),
    ({"rate": "1Mbit", "aqm": {"kind": "red", "max": "90KB", "avpkt": 10}}, "downlink.aqm.avpkt", "64B..65535B"),
    ({"rate": "1Mbit", "aqm": {"kind": "red", "max": "90KB", "probability": 0}}, "downlink.aqm.probability",
     "(0..100]%"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "gentle": True}}, "downlink.aqm.gentle", "is a RED setting"),
    ({"aqm": {"kind": "red", "max": "90KB"}}, "downlink.aqm", "needs a rate"),
    ({"aqm": "codel"}, "downlink.aqm", "needs a rate"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "target": "200ms"}}, "downlink.aqm.target", "below the interval"),
    ({"rate": "1Mbit", "aqm": {"kind": "codel", "interval": "5s"}}, "downlink.aqm.interval", "1us..4.294967295s"),
    ({"rate": "1Mbit", "aqm": {"ecn": True}}, "downlink.aqm.ecn", "pick aqm codel, red or pie"),
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
    # netem's own ecn needs a loss model (tc's words); the message points at the AQM's.
    ("rate 1mbit ecn", '"ecn requested without loss model"'),
    ("rate 1mbit ecn", "(for marks where the rate queue is congested: codel ... ecn, red ... ecn or pie ... ecn)"),
    # One AQM per rate queue: a second one is refused, not silently the one that counts.
    ("rate 1mbit codel red max 90000", "red: is a second AQM after codel: the rate queue has one"),
    ("rate 1mbit codel target", "expects a time"),
    ("rate 1mbit codel target 1s", "below the interval"),
])
def test_netem_codel_refusals(options, words) -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_netem(options)
    assert words in str(err.value), str(err.value)


def test_red_takes_tc_red_defaults_and_round_trips_through_the_table() -> None:
    p = _down(rate="10Mbit", queue={"bytes": "400KB"}, aqm={"kind": "red", "max": "90KB", "gentle": True, "ecn": True})
    aqm = p.downlink.aqm
    # tc-red: min = max / 3, probability 2 %, avpkt 1000, burst (2 min + max) / (3 avpkt) = 50 -> W = 1/32.
    assert (int(aqm.min), str(aqm.probability), int(aqm.avpkt), aqm.wlog, aqm.gentle) == (30_000, "2%", 1000, 5, True)
    params = p.downlink.to_table_params()
    assert (params["aqm"], params["red_min_bytes"], params["red_max_bytes"], params["red_wlog"],
            params["red_gentle"], params["ecn"]) == (2, 30_000, 90_000, 5, 1, 1)
    assert params["red_max_prob"] == round(0.02 * 2**32)
    assert params["red_span_bytes"] == 60_000 * 2**32 // params["red_max_prob"]  # (max - min) / max_p
    # log2(1/(1 - 1/32)) halvings per 1000-byte packet time (800 us at 10 Mbit/s), per 1024 ns, Q48.
    expected_idle = 2**48 * 1024 * 0.045803689613 / 800_000
    assert abs(params["red_idle_q48"] / expected_idle - 1) < 1e-6
    back = Profile.from_table_params("aqm", p.uplink.to_table_params(), params, None)
    assert back.downlink.aqm == aqm
    # The other kinds write zeros into the RED params.
    codel = _down(rate="10Mbit", aqm="codel").downlink.to_table_params()
    assert all(codel[k] == 0 for k in codel if k.startswith("red_"))


def test_netem_red_options() -> None:
    p, warnings = profile_from_netem("rate 10mbit red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 "
                                     "probability 0.05 ecn gentle")
    assert warnings == []
    aqm = p.downlink.aqm
    assert (aqm.kind.value, int(aqm.min), int(aqm.max), str(aqm.probability), aqm.ecn, aqm.gentle) == \
        ("red", 30_000, 90_000, "5%", True, True)
    assert aqm.wlog == 5  # tc_red_eval_ewma(30000, 55, 1000)
    assert int(p.downlink.queue.bytes) == 400_000  # red's limit is the rate queue's byte limit
    # tc's defaults: max = limit / 4, min = max / 3; k is 1024 bytes.
    q = profile_from_netem("rate 10mbit red limit 1200k")[0].downlink.aqm
    assert (int(q.max), int(q.min)) == (307_200, 102_400)


@pytest.mark.parametrize("options, words", [
    ("red max 90000", "needs rate RATE"),
    ("rate 1mbit red min 3000", "needs max BYTES"),
    ("rate 1mbit red max 90000 harddrop", "harddrop is not supported"),
    ("rate 1mbit red max 90000 adaptive", "adaptive RED"),
    ("rate 1mbit red max 90000 probability 2", "not a probability in (0, 1]"),
    ("rate 1mbit red max 90000 min 30000 burst 10", "burst 10 is too small"),
    ("rate 1mbit red max 90q", "unknown size unit"),
])
def test_netem_red_refusals(options, words) -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_netem(options)
    assert words in str(err.value), str(err.value)
