"""Impairment profiles: units, validation messages, YAML files, built-ins, table conversion."""

from __future__ import annotations

import math
import os
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from p4netem.paths import p4info_path
from p4netem.profiles import (BUILTIN_NAMES, IMPAIRMENT_PARAMS, SET_IMPAIRMENT, ByteSize,
                              Direction, Duration, GilbertElliott, JitterDistribution,
                              LinkParams, Percent, Profile,
                              ProfileError, RADIO_PARAMS, SET_RADIO, Rate, RadioGprs, RadioLte,
                              RadioNone, RadioUmts, UnitError, builtin_profile, builtin_profiles,
                              decode_link, decode_radio, dump, dumps, encode_link, encode_radio,
                              load_profile, load_profiles, loads_profiles)
from p4netem import profiles as profiles_package
from p4netem.profiles import units
from p4netem.profiles.summary import link_summary

BUILTIN_DIR = Path(profiles_package.__file__).parent / "builtin"
WIDTHS = {name: bits for _, name, bits in IMPAIRMENT_PARAMS}


def problems_of(doc: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        Profile.parse(doc)
    return [str(p) for p in info.value.problems]


# ---- units ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,ns", [
    ("50ms", 50_000_000), ("1.5s", 1_500_000_000), ("200us", 200_000), ("200µs", 200_000),
    ("7ns", 7), (" 50 ms ", 50_000_000), ("0", 0), (0, 0), (0.0, 0), ("1e3ns", 1000),
    ("2min", 120 * 10**9), ("1h", 3600 * 10**9), ("0.000001ms", 1), (".5s", 500_000_000),
])
def test_duration_parses(text, ns):
    assert Duration.parse(text) == ns


@pytest.mark.parametrize("text,needle", [
    ("50", "has no unit"), (50, "has no unit"), (1.5, "has no unit"), ("-1ms", "negative"),
    ("1.5ns", "whole number of nanoseconds"), ("5 parsecs", "unknown unit"), ("ms", "not a"),
    (True, "not a duration"), (None, "not a duration"), ("1.2.3s", "not a duration"),
])
def test_duration_rejects(text, needle):
    with pytest.raises(UnitError, match=needle):
        Duration.parse(text)


def test_duration_str_round_trips():
    rng = random.Random(1)
    values = [0, 1, 999, 1000, 1500, 10**9, 12_500_000, 2**48 - 1]
    values += [rng.randrange(2**48) for _ in range(500)]
    values += [rng.randrange(1000) * 10 ** rng.randrange(10) for _ in range(500)]
    for ns in values:
        assert Duration.parse(str(Duration(ns))) == ns, ns
    assert str(Duration(50_000_000)) == "50ms" and str(Duration(1_500_000_000)) == "1.5s"
    assert f"{Duration(200_000)}" == "200us"


@pytest.mark.parametrize("text,bps", [
    ("3Mbit", 3_000_000), ("60kbit", 60_000), ("1Gbit", 10**9), ("unlimited", 0),
    ("1.544Mbit/s", 1_544_000), ("3MBIT", 3_000_000), ("100Gbit", 10**11), (0, 0),
    ("28.8kbit", 28_800), (" 370 kbit ", 370_000), ("1000.5bit", Decimal("1000.5")),
])
def test_rate_parses(text, bps):
    assert Rate.parse(text) == bps


@pytest.mark.parametrize("text,needle", [
    ("-3Mbit", "negative"), ("3Mbps", "ambiguous"), ("3MB/s", "not a rate"), ("3", "no unit"),
    (3, "no unit"), ("fast", "not a rate"), (False, "not a rate"),
])
def test_rate_rejects(text, needle):
    with pytest.raises(UnitError, match=needle):
        Rate.parse(text)


@pytest.mark.parametrize("text,percent", [
    ("1%", 1), (1, 1), (0.01, Decimal("0.01")), ("0.5 %", Decimal("0.5")), ("0.5", Decimal("0.5")),
    (0.1, Decimal("0.1")), ("100%", 100), ("1e-3%", Decimal("0.001")),
])
def test_percent_parses_as_percent(text, percent):
    value = Percent.parse(text)
    assert value == percent
    assert Percent.parse(str(value)) == value


@pytest.mark.parametrize("text", ["1%%", "one", True, "nan", "inf%", [1]])
def test_percent_rejects(text):
    with pytest.raises(UnitError):
        Percent.parse(text)


@pytest.mark.parametrize("text,size", [
    ("64KB", 64_000), ("64KiB", 65_536), (1500, 1500), ("1500B", 1500), ("1.5KB", 1500),
    ("1MiB", 2**20), ("2 kib", 2048),
])
def test_byte_size_parses(text, size):
    assert ByteSize.parse(text) == size
    assert ByteSize.parse(str(ByteSize(size))) == size


@pytest.mark.parametrize("text", ["0.5B", "-1KB", "64Kb/s", "lots", 1.5, True])
def test_byte_size_rejects(text):
    with pytest.raises(UnitError):
        ByteSize.parse(text)


def test_probability_quantisation_edges():
    assert units.percent_to_prob(Percent(100)) == 0xFFFFFFFF  # "always" saturates
    assert units.percent_to_prob(Percent(50)) == 2**31
    assert units.percent_to_prob(Percent(0)) == 0
    assert units.prob_to_percent(0) == 0
    assert units.prob_to_percent(0xFFFFFFFF) == 100
    assert units.prob_to_percent(2**31) == 50
    # 1% is not a multiple of 2^-32: the nearest step, read back as "1%" again
    assert units.percent_to_prob(Percent(1)) == round(2**32 / 100)
    assert units.prob_to_percent(round(2**32 / 100)) == 1


def test_probability_read_back_is_exact_inverse():
    rng = random.Random(2)
    for prob in [1, 2, 3, 0xFFFFFFFE, 0xFFFFFFFF] + [rng.randrange(2**32) for _ in range(3000)]:
        percent = units.prob_to_percent(prob)
        assert units.percent_to_prob(percent) == prob, prob
        if prob == 0xFFFFFFFF:
            assert percent == 100  # the contract's "always"
            continue
        # and it is within half a step of the exact value
        assert abs(Fraction(Decimal(percent)) / 100 - Fraction(prob, 2**32)) <= Fraction(1, 2**33)


