"""Mahimahi shell chains to profiles (p4netem.profiles.mahimahi): each shell and mm-link option
mapped as Mahimahi reads it (getopt_long's forms, mm-link's queue arguments and their defaults,
mm-onoff's means and their edge cases), and every shell, option or value p4netem cannot emulate
refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4netem.profiles import ProfileError
from p4netem.profiles.link import TracePlacement
from p4netem.profiles.mahimahi import parse_mahimahi

UP, DOWN = TracePlacement(opportunities=10, period=20, cells=0), TracePlacement(opportunities=5, period=8, cells=10)
LINK = "mm-link up.trace down.trace"


def profile(text: str):
    chain = parse_mahimahi(text)
    return chain.profile({d: {"uplink": UP, "downlink": DOWN}[d] for d in chain.traces})


def problems(text: str) -> list[str]:
    with pytest.raises(ProfileError) as info:
        parse_mahimahi(text)
    assert info.value.source == "mahimahi command"
    return [str(p) for p in info.value.problems]


def warnings(text: str) -> list[str]:
    return parse_mahimahi(text).warnings


# ---- mappings ---------------------------------------------------------------------------------

def test_mm_delay_is_the_one_way_delay_of_each_direction_and_nested_delays_add() -> None:
    p = profile("mm-delay 20")
    assert int(p.uplink.delay) == int(p.downlink.delay) == 20_000_000
    assert p.uplink.loss == 0 and p.uplink.trace is None and p.downlink.queue.unlimited
    assert int(profile("mm-delay 20 mm-delay 5").downlink.delay) == 25_000_000
    assert int(profile("mm-delay 0").uplink.delay) == 0
    assert int(profile("mm-delay +20").downlink.delay) == 20_000_000  # strtol takes a leading +, as myatoi does


def test_mm_loss_is_independent_loss_of_its_direction_only() -> None:
    p = profile("mm-loss uplink 0.01")
    assert str(p.uplink.loss) == "1%" and p.downlink.loss == 0
    p = profile("mm-loss downlink 0.25")
    assert str(p.downlink.loss) == "25%" and p.uplink.loss == 0
    assert str(profile("mm-loss downlink 1").downlink.loss) == "100%"
    assert str(profile("mm-loss downlink 1e-3").downlink.loss) == "0.1%"
    assert profile("mm-loss uplink 0").uplink.loss == 0
    # Nested loss shells are independent: a packet gets through when it survives each of them.
    assert str(profile("mm-loss uplink 0.1 mm-loss uplink 0.2").uplink.loss) == "28%"


def test_mm_onoff_is_the_on_off_link_of_its_direction_only() -> None:
    p = profile("mm-onoff uplink 10 2")
    assert (str(p.uplink.onoff.mean_on), str(p.uplink.onoff.mean_off)) == ("10s", "2s") and p.downlink.onoff is None
    assert parse_mahimahi("mm-onoff downlink 0.5 5e-2").fields == {
        "uplink": {}, "downlink": {"onoff": {"mean_on": "0.5s", "mean_off": "0.05s"}}}
    assert int(profile("mm-onoff downlink +1e-3 0.037").downlink.onoff.mean_off) == 37_000_000
    # With the other shells, each on its own direction (one on/off link per direction).
    p = profile("mm-delay 20 mm-onoff uplink 10 2 mm-loss uplink 0.01 mm-onoff downlink 1 1")
    assert str(p.uplink.loss) == "1%" and int(p.uplink.delay) == 20_000_000
    assert int(p.downlink.onoff.mean_on) == int(p.downlink.onoff.mean_off) == 10**9 and p.downlink.loss == 0


def test_mm_onoff_never_on_is_total_loss_and_never_off_is_nothing_with_a_warning() -> None:
    chain = parse_mahimahi("mm-onoff uplink 0 1 mm-loss uplink 0.1")
    assert chain.fields["uplink"] == {"loss": "100%"} and chain.fields["downlink"] == {}
    assert chain.warnings == ["mm-onoff uplink 0 1: a mean on-time of 0 keeps the link off, so every uplink packet "
                              "is lost: loss: 100%"]
    assert parse_mahimahi("mm-loss downlink 0.1 mm-onoff downlink 0.0 3").fields["downlink"] == {"loss": "100%"}
    chain = parse_mahimahi("mm-onoff downlink 5 0")
    assert chain.fields == {"uplink": {}, "downlink": {}}
    assert chain.warnings == ["mm-onoff downlink 5 0: a mean off-time of 0 keeps the link on: nothing to emulate "
                              "(left out)"]


def test_mm_onoff_means_out_of_the_profiles_range_are_named_by_field() -> None:
    with pytest.raises(ProfileError) as info:
        profile("mm-onoff uplink 1000000 1")
    assert str(info.value) == "mahimahi command: uplink.onoff.mean_on: 1000000s out of range 1us..604800s"
    with pytest.raises(ProfileError, match=r"downlink.onoff.mean_off: 100ns out of range 1us\.\.604800s"):
        profile("mm-onoff downlink 1 0.0000001")
    with pytest.raises(ProfileError, match="downlink.onoff.mean_off: .* is not a whole number of nanoseconds"):
        profile("mm-onoff downlink 1 0.0000010001")


def test_mm_link_plays_each_trace_on_its_direction_with_mm_links_unlimited_default_queue() -> None:
    chain = parse_mahimahi(LINK)
    assert chain.traces == {"uplink": Path("up.trace"), "downlink": Path("down.trace")}
    p = chain.profile({"uplink": UP, "downlink": DOWN})
    assert p.uplink.trace == UP and p.downlink.trace == DOWN
    assert p.uplink.queue.unlimited and p.downlink.queue.unlimited
    assert p.uplink.rate == 0 and p.uplink.aqm.kind.value == "tail-drop"
    assert p.source == f"mahimahi {LINK}" and p.name == "mahimahi"
    # The traces' placements are needed: the profile plays what the switch holds.
    with pytest.raises(ValueError, match="no trace placement for downlink"):
        chain.profile({"uplink": UP})


def test_the_example_chain_of_the_docs() -> None:
    chain = parse_mahimahi('mm-delay 20 mm-loss uplink 0.01 mm-link up.trace down.trace '
                           '--uplink-queue=droptail --uplink-queue-args="packets=100" '
                           '--downlink-queue=droptail --downlink-queue-args="packets=1000,bytes=1500000"')
    assert chain.fields == {
        "uplink": {"delay": "20ms", "loss": "1%", "queue": {"packets": 100}},
        "downlink": {"delay": "20ms", "queue": {"packets": 1000, "bytes": 1500000}}}


def test_droptail_limits_are_packets_and_or_bytes_and_zero_is_not_given() -> None:
    p = profile(f"{LINK} --downlink-queue=droptail --downlink-queue-args=bytes=30000")
    assert int(p.downlink.queue.bytes) == 30000 and p.downlink.queue.packets == 0 and p.uplink.queue.unlimited
    p = profile(f"{LINK} --uplink-queue=droptail --uplink-queue-args='packets=0, bytes=9000'")
    assert p.uplink.queue.packets == 0 and int(p.uplink.queue.bytes) == 9000


CODEL = f"{LINK} --downlink-queue=codel --downlink-queue-args=packets=1000,target=5,interval=100"


def test_codel_is_the_profiles_codel_aqm_on_the_traced_queue() -> None:
    assert parse_mahimahi(CODEL).fields["downlink"] == {
        "queue": {"packets": 1000}, "aqm": {"kind": "codel", "target": "5ms", "interval": "100ms", "ecn": False}}


def test_codel_on_a_traced_direction_is_a_valid_profile() -> None:
    p = parse_mahimahi(CODEL).profile({"uplink": UP, "downlink": DOWN})
    assert p.downlink.aqm.kind.value == "codel" and int(p.downlink.aqm.target) == 5_000_000
    assert int(p.downlink.aqm.interval) == 100_000_000 and not p.downlink.aqm.ecn


PIE = f"{LINK} --downlink-queue=pie --downlink-queue-args=packets=100,qdelay_ref=20,max_burst=100"
PIE_WARNING = (
    "--downlink-queue=pie: p4netem runs RFC 8033's PIE with Linux's arithmetic (sch_pie) on each packet's exact "
    "queue delay, updated every 30 ms as Mahimahi's; Mahimahi's PIE estimates the queue delay from an averaged drain "
    "rate in whole milliseconds and scales alpha and beta by 1/128, 1/32 or 1/16 by probability band (below 1 %, "
    "below 10 %, from 10 %) of that delay in milliseconds, so its probability moves 62.5 times as fast as Linux's "
    "(faster still below 0.1 %); it also decays an idle queue's probability by 2 % per update (Linux: 1/64), draws "
    "each drop on its own (Linux spreads them out: RFC 8033's de-randomisation) and starts with no burst allowance. "
    "The same target, burst allowance and update period: not the same drops")


def test_pie_is_the_profiles_pie_aqm_with_mahimahis_30ms_updates() -> None:
    chain = parse_mahimahi(PIE)
    # qdelay_ref and max_burst are milliseconds; Mahimahi's PIE updates every 30 ms and only drops.
    assert chain.fields["downlink"] == {"queue": {"packets": 100}, "aqm": {
        "kind": "pie", "target": "20ms", "max_burst": "100ms", "tupdate": "30ms", "ecn": False}}
    assert chain.fields["uplink"] == {}
    assert chain.warnings == [PIE_WARNING]
    aqm = chain.profile({"uplink": UP, "downlink": DOWN}).downlink.aqm
    # alpha and beta stay RFC 8033's (and Mahimahi's) 0.125 and 1.25.
    assert (aqm.kind.value, str(aqm.target), str(aqm.max_burst), str(aqm.tupdate), str(aqm.alpha), str(aqm.beta),
            aqm.ecn) == ("pie", "20ms", "100ms", "30ms", "0.125", "1.25", False)


def test_pie_takes_a_byte_limit_and_both_directions() -> None:
    chain = parse_mahimahi(f"{LINK} --uplink-queue=pie --uplink-queue-args=bytes=30000,qdelay_ref=5,max_burst=1 "
                           "--downlink-queue=pie --downlink-queue-args='packets=9, bytes=9000, max_burst=4294, "
                           "qdelay_ref=4294'")
    assert chain.fields["uplink"] == {"queue": {"bytes": 30000}, "aqm": {
        "kind": "pie", "target": "5ms", "max_burst": "1ms", "tupdate": "30ms", "ecn": False}}
    assert chain.fields["downlink"]["queue"] == {"packets": 9, "bytes": 9000}
    assert chain.fields["downlink"]["aqm"]["target"] == chain.fields["downlink"]["aqm"]["max_burst"] == "4294ms"
    assert [w.split(":")[0] for w in chain.warnings] == ["--uplink-queue=pie", "--downlink-queue=pie"]
    p = chain.profile({"uplink": UP, "downlink": DOWN})
    assert int(p.uplink.aqm.target) == 5_000_000 and int(p.downlink.aqm.max_burst) == 4_294_000_000


def test_pie_needs_qdelay_ref_and_max_burst_as_mm_link_does() -> None:
    q = f"{LINK} --downlink-queue=pie --downlink-queue-args"
    assert problems(f"{q}=packets=100,max_burst=100") == [
        "--downlink-queue-args=packets=100,max_burst=100: the pie queue needs qdelay_ref=MS (the target queue delay, "
        "milliseconds, 1..4294), as mm-link does"]
    assert problems(f"{q}=packets=100,qdelay_ref=5,max_burst=0") == [
        "--downlink-queue-args=packets=100,qdelay_ref=5,max_burst=0: the pie queue needs max_burst=MS (the burst "
        "allowance, milliseconds, 1..4294), as mm-link does"]
    assert problems(f"{q}=packets=100,qdelay_ref=4295,max_burst=5") == [
        "--downlink-queue-args=packets=100,qdelay_ref=4295,max_burst=5: qdelay_ref=4295 must be at most 4294 ms "
        "(PIE's times are 32-bit ns)"]
    assert problems(f"{q}=qdelay_ref=5,max_burst=10")[0].startswith(
        "--downlink-queue-args=qdelay_ref=5,max_burst=10: the pie queue needs a limit")
    assert problems(f"{q}=packets=1,qdelay_ref=5,max_burst=10,target=3") == [
        "--downlink-queue-args=packets=1,qdelay_ref=5,max_burst=10,target=3: target is not an argument of the pie "
        "queue; allowed: packets, bytes, qdelay_ref, max_burst"]
    assert problems(f"{LINK} --downlink-queue=pie")[0].startswith("--downlink-queue=pie: the pie queue needs a limit")


def test_mm_link_options_take_both_getopt_forms_prefixes_and_any_position() -> None:
    want = parse_mahimahi(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=7").fields
    # `--name value`, a unique prefix, options before the traces (getopt permutes), `--` ends them.
    assert parse_mahimahi(f"{LINK} --uplink-queue droptail --uplink-queue-args packets=7").fields == want
    assert parse_mahimahi("mm-link --uplink-queue-a=packets=7 up.trace --uplink-queue=droptail down.trace").fields == want
    assert parse_mahimahi(["mm-link", "up.trace", "down.trace", "--uplink-queue=droptail",
                           "--uplink-queue-args=packets=7", "--", "./run", "--uplink-queue=pie"]).fields == want
    # An empty argument list is no arguments, as mm-link reads it.
    assert parse_mahimahi(f"{LINK} --uplink-queue=infinite --uplink-queue-args=").fields["uplink"] == {}


def test_quoting_forms_of_the_chain() -> None:
    want = parse_mahimahi(f"{LINK} --downlink-queue=codel --downlink-queue-args=packets=9,target=5,interval=100").fields
    for text in (f"{LINK} --downlink-queue=codel --downlink-queue-args='packets=9, target=5, interval=100'",
                 f'{LINK} --downlink-queue=codel "--downlink-queue-args=packets=9,target=5,interval=100"',
                 f'{LINK} --downlink-queue codel --downlink-queue-args "packets=9 ,target=5, interval=100"'):
        assert parse_mahimahi(text).fields == want, text
    # A path to the shell, and traces with spaces in quotes.
    chain = parse_mahimahi("/usr/local/bin/mm-delay 5 /usr/bin/mm-link 'my up.trace' \"my down.trace\"")
    assert chain.traces == {"uplink": Path("my up.trace"), "downlink": Path("my down.trace")}
    assert chain.fields["uplink"] == {"delay": "5ms"}
    assert problems("mm-link 'up.trace down.trace") == [
        "cannot split \"mm-link 'up.trace down.trace\" into words: No closing quotation"]


def test_the_shells_may_come_in_any_order() -> None:
    a = parse_mahimahi(f"mm-delay 20 mm-loss downlink 0.02 {LINK}").fields
    assert parse_mahimahi(f"{LINK} mm-loss downlink 0.02 mm-delay 20").fields == a
    assert parse_mahimahi(f"mm-loss downlink 0.02 {LINK} mm-delay 20").fields == a


# ---- warnings ---------------------------------------------------------------------------------

def test_meters_and_logs_are_accepted_with_a_warning_naming_p4netems_view() -> None:
    assert warnings(LINK) == []
    (meter,) = warnings(f"{LINK} --meter-all")
    assert meter.startswith("--meter-all: mm-link's live graph is not drawn; `p4netem stats`")
    assert len(warnings(f"{LINK} --meter-uplink --meter-downlink-delay")) == 2
    (log,) = warnings(f"{LINK} --uplink-log=up.log")
    assert log.startswith('--uplink-log=up.log: no per-packet log is written to "up.log"; `p4netem stats --json')
    (log,) = warnings(f"{LINK} -d down.log")
    assert log.startswith('-d down.log: no per-packet log is written to "down.log"')
    (meter,) = warnings("mm-meter --meter-uplink mm-delay 3")
    assert meter.startswith("mm-meter (--meter-uplink): its live graph is not drawn; `p4netem stats`")
    assert parse_mahimahi("mm-meter --meter-uplink mm-delay 3").fields["uplink"] == {"delay": "3ms"}


def test_the_program_after_the_shells_is_left_out_with_a_warning() -> None:
    chain = parse_mahimahi("mm-delay 20 curl -s http://example.com")
    assert chain.fields["uplink"] == {"delay": "20ms"}
    assert chain.warnings == ['the program after the shells is not run: "curl -s http://example.com"; p4netem '
                              'impairs the traffic its rules select (--rule), so run the program on a client host '
                              'behind the switch']
    # After mm-link, getopt reads the program's options as its own unless a `--` comes first.
    assert len(parse_mahimahi(f"{LINK} -- curl -s http://example.com").warnings) == 1
    assert problems(f"{LINK} curl -s http://example.com")[0].startswith('-s: is not an option of mm-link; allowed:')


def test_a_loss_mahimahi_runs_after_the_link_is_warned_about() -> None:
    # The uplink leaves from the inside out: a loss shell outside mm-link loses after the link.
    (w,) = warnings(f"mm-loss uplink 0.01 {LINK}")
    assert w.startswith("mm-loss uplink is outside mm-link in the chain, so Mahimahi loses those uplink packets "
                        "after the link")
    (w,) = warnings(f"{LINK} mm-loss downlink 0.01")
    assert w.startswith("mm-loss downlink is inside mm-link")
    # Before the link, as p4netem's loss stage is: nothing to say.
    assert warnings(f"{LINK} mm-loss uplink 0.01") == warnings(f"mm-loss downlink 0.01 {LINK}") == []
    assert warnings("mm-loss uplink 0.01") == []  # no link at all
    assert warnings(f"mm-loss uplink 0 {LINK}") == []  # no loss


def test_an_on_off_link_mahimahi_runs_after_the_link_is_warned_about() -> None:
    (w,) = warnings(f"mm-onoff uplink 10 2 {LINK}")
    assert w.startswith("mm-onoff uplink is outside mm-link in the chain, so Mahimahi drops those uplink packets "
                        "after the link while it is off")
    assert "the same share of time off" in w
    (w,) = warnings(f"{LINK} mm-onoff downlink 10 2")
    assert w.startswith("mm-onoff downlink is inside mm-link")
    assert warnings(f"{LINK} mm-onoff uplink 10 2") == warnings(f"mm-onoff downlink 10 2 {LINK}") == []
    assert warnings("mm-onoff uplink 10 2") == []  # no link at all
    # One warning per shell, mm-loss's and mm-onoff's each.
    assert [w.split(" is ")[0] for w in warnings(f"mm-onoff uplink 10 2 mm-loss uplink 0.1 {LINK}")] == [
        "mm-onoff uplink", "mm-loss uplink"]


# ---- refusals ---------------------------------------------------------------------------------

def test_mm_loss_values_are_checked() -> None:
    assert problems("mm-loss uplink 1.5") == ["mm-loss uplink 1.5: rate must be between 0 and 1"]
    assert problems("mm-loss downlink -0.1") == ["mm-loss downlink -0.1: rate must be between 0 and 1"]
    assert problems("mm-loss uplink 1%") == ["mm-loss uplink 1%: the rate must be a number between 0 and 1 (0.01 is 1 %)"]
    assert problems("mm-loss up 0.1") == ["mm-loss up: the direction must be uplink or downlink"]
    assert problems("mm-loss uplink") == ["mm-loss: expects a direction and a rate: mm-loss uplink|downlink RATE "
                                          "[COMMAND...]"]


def test_mm_onoff_values_are_checked_as_mm_onoff_checks_them() -> None:
    assert problems("mm-onoff uplink 0 0") == [
        "mm-onoff uplink 0 0: MEAN_ON and MEAN_OFF cannot both be 0 seconds (mm-onoff refuses them too)"]
    assert problems("mm-onoff uplink -1 2") == [
        "mm-onoff uplink -1 2: MEAN_ON -1 must be 0 seconds or more (mm-onoff refuses a negative mean)"]
    assert problems("mm-onoff downlink 1 -0.5") == [
        "mm-onoff downlink 1 -0.5: MEAN_OFF -0.5 must be 0 seconds or more (mm-onoff refuses a negative mean)"]
    assert problems("mm-onoff uplink 10s 2") == [
        'mm-onoff uplink 10s 2: MEAN_ON "10s" is not a number of seconds (0 or more, e.g. 10 or 0.5)']
    assert problems("mm-onoff uplink 1 inf") == [
        'mm-onoff uplink 1 inf: MEAN_OFF "inf" is not a number of seconds (0 or more, e.g. 10 or 0.5)']
    assert problems("mm-onoff up 1 2") == ["mm-onoff up: the direction must be uplink or downlink"]
    # A huge exponent is named, not a decimal.Overflow traceback from the profile's duration.
    assert problems("mm-onoff uplink 1e100000000 1") == [
        "mm-onoff uplink 1e100000000 1: MEAN_ON 1e100000000 is too large (the profile's means are at most 604800 "
        "seconds)"]
    assert problems("mm-onoff uplink 1") == ["mm-onoff: expects a direction and two mean times in seconds: mm-onoff "
                                             "uplink|downlink MEAN_ON MEAN_OFF [COMMAND...]"]


def test_a_second_mm_onoff_on_one_direction_is_refused() -> None:
    assert problems("mm-onoff uplink 1 2 mm-delay 5 mm-onoff uplink 3 4") == [
        "mm-onoff uplink 3 4: a second mm-onoff on the uplink: p4netem has one on/off link per direction (two in "
        "series are a link that is on when both are)"]
    # Even after one that does nothing: the rule is one mm-onoff per direction.
    assert problems("mm-onoff downlink 1 0 mm-onoff downlink 3 4")[0].startswith(
        "mm-onoff downlink 3 4: a second mm-onoff on the downlink")


def test_mm_delay_values_are_checked() -> None:
    assert problems("mm-delay 20ms") == ["mm-delay 20ms: the delay must be a whole number of milliseconds with no "
                                         "unit (0..281474976), e.g. mm-delay 20"]
    assert problems("mm-delay 2.5")[0].startswith("mm-delay 2.5: the delay must be a whole number")
    assert problems("mm-delay -1")[0].startswith("mm-delay -1: the delay must be a whole number")
    assert problems("mm-delay") == ["mm-delay: expects a delay in milliseconds: mm-delay MS [COMMAND...]"]
    assert problems("mm-delay 281474976 mm-delay 1") == [
        "mm-delay 1: the delay (in all: 281474977 ms) must be at most 281474976 ms"]


def test_queues_p4netem_does_not_have_are_refused_with_why() -> None:
    (drophead,) = problems(f"{LINK} --uplink-queue=drophead --uplink-queue-args=packets=10")
    assert drophead.startswith("--uplink-queue=drophead: is not supported: p4netem has no drop-head queue: its rate "
                               "queue fixes each packet's departure when it admits it")
    (red,) = problems(f"{LINK} --downlink-queue=red --downlink-queue-args=packets=10,wq=1,minthresh=1,maxthresh=2")
    assert red.startswith("--downlink-queue=red: is not supported: Mahimahi's red")
    assert problems(f"{LINK} --downlink-queue=fifo") == [
        "--downlink-queue=fifo: is not a queue type; allowed: infinite (the default), droptail, codel, pie"]


def test_queue_arguments_are_checked_as_mm_link_needs_them() -> None:
    assert problems(f"{LINK} --uplink-queue=droptail") == [
        "--uplink-queue=droptail: the droptail queue needs a limit: --uplink-queue-args=packets=N and/or bytes=N "
        "(1..4294967295 each)"]
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=0")[0].startswith(
        "--uplink-queue-args=packets=0: the droptail queue needs a limit")
    assert problems(f"{LINK} --uplink-queue-args=packets=10") == [
        "--uplink-queue-args=packets=10: the infinite queue takes no arguments (give --uplink-queue=droptail or "
        "codel for a limit)"]
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=10,target=5") == [
        "--uplink-queue-args=packets=10,target=5: target is not an argument of the droptail queue; allowed: "
        "packets, bytes"]
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=pakets=10") == [
        '--uplink-queue-args=pakets=10: "pakets" is not a queue argument; mm-link\'s are packets, bytes, target, '
        'interval, qdelay_ref, max_burst, wq, minthresh, maxthresh']
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=1.5") == [
        '--uplink-queue-args=packets=1.5: "packets=1.5" is not NAME=NUMBER (a whole number, e.g. packets=100)']
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=4294967296") == [
        "--uplink-queue-args=packets=4294967296: packets=4294967296 must be at most 4294967295"]
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue-args=packets=1,packets=2") == [
        "--uplink-queue-args=packets=1,packets=2: packets is given twice"]


def test_codel_needs_target_and_interval_in_range() -> None:
    q = f"{LINK} --downlink-queue=codel --downlink-queue-args"
    assert problems(f"{q}=packets=100,interval=100") == [
        "--downlink-queue-args=packets=100,interval=100: the codel queue needs target=MS (milliseconds, 1..4294), "
        "as mm-link does"]
    assert problems(f"{q}=packets=100,target=5")[0].endswith("the codel queue needs interval=MS (milliseconds, "
                                                             "1..4294), as mm-link does")
    assert problems(f"{q}=target=5,interval=100")[0].startswith(
        "--downlink-queue-args=target=5,interval=100: the codel queue needs a limit")
    assert problems(f"{q}=packets=100,target=5,interval=5000") == [
        "--downlink-queue-args=packets=100,target=5,interval=5000: interval=5000 must be at most 4294 ms (CoDel's "
        "times are 32-bit ns)"]
    assert problems(f"{q}=packets=100,target=100,interval=100") == [
        "--downlink-queue-args=packets=100,target=100,interval=100: target=100 must be below interval=100 "
        "(p4netem's CoDel, RFC 8289: target is 5-10 % of the interval)"]


def test_mm_link_options_p4netem_cannot_follow_are_refused() -> None:
    (once,) = problems(f"{LINK} --once")
    assert once == ("--once: is not supported: p4netem's data plane repeats a trace with its period, so the link "
                    "cannot end after one pass")
    assert problems(f"{LINK} --on") == [once]  # a prefix is the option
    assert problems(f"{LINK} --uplink-q=droptail") == [
        "--uplink-q: is ambiguous: it could be --uplink-queue, --uplink-queue-args"]
    assert problems(f"{LINK} --cbr=12M")[0].startswith("--cbr: is not an option of mm-link; allowed: --uplink-log=VALUE")
    assert problems(f"{LINK} --uplink-queue") == ["--uplink-queue: needs a value: --uplink-queue=VALUE or "
                                                  "--uplink-queue VALUE"]
    assert problems(f"{LINK} --once=yes") == ["--once=yes: --once takes no value"]
    assert problems(f"{LINK} --uplink-queue=droptail --uplink-queue=codel")[0] == (
        '--uplink-queue: is given twice ("droptail" and "codel")')
    assert problems("mm-link up.trace") == ["mm-link: expects two trace files: mm-link UPTRACE DOWNTRACE [OPTIONS] "
                                            "[COMMAND...]"]
    assert problems(f"{LINK} mm-delay 2 {LINK}") == [
        "mm-link: given twice: p4netem has one queue per direction, so two links in series cannot be emulated"]


def test_other_shells_and_unknown_words_are_refused_by_name() -> None:
    assert problems("mm-webrecord /tmp/rec")[0].startswith("mm-webrecord: is not supported: it records web pages")
    assert problems("mm-webreplay /tmp/rec")[0].startswith("mm-webreplay: is not supported: it replays")
    assert problems("mm-delay 10 mm-dealy 5") == [
        'mm-dealy: is not a Mahimahi shell p4netem can emulate; allowed: mm-delay, mm-loss, mm-onoff, mm-link, '
        'mm-meter (a chain starts with one of them)']
    assert problems("delay 20")[0].startswith('delay: is not a Mahimahi shell p4netem can emulate')
    assert problems("") == ["no Mahimahi command given; e.g. mm-delay 20 mm-link up.trace down.trace"]
