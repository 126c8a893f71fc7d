"""The on/off link (Mahimahi's mm-onoff) as a profile field: its two set_impairment params computed
independently here, the clamps, the read-back (the simplest pair of means with the same encoding,
so encode(decode(t)) == t, and ordinary means read back as written), and field-named errors."""

from __future__ import annotations

import math
import random
from decimal import Decimal, getcontext
from fractions import Fraction

import pytest

from p4netem.profiles import IMPAIRMENT_PARAMS, LinkParams, Profile, ProfileError, dumps, loads_profiles
from p4netem.profiles.onoff import ONOFF_MAX_NS, ONOFF_MIN_NS, OnOff, decode_onoff, encode_onoff

S, MS, US = 10**9, 10**6, 10**3
ONOFF_PARAMS = ("onoff_on_prob", "onoff_recip")


def _down(**link) -> LinkParams:
    return Profile.parse({"name": "onoff", "downlink": link}).downlink


def _onoff(on: str, off: str) -> LinkParams:
    return _down(onoff={"mean_on": on, "mean_off": off})


def _problems(link: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        Profile.parse({"name": "onoff", "downlink": link})
    return [str(p) for p in info.value.problems]


def _exact(on_ns: int, off_ns: int) -> tuple[int, int]:
    """The two params from their definition, in 50-digit decimals: pi = on / (on + off) in Q32,
    2^64 / (tau ln 2) with tau = on off / (on + off), each rounded to the nearest integer."""
    getcontext().prec = 50
    pi = Fraction(on_ns, on_ns + off_ns)
    tau = Decimal(on_ns) * Decimal(off_ns) / Decimal(on_ns + off_ns)
    return round(pi * 2**32), int((Decimal(2**64) / (tau * Decimal(2).ln())).to_integral_value())


# ---- the params ---------------------------------------------------------------------------------

def test_the_params_are_the_contracts_57_and_58() -> None:
    # PIE's five (tests/unit/test_pie_profiles.py) came after them.
    assert IMPAIRMENT_PARAMS[56:58] == ((57, "onoff_on_prob", 32), (58, "onoff_recip", 64))


@pytest.mark.parametrize("on, off, on_ns, off_ns", [
    ("10s", "2s", 10 * S, 2 * S),  # pi = 10/12, tau = 10 * 2 / 12 s
    ("500ms", "50ms", 500 * MS, 50 * MS),
    ("37ms", "1.234567s", 37 * MS, 1_234_567 * US),
    ("1us", "1us", US, US),
    ("604800s", "604800s", ONOFF_MAX_NS, ONOFF_MAX_NS),
])
def test_encoding_is_pi_in_q32_and_the_relaxation_rate(on, off, on_ns, off_ns) -> None:
    params = _onoff(on, off).to_table_params()
    assert (params["onoff_on_prob"], params["onoff_recip"]) == _exact(on_ns, off_ns)
    total = on_ns + off_ns
    assert params["onoff_on_prob"] == (2 * on_ns * 2**32 + total) // (2 * total)
    # In floats: the same wherever onoff_recip is below 2^53 (tau above 3us).
    float_recip = round(2**64 * total / (math.log(2) * on_ns * off_ns))
    assert params["onoff_recip"] == float_recip or (params["onoff_recip"] > 2**53 and
                                                    abs(params["onoff_recip"] - float_recip) <= 8)


def test_ten_seconds_on_two_off_by_hand() -> None:
    on_prob, recip = encode_onoff(10 * S, 2 * S)
    assert on_prob == 3579139413  # 10/12 * 2^32 = 3579139413.33
    tau = 10 * 2 / 12 * S
    assert recip == round(2**64 / (tau * math.log(2))) == 15_967_815_717  # about 1.6e10 per ns, Q64
    assert decode_onoff(on_prob, recip) == (10 * S, 2 * S)


def test_without_onoff_both_params_are_zero_and_nothing_else_changes() -> None:
    plain = _down(delay="10ms", loss="1%").to_table_params()
    assert (plain["onoff_on_prob"], plain["onoff_recip"]) == (0, 0)
    with_onoff = _down(delay="10ms", loss="1%", onoff={"mean_on": "10s", "mean_off": "2s"}).to_table_params()
    assert {k for k in plain if plain[k] != with_onoff[k]} == set(ONOFF_PARAMS)
    assert LinkParams.from_table_params(plain).onoff is None


def test_clamps_keep_the_params_in_range_and_a_profile_never_reaches_them() -> None:
    assert encode_onoff(1, 2**40)[0] == 1  # pi rounds to 0
    assert encode_onoff(2**40, 1)[0] == 2**32 - 1  # pi rounds to 1
    assert encode_onoff(1, 1)[1] == 2**64 - 1  # 2^65 / ln 2
    assert encode_onoff(2**80, 2**80)[1] == 1  # rounds to 0, which would mean "no on/off link"
    # The extremes of a valid profile: unclamped (and read back to the same encoding).
    for on, off in ((ONOFF_MIN_NS, ONOFF_MIN_NS), (ONOFF_MAX_NS, ONOFF_MAX_NS), (ONOFF_MIN_NS, 2**32 * ONOFF_MIN_NS),
                    (2**32 * ONOFF_MIN_NS, ONOFF_MIN_NS), (ONOFF_MAX_NS, ONOFF_MAX_NS // 2**32 + 1)):
        on_prob, recip = encode_onoff(on, off)
        assert (on_prob, recip) == _exact(on, off)
        assert 1 <= on_prob <= 2**32 - 1 and 1 <= recip <= 2**64 - 1
        assert encode_onoff(*decode_onoff(on_prob, recip)) == (on_prob, recip)
    # pi of 2^32 us against 1 us is 1 or 2^32 - 1 for a wide range of the long mean: the simplest reads back.
    assert decode_onoff(*encode_onoff(ONOFF_MIN_NS, 2**32 * ONOFF_MIN_NS)) == (ONOFF_MIN_NS, 4294_967 * MS)


# ---- read back ------------------------------------------------------------------------------------

@pytest.mark.parametrize("on, off", [("10s", "2s"), ("500ms", "50ms"), ("37ms", "1.234567s"), ("1.234567s", "37ms"),
                                     ("1us", "1ms"), ("1.001us", "999.001us"), ("100s", "100ms"),
                                     ("99.999999s", "100.001ms"), ("1000s", "10s"), ("7ms", "300s")])
def test_ordinary_means_read_back_as_written(on, off) -> None:
    down = _onoff(on, off)
    back = LinkParams.from_table_params(down.to_table_params())
    assert back == down and (str(back.onoff.mean_on), str(back.onoff.mean_off)) == (on, off)


def _pairs(rng: random.Random, unit: int, longest: int, ratio: int, n: int):
    """n pairs of whole `unit`s up to `longest`, neither more than `ratio` times the other; half of
    them at the edges (the longest mean, the largest ratio)."""
    for i in range(n):
        long = longest - rng.randrange(longest // 1000) // unit * unit
        if i % 2:
            long = int(math.exp(rng.uniform(math.log(1000 * unit), math.log(longest)))) // unit * unit
        short = max(unit, long // ratio // unit * unit + rng.randrange(3) * unit)
        if i % 4 == 3:
            short = max(unit, int(math.exp(rng.uniform(math.log(long / ratio), math.log(long)))) // unit * unit)
        yield (short, long) if rng.random() < 0.5 else (long, short)


@pytest.mark.parametrize("unit, longest, ratio", [(MS, 1000 * S, 10**5), (US, 100 * S, 10**4)], ids=["ms", "us"])
def test_the_documented_exact_read_back(unit, longest, ratio) -> None:
    """docs/profiles.md: whole milliseconds up to 1000s, neither more than 10^5 times the other, and
    whole microseconds up to 100s, neither more than 10^4 times the other, read back as written."""
    for on, off in _pairs(random.Random(unit), unit, longest, ratio, 60):
        assert decode_onoff(*encode_onoff(on, off)) == (on, off)


def test_encode_decode_encode_is_the_encoding_over_the_whole_range() -> None:
    """Any valid pair, to the nanosecond, including those whose encoding holds fewer digits than
    they have (long means, extreme ratios): the pair read back programs the switch identically."""
    rng = random.Random(57)
    lo, hi = math.log(ONOFF_MIN_NS), math.log(ONOFF_MAX_NS)
    n = 0
    while n < 150:
        on, off = (int(math.exp(rng.uniform(lo, hi))) for _ in range(2))
        if max(on, off) > 2**32 * min(on, off):
            continue
        n += 1
        params = encode_onoff(on, off)
        back = decode_onoff(*params)
        assert encode_onoff(*back) == params, (on, off, back)
        assert OnOff(mean_on=back[0], mean_off=back[1])  # a valid profile value


def test_an_unresolved_long_mean_reads_back_as_the_simplest_with_the_same_encoding() -> None:
    # 2^-32 of pi cannot tell 10423.285s from its neighbours when the other mean is 1ms.
    down = _onoff("1ms", "10423.285s")
    back = LinkParams.from_table_params(down.to_table_params())
    assert str(back.onoff.mean_on) == "1ms" and back.onoff.mean_off != down.onoff.mean_off
    assert back.to_table_params() == down.to_table_params()
    assert abs(int(back.onoff.mean_off) - int(down.onoff.mean_off)) < 10 * MS


def test_params_no_profile_writes_are_named_on_read_back() -> None:
    params = _onoff("10s", "2s").to_table_params()
    with pytest.raises(ProfileError) as info:
        LinkParams.from_table_params({**params, "onoff_on_prob": 0})
    assert str(info.value).startswith("P4netemIngress.set_impairment: onoff_on_prob: 0 with onoff_recip set")
    with pytest.raises(ProfileError) as info:
        LinkParams.from_table_params({**params, "onoff_recip": 1})  # tau of 850 years
    assert "onoff_on_prob, onoff_recip (onoff.mean_on): " in str(info.value)
    assert "out of range 1us..604800s" in str(info.value)


# ---- the schema ---------------------------------------------------------------------------------

@pytest.mark.parametrize("onoff, field, words", [
    ({"mean_on": 0, "mean_off": "1s"}, "downlink.onoff.mean_on", "0s out of range 1us..604800s"),
    ({"mean_on": "1s", "mean_off": "999ns"}, "downlink.onoff.mean_off", "999ns out of range 1us..604800s"),
    ({"mean_on": "-1s", "mean_off": "1s"}, "downlink.onoff.mean_on", "negative"),
    ({"mean_on": "1s", "mean_off": "8h", "x": 1}, "downlink.onoff.x", "unknown field"),
    ({"mean_on": "169h", "mean_off": "1s"}, "downlink.onoff.mean_on", "608400s out of range 1us..604800s"),
    ({"mean_on": "1s"}, "downlink.onoff.mean_off", "required"),
    ({"mean_off": "1s"}, "downlink.onoff.mean_on", "required"),
    ({"mean_on": 10, "mean_off": "1s"}, "downlink.onoff.mean_on", "has no unit"),
    ({"mean_on": True, "mean_off": "1s"}, "downlink.onoff.mean_on", "is not a duration"),
    ({"mean_on": "1.5ns", "mean_off": "1s"}, "downlink.onoff.mean_on", "not a whole number of nanoseconds"),
    ("10s", "downlink.onoff", '"10s" is not an onoff block ({mean_on, mean_off}, two durations)'),
    ([1, 2], "downlink.onoff", "is not an onoff block"),
    ({"mean_on": "100h", "mean_off": "1us"}, "downlink.onoff.mean_on", "more than 2^32 times mean_off 1us"),
    ({"mean_on": "1us", "mean_off": "5000s"}, "downlink.onoff.mean_off", "more than 2^32 times mean_on 1us"),
])
def test_bad_onoff_names_the_field_and_range(onoff, field, words) -> None:
    problems = _problems({"onoff": onoff})
    assert any(p.startswith(f"{field}: ") and words in p for p in problems), problems


def test_ratio_edge_is_two_to_the_32() -> None:
    assert _onoff("4294.967296s", "1us").onoff.mean_on == 2**32 * US
    assert _problems({"onoff": {"mean_on": "4294.967297s", "mean_off": "1us"}})[0].startswith(
        "downlink.onoff.mean_on: 4294.967297s is more than 2^32 times mean_off 1us")


def test_it_combines_with_the_other_models_but_is_not_a_loss_model_for_ecn() -> None:
    onoff = {"mean_on": "10s", "mean_off": "2s"}
    down = _down(onoff=onoff, gilbert_elliott={"p": "1%", "r": "30%"}, loss_ecn=True, rate="10Mbit",
                 aqm="codel", delay="20ms", slot="5ms", duplicate="1%")
    assert down.onoff.off_share == pytest.approx(1 / 6)
    assert _down(onoff=onoff, trace={"opportunities": 3, "period": 10}).onoff == down.onoff
    # link_off is never marked CE: loss_ecn still needs a loss model of its own.
    (problem,) = _problems({"onoff": onoff, "loss_ecn": True})
    assert problem.startswith("downlink.loss_ecn: true has no effect without a loss model")


def test_both_directions_yaml_and_dump() -> None:
    text = """
name: flaky
description: a link that drops out
both:
  delay: 20ms
  onoff: {mean_on: 10s, mean_off: 2s}
downlink:
  onoff:
    mean_on: 500ms
    mean_off: 50ms
"""
    (p,) = loads_profiles(text)
    assert (str(p.uplink.onoff.mean_on), str(p.uplink.onoff.mean_off)) == ("10s", "2s")
    assert (str(p.downlink.onoff.mean_on), str(p.downlink.onoff.mean_off)) == ("500ms", "50ms")
    assert int(p.downlink.delay) == 20 * MS
    assert loads_profiles(dumps([p]))[0] == p
    assert "onoff:\n      mean_on: 500ms\n      mean_off: 50ms" in dumps([p])
    same = Profile.parse({"name": "flaky", "both": {"onoff": {"mean_on": "10s", "mean_off": "2s"}}})
    assert same.uplink.onoff == same.downlink.onoff == p.uplink.onoff
    assert same.to_dict()["both"] == {"onoff": {"mean_on": "10s", "mean_off": "2s"}}
    back = Profile.from_table_params("flaky", p.uplink.to_table_params(), p.downlink.to_table_params(),
                                     description=p.description)
    assert back == p and back.same_table_params(p)