def _q16_reference(bps: Fraction) -> int:
    # independent of the implementation: round half up of 8e9 * 65536 / bps, in integers
    num, den = 8 * 10**9 * 65536 * bps.denominator, bps.numerator
    return (2 * num + den) // (2 * den)


@pytest.mark.parametrize("text", ["1kbit", "20kbit", "28.8kbit", "60kbit", "370kbit", "1.544Mbit",
                                  "3Mbit", "42Mbit", "333.3Mbit", "1Gbit", "1.5Gbit", "2.5Gbit",
                                  "9.953Gbit", "40Gbit", "99.9Gbit", "100Gbit"])
def test_rate_quantisation_round_trips_human_values(text):
    rate = Rate.parse(text)
    q16 = units.rate_to_ns_per_byte_q16(rate)
    assert q16 == _q16_reference(Fraction(Decimal(rate)))
    assert units.ns_per_byte_q16_to_rate(q16) == rate


def test_whole_rates_below_sqrt_of_the_scale_round_trip():
    # Below sqrt(8e9 * 65536) ~ 22.9 Mbit/s the q16 grid is finer than 1 bit/s.
    rng = random.Random(6)
    for bps in [1000, 22_898_000] + [rng.randrange(1000, 22_898_000) for _ in range(3000)]:
        rate = Rate(bps)
        assert units.ns_per_byte_q16_to_rate(units.rate_to_ns_per_byte_q16(rate)) == rate


@pytest.mark.parametrize("digits,limit", [(3, 10**11), (4, 70 * 10**9), (5, 7 * 10**9)])
def test_rates_with_few_digits_round_trip(digits, limit):
    # the guarantees docs/profiles.md states, on a sample of mantissas at every exponent
    rng = random.Random(digits)
    for exponent in range(3, 12):
        for mantissa in rng.sample(range(10 ** (digits - 1), 10**digits), 300):
            rate = Rate(Decimal(mantissa).scaleb(exponent - digits + 1))
            if 1000 <= rate <= limit:
                q16 = units.rate_to_ns_per_byte_q16(rate)
                assert units.ns_per_byte_q16_to_rate(q16) == rate


def test_rate_read_back_is_exact_inverse():
    rng = random.Random(3)
    lo, hi = _q16_reference(Fraction(10**11)), _q16_reference(Fraction(1000))
    for q16 in [lo, hi, lo + 1, hi - 1] + [rng.randrange(lo, hi + 1) for _ in range(3000)]:
        rate = units.ns_per_byte_q16_to_rate(q16)
        assert units.rate_to_ns_per_byte_q16(rate) == q16, q16
    # the 48-bit parameter holds the slowest allowed rate with room to spare
    assert hi < 2**48


# ---- validation messages ---------------------------------------------------------------------------

