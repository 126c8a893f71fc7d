"""PIE (RFC 8033 with Linux sch_pie's arithmetic) as a profile's AQM: tc-pie's defaults, the ranges
and their field-named errors, the five set_impairment params (the gains computed exactly here from
their definition), the read-back of the gains (the simplest decimal with the same encoding, so
encode(decode(t)) == t and ordinary gains read back as written), the summary and the YAML round trip.
The netem-style `pie` options are in test_netem.py, Mahimahi's pie queue in test_mahimahi_convert.py."""

from __future__ import annotations

import random
import re
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from p4netem import pipeline as pl
from p4netem.paths import REPO_ROOT
from p4netem.profiles import IMPAIRMENT_PARAMS, LinkParams, Profile, ProfileError, dumps, loads_profiles
from p4netem.profiles.link import Aqm, AqmKind
from p4netem.profiles.pie import PIE_ALPHA_MIN, PIE_GAIN_MAX, decode_gain, encode_gain
from p4netem.profiles.summary import link_summary
from p4netem.profiles.table import same_table_params

MS = 10**6
PIE_PARAMS = ("pie_target_ns", "pie_tupdate_ns", "pie_alpha", "pie_beta", "pie_max_burst_ns")
TRACE = {"opportunities": 3, "period": 10}


def _down(**link) -> LinkParams:
    return Profile.parse({"name": "pie", "downlink": link}).downlink


def _pie(**aqm) -> LinkParams:
    return _down(rate="10Mbit", queue=1000, aqm={"kind": "pie", **aqm})


