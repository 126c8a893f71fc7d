"""netem command-line options to profiles (p4netem.profiles.netem): every option mapped as tc
reads it (units, abbreviations, defaults), the loss models checked against netem's own
algorithms, and every unsupported or malformed token refused by name."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from p4netem.profiles import Profile, ProfileError, dumps, loads_profiles
from p4netem.profiles.netem import NETEM_DEFAULT_LIMIT, netem_setup, parse_netem, profile_from_netem


def fields(text: str) -> dict:
    return parse_netem(text).fields


def link(text: str):
    profile, _ = profile_from_netem(text)
    assert profile.uplink == profile.downlink
    return profile.downlink


def problems(text: str | None = None, **kw) -> list[str]:
    with pytest.raises(ProfileError) as info:
        profile_from_netem(text, **kw)
    return [str(p) for p in info.value.problems]


def test_the_common_options_map_one_to_one() -> None:
    down = link("delay 100ms 10ms distribution normal loss 1% duplicate 0.5% corrupt 0.1% "
                "reorder 25% rate 1mbit 24 limit 200")
    assert int(down.delay) == 100_000_000 and int(down.jitter) == 10_000_000
    assert down.jitter_distribution == "normal"
    assert str(down.loss) == "1%" and str(down.duplicate) == "0.5%" and str(down.corrupt) == "0.1%"
    assert str(down.reorder.probability) == "25%"
    assert not down.reorder.keep_order  # netem's tfifo sends in time order: jitter reorders
    assert int(down.rate) == 1_000_000 and down.overhead == 24 and down.queue.packets == 200


def test_units_are_read_as_tc_reads_them() -> None:
    # A bare time is microseconds; tc's long unit names; case does not matter.
    assert int(link("delay 100").delay) == 100_000
    assert int(link("delay 1.5SEC").delay) == 1_500_000_000
    assert int(link("delay 250usecs").delay) == 250_000
    # tc's delay has no ns (get_time: s, ms, us): refused, as tc refuses it (test_delay_and_limit_as_tc_6_1).
    assert int(link("delay 7us").delay) == 7_000
    # Rates: a bare number is bit/s, "bps" is BYTES per second, IEC prefixes are powers of 1024.
    rate = lambda text: int(link(f"rate {text}").rate)  # noqa: E731
    assert rate("64000") == 64_000
    assert rate("1mbit") == rate("1Mbit") == rate("1000kbit") == 1_000_000
    assert rate("100kbps") == 800_000
    assert rate("1KiBps") == 8192 and rate("1kibit") == 1024 and rate("2MiBps") == 2 * 8 * 1024**2
    assert rate("1.5gbit") == 1_500_000_000
    # Percentages may omit the %.
    assert str(link("loss 0.3").loss) == "0.3%"


def test_keywords_may_be_abbreviated_like_tc_and_a_pasted_tc_command_works() -> None:
    # The first keyword in tc's order that a word is a prefix of: d is delay, di distribution,
    # r reorder, ra rate, l limit, lo loss, c corrupt.
    assert fields("del 10ms 1ms di pareto lo 1 dup 2 c 3 ra 5mbit li 9") == \
        fields("delay 10ms 1ms distribution pareto loss 1 duplicate 2 corrupt 3 rate 5mbit limit 9")
    assert fields("d 10ms 1ms di normal r 5 ra 1mbit l 5 c 1") == \
        fields("delay 10ms 1ms distribution normal reorder 5 rate 1mbit limit 5 corrupt 1")
    assert fields("latency 5ms drop 1%") == fields("delay 5ms loss random 1%")
    assert fields("tc qdisc add dev eth0 root netem delay 5ms") == fields("delay 5ms") == fields("netem delay 5ms")


def test_netem_defaults() -> None:
    # Jitter without a distribution: netem draws it uniformly (the kernel's table-less case).
    assert link("delay 50ms 5ms").jitter_distribution == "uniform"
    # netem's queue limit is 1000 packets unless given.
    assert link("rate 2mbit").queue.packets == NETEM_DEFAULT_LIMIT
    # Correlation 0 is no correlation.
    assert fields("delay 50ms 5ms 0% loss 1% 0 duplicate 1% 0") == fields("delay 50ms 5ms loss 1% duplicate 1%")
    # limit without rate bounds nothing in p4netem: a warning, not silence.
    profile, warnings = profile_from_netem("delay 10ms limit 50")
    assert profile.downlink.queue.packets == 0 and len(warnings) == 1
    assert warnings[0].startswith("limit 50 without rate")


def test_gemodel_defaults_and_arguments_follow_tc() -> None:
    # tc (iproute2 5.2 on): r 100% - p, 1-h 100%, 1-k 0%: `loss gemodel P` is Bernoulli loss at P (tc-netem(8)).
    ge = link("loss gemodel 1%").gilbert_elliott
    assert (str(ge.p), str(ge.r), str(ge.loss_bad), str(ge.loss_good)) == ("1%", "99%", "100%", "0%")
    ge = link("loss gemodel 30%").gilbert_elliott
    assert str(ge.r) == "70%"
    # The stationary loss is p / (p + r) = P: the Bernoulli model (r 100% would lose 30 / 130 = 23 %).
    assert Decimal(str(ge.p)[:-1]) / (Decimal(str(ge.p)[:-1]) + Decimal(str(ge.r)[:-1])) == Decimal("0.3")
    # A P (or P13) outside 0..100 % is named as given, not through the r (p31) tc would derive from it.
    assert problems("loss gemodel 150%") == ['loss gemodel p: "150%" out of range 0..100% (tc refuses it too)']
    assert problems("loss state 150%") == ['loss state p13: "150%" out of range 0..100% (tc refuses it too)']
    ge = link("loss gemodel 1% 10% 70% 0.1%").gilbert_elliott
    assert (str(ge.p), str(ge.r), str(ge.loss_bad), str(ge.loss_good)) == ("1%", "10%", "70%", "0.1%")
    # p = 0 never leaves the good state: random loss at 1-k.
    down = link("loss gemodel 0 50% 100% 2%")
    assert down.gilbert_elliott is None and str(down.loss) == "2%"


def _netem_gemodel(p, r, h, k1, n, rng):
    """netem's loss_gilb_ell: draw the transition, then the loss of the state the packet found."""
    state, lost = "good", []
    for _ in range(n):
        if state == "good":
            if rng.random() < p:
                state = "bad"
            lost.append(rng.random() < k1)
        else:
            if rng.random() < r:
                state = "good"
            lost.append(rng.random() > h)
    return lost