BAD_INPUTS = [
    # (document without the name, path, words the message must contain)
    ({"downlink": {"rate": "-3Mbit"}}, "downlink.rate", ['"-3Mbit"', "not a rate", "1kbit..100Gbit"]),
    ({"downlink": {"rate": "200Gbit"}}, "downlink.rate", ["200Gbit", "out of range", "1kbit..100Gbit"]),
    ({"uplink": {"rate": "500bit"}}, "uplink.rate", ["500bit", "1kbit..100Gbit"]),
    ({"uplink": {"rate": "3Mbps"}}, "uplink.rate", ['"3Mbps"', "ambiguous"]),
    ({"uplink": {"loss": "150%"}}, "uplink.loss", ["150%", "out of range 0..100%"]),
    ({"uplink": {"loss": -1}}, "uplink.loss", ["-1%", "0..100%"]),
    ({"uplink": {"loss": "lots"}}, "uplink.loss", ['"lots"', "not a percentage", "0..100%"]),
    ({"uplink": {"duplicate": "1e-9%"}}, "uplink.duplicate", ["0.000000001%", "resolution"]),
    ({"downlink": {"corrupt": 100.5}}, "downlink.corrupt", ["100.5%", "0..100%"]),
    ({"downlink": {"delay": "300000s"}}, "downlink.delay", ["300000s", "0s..281474.976710655s"]),
    ({"downlink": {"delay": "50"}}, "downlink.delay", ['"50"', "no unit"]),
    ({"downlink": {"delay": 50}}, "downlink.delay", ["50", "no unit", "0s..281474.976710655s"]),
    ({"downlink": {"delay": "1.5ns"}}, "downlink.delay", ['"1.5ns"', "whole number"]),
    ({"downlink": {"jitter": "-2ms"}}, "downlink.jitter", ['"-2ms"', "negative"]),
    ({"downlink": {"jitter": "5ms", "jitter_distribution": "gauss"}},
     "downlink.jitter_distribution", ['"gauss"', "none, uniform, normal, pareto, paretonormal, user"]),
    ({"uplink": {"rate": "1Mbit", "overhead": 70000}}, "uplink.overhead", ["70000", "-32768..32767"]),
    ({"uplink": {"rate": "1Mbit", "overhead": -32769}}, "uplink.overhead", ["-32769", "-32768..32767"]),
    ({"uplink": {"rate": "1Mbit", "overhead": 1.5}}, "uplink.overhead", ["1.5", "whole number"]),
    ({"uplink": {"rate": "1Mbit", "queue": {"packets": 2**32}}}, "uplink.queue.packets",
     [str(2**32), "0..4294967295"]),
    ({"uplink": {"rate": "1Mbit", "queue": {"bytes": "5GB"}}}, "uplink.queue.bytes",
     ["5GB", "0B..4294967295B"]),
    ({"uplink": {"rate": "1Mbit", "queue": "lots"}}, "uplink.queue", ['"lots"', "queue block"]),
    ({"uplink": {"gilbert_elliott": {"p": 0, "r": 50}}}, "uplink.gilbert_elliott.p",
     ["0%", "(0..100]%"]),
    ({"uplink": {"gilbert_elliott": {"p": 1, "r": 120}}}, "uplink.gilbert_elliott.r",
     ["120%", "0..100%"]),
    ({"uplink": {"gilbert_elliott": {"p": 1}}}, "uplink.gilbert_elliott.r", ["required"]),
    ({"uplink": {"gilbert_elliott": "bursty"}}, "uplink.gilbert_elliott", ['"bursty"']),
    ({"uplink": {"reorder": {"keep_order": "yes"}}}, "uplink.reorder.keep_order",
     ['"yes"', "true or false"]),
    ({"uplink": {"dealy": "5ms"}}, "uplink.dealy", ["unknown field", "'delay'"]),
    ({"downlink": 5}, "downlink", ["5", "not a mapping"]),
    ({"both": {"rate": "fast"}}, "both.rate", ['"fast"', "1kbit..100Gbit"]),
    ({"both": [1]}, "both", ["not a mapping"]),
    ({"radio": {"model": "5g"}}, "radio.model", ['"5g"', "none, umts, lte, gprs"]),
    ({"radio": "5g"}, "radio.model", ['"5g"', "none, umts, lte, gprs"]),
    ({"radio": {"model": "lte", "tail": "2h"}}, "radio.tail", ["7200s", "0s..3600s"]),
    ({"radio": {"model": "umts", "promotion_idle_dch": "90s"}}, "radio.promotion_idle_dch",
     ["90s", "0s..60s"]),
    ({"radio": {"model": "umts", "power_dch": "20W"}}, "radio.power_dch", ["20", "0..10 W"]),
    ({"radio": {"model": "umts", "fach_threshold_uplink": 70000}}, "radio.fach_threshold_uplink",
     ["70000", "0..65535"]),
    ({"radio": {"model": "gprs", "tail": "1s"}}, "radio.tail",
     ["not a field of the gprs radio model (it belongs to lte)", "gprs's fields: "]),
    ({"radio": {"model": "umts", "promotion": "1s"}}, "radio.promotion",
     ["not a field of the umts radio model (it belongs to lte and gprs)", "promotion_idle_dch"]),
    ({"radio": {"model": "lte", "short_drx_cycle": "50ms"}}, "radio.short_drx_cycle",
     ["50ms", "long_drx_cycle 40ms"]),
    ({"radio": {"model": "lte", "on_duration": "0s"}}, "radio.on_duration", ["never wake"]),
    ({"radio": {"model": "lte", "tail": "50ms"}}, "radio.tail", ["50ms", "drx_inactivity 100ms"]),
    ({"radio": {"model": "lte", "promotion_spread": "2min"}}, "radio.promotion_spread",
     ["120s", "0s..60s"]),
    ({"radio": {"model": "umts", "promotion_queue": -1}}, "radio.promotion_queue",
     ["-1", "0..4294967295"]),
    ({"radio": {"model": "gprs", "power_ready": "-1W"}}, "radio.power_ready", ["-1", "0..10 W"]),
    ({"radio": {"model": "none", "promotion": "1s"}}, "radio.promotion",
     ["not a field of the none radio model", "none has no other field"]),
    ({"title": "two\nlines"}, "title", ["one line"]),
    ({"description": 5}, "description", ["5", "not a string"]),
    # settings the pipeline would silently ignore
    ({"uplink": {"jitter": "5ms", "jitter_distribution": "none"}}, "uplink.jitter_distribution",
     ["none", "5ms"]),
    ({"uplink": {"queue": 25}}, "uplink.queue", ["needs a rate"]),
    ({"uplink": {"overhead": 24}}, "uplink.overhead", ["24", "needs a rate"]),
    ({"uplink": {"reorder": "25%"}}, "uplink.reorder.probability", ["25%", "delay"]),
    ({"uplink": {"loss": "1%", "gilbert_elliott": {"p": 1, "r": 30}}}, "uplink.loss",
     ["1%", "gilbert_elliott"]),
    # bearers (a queue per UE in a cell)
    ({"downlink": {"rate": "1Mbit", "bearers": "rr"}}, "downlink.bearers.scheduler", ['"rr"', "fifo, drr, pf"]),
    ({"downlink": {"rate": "1Mbit", "bearers": {"scheduler": "drr", "quantum": 10}}}, "downlink.bearers.quantum",
     ["10B", "64B..1MiB"]),
    ({"downlink": {"rate": "1Mbit", "bearers": {"scheduler": "pf", "halflife": "1ns"}}}, "downlink.bearers.halflife",
     ["1ns", "1.024us.."]),
    ({"downlink": {"rate": "1Mbit", "bearers": {"scheduler": "pf", "quantum": 1514}}}, "downlink.bearers.quantum",
     ["DRR setting", "pf"]),
    ({"downlink": {"bearers": "drr"}}, "downlink.bearers", ["drr", "needs a rate"]),
    ({"downlink": {"rate": "1Mbit", "bearers": "drr", "aqm": "codel"}}, "downlink.aqm", ["codel", "bearers"]),
]


@pytest.mark.parametrize("doc,path,words", BAD_INPUTS, ids=[b[1] for b in BAD_INPUTS])
def test_bad_input_names_field_value_and_range(doc, path, words):
    problems = problems_of({"name": "bad", **doc})
    assert len(problems) == 1, problems
    prefix, _, message = problems[0].partition(": ")
    assert prefix == path
    for word in words:
        assert word in message, (word, message)


def test_bad_name_is_reported():
    for name in ["LTE", "-lte", "lte 200", "", "x" * 64, 5, None]:
        problems = problems_of({"name": name})
        assert problems and problems[0].startswith("name: "), problems


def test_all_field_problems_are_listed_at_once():
    problems = problems_of({"name": "x", "downlink": {"rate": "-3Mbit", "delay": "5"},
                            "uplink": {"loss": "150%"}, "radio": {"model": "lte", "tail": "2h"},
                            "colour": "red"})
    paths = [p.split(": ")[0] for p in problems]
    assert paths == ["uplink.loss", "downlink.delay", "downlink.rate", "radio.tail", "colour"]


