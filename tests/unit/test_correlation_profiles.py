"""netem's correlation and reorder gap as profile fields: the `correlation` block and `reorder.gap`,
field-named errors with the allowed ranges, every ineffective setting named by its field, the
table encoding both ways (delay_corr .. reorder_gap, jitter_mod_recip), the one-line summary, and
a simulation of the kernel's arithmetic (sch_netem get_crandom) with the profile's encoded values.
The netem spelling is in tests/unit/test_netem.py."""

from __future__ import annotations

import random
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from p4netem.profiles import IMPAIRMENT_PARAMS, LinkParams, Profile, ProfileError, decode_link, dumps, encode_link
from p4netem.profiles import loads_profiles
from p4netem.profiles.summary import link_summary

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from netem_corr_theory import losses  # noqa: E402  (the kernel's arithmetic, shared with the bench)

CORR_PARAMS = ("delay_corr", "jitter_mod_recip", "loss_corr", "dup_corr", "corrupt_corr", "reorder_corr",
               "reorder_gap")
WIDTHS = {name: bits for _, name, bits in IMPAIRMENT_PARAMS}


def _down(**link) -> Profile:
    return Profile.parse({"name": "corr", "downlink": link})


def _corr_params(link: LinkParams) -> dict[str, int]:
    return {k: v for k, v in link.to_table_params().items() if k in CORR_PARAMS}


def _problems(**link) -> list[str]:
    with pytest.raises(ProfileError) as info:
        _down(**link)
    return [str(p) for p in info.value.problems]


FULL = {"delay": "100ms", "jitter": "10ms", "jitter_distribution": "uniform", "loss": "2%", "duplicate": "1%",
        "corrupt": "0.1%", "reorder": {"probability": "25%", "gap": 5},
        "correlation": {"delay": "25%", "loss": "25%", "duplicate": "10%", "corrupt": "5%", "reorder": "50%"}}


# ---- the params, in contract order --------------------------------------------------------------

def test_the_params_are_the_contracts_seven_before_loss_ecn() -> None:
    # loss_ecn (netem's ecn, tests/unit/test_loss_ecn_profiles.py), the three of netem's cells
    # (tests/unit/test_cell_profiles.py) and the on/off link's two (test_onoff_profiles.py) came after them.
    assert [(name, bits) for _, name, bits in IMPAIRMENT_PARAMS[45:52]] == [
        ("delay_corr", 32), ("jitter_mod_recip", 64), ("loss_corr", 32), ("dup_corr", 32), ("corrupt_corr", 32),
        ("reorder_corr", 32), ("reorder_gap", 32)]


def test_each_param_is_encoded_exactly() -> None:
    link = _down(**FULL).downlink
    assert _corr_params(link) == {
        "delay_corr": 2**30,  # 25% of 2^32, as every probability (netem's rho)
        "jitter_mod_recip": 2**64 // 20_000_000,  # floor(2^64 / (2 * jitter_ns)): 922337203685
        "loss_corr": 2**30,
        "dup_corr": 429496730,  # round_half_up(0.10 * 2^32) = 429496729.6 -> ...730
        "corrupt_corr": 214748365,  # 0.05 * 2^32 = 214748364.8
        "reorder_corr": 2**31,
        "reorder_gap": 5,
    }
    assert _corr_params(link)["jitter_mod_recip"] == 922337203685
    params = link.to_table_params()
    assert list(params) == [name for _, name, _ in IMPAIRMENT_PARAMS]  # param-id order
    assert decode_link(params) == link and encode_link(decode_link(params)) == params
    # 100% is "always", as for every probability: 0xFFFFFFFF (rho = 2^32: the first draw forever).
    assert _corr_params(_down(loss="1%", correlation={"loss": "100%"}).downlink)["loss_corr"] == 0xFFFFFFFF


def test_no_correlation_encodes_zeros_and_gap_follows_the_reorder_probability() -> None:
    assert set(_corr_params(LinkParams()).values()) == {0}
    assert LinkParams().correlation.model_dump(mode="json") == {
        "delay": "0%", "loss": "0%", "duplicate": "0%", "corrupt": "0%", "reorder": "0%"}
    # gap 1 is netem's default when reorder is given; without a reorder probability reorder_gap is 0.
    assert _corr_params(_down(delay="5ms", reorder="10%").downlink)["reorder_gap"] == 1
    assert _corr_params(_down(delay="5ms", reorder={"probability": "10%", "gap": 4294967295}).downlink) \
        ["reorder_gap"] == 4294967295
    assert _corr_params(_down(delay="5ms").downlink)["reorder_gap"] == 0