def _netem_4state(p13, p31, n, rng):
    """netem's loss_4state with p32 = p14 = 0: states 1 (sent) and 3 (lost)."""
    state, lost = 1, []
    for _ in range(n):
        u = rng.random()
        if state == 1:
            state = 3 if u < p13 else 1
        else:
            state = 1 if u < p31 else 3
        lost.append(state == 3)
    return lost


def _stats(lost: list[bool]) -> tuple[float, float]:
    bursts, run = [], 0
    for x in lost:
        if x:
            run += 1
        elif run:
            bursts.append(run)
            run = 0
    return sum(lost) / len(lost), sum(bursts) / len(bursts)


def test_loss_models_have_netems_statistics() -> None:
    """The mapped Gilbert-Elliott model's mean loss and burst length (p4netem's formulas,
    checked against its data-plane semantics in tests/control/test_profiles.py) equal those of
    netem's own algorithms, simulated here (200k packets; statistical tolerance)."""
    rng = random.Random(7)
    ge = link("loss gemodel 2% 25% 80% 0.5%").gilbert_elliott
    loss, burst = _stats(_netem_gemodel(0.02, 0.25, 1 - 0.80, 0.005, 200_000, rng))
    assert ge.mean_loss == pytest.approx(loss, rel=0.06) and ge.mean_burst == pytest.approx(burst, rel=0.06)
    ge = link("loss state 3% 40%").gilbert_elliott
    assert (str(ge.p), str(ge.r), str(ge.loss_bad), str(ge.loss_good)) == ("3%", "40%", "100%", "0%")
    loss, burst = _stats(_netem_4state(0.03, 0.40, 200_000, rng))
    assert ge.mean_loss == pytest.approx(loss, rel=0.06) and ge.mean_burst == pytest.approx(burst, rel=0.06)
    # tc's default p31 is 100% - p13.
    assert str(link("loss state 5%").gilbert_elliott.r) == "95%"
    assert link("loss state 0").gilbert_elliott is None


def test_unsupported_and_malformed_tokens_are_named() -> None:
    found = problems("slot 800us 10ms packets 42 ecn frobnicate 3 rate 10% loss gemodel 1% 10% 70% 0.1% 30% "
                     "reorder 5% 25% gap 5 delay 1ms distribution gauss")
    # slot (tests/unit/test_slot_profile.py), reorder's correlation and gap are fine, and so is ecn (no
    # arguments; its loss model is the refused gemodel, not named twice): the others are named, each once.
    assert found[0].startswith('"frobnicate" is not a netem option p4netem knows; allowed: delay TIME')
    assert found[1].startswith('rate: "10%": a rate in percent of the device\'s speed')
    assert found[2] == ('loss gemodel: "30%": loss gemodel takes at most P R 1-H 1-K; netem has no correlation '
                        'for it (only random loss is correlated: the Markov chain has its own memory)')
    assert found[3].startswith('distribution: "gauss" is not a built-in distribution (uniform, normal, pareto, '
                               'paretonormal) and there is no such table in tc\'s library directory; give the '
                               'path of a .dist file')
    assert len(found) == 4
    assert problems("loss state 1% 30% 80%")[0].startswith("both.loss_state.p32: p31 + p32 = 110% leaves state 3")
    assert problems("loss sometimes 1%")[0].startswith('loss: "sometimes" is not a loss model; allowed: random')
    assert problems("rate 1mbit -4x") == ['rate packetoverhead: "-4x" is not a whole number of bytes']
    assert problems("rate 5furlongs")[0].startswith('rate: "5furlongs" has an unknown rate unit "furlongs"; '
                                                    "tc's units: bit, kbit")
    assert problems("delay 5 fortnights")[0].startswith('"fortnights" is not a netem option')
    assert problems("delay 5parsecs")[0].startswith('delay: "5parsecs" has an unknown time unit "parsecs"')
    assert problems("delay") == ["delay: expects a time after it"]
    assert problems("delay 1ms delay 2ms") == ['delay: given twice ("delay" and "delay")']
    assert problems("rate 1mbit limit many") == ['limit: "many" is not a number of packets']
    assert problems("delay 5ms reorder 5% gap x") == ['gap: "x" is not a number of packets']
    assert problems("reorder 5%") == ["reorder: reordering needs some delay (tc refuses it too): add delay TIME"]
    # tc checks the latency (not the jitter): `delay 0ms 1ms reorder 25%` is refused by tc 6.1 too.
    assert problems("delay 0ms 1ms reorder 25%") == [
        "reorder: reordering needs some delay (tc refuses it too): add delay TIME"]
    assert problems("delay 5ms distribution normal") == ["distribution: needs delay TIME JITTER (tc refuses it too)"]
    assert problems("seed 42")[0].startswith("seed: a p4netem switch has one PRNG seed")
    assert problems("delay 'oops")[0].startswith("cannot split")
    # Values netem takes but p4netem's ranges do not: named by profile field.
    assert problems("rate 500bit") == ['both.rate: 500bit out of range 1kbit..100Gbit or "unlimited"']
    assert problems("loss 150%") == ["both.loss: 150% out of range 0..100%"]
    assert problems() == ["no netem options given"]


def test_a_bare_slot_time_is_nanoseconds_as_tc_reads_it() -> None:
    # q_netem.c reads slot's times with get_time64 (a bare number is nanoseconds), delay's with get_time
    # (microseconds): tc 6.1 refuses `slot 2us 1500` (Illegal "slot max_delay": 1500ns < 2us).
    assert fields("slot 1500")["slot"] == {"min": "1500ns"}
    assert fields("slot distribution normal 10 5")["slot"] == {"distribution": "normal", "delay": "10ns",
                                                               "jitter": "5ns"}
    assert problems("slot 2us 1500") == ['slot max_delay: "1500" is below MIN_DELAY "2us" (tc refuses it too)']
    assert fields("delay 1500 slot 1500ms") == {"delay": "1500000ns", "slot": {"min": "1500000000ns"}}


@pytest.mark.parametrize("options, where", [
    ("delay 1e100000000", "delay"), ("rate 1e100000000", "rate"), ("loss 1e100000000", "loss"),
    ("slot 1e999999999", "slot min_delay"), ("delay 1ms 1ms 1e99999999", "delay correlation"),
])
def test_a_huge_exponent_is_named_not_a_traceback(options, where) -> None:
    # Scaled by its unit (or read by the profile), 1e100000000 overflowed Decimal's context: decimal.Overflow.
    assert problems(options) == [f'{where}: "{options.split()[-1]}" is too large']