def test_both_problem_is_reported_once_under_both():
    problems = problems_of({"name": "x", "both": {"rate": "-3Mbit"}, "uplink": {"rate": "-1kbit"}})
    assert [p.split(": ")[0] for p in problems] == ["uplink.rate", "both.rate"]



def test_a_both_field_every_direction_overrides_is_still_checked():
    # Expansion never reads it, but it is a typo in the file like any other (it was taken).
    doc = {"name": "x", "both": {"rate": "3Mbit", "delay": "10ms", "queue": 20},
           "uplink": {"rate": "1Mbit", "queue": 5}, "downlink": {"rate": "2Mbit", "queue": "lots"}}
    problems = problems_of({**doc, "both": {**doc["both"], "rate": "fast"}})
    assert [p.split(": ")[0] for p in problems] == ["downlink.queue", "both.rate"], problems
    assert '"fast"' in problems[1] and "1kbit..100Gbit" in problems[1]
    # A valid one is taken (it has no effect).
    profile = Profile.parse({**doc, "downlink": {"rate": "2Mbit", "queue": 5}})
    assert (profile.uplink.rate, profile.downlink.rate) == (1_000_000, 2_000_000)


# ---- model semantics -----------------------------------------------------------------------------

def test_both_fills_both_directions_and_directions_override():
    profile = Profile.parse({"name": "x", "both": {"delay": "50ms", "rate": "3Mbit",
                                                   "queue": {"packets": 50}},
                             "uplink": {"rate": "370kbit", "queue": {"bytes": "64KB"}}})
    assert profile.downlink.delay == profile.uplink.delay == 50_000_000
    assert profile.downlink.rate == 3_000_000 and profile.uplink.rate == 370_000
    # nested blocks are replaced whole, not merged
    assert profile.downlink.queue.packets == 50 and profile.downlink.queue.bytes == 0
    assert profile.uplink.queue.packets == 0 and profile.uplink.queue.bytes == 64_000


def test_defaults_are_pass_through():
    profile = Profile.parse({"name": "x"})
    assert profile.title == "x" and profile.radio.model == "none"
    assert profile.uplink.passthrough and profile.downlink.passthrough
    params = profile.to_table_params("uplink")
    assert set(params.values()) == {0}  # every param of "no impairment" is 0 ...
    assert len(params) == len(IMPAIRMENT_PARAMS) == 63  # ... and all are present


def test_jitter_distribution_defaults_to_normal_only_with_jitter():
    assert LinkParams(jitter="5ms").jitter_distribution.value == "normal"
    assert LinkParams().jitter_distribution.value == "none"
    assert LinkParams(jitter="5ms", jitter_distribution="pareto").jitter_distribution.code == 3


def test_profiles_are_immutable():
    profile = builtin_profile("hspa")
    with pytest.raises(Exception):
        profile.name = "other"  # type: ignore[misc]
    with pytest.raises(Exception):
        profile.downlink.delay = Duration(1)  # type: ignore[misc]


def test_direction_parse():
    assert Direction.parse("uplink") == Direction.parse(0) == Direction.UPLINK
    assert Direction.parse("DOWNLINK") == Direction.parse(1) == Direction.DOWNLINK
    for bad in ["both", 2, True, None]:
        with pytest.raises(ValueError):
            Direction.parse(bad)


# ---- table params ----------------------------------------------------------------------------------

def test_impairment_params_match_the_p4info():
    from p4netem.p4rt.p4info import P4Info

    action = P4Info.load(p4info_path()).action(SET_IMPAIRMENT)
    from_p4info = sorted((p.id, p.name, p.bitwidth) for p in action.params.values())
    assert from_p4info == sorted(IMPAIRMENT_PARAMS)
    # and the names, in order, are the ones the rest of the control plane uses
    from p4netem import pipeline

    assert tuple(name for _, name, _ in IMPAIRMENT_PARAMS) == pipeline.IMPAIRMENT_PARAMS
    assert [d.code for d in JitterDistribution] == [int(d) for d in pipeline.JitterDist]