@pytest.mark.parametrize("link, recip", [
    ({"jitter": "10ms", "jitter_distribution": "uniform", "correlation": {"delay": "25%"}}, 922337203685),
    ({"jitter": "1ns", "jitter_distribution": "uniform", "correlation": {"delay": "1%"}}, 2**63),
    ({"jitter": "2147483647ns", "jitter_distribution": "uniform", "correlation": {"delay": "1%"}},
     2**64 // (2**32 - 2)),
    # Table jitter takes the cell as answer mod 4096 (a mask): no reciprocal.
    ({"jitter": "10ms", "jitter_distribution": "normal", "correlation": {"delay": "25%"}}, 0),
    ({"jitter": "10ms", "jitter_distribution": "user", "correlation": {"delay": "25%"}}, 0),
    # Uniform jitter without delay correlation: the data plane draws in range itself.
    ({"jitter": "10ms", "jitter_distribution": "uniform"}, 0),
    ({"jitter": "10ms", "jitter_distribution": "uniform", "loss": "1%", "correlation": {"loss": "25%"}}, 0),
])
def test_jitter_mod_recip(link, recip) -> None:
    assert _corr_params(_down(**link).downlink)["jitter_mod_recip"] == recip


def test_decode_ignores_jitter_mod_recip_and_reads_gap_0_as_1() -> None:
    link = _down(**FULL).downlink
    params = link.to_table_params()
    assert decode_link(params | {"jitter_mod_recip": 12345}) == link
    plain = _down(delay="5ms", reorder="10%").downlink
    assert decode_link(plain.to_table_params() | {"reorder_gap": 0}).reorder.gap == 1
    # A switch may hold what a profile file refuses (a correlation with nothing to correlate): shown as it is.
    odd = decode_link(LinkParams().to_table_params() | {"loss_corr": 2**30, "reorder_gap": 7})
    assert str(odd.correlation.loss) == "25%" and odd.reorder.gap == 7
    with pytest.raises(ProfileError, match="correlation.loss: 25% has no effect without loss"):
        Profile.parse({"name": "x", "uplink": odd.model_dump(mode="json")})


def test_random_profiles_round_trip_through_the_table() -> None:
    rng = random.Random(9)
    pct = lambda: f"{Decimal(rng.randrange(1, 10**9)).scaleb(-7)}%"  # noqa: E731  (7 decimal places)
    for _ in range(300):
        link = LinkParams(
            delay=f"{rng.randrange(1, 10**6)}us", jitter=f"{rng.randrange(1, 2**31)}ns",
            jitter_distribution=rng.choice(["uniform", "normal", "pareto", "paretonormal", "user"]),
            reorder={"keep_order": rng.random() < 0.5, "probability": pct(), "gap": rng.randrange(1, 2**32)},
            loss=pct(), duplicate=pct(), corrupt=pct(),
            correlation={f: pct() for f in ("delay", "loss", "duplicate", "corrupt", "reorder")
                         if rng.random() < 0.7})
        params = encode_link(link)
        assert all(0 <= v < 2 ** WIDTHS[k] for k, v in params.items())
        assert decode_link(params) == link
        assert encode_link(decode_link(params)) == params


# ---- the profile fields ---------------------------------------------------------------------------

def test_yaml_shape_and_round_trip() -> None:
    p = Profile.parse({"name": "corr", "both": FULL})
    text = dumps(p)
    assert ("  reorder:\n    probability: 25%\n    gap: 5\n" in text
            and "  correlation:\n    delay: 25%\n    loss: 25%\n    duplicate: 10%\n    corrupt: 5%\n"
                "    reorder: 50%\n" in text), text
    assert loads_profiles(text) == [p]
    # Defaults are left out: no correlation block, no gap.
    assert "correlation" not in dumps(_down(loss="1%")) and "gap" not in dumps(_down(delay="5ms", reorder="1%"))


@pytest.mark.parametrize("link, problem", [
    ({"loss": "1%", "correlation": {"loss": "101%"}}, "downlink.correlation.loss: 101% out of range 0..100%"),
    ({"loss": "1%", "correlation": {"loss": "1e-9%"}},
     "downlink.correlation.loss: 0.000000001% is below the resolution"),
    ({"jitter": "1ms", "correlation": {"delay": "-1%"}}, "downlink.correlation.delay: -1% out of range 0..100%"),
    ({"correlation": {"latency": "5%"}}, "downlink.correlation.latency: unknown field"),
    ({"correlation": "25%"}, 'downlink.correlation: "25%" is not a correlation block ({delay, loss, duplicate, '
                             'corrupt, reorder}, each a percentage)'),
    ({"delay": "1ms", "reorder": {"probability": "1%", "gap": 0}},
     "downlink.reorder.gap: 0 out of range 1..4294967295"),
    ({"delay": "1ms", "reorder": {"probability": "1%", "gap": 2**32}},
     "downlink.reorder.gap: 4294967296 out of range 1..4294967295"),
    ({"delay": "1ms", "reorder": {"probability": "1%", "gap": 2.5}},
     "downlink.reorder.gap: 2.5 is not a whole number of packets; allowed 1..4294967295"),
])
def test_bad_values_name_the_field_and_the_range(link, problem) -> None:
    found = _problems(**link)
    assert len(found) == 1 and found[0].startswith(problem), found


@pytest.mark.parametrize("link, problem", [
    ({"correlation": {"delay": "25%"}, "delay": "100ms"},
     "downlink.correlation.delay: 25% has no effect without jitter (netem correlates the jitter's draw)"),
    ({"correlation": {"delay": "25%"}, "jitter": "2147483648ns"},
     "downlink.correlation.delay: 25% needs jitter at most 2147483647ns (netem's limit; jitter is 2.147483648s)"),
    ({"correlation": {"loss": "25%"}},
     "downlink.correlation.loss: 25% has no effect without loss"),
    ({"correlation": {"loss": "25%"}, "gilbert_elliott": {"p": "1%", "r": "10%"}},
     "downlink.correlation.loss: 25% does not apply to gilbert_elliott: netem correlates only random loss"),
    ({"correlation": {"loss": "25%"}, "loss_state": {"p13": "1%", "p14": "1%"}},
     "downlink.correlation.loss: 25% does not apply to loss_state: netem correlates only random loss"),
    ({"correlation": {"duplicate": "10%"}, "corrupt": "1%"},
     "downlink.correlation.duplicate: 10% has no effect without duplicate"),
    ({"correlation": {"corrupt": "10%"}, "duplicate": "1%"},
     "downlink.correlation.corrupt: 10% has no effect without corrupt"),
    ({"correlation": {"reorder": "50%"}, "delay": "10ms"},
     "downlink.correlation.reorder: 50% has no effect without reorder.probability"),
    ({"reorder": {"gap": 5}, "delay": "10ms"},
     "downlink.reorder.gap: 5 has no effect without reorder.probability (tc: gap specified without reorder "
     "probability)"),
])
def test_ineffective_settings_name_their_field(link, problem) -> None:
    found = _problems(**link)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_ineffective_settings_are_all_listed_and_blamed_on_both() -> None:
    found = _problems_of_both(correlation={"delay": "1%", "loss": "1%", "duplicate": "1%", "corrupt": "1%",
                                           "reorder": "1%"}, reorder={"gap": 2})
    assert [p.path for p in found] == [
        "both.correlation.delay", "both.correlation.loss", "both.correlation.duplicate",
        "both.correlation.corrupt", "both.correlation.reorder", "both.reorder.gap"]
    # The limit itself is allowed; gap 1 and correlation 0 never are problems.
    assert _down(jitter="2147483647ns", correlation={"delay": "5%"}).downlink.correlation.delay == 5
    assert _down(reorder={"gap": 1}, correlation={"loss": "0%"}).downlink == LinkParams()


def _problems_of_both(**link) -> list:
    with pytest.raises(ProfileError) as info:
        Profile.parse({"name": "corr", "both": link})
    return info.value.problems


def test_summary_shows_the_correlations_and_the_gap() -> None:
    assert link_summary(_down(**FULL).downlink) == (
        "delay 100ms, jitter 10ms uniform (correlation 25%), reorder 25% gap 5 (correlation 50%), "
        "loss 2% (correlation 25%), duplicate 1% (correlation 10%), corrupt 0.1% (correlation 5%)")
    assert link_summary(_down(delay="1ms", reorder="5%", loss="1%").downlink) == "delay 1ms, reorder 5%, loss 1%"


# ---- netem's arithmetic ---------------------------------------------------------------------------

def _encoded(netem_loss: str, corr: str) -> tuple[int, int]:
    params = _down(loss=netem_loss, correlation={"loss": corr}).downlink.to_table_params()
    return params["loss_prob"], params["loss_corr"]


def test_correlated_loss_is_netems_far_below_its_percentage() -> None:
    """docs/profiles.md ("Correlation (netem's)"): like netem, `loss 1% 25%` loses far less than 1%
    over the long run (about 3 packets in a million), `loss 10% 25%` about 1.75%, `loss 25% 50%`
    about 7%; without correlation 1% is 1% (200k packets each; statistical tolerance)."""
    rng = random.Random(2024)
    n = 200_000
    prob, corr = _encoded("1%", "25%")
    assert (prob, corr) == (42949673, 2**30)
    lost = sum(losses(prob, corr, n, rng))
    assert lost / n < 0.01 and lost <= 20  # expected about 0.5 in 200k
    assert sum(losses(prob, 0, n, rng)) / n == pytest.approx(0.01, rel=0.06)
    assert sum(losses(*_encoded("10%", "25%"), n, rng)) / n == pytest.approx(0.0175, rel=0.1)
    assert sum(losses(*_encoded("25%", "50%"), n, rng)) / n == pytest.approx(0.0696, rel=0.08)
    # 50% keeps its mean (the answers are symmetric about the middle).
    assert sum(losses(*_encoded("50%", "25%"), n, rng)) / n == pytest.approx(0.5, rel=0.02)


def test_full_correlation_repeats_the_first_draw() -> None:
    # rho = 0xFFFFFFFF + 1 = 2^32: value's weight is 0, so every answer is the seed: all lost or none.
    prob, corr = _encoded("50%", "100%")
    outcomes = {tuple(set(losses(prob, corr, 1000, random.Random(seed)))) for seed in range(40)}
    assert outcomes == {(True,), (False,)}