def test_rate_0_is_netems_no_rate_limit() -> None:
    # tc takes rate 0, and netem shapes nothing then (netem_enqueue: `if (q->rate)`): no rate, with a
    # warning, rather than a refusal of a queue limit the command does not give.
    profile, warnings = profile_from_netem("delay 5ms rate 0")
    assert profile.downlink.rate.unlimited and profile.downlink.queue.packets == 0
    assert warnings == ["rate 0: netem shapes nothing at rate 0 (no rate limit), so the profile has no rate"]
    # Its overheads and cells go with it; a limit is then the delay's, as without a rate.
    assert fields("rate 0mbit 20 48 5 delay 1ms") == {"delay": "1000000ns"}
    assert profile_from_netem("rate 0bit limit 10")[1][1].startswith("limit 10 without rate")


CELL_OVERHEAD_ALONE = ("rate celloverhead: 5 without a CELLSIZE has no effect (netem adds it to each cell, and "
                       "CELLSIZE 0 is no cells): give the cell size, e.g. rate 1mbit 0 48 5 for ATM, or leave it out")


def test_rate_cells_map_as_tc_reads_them() -> None:
    # tc-netem(8)'s example: 5kbit, 20 bytes per packet, cells of 100 bytes with 5 bytes each on top.
    down = link("tc qdisc add dev eth0 root netem rate 5kbit 20 100 5")
    assert (int(down.rate), down.overhead, down.cell_size, down.cell_overhead) == (5000, 20, 100, 5)
    params = down.to_table_params()
    assert (params["overhead_bytes"], params["cell_bytes"], params["cell_overhead_bytes"]) == (20, 100, 5)
    assert params["cell_recip"] == 2**32 // 100
    # ATM (the man page's `rate 1mbit 0 48 5`): no packet overhead, 48-byte cells with a 5-byte header.
    assert fields("rate 1mbit 0 48 5") == {"rate": "1000000bit", "cell_size": 48, "cell_overhead": 5,
                                           "queue": {"packets": NETEM_DEFAULT_LIMIT}}
    # CELLOVERHEAD is optional; CELLSIZE 0 (and a cell overhead of 0 with it) is netem's "no cells".
    assert fields("rate 1mbit 0 48")["cell_size"] == 48 and "cell_overhead" not in fields("rate 1mbit 0 48")
    assert fields("rate 1mbit 0 0") == fields("rate 1mbit 0 0 0") == fields("rate 1mbit 0") == fields("rate 1mbit")
    assert "cell_size" not in fields("rate 1mbit 0 0 0")
    # As tc's get_u32/get_s32 (base 0): hex; the option after them is read as one. (A `+` sign is not
    # tc's NEXT_IS_SIGNED_NUMBER: `+5` is refused, test_a_value_must_start_with_a_digit_as_tc_reads_it.)
    assert fields("rate 1mbit 0x14 0x30 5 limit 9 delay 1ms") == {
        "rate": "1000000bit", "overhead": 20, "cell_size": 48, "cell_overhead": 5, "delay": "1000000ns",
        "queue": {"packets": 9}}
    assert link("rate 1mbit 0 48 5 delay 10ms").cell_size == 48
    # The YAML it makes loads back to the same profile.
    profile, warnings = profile_from_netem("rate 1mbit 0 48 5", name="atm")
    assert warnings == [] and loads_profiles(dumps(profile)) == [profile]
    assert "cell_size: 48" in dumps(profile) and "cell_overhead: 5" in dumps(profile)


def test_negative_overheads_map_as_tc_reads_them() -> None:
    # tc-netem(8): PACKETOVERHEAD "can be negative ... to artificial strip the Ethernet header (e.g. -14)";
    # CELLOVERHEAD "can be negative" too. tc reads both as signed (get_s32).
    assert fields("rate 1mbit -14") == {"rate": "1000000bit", "overhead": -14, "queue": {"packets": NETEM_DEFAULT_LIMIT}}
    assert fields("rate 1mbit -14 48 -5") == {"rate": "1000000bit", "overhead": -14, "cell_size": 48,
                                              "cell_overhead": -5, "queue": {"packets": NETEM_DEFAULT_LIMIT}}
    down = link("rate 1mbit -14 48 -5")
    assert (down.overhead, down.cell_size, down.cell_overhead) == (-14, 48, -5)
    # Written as the bit<16>'s two's complement.
    params = down.to_table_params()
    assert (params["overhead_bytes"], params["cell_bytes"], params["cell_overhead_bytes"]) == (65522, 48, 65531)
    # Hex and a sign, as get_s32 reads them; the ends of the range; the option after them is read as one.
    assert fields("rate 1mbit -0xe 0x30 -0x5 limit 9") == {**fields("rate 1mbit -14 48 -5"), "queue": {"packets": 9}}
    assert (link("rate 1mbit -32768 48 -47").overhead, link("rate 1mbit -32768 48 -47").cell_overhead) == (-32768, -47)
    assert link("rate 1mbit 32767 65535 32767").cell_size == 65535
    # The YAML it makes loads back to the same profile.
    profile, warnings = profile_from_netem("rate 1mbit -14 48 -5", name="compressed")
    assert warnings == [] and loads_profiles(dumps(profile)) == [profile]
    assert "overhead: -14" in dumps(profile) and "cell_overhead: -5" in dumps(profile)
    # Per direction too.
    profile, _ = profile_from_netem(uplink="rate 1mbit -14", downlink="rate 2mbit 4")
    assert (profile.uplink.overhead, profile.downlink.overhead) == (-14, 4)


def test_negative_overheads_through_the_cli() -> None:
    """`profiles from-netem` and `apply --netem` take the negative numbers inside the quoted options
    (click does not read them as flags); apply refuses a bad direction before it connects."""
    from typer.testing import CliRunner

    from p4netem.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["profiles", "from-netem", "rate 1mbit -14 48 -5"])
    assert res.exit_code == 0, res.output
    (profile,) = loads_profiles(res.stdout)
    assert (profile.downlink.overhead, profile.downlink.cell_size, profile.downlink.cell_overhead) == (-14, 48, -5)
    res = runner.invoke(app, ["profiles", "from-netem", "--uplink", "rate 1mbit -14", "--downlink", "rate 1mbit 0 48 -5"])
    assert res.exit_code == 0, res.output
    (profile,) = loads_profiles(res.stdout)
    assert (profile.uplink.overhead, profile.downlink.cell_overhead) == (-14, -5)
    # The uplink's options are taken; only the downlink's empty cell is named (exit 1, nothing written).
    res = runner.invoke(app, ["apply", "--netem", "rate 1mbit -14 48 -5", "--netem-downlink", "rate 1mbit -14 48 -48",
                              "--switch", "127.0.0.1:1"], env={"COLUMNS": "400"})
    assert res.exit_code == 1 and "downlink.cell_overhead: -48 bytes leaves each 48-byte cell 0 bytes" in res.output
    assert "uplink" not in res.output