def test_encoding_of_each_field():
    link = LinkParams(delay="50ms", jitter="3.5ms", jitter_distribution="uniform",
                      reorder={"keep_order": False, "probability": "25%"}, rate="3Mbit",
                      overhead=24, cell_size=48, cell_overhead=5,
                      queue={"packets": 25, "bytes": "64KiB"}, loss=0,
                      gilbert_elliott={"p": "1%", "r": "30%", "loss_good": 0.5, "loss_bad": 80},
                      duplicate="0.1%", corrupt="50%",
                      aqm={"kind": "codel", "target": "3ms", "interval": "60ms", "ecn": True},
                      onoff={"mean_on": "10s", "mean_off": "2s"})
    params = link.to_table_params()
    assert list(params) == [name for _, name, _ in IMPAIRMENT_PARAMS]
    expected = {
        "delay_ns": 50_000_000, "jitter_ns": 3_500_000, "jitter_dist": 1, "reorder_mode": 1,
        "reorder_prob": 2**30, "loss_prob": 0, "ge_p": round(2**32 * 0.01),
        "ge_r": round(2**32 * 0.3), "ge_loss_good": round(2**32 * 0.005),
        "ge_loss_bad": round(2**32 * 0.8), "ns_per_byte_q16": _q16_reference(Fraction(3 * 10**6)),
        "overhead_bytes": 24, "queue_limit_bytes": 65536, "queue_limit_pkts": 25,
        "dup_prob": round(2**32 * 0.001), "corrupt_prob": 2**31,
        "aqm": 1, "codel_target_ns": 3_000_000, "codel_interval_ns": 60_000_000, "ecn": 1,
        "red_min_bytes": 0, "red_max_bytes": 0, "red_max_prob": 0, "red_wlog": 0, "red_span_bytes": 0,
        "red_gentle": 0, "red_idle_q48": 0,  # RED's params are zero for CoDel (tests/unit/test_aqm_profile.py)
        "loss4_p13": 0, "loss4_p31": 0, "loss4_p32": 0, "loss4_p23": 0, "loss4_p14": 0,  # test_loss_state.py
            "slot_delay_ns": 0, "slot_span_ns": 0, "slot_dist": 0, "slot_packets": 0, "slot_bytes": 0,  # test_slot_profile.py
            "trace_base": 0, "trace_len": 0, "trace_ms_base": 0, "trace_period_ms": 0,
            "trace_period_recip": 0,  # tests/unit/test_trace_exact_profile.py
            "bearer_sched": 0, "bearer_quantum_bytes": 0, "bearer_pf_halflife_log2": 0,  # test_bearers_encode_and_read_back
            # netem's correlations: none; gap 1 with a reorder probability (tests/unit/test_correlation_profiles.py)
            "delay_corr": 0, "jitter_mod_recip": 0, "loss_corr": 0, "dup_corr": 0, "corrupt_corr": 0,
            "reorder_corr": 0, "reorder_gap": 1,
            "loss_ecn": 0,  # netem's ecn: off (tests/unit/test_loss_ecn_profiles.py)
            # ATM-like cells of 48 + 5 bytes; cell_recip = floor(2^32 / 48) (tests/unit/test_cell_profiles.py)
            "cell_bytes": 48, "cell_overhead_bytes": 5, "cell_recip": 89_478_485,
            # the on/off link: pi = 10/12 in Q32, 2^64 / (tau ln 2) with tau = 10 x 2 / 12 s
            # (tests/unit/test_onoff_profiles.py)
            "onoff_on_prob": round(2**32 * 10 / 12), "onoff_recip": round(2**64 / (10 * 2 / 12 * 1e9 * math.log(2))),
            # PIE's params are zero for CoDel (tests/unit/test_pie_profiles.py)
            "pie_target_ns": 0, "pie_tupdate_ns": 0, "pie_alpha": 0, "pie_beta": 0, "pie_max_burst_ns": 0,
    }
    assert params == expected
    assert LinkParams.from_table_params(params) == link