def _problems(link: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        Profile.parse({"name": "pie", "downlink": link})
    return [str(p) for p in info.value.problems]


def _by_definition(gain: str) -> int:
    """floor(gain * 2^56 / 10^9) in exact rationals: probability (Q56) per ns of delay error."""
    return (Fraction(gain) * 2**56 / 10**9).__floor__()


# ---- the contract -------------------------------------------------------------------------------

def test_the_params_are_the_contracts_59_to_63() -> None:
    assert IMPAIRMENT_PARAMS[58:] == ((59, "pie_target_ns", 32), (60, "pie_tupdate_ns", 32), (61, "pie_alpha", 32),
                                      (62, "pie_beta", 32), (63, "pie_max_burst_ns", 32))
    assert list(_pie().to_table_params()) == [name for _, name, _ in IMPAIRMENT_PARAMS]  # param-id order


def test_aqm_pie_is_3_here_and_in_the_p4_defines() -> None:
    defines = (REPO_ROOT / "p4src" / "include" / "defines.p4").read_text(encoding="utf-8")
    in_p4 = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+AQM_(\w+)\s+(\d+)", defines)}
    assert in_p4 == {k.name: int(pl.Aqm[k.name]) for k in AqmKind} == {"TAIL_DROP": 0, "CODEL": 1, "RED": 2, "PIE": 3}
    assert AqmKind.PIE.code == pl.Aqm.PIE == 3 and AqmKind.from_code(3) is AqmKind.PIE
    with pytest.raises(ValueError, match=r"aqm 4 is not an AQM of the contract \(0 tail-drop, 1 codel, 2 red, 3 pie\)"):
        AqmKind.from_code(4)


# ---- defaults and encoding ------------------------------------------------------------------------

def test_the_defaults_are_tc_pies() -> None:
    aqm = _down(rate="10Mbit", aqm="pie").aqm
    assert aqm == _down(rate="10Mbit", aqm={"kind": "pie"}).aqm
    assert (aqm.kind, int(aqm.target), int(aqm.tupdate), aqm.alpha, aqm.beta, int(aqm.max_burst), aqm.ecn) == \
        (AqmKind.PIE, 15 * MS, 15 * MS, Decimal("0.125"), Decimal("1.25"), 150 * MS, False)
    # CoDel keeps its own target default (5ms); the other kinds have no PIE settings.
    assert int(_down(rate="10Mbit", aqm="codel").aqm.target) == 5 * MS
    assert _down(rate="10Mbit", aqm="codel").aqm.tupdate is None and Aqm().alpha is None


def test_the_default_encoding_by_hand() -> None:
    params = _down(rate="10Mbit", aqm="pie").to_table_params()
    # 0.125 * 2^56 / 10^9 = 9007199.2547..., 1.25 * 2^56 / 10^9 = 90071992.547...
    assert _by_definition("0.125") == 9007199 and _by_definition("1.25") == 90071992
    assert (params["aqm"], params["ecn"], *(params[k] for k in PIE_PARAMS)) == \
        (3, 0, 15 * MS, 15 * MS, 9007199, 90071992, 150 * MS)
    # PIE writes none of CoDel's or RED's params.
    assert params["codel_target_ns"] == params["codel_interval_ns"] == 0
    assert all(params[k] == 0 for k in params if k.startswith("red_"))


def test_the_other_kinds_write_zeros_into_pies_params() -> None:
    for aqm in ("tail-drop", "codel", {"kind": "red", "max": "90KB"}):
        params = _down(rate="10Mbit", aqm=aqm).to_table_params()
        assert all(params[k] == 0 for k in PIE_PARAMS), aqm
    plain, pie = _down(rate="10Mbit").to_table_params(), _pie().to_table_params()
    assert {k for k in plain if plain[k] != pie[k]} == {"aqm", "queue_limit_pkts", *PIE_PARAMS}


@pytest.mark.parametrize("aqm", [
    {"target": "20ms", "tupdate": "30ms", "alpha": 0.0625, "beta": 0, "max_burst": "0s", "ecn": True},
    {"target": "1us", "tupdate": "1ms", "alpha": 0.015625, "beta": 2, "max_burst": "4.294967295s"},
    {"target": "4.294967295s", "tupdate": "1s", "alpha": 2, "beta": "0.3", "max_burst": "1ns"},
])
def test_every_setting_is_encoded_exactly(aqm) -> None:
    down = _pie(**aqm)
    params = down.to_table_params()
    a = down.aqm
    assert (params["pie_target_ns"], params["pie_tupdate_ns"], params["pie_max_burst_ns"], params["ecn"]) == \
        (int(a.target), int(a.tupdate), int(a.max_burst), int(a.ecn))
    assert (params["pie_alpha"], params["pie_beta"]) == (_by_definition(str(aqm["alpha"])), _by_definition(str(aqm["beta"])))
    assert LinkParams.from_table_params(params) == down


def test_the_gains_are_encoded_in_exact_arithmetic() -> None:
    # The gain at which the encoding steps from k - 1 to k is k * 10^9 / 2^56 (a 50-digit decimal):
    # exactly there it is k, a hair below k - 1 (a float holds both as the same number).
    k = 9007199
    with localcontext() as ctx:
        ctx.prec = 100
        step = Decimal(k * 5**9) / Decimal(2**47)  # k * 10^9 / 2^56
        below = step - Decimal("1e-40")
    assert Fraction(step) == Fraction(k * 10**9, 2**56)
    assert encode_gain(step) == k and encode_gain(below) == k - 1
    assert float(step) == float(below)
    # And through the profile (the field keeps every digit).
    assert _pie(alpha=str(step)).to_table_params()["pie_alpha"] == k
    assert _pie(alpha=str(below)).to_table_params()["pie_alpha"] == k - 1


# ---- read back ------------------------------------------------------------------------------------

def test_the_defaults_read_back_as_written() -> None:
    assert decode_gain(9007199) == Decimal("0.125") and decode_gain(90071992) == Decimal("1.25")
    down = _pie()
    back = LinkParams.from_table_params(down.to_table_params())
    assert back == down and (str(back.aqm.alpha), str(back.aqm.beta)) == ("0.125", "1.25")


@pytest.mark.parametrize("gain", ["0.015625", "0.0625", "0.1", "0.125", "0.3", "0.5", "1", "1.25", "1.999", "2",
                                  "0.1234567", "1.0000001"])
def test_ordinary_gains_read_back_as_written(gain) -> None:
    down = _pie(alpha=gain, beta=gain)
    back = LinkParams.from_table_params(down.to_table_params())
    assert back == down and str(back.aqm.alpha) == str(back.aqm.beta) == gain
    assert decode_gain(encode_gain(Decimal(gain))) == Decimal(gain)


def test_every_gain_with_up_to_7_decimal_places_reads_back_as_written() -> None:
    """docs/profiles.md: one step (1.39e-8 Hz) is finer than 10^-7, so such a gain is the simplest of its
    integer's decimals."""
    rng = random.Random(7)
    for _ in range(1000):
        places = rng.randint(0, 7)
        gain = Decimal(rng.randint(0, 2 * 10**places)).scaleb(-places)
        assert decode_gain(encode_gain(gain)) == gain, gain


def _random_gain(rng: random.Random, lo: Decimal, hi: Decimal) -> Decimal:
    """A gain in [lo, hi] with 1 to 20 decimals (some at the range's ends)."""
    roll = rng.random()
    if roll < 0.05:
        return lo
    if roll < 0.1:
        return hi
    places = rng.randint(1, 20)
    scale = 10**places
    n = rng.randint(int(lo * scale) + 1, int(hi * scale))
    return Decimal(n).scaleb(-places)


@pytest.mark.parametrize("name, lo", [("alpha", PIE_ALPHA_MIN), ("beta", Decimal(0))])
def test_encode_decode_encode_is_the_encoding_for_1000_random_gains(name, lo) -> None:
    rng = random.Random(8033 if name == "alpha" else 33)
    for _ in range(1000):
        gain = _random_gain(rng, lo, PIE_GAIN_MAX)
        raw = encode_gain(gain)
        assert raw == _by_definition(str(gain))
        back = decode_gain(raw, lo=lo)
        assert encode_gain(back) == raw, (gain, back)
        assert lo <= back <= PIE_GAIN_MAX, (gain, back)  # a valid gain reads back valid
        # Never more digits than written.
        assert len(str(back).replace(".", "").strip("0")) <= len(str(gain).replace(".", "").strip("0")), (gain, back)
        # Through the table: the read-back profile programs the switch identically.
        down = _pie(**{name: str(gain)})
        back_link = LinkParams.from_table_params(down.to_table_params())
        assert back_link.to_table_params() == down.to_table_params() and getattr(back_link.aqm, name) == back


def test_gains_within_one_step_are_the_same_on_the_switch() -> None:
    # One step of the encoding is 10^9 / 2^56 Hz (about 1.4e-8): 0.125 and 0.125000001 share an integer.
    assert same_table_params(_pie(alpha="0.125"), _pie(alpha="0.125000001"))
    assert not same_table_params(_pie(alpha="0.125"), _pie(alpha="0.12500002"))
    assert decode_gain(encode_gain(Decimal("0.125000001"))) == Decimal("0.125")


def test_the_read_back_stays_inside_the_range_at_its_ends() -> None:
    # The integer of 1/64 also holds gains just below 1/64; the read-back is the valid one.
    raw = encode_gain(PIE_ALPHA_MIN)
    assert Fraction(raw * 10**9, 2**56) < Fraction(1, 64)
    assert decode_gain(raw, lo=PIE_ALPHA_MIN) == PIE_ALPHA_MIN
    assert decode_gain(encode_gain(PIE_GAIN_MAX), lo=PIE_ALPHA_MIN) == 2
    assert decode_gain(0) == 0
    # Where the integer's interval straddles a bound, the simplest decimal on the valid side is taken.
    raw = encode_gain(Decimal("0.125"))  # its decimals run from 0.1249999965 to 0.1250000103
    lo, hi = Decimal("0.1250000001"), Decimal("0.1249999999")
    assert decode_gain(raw, lo=lo) == Decimal("0.12500001") and decode_gain(raw, hi=hi) == Decimal("0.124999998")
    assert encode_gain(Decimal("0.12500001")) == encode_gain(Decimal("0.124999998")) == raw
    # An integer no valid gain has reads back as its own simplest decimal (the profile names it out of range).
    assert decode_gain(1, lo=PIE_ALPHA_MIN) == Decimal("0.00000002")


def test_params_no_profile_writes_are_named_on_read_back() -> None:
    params = _pie().to_table_params()
    cases = [({"pie_alpha": 0}, "pie_alpha (aqm.alpha): 0 is refused"),
             # One step is 1.39e-8 Hz: the simplest gain of the integer 1 is 2e-8.
             ({"pie_alpha": 1}, "pie_alpha (aqm.alpha): 0.00000002 out of range 0.015625..2"),
             ({"pie_beta": 2**32 - 1}, "pie_beta (aqm.beta): 59.60464477 out of range 0..2"),
             ({"pie_target_ns": 0}, "pie_target_ns (aqm.target): 0s out of range 1us..4.294967295s"),
             ({"pie_tupdate_ns": 0}, "pie_tupdate_ns (aqm.tupdate): 0s out of range 1ms..1s")]
    for change, words in cases:
        with pytest.raises(ProfileError) as info:
            LinkParams.from_table_params({**params, **change})
        assert words in str(info.value), str(info.value)
    # CoDel's target is still CoDel's param.
    codel = _down(rate="10Mbit", aqm="codel").to_table_params()
    with pytest.raises(ProfileError) as info:
        LinkParams.from_table_params({**codel, "codel_target_ns": 0})
    assert "codel_target_ns (aqm.target): 0s out of range" in str(info.value)


# ---- the schema -----------------------------------------------------------------------------------

ALPHA_RANGE = "0.015625..2 (Hz; tc-pie's alpha N is N/16)"
BETA_RANGE = "0..2 (Hz; tc-pie's beta N is N/16)"


@pytest.mark.parametrize("aqm, field, words", [
    ({"target": "999ns"}, "target", "999ns out of range 1us..4.294967295s"),
    ({"target": "4.294967296s"}, "target", "4.294967296s out of range 1us..4.294967295s"),
    ({"tupdate": "999us"}, "tupdate", "999us out of range 1ms..1s"),
    ({"tupdate": "1.001s"}, "tupdate", "1.001s out of range 1ms..1s"),
    ({"tupdate": 15}, "tupdate", '15 has no unit; write e.g. "15ms" (units: ns, us, ms, s, min, h); allowed 1ms..1s'),
    ({"max_burst": "4.294967296s"}, "max_burst", "4.294967296s out of range 0s..4.294967295s"),
    ({"alpha": 0}, "alpha", "0 is refused: with alpha 0 an idle queue brings the probability down only by Linux's "
                            f"decay of 1/64 per update, which stalls a few units above 0: it never settles (and the "
                            f"update clock never stops); allowed {ALPHA_RANGE}"),
    ({"alpha": "0.015624"}, "alpha", f"0.015624 out of range {ALPHA_RANGE}"),
    ({"alpha": 2.01}, "alpha", f"2.01 out of range {ALPHA_RANGE}"),
    ({"alpha": "fast"}, "alpha", f'"fast" is not a number (Hz); allowed {ALPHA_RANGE}'),
    ({"alpha": True}, "alpha", f"True is not a number (Hz); allowed {ALPHA_RANGE}"),
    ({"beta": -0.5}, "beta", f"-0.5 out of range {BETA_RANGE}"),
    ({"beta": 3}, "beta", f"3 out of range {BETA_RANGE}"),
    ({"interval": "100ms"}, "interval", "is a CoDel setting; pie has none (its update period is tupdate)"),
    ({"gentle": True}, "gentle", "is a RED setting; pie has none (kind red uses it)"),
    ({"ecn": "yes"}, "ecn", '"yes" is not true or false (mark CE instead of dropping ECN-capable packets)'),
])
def test_bad_pie_settings_name_the_field_and_the_range(aqm, field, words) -> None:
    problems = _problems({"rate": "10Mbit", "aqm": {"kind": "pie", **aqm}})
    assert f"downlink.aqm.{field}: {words}" in problems, problems


@pytest.mark.parametrize("aqm, field", [
    ({"kind": "codel", "tupdate": "30ms"}, "tupdate"),
    ({"kind": "codel", "alpha": 0.125}, "alpha"),
    ({"kind": "red", "max": "90KB", "beta": 1}, "beta"),
    ({"kind": "tail-drop", "max_burst": "0s"}, "max_burst"),
])
def test_pie_settings_belong_to_pie(aqm, field) -> None:
    problems = _problems({"rate": "10Mbit", "aqm": aqm})
    assert f"downlink.aqm.{field}: is a PIE setting; {aqm['kind']} has none (kind pie uses it)" in problems, problems


def test_pie_needs_a_rate_or_a_trace_and_no_bearers_as_codel() -> None:
    assert _problems({"aqm": "pie"}) == ["downlink.aqm: pie needs a rate or a trace (without one the rate queue "
                                         "is always empty)"]
    assert _down(trace=TRACE, queue=100, aqm="pie").aqm.kind is AqmKind.PIE
    (problem,) = _problems({"rate": "10Mbit", "bearers": "drr", "aqm": "pie"})
    assert problem.startswith("downlink.aqm: pie manages the single rate queue; with bearers each UE's queue is "
                              "tail drop")
    (problem,) = _problems({"rate": "10Mbit", "aqm": {"ecn": True}})
    assert problem.startswith("downlink.aqm.ecn: marks only where an AQM would drop; pick aqm codel, red or pie")


def test_gains_are_numbers_or_numeric_strings_in_hz() -> None:
    for written in (0.125, "0.125", "0.125Hz", " 0.1250 hz", Decimal("0.125")):
        assert _pie(alpha=written).aqm.alpha == Decimal("0.125"), written
    assert _pie(beta=1).aqm.beta == 1 and _pie(beta="0").aqm.beta == 0


# ---- summary and YAML -----------------------------------------------------------------------------

@pytest.mark.parametrize("aqm, want", [
    ({}, "pie (target 15ms, tupdate 15ms)"),
    ({"ecn": True}, "pie (target 15ms, tupdate 15ms, ecn)"),
    ({"target": "20ms", "tupdate": "30ms", "alpha": 0.0625, "beta": 0, "max_burst": "0s", "ecn": True},
     "pie (target 20ms, tupdate 30ms, alpha 0.0625, beta 0, max_burst 0s, ecn)"),
    ({"beta": 2}, "pie (target 15ms, tupdate 15ms, beta 2)"),
    ({"max_burst": "100ms"}, "pie (target 15ms, tupdate 15ms, max_burst 100ms)"),
])
def test_summary_names_alpha_beta_and_burst_only_off_their_defaults(aqm, want) -> None:
    assert link_summary(_pie(**aqm)) == f"rate 10Mbit, queue 1000 pkt, {want}"


def test_yaml_loads_and_dumps() -> None:
    text = """
name: pie
both:
  rate: 10Mbit
  queue: 1000
  aqm: {kind: pie, target: 15ms, tupdate: 15ms, alpha: 0.125, beta: 1.25, max_burst: 150ms, ecn: false}
downlink:
  aqm: {kind: pie, target: 5ms, alpha: 0.0625, ecn: true}
"""
    (p,) = loads_profiles(text)
    assert p.uplink.aqm == _pie().aqm
    assert (int(p.downlink.aqm.target), p.downlink.aqm.alpha, p.downlink.aqm.ecn) == (5 * MS, Decimal("0.0625"), True)
    out = dumps(p)
    # The filled-in defaults are written out (as RED's are); the gains are YAML numbers.
    assert out.endswith("uplink:\n  aqm:\n    kind: pie\n    target: 15ms\n    tupdate: 15ms\n    alpha: 0.125\n"
                        "    beta: 1.25\n    max_burst: 150ms\n")
    # A pie target of 5ms is CoDel's default but not PIE's: it is written, and reads back as 5ms.
    assert "downlink:\n  aqm:\n    kind: pie\n    target: 5ms\n    ecn: true\n    tupdate: 15ms\n    alpha: 0.0625\n" in out
    assert loads_profiles(out)[0] == p
    assert Profile.from_table_params("pie", p.uplink.to_table_params(), p.downlink.to_table_params(), None) == p


def test_a_gain_a_float_cannot_hold_round_trips_through_yaml() -> None:
    p = Profile.parse({"name": "pie", "downlink": {"rate": "10Mbit", "aqm": {"kind": "pie",
                                                                             "alpha": "0.12500000000000000001"}}})
    out = dumps(p)
    assert "alpha: '0.12500000000000000001'" in out
    assert loads_profiles(out)[0].downlink.aqm.alpha == Decimal("0.12500000000000000001")