def test_rate_cell_refusals_are_named() -> None:
    # tc reads a signed number after PACKETOVERHEAD as CELLOVERHEAD (CELLSIZE needs a digit first): a
    # cell overhead without cells, refused whatever its sign.
    assert problems("rate 1mbit 0 -5") == [CELL_OVERHEAD_ALONE.replace(": 5 ", ": -5 ")]
    # Outside the profile's ranges: named by profile field, with the range.
    assert problems("rate 1mbit 0 65536") == ["both.cell_size: 65536 out of range 0..65535"]
    assert problems("rate 1mbit 0 48 32768") == ["both.cell_overhead: 32768 out of range -32768..32767"]
    assert problems("rate 1mbit 0 48 -32769") == ["both.cell_overhead: -32769 out of range -32768..32767"]
    assert problems("rate 1mbit 32768") == ["both.overhead: 32768 out of range -32768..32767"]
    assert problems("rate 1mbit -40000") == ["both.overhead: -40000 out of range -32768..32767"]
    assert problems(downlink="rate 1mbit -40000") == ["downlink.overhead: -40000 out of range -32768..32767"]
    # A cell overhead that leaves a cell no byte on the link (netem's u32 sum would wrap).
    assert problems("rate 1mbit 0 48 -48") == [
        "both.cell_overhead: -48 bytes leaves each 48-byte cell 0 bytes on the link (a packet would take no "
        "link time at the rate); allowed -47..32767 with cell_size 48"]
    # A cell overhead without cells: tc takes it and netem ignores it; named here, not as a schema error.
    assert problems("rate 1mbit 0 0 5") == [CELL_OVERHEAD_ALONE]
    assert problems(uplink="rate 1mbit 0 0 5", downlink="rate 1mbit 0 48 5") == ["uplink." + CELL_OVERHEAD_ALONE]
    # Not whole numbers.
    assert problems("rate 1mbit 0 4.5") == ['rate cellsize: "4.5" is not a whole number of bytes']
    assert problems("rate 1mbit 0 48 1e3") == ['rate celloverhead: "1e3" is not a whole number of bytes']


def test_correlation_and_gap_map_as_tc_reads_them() -> None:
    # CORR after delay's jitter, loss, duplicate, corrupt and reorder; gap N (tc/q_netem.c).
    assert fields("delay 100ms 10ms 25% loss 2% 25% reorder 25% 50% gap 5") == {
        "delay": "100000000ns", "jitter": "10000000ns", "jitter_distribution": "uniform", "loss": "2%",
        "reorder": {"probability": "25%", "gap": 5, "keep_order": False},
        "correlation": {"delay": "25%", "loss": "25%", "reorder": "50%"}}
    assert fields("duplicate 1% 10% corrupt 0.1% 5%") == {
        "duplicate": "1%", "corrupt": "0.1%", "correlation": {"duplicate": "10%", "corrupt": "5%"}}
    # The % may be left out; `random`, `drop` and abbreviations are tc's; gap is decimal or 0x hex.
    assert fields("loss random 1% 25%") == fields("loss 1 25") == fields("drop 1% 25")
    assert link("lo 1% 25.0%") == link("loss 1% 25%")
    assert fields("d 10ms 1ms 5 r 5 50 g 0x10") == fields("delay 10ms 1ms 5% reorder 5% 50% gap 16")
    assert fields("d 10ms 1ms 5 r 5 50 g 0x10")["reorder"]["gap"] == 16
    # gap 0 is tc's "not given" (netem's default gap 1); gap 1 is the default too.
    down = link("delay 10ms reorder 10% gap 0")
    assert down.reorder.gap == 1 and down == link("delay 10ms reorder 10%") == link("delay 10ms reorder 10% gap 1")
    # reorder 0% is no reordering: it needs no delay (tc), and gap 0 with it is fine.
    assert fields("reorder 0% gap 0") == {"reorder": {"probability": "0%"}}
    assert link("reorder 0% gap 0") == Profile.parse({"name": "x"}).downlink

    profile, warnings = profile_from_netem("delay 100ms 10ms 25% loss 2% 25% duplicate 1% 10% corrupt 0.1% 5% "
                                           "reorder 25% 50% gap 5")
    # netem's own man page deprecates the loss correlation; the converter says what it does.
    assert len(warnings) == 1 and warnings[0].startswith("loss 2% 25%: netem's loss correlation is deprecated")
    assert "loss 1% 25% loses about 0.0003 %" in warnings[0], warnings
    assert profile_from_netem("delay 100ms 10ms 25% duplicate 1% 10% corrupt 0.1% 5%")[1] == []
    assert profile.uplink == profile.downlink
    down = profile.downlink
    assert (str(down.correlation.delay), str(down.correlation.loss), str(down.correlation.duplicate),
            str(down.correlation.corrupt), str(down.correlation.reorder), down.reorder.gap) == \
        ("25%", "25%", "10%", "5%", "50%", 5)
    params = profile.to_table_params("downlink")
    assert {k: params[k] for k in ("delay_corr", "jitter_mod_recip", "loss_corr", "dup_corr", "corrupt_corr",
                                   "reorder_corr", "reorder_gap")} == {
        "delay_corr": 2**30, "jitter_mod_recip": 2**64 // 20_000_000, "loss_corr": 2**30, "dup_corr": 429496730,
        "corrupt_corr": 214748365, "reorder_corr": 2**31, "reorder_gap": 5}
    (back,) = loads_profiles(dumps(profile))
    assert back == profile
    # A table distribution keeps its correlation (the cell is answer mod 4096): no reciprocal.
    normal = profile_from_netem("delay 100ms 10ms 25% distribution normal")[0].downlink
    assert str(normal.correlation.delay) == "25%" and normal.to_table_params()["jitter_mod_recip"] == 0