def test_decode_accepts_p4runtime_bytestrings():
    params = builtin_profile("t1").to_table_params("downlink")
    as_bytes = {name: value.to_bytes((WIDTHS[name] + 7) // 8, "big") for name, value in params.items()}
    minimal = {name: value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
               for name, value in params.items()}  # P4Runtime canonical (shortest) form
    assert decode_link(as_bytes) == decode_link(minimal) == builtin_profile("t1").downlink


def test_decode_reports_every_bad_param():
    params = builtin_profile("t1").to_table_params("downlink")
    params.pop("delay_ns")
    params["overhead_bytes"] = 2**16
    params["colour"] = 1
    params["loss_prob"] = "1%"
    with pytest.raises(ProfileError) as info:
        decode_link(params)
    text = str(info.value)
    assert SET_IMPAIRMENT in text
    paths = sorted(p.path for p in info.value.problems)
    assert paths == ["colour", "delay_ns", "loss_prob", "overhead_bytes"]
    assert "65536 out of range 0..65535 (bit<16>)" in text


@pytest.mark.parametrize("name,value,needle", [("jitter_dist", 6, "0..5"),
                                               ("reorder_mode", 2, "0..1"),
                                               ("ns_per_byte_q16", 1, "1kbit..100Gbit")])
def test_decode_rejects_values_no_profile_has(name, value, needle):
    params = builtin_profile("t1").to_table_params("downlink")
    params[name] = value
    with pytest.raises(ProfileError, match=r"(?s)" + name + ".*" + needle.replace(".", r"\.")):
        decode_link(params)


def test_decode_shows_switch_state_a_profile_file_would_refuse():
    # Another P4Runtime client may have written a queue limit with no rate: still shown as is.
    params = LinkParams().to_table_params() | {"queue_limit_pkts": 25, "jitter_ns": 1000}
    link = decode_link(params)
    assert link.queue.packets == 25 and link.jitter == 1000
    assert link.to_table_params() == params
    with pytest.raises(ProfileError):
        Profile.parse({"name": "x", "uplink": link.model_dump(mode="json")})


def test_decode_ignores_ge_params_when_model_is_off():
    params = LinkParams().to_table_params() | {"ge_r": 5, "ge_loss_bad": 7}
    assert decode_link(params) == LinkParams()


def test_random_profiles_round_trip_through_the_table():
    rng = random.Random(4)
    for _ in range(300):
        link = LinkParams(
            delay=f"{rng.randrange(0, 10**6)}us",
            jitter=f"{rng.randrange(1, 10**4)}us",
            jitter_distribution=rng.choice(["uniform", "normal", "pareto", "paretonormal", "user"]),
            reorder={"keep_order": rng.random() < 0.5,
                     "probability": f"{rng.randrange(0, 1000) / 10}%"},
            # 3 significant digits survive the rate quantisation at any rate (docs/profiles.md)
            rate=f"{rng.randrange(100, 1000)}e{rng.randrange(1, 9)}bit",
            overhead=rng.randrange(-32768, 32768),  # signed: bit<16> two's complement
            queue={"packets": rng.randrange(0, 10**4), "bytes": rng.randrange(0, 2**32)},
            # 7 decimal places of a percent survive the bit<32> quantisation
            loss=f"{Decimal(rng.randrange(0, 10**9)).scaleb(-7)}%",
            duplicate=f"{rng.randrange(0, 100)}%", corrupt=f"{rng.randrange(0, 10**6) / 10**4}%")
        params = encode_link(link)
        assert all(0 <= v < 2 ** WIDTHS[k] for k, v in params.items())
        assert decode_link(params) == link
        assert encode_link(decode_link(params)) == params


def test_bearers_encode_and_read_back():
    drr = Profile.parse({"name": "cell", "downlink": {"rate": "10Mbit", "queue": 50, "bearers": "drr"}}).downlink
    assert drr.bearers.quantum == 1514
    params = encode_link(drr)
    assert (params["bearer_sched"], params["bearer_quantum_bytes"], params["bearer_pf_halflife_log2"]) == (1, 1514, 0)
    assert decode_link(params) == drr
    pf = Profile.parse({"name": "cell", "downlink": {"rate": "10Mbit", "bearers": {"scheduler": "pf", "halflife": "100ms"}}})
    # The switch halves per 2^k ns: the profile holds the half-life it really gets.
    assert int(pf.downlink.bearers.halflife) == 2**27
    params = encode_link(pf.downlink)
    assert (params["bearer_sched"], params["bearer_quantum_bytes"], params["bearer_pf_halflife_log2"]) == (2, 0, 27)
    assert decode_link(params) == pf.downlink
    fifo = encode_link(Profile.parse({"name": "x", "downlink": {"rate": "10Mbit"}}).downlink)
    assert (fifo["bearer_sched"], fifo["bearer_quantum_bytes"], fifo["bearer_pf_halflife_log2"]) == (0, 0, 0)


# ---- radio -----------------------------------------------------------------------------------------

def test_radio_params_match_the_p4info():
    from p4netem.p4rt.p4info import P4Info
    from p4netem import pipeline

    action = P4Info.load(p4info_path()).action(SET_RADIO)
    assert sorted((p.id, p.name, p.bitwidth) for p in action.params.values()) == sorted(RADIO_PARAMS)
    assert tuple(name for _, name, _ in RADIO_PARAMS) == pipeline.RADIO_PARAMS


def test_radio_encodes_to_set_radio_exactly():
    hspa = builtin_profile("hspa")
    params = hspa.radio_table_params()
    assert list(params) == [name for _, name, _ in RADIO_PARAMS]
    assert params["model"] == 1 and params["idle_to_dch_ns"] == 1_800_000_000
    assert params["fach_to_dch_ns"] == 1_500_000_000 and params["dch_fach_timer_ns"] == 4 * 10**9
    assert (params["rlc_ul_bytes"], params["rlc_dl_bytes"]) == (543, 475)
    assert params["fach_ns_per_byte_q16"] == 400_000 * 65536  # 20 kbit/s = 400 us per byte
    assert params["idle_to_connected_ns"] == params["drx_inactivity_ns"] == 0  # LTE's: unused
    # The link params never carry the radio; the radio is its own entry.
    assert hspa.to_table_params("downlink") == encode_link(hspa.downlink)
    lte = Profile.parse({"name": "x", "radio": {"model": "lte", "promotion": "100ms",
                                                "promotion_spread": "20ms", "promotion_queue": 8}})
    p = lte.radio_table_params()
    assert (p["model"], p["idle_to_connected_ns"], p["promo_spread_ns"], p["promo_queue_pkts"]) == \
        (2, 100_000_000, 20_000_000, 8)
    assert (p["short_drx_cycle_ns"], p["long_drx_cycle_ns"], p["drx_on_ns"], p["tail_ns"]) == \
        (20_000_000, 40_000_000, 1_000_000, 10 * 10**9)
    gprs = RadioGprs(model="gprs", promotion="1s")
    assert gprs.to_table_params()["standby_to_ready_ns"] == 10**9  # defaults to the promotion
    assert RadioGprs(model="gprs", promotion_standby_ready="300ms").to_table_params()[
        "standby_to_ready_ns"] == 300_000_000
    assert encode_radio(RadioNone()) == {name: 0 for _, name, _ in RADIO_PARAMS}


@pytest.mark.parametrize("radio", [
    RadioNone(), RadioUmts(model="umts"), RadioLte(model="lte"), RadioGprs(model="gprs"),
    RadioUmts(model="umts", fach_rate="unlimited", inactivity_dch_fach=0, promotion_spread="1s"),
    RadioLte(model="lte", drx_inactivity=0, short_drx_cycle=0, short_drx_time=0, tail="11.576s"),
    RadioGprs(model="gprs", promotion_standby_ready="200ms", standby_timer="54min", promotion_queue=3),
])
def test_radio_table_round_trip(radio):
    params = encode_radio(radio)
    assert all(0 <= v < 2 ** bits for (_, name, bits), v in zip(RADIO_PARAMS, params.values()))
    assert decode_radio(params) == radio
    assert encode_radio(decode_radio(params)) == params
    as_bytes = {k: v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big") for k, v in params.items()}
    assert decode_radio(as_bytes) == radio


def test_decode_radio_names_each_bad_param():
    good = encode_radio(RadioLte(model="lte"))
    with pytest.raises(ProfileError) as info:
        decode_radio(good | {"model": 7})
    assert "model: 7 is not a radio model" in str(info.value)
    with pytest.raises(ProfileError) as info:
        decode_radio({k: v for k, v in good.items() if k != "tail_ns"} | {"colour": 1, "rlc_ul_bytes": 2**32})
    text = str(info.value)
    assert "tail_ns: missing" in text and "colour: not a set_radio param" in text
    assert "rlc_ul_bytes: 4294967296 out of range 0..4294967295" in text
    # A value the table holds but the model refuses (no on-duration) names the model's field.
    with pytest.raises(ProfileError, match="on_duration"):
        decode_radio(good | {"drx_on_ns": 0})
    # ... and reading a whole profile back prefixes it with radio.
    with pytest.raises(ProfileError, match="radio.model"):
        Profile.from_table_params("x", LinkParams().to_table_params(), LinkParams().to_table_params(),
                                  radio=good | {"model": 9})
    back = Profile.from_table_params("x", LinkParams().to_table_params(), LinkParams().to_table_params(),
                                     radio=good)
    assert back.radio == RadioLte(model="lte") and back.has_radio


def test_radio_defaults_and_shorthand():
    lte = Profile.parse({"name": "x", "radio": "lte"}).radio
    assert lte.model == "lte" and lte.promotion == 260_000_000 and lte.long_drx_cycle == 40_000_000
    umts = Profile.parse({"name": "x", "radio": {"model": "umts"}}).radio
    assert umts.promotion_idle_dch == 2 * 10**9 and umts.fach_threshold_uplink == 543


# ---- Gilbert-Elliott ----------------------------------------------------------------------------

def _simulate(ge: GilbertElliott, packets: int, seed: int) -> tuple[float, float]:
    """Loss rate and mean loss-burst length of the contract's semantics: move, then lose."""
    rng = random.Random(seed)
    p, r = float(ge.p) / 100, float(ge.r) / 100
    k, h = float(ge.loss_good) / 100, float(ge.loss_bad) / 100
    bad, lost_total, bursts, in_burst = False, 0, 0, False
    for _ in range(packets):
        bad = (rng.random() >= r) if bad else (rng.random() < p)
        lost = rng.random() < (h if bad else k)
        if lost:
            lost_total += 1
            if not in_burst:
                bursts += 1
        in_burst = lost
    return lost_total / packets, lost_total / max(bursts, 1)


@pytest.mark.parametrize("loss,burst", [("1%", 1), ("1%", 3), ("5%", 2.5), ("0.1%", 10), (20, 4)])
def test_from_burst_closed_form(loss, burst):
    ge = GilbertElliott.from_burst(loss, burst)
    target = float(Percent.parse(loss)) / 100
    # simple Gilbert model: r = 1/burst, p = r * L / (1 - L)
    assert float(ge.r) / 100 == pytest.approx(1 / burst, rel=1e-6)
    assert float(ge.p) / 100 == pytest.approx(target / (1 - target) / burst, rel=1e-6)
    assert ge.mean_loss == pytest.approx(target, rel=1e-6)
    assert ge.mean_burst == pytest.approx(burst, rel=1e-6)
    assert ge.loss_good == 0 and ge.loss_bad == 100


def test_from_burst_with_partial_loss_in_bad_state():
    ge = GilbertElliott.from_burst("2%", 1.5, loss_bad="80%")
    assert ge.mean_loss == pytest.approx(0.02, rel=1e-6)
    assert ge.mean_burst == pytest.approx(1.5, rel=1e-6)


@pytest.mark.parametrize("ge", [GilbertElliott.from_burst("5%", 3),
                                GilbertElliott(p="2%", r="20%", loss_good="1%", loss_bad="60%")])
def test_statistics_match_a_simulation_of_the_data_plane_semantics(ge):
    n = 400_000
    loss, burst = _simulate(ge, n, seed=5)
    # loss: the chain's correlation inflates the variance; 6 binomial sigmas leave room for it
    sigma = math.sqrt(ge.mean_loss * (1 - ge.mean_loss) / n) * math.sqrt(2 * ge.mean_burst)
    assert abs(loss - ge.mean_loss) < 6 * sigma, (loss, ge.mean_loss)
    assert burst == pytest.approx(ge.mean_burst, rel=0.05)


@pytest.mark.parametrize("loss,burst,loss_bad,needle", [
    ("1%", 0.5, "100%", "at least 1 packet"),
    ("0%", 2, "100%", "above 0%"),
    ("60%", 2, "50%", "below loss_bad"),
    ("1%", 10, "50%", "unreachable"),
    ("60%", 1, "100%", "above 100%"),
])
def test_from_burst_rejects_impossible_targets(loss, burst, loss_bad, needle):
    with pytest.raises(ValueError, match=needle):
        GilbertElliott.from_burst(loss, burst, loss_bad=loss_bad)


# ---- built-in library ---------------------------------------------------------------------------

# From cellular.md: (name, down bit/s, up bit/s, RTT ms, RTT sd ms, radio model)
CELLULAR_MD = [
    ("gprs", 60_000, 20_000, 400, 30, "gprs"),
    ("hspa", 3_000_000, 370_000, 100, 5, "umts"),
    ("lte", 20_000_000, 5_000_000, 25, 0, "lte"),
    ("lte-200ms", 20_000_000, 5_000_000, 225, 0, "lte"),
    ("edge", 384_000, 135_000, None, None, "gprs"),
    ("hspa-plus", 42_000_000, 11_000_000, None, None, "umts"),
    ("modem-28k8", 28_800, 28_800, 150, 0, "none"),
    ("t1", 1_544_000, 1_544_000, 100, 0, "none"),
    ("cable-10-1", 10_000_000, 1_000_000, None, 0, "none"),
    ("cable-20-2", 20_000_000, 2_000_000, None, 0, "none"),
    ("wan-90ms", 0, 0, 90, 0, "none"),
    ("geo-satellite", 0, 0, 600, 0, "none"),
]


def test_builtin_library_is_complete():
    profiles = builtin_profiles()
    assert tuple(profiles) == BUILTIN_NAMES
    assert sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")) == sorted(BUILTIN_NAMES)
    for name in BUILTIN_NAMES:  # one file per profile, named after it
        assert load_profile(BUILTIN_DIR / f"{name}.yaml").name == name


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_loads_converts_and_round_trips(name):
    profile = builtin_profile(name)
    assert profile.title and profile.title != profile.name
    assert profile.description and profile.source
    for direction in ("uplink", "downlink"):
        params = profile.to_table_params(direction)
        assert list(params) == [n for _, n, _ in IMPAIRMENT_PARAMS]
        assert all(isinstance(v, int) and 0 <= v < 2 ** WIDTHS[k] for k, v in params.items())
        assert LinkParams.from_table_params(params) == profile.link(direction)
    back = Profile.from_table_params(
        name, profile.to_table_params("uplink"),
        profile.to_table_params("downlink"), title=profile.title,
        description=profile.description, source=profile.source, radio=profile.radio)
    assert back == profile and back.same_table_params(profile)
    assert loads_profiles(dumps(profile)) == [profile]


@pytest.mark.parametrize("name,down,up,rtt_ms,sd_ms,radio", CELLULAR_MD)
def test_builtin_numbers_follow_cellular_md(name, down, up, rtt_ms, sd_ms, radio):
    profile = builtin_profile(name)
    assert profile.radio.model == radio
    for direction, bps in (("downlink", down), ("uplink", up)):
        params = profile.to_table_params(direction)
        expected_q16 = _q16_reference(Fraction(bps)) if bps else 0
        assert params["ns_per_byte_q16"] == expected_q16
        if rtt_ms is not None:
            assert 2 * params["delay_ns"] == rtt_ms * 10**6  # one-way = RTT / 2
        if sd_ms:
            # two independent directions: RTT sd = sqrt(2) * one-way sigma
            assert params["jitter_dist"] == 2 and params["reorder_mode"] == 0
            assert math.sqrt(2) * params["jitter_ns"] == pytest.approx(sd_ms * 10**6, rel=0.01)
        elif sd_ms == 0:
            assert params["jitter_ns"] == 0


def test_builtin_queues_and_loss_follow_cellular_md():
    for name, packets in (("t1", 25), ("cable-10-1", 50), ("cable-20-2", 50)):
        for direction in ("uplink", "downlink"):
            assert builtin_profile(name).to_table_params(direction)["queue_limit_pkts"] == packets
    wifi = builtin_profile("wifi-lossy")
    assert wifi.uplink.loss == wifi.downlink.loss == 1
    assert builtin_profile("hspa").radio.promotion_idle_dch == 1_800_000_000


# ---- YAML files -----------------------------------------------------------------------------------

def test_load_one_profile_and_a_list(tmp_path):
    one = tmp_path / "one.yaml"
    one.write_text("name: mine\nboth: {delay: 20ms}\ndownlink: {rate: 8Mbit, loss: 0.5}\n")
    profile = load_profile(one)
    assert profile.downlink.loss == Decimal("0.5") and profile.uplink.rate == 0
    many = tmp_path / "many.yaml"
    dump([profile, builtin_profile("lte")], many)
    assert [p.name for p in load_profiles(many)] == ["mine", "lte"]
    with pytest.raises(ProfileError, match="holds 2 profiles"):
        load_profile(many)
    assert load_profiles(one) == [profile]


def test_load_directory(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\n")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [p.name for p in load_profiles(tmp_path)] == ["a", "b"]
    (tmp_path / "c.yml").write_text("name: a\n")
    with pytest.raises(ProfileError, match="duplicate profile name 'a'"):
        load_profiles(tmp_path)


def test_bad_file_lists_every_problem_with_file_and_path(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "profiles:\n"
        "  - name: ok\n"
        "  - name: broken\n"
        "    downlink: {rate: -3Mbit, delay: 5}\n"
        "    uplink: {loss: 150%}\n"
        "  - name: ok\n"
    )
    before = (bad.read_bytes(), os.stat(bad).st_mtime_ns)
    with pytest.raises(ProfileError) as info:
        load_profiles(bad)
    text = str(info.value)
    assert text.startswith(f"{bad}: 4 problems")
    assert [p.path for p in info.value.problems] == [
        "profiles[1].uplink.loss", "profiles[1].downlink.delay", "profiles[1].downlink.rate",
        "profiles[2].name"]
    assert "duplicate profile name 'ok'" in text
    assert (bad.read_bytes(), os.stat(bad).st_mtime_ns) == before  # loading changes nothing


@pytest.mark.parametrize("text,needle", [
    ("name: x\nname: y\n", "line 2: duplicate key 'name'"),
    ("name: x\nboth:\n  delay: 1ms\n  delay: 2ms\n", "line 4: duplicate key 'delay'"),
    ("name: [x\n", "not valid YAML"),
    ("", "empty file"),
    ("- name: x\n", "expected a profile mapping"),
    ("profiles: []\n", "non-empty list"),
    ("profiles:\n  - name: x\nextra: 1\n", "extra: unknown top-level key"),
])
def test_bad_yaml_shapes(tmp_path, text, needle):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profiles(path)
    assert needle in str(info.value) and str(path) in str(info.value)


def test_missing_file_is_a_profile_error(tmp_path):
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "nope.yaml")


def test_dump_is_short_and_reloads_exactly(tmp_path):
    hspa = builtin_profile("hspa")
    doc = hspa.to_dict()
    assert doc["both"] == {"delay": "50ms", "jitter": "3.54ms"}
    assert doc["downlink"] == {"rate": "3Mbit"} and doc["uplink"] == {"rate": "370kbit"}
    assert doc["radio"] == {"model": "umts", "promotion_idle_dch": "1.8s"}
    path = tmp_path / "all.yaml"
    text = dump(list(builtin_profiles().values()), path)
    assert path.read_text() == text
    assert load_profiles(path) == list(builtin_profiles().values())


# ---- docs/profiles.md -------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"


def test_docs_builtin_table_matches_the_library():
    from p4netem.profiles.summary import markdown_table

    text = DOCS.read_text()
    start, end = "<!-- builtin-table:start -->\n", "<!-- builtin-table:end -->"
    table = text[text.index(start) + len(start):text.index(end)]
    assert table == markdown_table(builtin_profiles().values())


def test_docs_yaml_example_is_a_valid_profile():
    text = DOCS.read_text()
    blocks = [b[:b.index("```")] for b in text.split("```yaml\n")[1:]]
    examples = {p.name: p for b in blocks for p in loads_profiles(b, "docs example")}  # every example loads
    assert examples["ecn-bursts"].downlink.loss_ecn  # "ECN marking instead of loss"
    atm = examples["adsl-atm"].downlink  # "Cell framing", and the summary it quotes
    assert (atm.cell_size, atm.cell_overhead, atm.overhead) == (48, 5, 8)
    assert link_summary(atm) == "rate 8Mbit (overhead 8B, cells 48B + 5B)" and "`" + link_summary(atm) + "`" in text
    profile = examples["my-3g"]  # "Files"
    assert profile.uplink.gilbert_elliott.loss_bad == 80
    assert profile.downlink.queue.bytes == profile.uplink.queue.bytes == 64_000
    assert profile.downlink.duplicate == Decimal("0.1")