def test_correlation_and_gap_refusals_name_the_field() -> None:
    gap_alone = ('gap: 5 without a reorder probability: tc refuses it too ("gap specified without reorder '
                 'probability"); add reorder PERCENT')
    assert problems("delay 10ms gap 5") == [gap_alone]
    assert problems("delay 10ms reorder 0% gap 5") == [gap_alone]
    assert problems("delay 10ms reorder 5% gap -1") == ['gap: "-1" is negative']
    assert problems("delay 10ms reorder 5% gap 4294967296") == ["both.reorder.gap: 4294967296 out of range "
                                                                "1..4294967295"]
    assert problems("reorder 5% 50%") == ["reorder: reordering needs some delay (tc refuses it too): add delay TIME"]
    assert problems("loss state 1% 30% 0 100% 0 25%") == [
        'loss state: "25%": loss state takes at most P13 P31 P32 P23 P14; netem has no correlation for it '
        '(only random loss is correlated: the Markov chain has its own memory)']
    assert problems("loss 1% 25x") == ['loss correlation: "25x" is not a percentage (e.g. 1% or 1)']
    assert problems("loss 1% 150%") == ["both.correlation.loss: 150% out of range 0..100%"]
    # A correlation with nothing to correlate: named by its profile field.
    assert problems("delay 100ms 0 25%") == [
        "both.correlation.delay: 25% has no effect without jitter (netem correlates the jitter's draw)"]
    assert problems("delay 100ms 3s 25%") == [
        "both.correlation.delay: 25% needs jitter at most 2147483647ns (netem's limit; jitter is 3s); leave the "
        "correlation out for a larger jitter"]
    assert problems("loss 0% 25%") == ["both.correlation.loss: 25% has no effect without loss"]
    assert problems("duplicate 0 10 corrupt 0 5") == [
        "both.correlation.duplicate: 10% has no effect without duplicate",
        "both.correlation.corrupt: 5% has no effect without corrupt"]
    assert problems("delay 10ms reorder 0 50") == [
        "both.correlation.reorder: 50% has no effect without reorder.probability"]


ECN_ALONE = ('ecn: without a loss model: tc refuses it too ("ecn requested without loss model"); netem\'s ecn '
             'marks what the loss model would lose: add loss PERCENT, loss gemodel P [R [1-H [1-K]]] or loss state '
             'P13 [...] (for marks where the rate queue is congested: codel ... ecn, red ... ecn or pie ... ecn)')


def test_ecn_marks_instead_of_losing_for_every_loss_model() -> None:
    # netem's own ecn (q_netem.c: TCA_NETEM_ECN) is the profile's loss_ecn, whichever loss model is given,
    # before or after it.
    assert fields("loss 5% ecn") == fields("ecn loss 5%") == {"loss": "5%", "loss_ecn": True}
    assert fields("loss random 5% 25% ecn") == {"loss": "5%", "correlation": {"loss": "25%"}, "loss_ecn": True}
    assert fields("loss gemodel 1% 20% 70% 0.1% ecn") == {
        "gilbert_elliott": {"p": "1%", "r": "20%", "loss_bad": "70%", "loss_good": "0.1%"}, "loss_ecn": True}
    assert fields("loss state 1% 30% 10% 50% 0.1% ecn") == {
        "loss_state": {"p13": "1%", "p31": "30%", "p32": "10%", "p23": "50%", "p14": "0.1%"}, "loss_ecn": True}
    # loss state as Gilbert's model, and gemodel with P 0 (random loss at 1-K): ecn goes with them.
    assert fields("loss state 1% ecn") == {
        "gilbert_elliott": {"p": "1%", "r": "99%", "loss_bad": "100%", "loss_good": "0%"}, "loss_ecn": True}
    assert fields("loss gemodel 0 100 100 5 ecn") == {"loss": "5%", "loss_ecn": True}
    # Without ecn nothing is marked; tc's abbreviation `e`, and ecn given twice (tc takes it), mean the same.
    assert "loss_ecn" not in fields("loss 5%")
    assert fields("loss 5% e") == fields("loss 5% ecn ecn") == fields("loss 5% ecn")
    down = link("delay 10ms loss gemodel 1% 20% ecn")
    assert down.loss_ecn and down.gilbert_elliott is not None and not down.aqm.ecn
    params = down.to_table_params()
    assert params["loss_ecn"] == 1 and params["ecn"] == 0 and params["ge_p"] != 0
    assert link("delay 10ms loss gemodel 1% 20%").to_table_params()["loss_ecn"] == 0
    profile, warnings = profile_from_netem("loss state 1% 30% 10% 50% 0.1% ecn", name="marks")
    assert warnings == []
    (back,) = loads_profiles(dumps(profile))
    assert back == profile and back.uplink.loss_ecn and back.downlink.loss_state is not None


def test_ecn_of_codel_and_red_stays_the_aqms() -> None:
    # An ecn among codel's (red's) options is the AQM's; netem's own is the one after another option.
    aqm_only = link("rate 1mbit codel ecn loss 1%")
    assert aqm_only.aqm.ecn and not aqm_only.loss_ecn
    both = link("loss 1% ecn rate 1mbit codel target 2ms ecn")
    assert both.aqm.ecn and both.loss_ecn and int(both.aqm.target) == 2_000_000
    assert link("rate 1mbit codel ecn loss 1% ecn") == both.model_copy(update={"aqm": link("rate 1mbit codel ecn").aqm})
    netem_only = link("loss 1% ecn rate 1mbit codel")
    assert netem_only.loss_ecn and not netem_only.aqm.ecn
    red = link("loss 2% rate 10mbit red limit 400k max 90k ecn")
    assert red.aqm.kind.value == "red" and red.aqm.ecn and not red.loss_ecn
    assert link("loss 2% ecn rate 10mbit red limit 400k max 90k").aqm.ecn is False


# ---- pie: tc-pie(8)'s options on the rate queue ----------------------------------------------------

def test_pie_alone_is_tc_pies_defaults_on_the_rate_queue() -> None:
    down = link("rate 10mbit pie")
    a = down.aqm
    assert (a.kind.value, str(a.target), str(a.tupdate), str(a.alpha), str(a.beta), str(a.max_burst), a.ecn) == \
        ("pie", "15ms", "15ms", "0.125", "1.25", "150ms", False)
    # tc-pie's default limit is 1000 packets, netem's too.
    assert down.queue.packets == NETEM_DEFAULT_LIMIT == 1000
    assert fields("rate 10mbit pie")["aqm"] == {"kind": "pie"}


def test_pie_options_map_as_tc_pie_reads_them() -> None:
    rate = fields("rate 1mbit")["rate"]
    assert fields("rate 1mbit pie limit 50 target 20ms tupdate 30ms alpha 1 beta 16 ecn") == {
        "rate": rate, "queue": {"packets": 50},
        "aqm": {"kind": "pie", "target": "20000000ns", "tupdate": "30000000ns", "alpha": "0.0625", "beta": "1",
                "ecn": True}}
    # Times in tc's units (a bare number is microseconds); alpha and beta are sixteenths of a Hz (hex too).
    a = link("rate 1mbit pie target 20000 tupdate 0.03s alpha 0x2 beta 32").aqm
    assert (int(a.target), int(a.tupdate), a.alpha, a.beta) == (20_000_000, 30_000_000, Decimal("0.125"), 2)
    assert link("rate 1mbit pie alpha 32 beta 1").aqm.alpha == 2 and link("rate 1mbit pie beta 1").aqm.beta == Decimal("0.0625")
    # ecn / noecn (the last one wins); the defaults tc-pie names are taken and change nothing.
    assert link("rate 1mbit pie ecn").aqm.ecn and not link("rate 1mbit pie ecn noecn").aqm.ecn
    assert fields("rate 1mbit pie nobytemode no_dq_rate_estimator") == fields("rate 1mbit pie")
    # pie's limit is the rate queue's packet limit, as netem's is: both may be given if they agree.
    assert link("rate 1mbit pie limit 50").queue.packets == 50
    assert link("rate 1mbit limit 50 pie limit 50").queue.packets == 50
    assert link("rate 1mbit limit 60 pie").queue.packets == 60


def test_ecn_of_pie_stays_the_aqms() -> None:
    aqm_only = link("rate 1mbit pie ecn loss 1%")
    assert aqm_only.aqm.ecn and not aqm_only.loss_ecn
    both = link("loss 1% ecn rate 1mbit pie ecn")
    assert both.aqm.ecn and both.loss_ecn
    assert link("rate 1mbit pie ecn").aqm.ecn  # needs no loss model


def test_a_0_that_tc_does_not_send_is_the_kernels_default() -> None:
    """tc-codel and tc-pie put an option in their netlink message only when it is not 0 (q_codel.c,
    q_pie.c: `if (target) addattr_l(...)`), so `pie beta 0` is the kernel's beta (20 sixteenths),
    not no beta, and `codel target 0` is 5ms; each is said in a warning. The last word wins, as in tc."""
    assert link("rate 1mbit pie beta 0").aqm == link("rate 1mbit pie").aqm
    assert link("rate 1mbit pie alpha 0 target 0 tupdate 0").aqm == link("rate 1mbit pie").aqm
    assert link("rate 1mbit codel target 0 interval 0").aqm == link("rate 1mbit codel").aqm
    assert link("rate 1mbit codel target 2ms target 0").aqm == link("rate 1mbit codel").aqm
    assert link("rate 1mbit pie beta 16 beta 0").aqm.beta == link("rate 1mbit pie").aqm.beta == Decimal("1.25")
    assert link("rate 1mbit pie limit 0").queue.packets == NETEM_DEFAULT_LIMIT
    assert link("rate 1mbit limit 60 pie limit 0").queue.packets == 60
    warnings = parse_netem("rate 1mbit pie alpha 0 beta 0").warnings
    assert warnings == ["pie alpha 0: tc sends no alpha when it is 0, so the kernel's default applies: 2 (0.125 Hz), "
                        "as here",
                        "pie beta 0: tc sends no beta when it is 0, so the kernel's default applies: 20 (1.25 Hz), "
                        "as here"], warnings
    assert parse_netem("rate 1mbit codel target 0").warnings == [
        "codel target 0: tc sends no target when it is 0, so the kernel's default applies: 5ms, as here"]


@pytest.mark.parametrize("options, want", [
    ("rate 1mbit pie bytemode", "pie bytemode: is not supported: p4netem's PIE drops by packet (its probability is "
                                "not scaled by the packet's size); leave it out (nobytemode, the default)"),
    ("rate 1mbit pie dq_rate_estimator", "pie dq_rate_estimator: is not supported: p4netem's PIE knows each packet's "
                                         "exact queue delay (the wait behind the bytes queued ahead of it), so it needs "
                                         "no drain-rate estimate; leave it out (no_dq_rate_estimator, the default)"),
    ("rate 1mbit pie alpha 33", 'pie alpha: 33 out of range 0..32 (sixteenths of a Hz; tc refuses it too: '
                                'Illegal "alpha")'),
    ("rate 1mbit pie beta 40", 'pie beta: 40 out of range 0..32 (sixteenths of a Hz; tc refuses it too: '
                               'Illegal "beta")'),
    ("rate 1mbit pie alpha 0.5", 'pie alpha: "0.5" is not an integer (tc-pie\'s alpha is 0..32 sixteenths of a Hz: '
                                 'alpha 2 is 0.125 Hz)'),
    ("rate 1mbit pie alpha", "pie alpha: expects an integer 0..32 after it"),
    ("rate 1mbit pie target 5parsecs", 'pie target: "5parsecs" has an unknown time unit "parsecs"; tc\'s units here: '
                                       's, ms, us (also sec, msec, usec; a bare number is microseconds)'),
    ("rate 1mbit limit 100 pie limit 50", "pie limit: 50 and netem's limit 100 would both be the rate queue's packet "
                                          "limit; give one of them"),
    ("pie", "pie: needs rate RATE: an AQM manages the rate queue, which only a rate has"),
    ("rate 1mbit codel pie", "pie: is a second AQM after codel: the rate queue has one; give one of them"),
    ("rate 1mbit pie red max 9000", "red: is a second AQM after pie: the rate queue has one; give one of them"),
    ("rate 1mbit pie tupdate 2s", "both.aqm.tupdate: 2s out of range 1ms..1s"),
])
def test_pie_refusals_are_named(options, want) -> None:
    assert want in problems(options), problems(options)


def test_pie_is_taken_whole_only() -> None:
    # `p`/`pi` are not pie (tc has no netem keyword in p; slot's `packets` may be abbreviated to p).
    assert problems("rate 1mbit pi")[0].startswith('"pi" is not a netem option p4netem knows; allowed: ')
    assert "pie [limit PACKETS] [target TIME] [tupdate TIME] [alpha 1..32] [beta 0..32] [ecn]" in \
        problems("rate 1mbit pi")[0]
    assert fields("delay 10ms slot 5ms p 4")["slot"] == {"min": "5000000ns", "packets": 4}


def test_pie_yaml_loads_back_to_the_same_profile() -> None:
    profile, warnings = profile_from_netem("rate 10mbit pie limit 200 target 20ms tupdate 30ms alpha 3 beta 24 ecn",
                                           name="pie")
    assert warnings == []
    (back,) = loads_profiles(dumps(profile))
    assert back == profile and back.uplink.aqm.alpha == Decimal("0.1875") and back.uplink.aqm.beta == Decimal("1.5")


def test_ecn_without_a_loss_model_is_refused_as_tc_refuses_it() -> None:
    # iproute2: `opt.loss <= 0 && loss_type == NETEM_LOSS_UNSPEC` -> "ecn requested without loss model".
    assert problems("ecn") == problems("delay 10ms ecn") == problems("ecn ecn") == [ECN_ALONE]
    # An ecn of codel's needs no loss model (it is the AQM's).
    assert link("rate 1mbit codel ecn").aqm.ecn
    # loss 0% is no loss model for tc either.
    assert problems("loss 0% ecn") == problems("loss random 0 ecn") == [
        ECN_ALONE.replace("without a loss model:", "without a loss model (loss 0% is none):")]
    # Collected with the other problems, named once.
    assert problems("delay 10ms gap 3 ecn seed 1") == [
        "seed: a p4netem switch has one PRNG seed for everything (p4netem-switch --seed / p4netem switch --seed), "
        "not one per profile",
        'gap: 3 without a reorder probability: tc refuses it too ("gap specified without reorder probability"); '
        "add reorder PERCENT",
        ECN_ALONE]
    # A loss model tc takes but that never loses: nothing to mark, named too.
    assert problems("loss gemodel 0 ecn") == [
        "ecn: has nothing to mark: loss gemodel with these values never loses a packet; leave ecn out (or give the "
        "model a loss)"]
    assert problems("loss state 0 ecn")[0].startswith("ecn: has nothing to mark: loss state with these values")
    # A refused loss option is named once, without a second problem for ecn.
    assert problems("loss 1x ecn") == ['loss: "1x" is not a percentage (e.g. 1% or 1)']


def test_per_direction_options_replace_the_shared_ones() -> None:
    profile, _ = profile_from_netem("delay 100ms 10ms loss gemodel 1% 20% rate 10mbit", downlink="delay 30ms",
                                    name="asym")
    assert profile.name == "asym"
    assert int(profile.uplink.rate) == 10_000_000 and profile.uplink.gilbert_elliott is not None
    down = profile.downlink
    assert int(down.delay) == 30_000_000 and int(down.jitter) == 0 and down.gilbert_elliott is None
    assert down.rate.unlimited
    only_up, _ = profile_from_netem(uplink="rate 400kbit")
    assert int(only_up.uplink.rate) == 400_000 and only_up.downlink == Profile.parse({"name": "x"}).downlink
    assert problems(uplink="delay 1ms gap 3", downlink="delay 1ms ecn") == [
        'uplink.gap: 3 without a reorder probability: tc refuses it too ("gap specified without reorder '
        'probability"); add reorder PERCENT',
        "downlink." + ECN_ALONE]
    # ecn is each direction's own too.
    marked, _ = profile_from_netem(uplink="loss 1% ecn", downlink="loss 1%")
    assert marked.uplink.loss_ecn and not marked.downlink.loss_ecn
    # Each direction's correlations are its own.
    corr, _ = profile_from_netem(uplink="delay 1ms 2ms 3%", downlink="loss 1% 5%")
    assert corr.uplink.correlation.model_dump(mode="json", exclude_defaults=True) == {"delay": "3%"}
    assert corr.downlink.correlation.model_dump(mode="json", exclude_defaults=True) == {"loss": "5%"}


def test_the_yaml_loads_back_to_the_same_profile() -> None:
    profile, _ = profile_from_netem("delay 100ms 10ms distribution paretonormal loss gemodel 1% 10% 70% 0.1% "
                                    "duplicate 1 corrupt 0.01 rate 100kbps 14 limit 64", name="round-trip")
    (back,) = loads_profiles(dumps(profile))
    assert back == profile
    assert profile.source == ("netem delay 100ms 10ms distribution paretonormal loss gemodel 1% 10% 70% 0.1% "
                              "duplicate 1 corrupt 0.01 rate 100kbps 14 limit 64")


def test_distribution_file_goes_to_the_user_table(tmp_path, monkeypatch) -> None:
    table = tmp_path / "mine.dist"
    table.write_text("# two values\n-8192 8192\n")
    setup = netem_setup(f"delay 10ms 4ms distribution {table}")
    link = setup.profile.uplink
    assert link.jitter_distribution.value == "user" and link.reorder.keep_order is False
    assert setup.profile.downlink == link
    assert setup.user_table is not None and setup.user_table.source == str(table)
    assert setup.user_table.values[:4] == (-8192, 8192, -8192, 8192) and setup.user_table.entries == 2
    # The plain parse says the profile needs the table loaded.
    profile, warnings = profile_from_netem(f"delay 10ms 4ms distribution {table}")
    assert profile == setup.profile
    assert warnings == [f"the profile draws its jitter from the switch's user table (jitter_distribution: user): "
                        f"load {table} into it with `p4netem distribution load {table}` (p4netem apply --netem "
                        "does it for you)"]
    # Built-in names stay the switch's built-in tables.
    assert netem_setup("delay 10ms 4ms distribution pareto").user_table is None
    # tc's lookup: NAME.dist in tc's library directory.
    (tmp_path / "lab.dist").write_text("8192\n")
    monkeypatch.setenv("TC_LIB_DIR", str(tmp_path))
    named = netem_setup("delay 10ms 4ms distribution lab")
    assert named.user_table.values == (8192,) * 4096 and named.profile.uplink.jitter_distribution.value == "user"


def test_bad_distribution_files_are_refused_with_the_line(tmp_path) -> None:
    bad = tmp_path / "bad.dist"
    bad.write_text("1 2\n3 40000\n")
    assert problems(f"delay 10ms 4ms distribution {bad}") == [
        f"distribution: {bad}: line 2: 40000 is outside -32768..32767 (a netem table entry is an int16: sigma/8192)"]
    odd = tmp_path / "odd.dist"
    odd.write_text("1 2 3\n")
    assert problems(f"delay 10ms 4ms distribution {odd}")[0].startswith(f"distribution: {odd}: 3 entries: ")
    assert problems(f"delay 10ms 4ms distribution {tmp_path}/none.dist")[0].startswith(
        f"distribution: cannot read {tmp_path}/none.dist: No such file")
    assert problems(f"delay 10ms distribution {bad.with_name('x.dist')}")[0].startswith("distribution: cannot read")
    good, other = tmp_path / "a.dist", tmp_path / "b.dist"
    good.write_text("8192\n")
    other.write_text("-8192\n")
    assert problems(uplink=f"delay 1ms 1ms distribution {good}", downlink=f"delay 1ms 1ms distribution {other}") == [
        f"distribution: the directions name different tables (uplink: {good}, downlink: {other}); the switch has "
        "one user table"]
    assert netem_setup(uplink=f"delay 1ms 1ms distribution {good}", downlink="delay 2ms").user_table.source == str(good)


# ---- tc 6.1's own accept/refuse of delay, jitter, limit, distribution (checked against `tc qdisc add dev
# <absent> root netem ...`: a parse error vs "Cannot find device") ---------------------------------------

def test_limit_is_a_size_as_tc_reads_it() -> None:
    # q_netem.c reads limit with get_size: tc's size units (k = 1024), a fraction truncated, 0x hex; 010 is ten.
    assert link("rate 1mbit limit 1k").queue.packets == 1024
    assert link("rate 1mbit limit 1K").queue.packets == 1024
    assert link("rate 1mbit limit 2kb").queue.packets == 2048
    assert link("rate 1mbit limit 1kbit").queue.packets == 128
    assert link("rate 1mbit limit 1.9").queue.packets == 1
    assert link("rate 1mbit limit 1e3").queue.packets == 1000
    assert link("rate 1mbit limit 0x10").queue.packets == 16
    assert link("rate 1mbit limit 010").queue.packets == 10
    assert profile_from_netem("rate 1mbit limit 1k")[1] == [
        "limit 1k: tc reads it as a size (k = 1024, fractions dropped): 1024 packets"]
    assert profile_from_netem("rate 1mbit limit 200")[1] == []
    # tc refuses what does not fit its unsigned 32 bits (Illegal "limit").
    for raw in ("-1", "4g", "1e10"):
        assert problems(f"rate 1mbit limit {raw}") == [
            f'limit: "{raw}" out of range 0..4294967295 packets (tc refuses it too: Illegal "limit")']
    assert problems("rate 1mbit limit 5x")[0].startswith('limit: "5x" has an unknown unit "x"; tc reads limit as '
                                                         'a size')
    # tc takes limit 0, and netem then drops every packet; a p4netem queue of 0 packets is unlimited.
    assert problems("rate 1mbit limit 0")[0].startswith('limit: "0" is 0 packets: netem then drops every packet')


def test_delay_and_jitter_are_tcs_whole_microseconds() -> None:
    # get_time has no ns (tc 6.1: Illegal "latency" for `delay 100ns`, `delay 1000ns`).
    for options, where in (("delay 100ns", "delay"), ("delay 1000nsec", "delay"), ("delay 10ms 5ns", "delay jitter")):
        assert problems(options)[0].startswith(f'{where}: "{options.split()[-1]}": tc refuses nanoseconds here')
    # A fraction of a microsecond is dropped, as tc's double -> unsigned int (with a warning).
    profile, warnings = profile_from_netem("delay 1.5us 10.9")
    assert (int(profile.downlink.delay), int(profile.downlink.jitter)) == (1_000, 10_000)
    assert warnings == ["delay 1.5us: tc reads whole microseconds (it drops the fraction), so netem's is 1us; that "
                        "is what the profile takes",
                        "delay jitter 10.9: tc reads whole microseconds (it drops the fraction), so netem's is 10us; "
                        "that is what the profile takes"]
    # `delay 0.5us` is no delay to tc: reordering then needs one, as tc says.
    assert problems("delay 0.5us reorder 5%") == [
        "reorder: reordering needs some delay (tc refuses it too): add delay TIME"]


@pytest.mark.parametrize("options, where", [
    ("delay 275s", "delay"), ("delay 274877907us", "delay"), ("delay 4295s", "delay"), ("delay 5000s", "delay"),
    ("delay 10ms 300s", "delay jitter"),
])
def test_a_delay_beyond_netems_32_bit_ticks_is_refused(options, where) -> None:
    # tc_core_time2big: 15.625 ticks of 64 ns per microsecond must fit 32 bits, so 274877906us is the most
    # (tc: "Illegal 275000000 time (too large)"). From 2^32 us on (4295s) tc's unsigned int wraps and it
    # takes a small delay instead: refused here too.
    assert problems(options) == [
        f'{where}: "{options.split()[-1]}" is above netem\'s largest delay and jitter, 274877906us (about 274.88s: '
        'the kernel takes them as 32 bits of 64 ns ticks); tc refuses it too ("Illegal time (too large)")']


def test_the_largest_delay_tc_takes_is_taken() -> None:
    assert int(link("delay 274877906us").delay) == 274_877_906_000
    assert int(link("delay 274s 274s").jitter) == 274_000_000_000


@pytest.mark.parametrize("options, zero", [
    ("delay 10ms 0 distribution normal", "the jitter is 0"),
    ("delay 10ms 0.5us distribution pareto", "the jitter is 0"),
    ("delay 0ms 1ms distribution normal", "the delay is 0"),
    ("delay 0 0 distribution paretonormal", "the delay and jitter are 0"),
])
def test_distribution_needs_a_delay_and_a_jitter_above_0(options, zero) -> None:
    # q_netem.c: `dist_data && (opt.latency == 0 || opt.jitter == 0)`: "distribution specified but no latency
    # and jitter values".
    assert problems(options) == [
        f"distribution: needs a delay and a jitter above 0 (whole microseconds), and {zero}: tc refuses it too "
        '("distribution specified but no latency and jitter values"); leave distribution out or give both']


@pytest.mark.parametrize("options, word, write", [
    ("delay 10ms .5ms", ".5ms", "0.5ms"),
    ("delay 10ms 1ms .5", ".5", "0.5"),
    ("loss 1% .5", ".5", "0.5"),
    ("duplicate 1% .5", ".5", "0.5"),
    ("delay 10ms reorder 5% .5", ".5", "0.5"),
    ("rate 1mbit +14", "+14", "14"),
    ("rate 1mbit 5 +48", "+48", "48"),
    ("rate 1mbit 0x14 0x30 +5", "+5", "5"),
    ("delay 10ms 1ms +25", "+25", "25"),
])
def test_a_value_must_start_with_a_digit_as_tc_reads_it(options, word, write) -> None:
    # tc's NEXT_IS_NUMBER is isdigit(argv[1][0]) (NEXT_IS_SIGNED_NUMBER: or '-'): anything else is read as the
    # next option, and tc 6.1 refuses it (What is ".5ms"?).
    assert problems(options) == [
        f'"{word}" is not a netem option, and tc takes a value after an option only when it starts with a digit '
        f'(or, for rate\'s overheads, with -); tc refuses it too (What is "{word}"?): write "{write}"']


def test_a_bare_loss_must_start_with_a_digit_as_tc_reads_it() -> None:
    # q_netem.c: `if (isdigit(argv[0][0])) goto random_loss_model;` (tc 6.1: Unknown loss parameter: .5%).
    assert problems("loss .5%")[0].endswith('(tc takes a bare PERCENT only when it starts with a digit: write '
                                            '"0.5%"; tc refuses ".5%" too)')
    assert str(link("loss random .5%").loss) == "0.5%" and str(link("duplicate .5%").duplicate) == "0.5%"
