"""codel's and pie's times in netem options, as tc 6.1 reads them: q_codel.c and q_pie.c take
target, interval and tupdate with tc_util.c's get_time (s, ms, us; a bare number microseconds; the
double cut to an unsigned int of microseconds), which has no ns. On this machine (iproute2 6.1.0):

    $ tc qdisc add dev p4n-absent root codel target 5000ns   -> Illegal "target"
    $ tc qdisc add dev p4n-absent root codel interval 100000ns -> Illegal "interval"
    $ tc qdisc add dev p4n-absent root pie target 5000ns     -> Illegal "target"
    $ tc qdisc add dev p4n-absent root pie tupdate 15000ns   -> Illegal "tupdate"
    $ tc qdisc add dev p4n-absent root codel target 5.5us    -> Cannot find device (parsed: 5us)

p4netem took `ns` there (only slot's times, get_time64, have it)."""

from __future__ import annotations

import pytest

from p4netem.profiles import ProfileError
from p4netem.profiles.netem import profile_from_netem


def problems(options: str) -> list[str]:
    with pytest.raises(ProfileError) as info:
        profile_from_netem(options)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize("options, where, option, spelling", [
    ("rate 1mbit codel target 5000ns", "codel target", "target", "codel's times are whole microseconds (s, ms, us; a "
                                                                 "bare number is microseconds): write 5us"),
    ("rate 1mbit codel interval 100000nsec", "codel interval", "interval", "codel's times are whole microseconds (s, "
                                                                          "ms, us; a bare number is microseconds): "
                                                                          "write 100us"),
    ("rate 1mbit pie target 5000NS", "pie target", "target", "pie's times are whole microseconds (s, ms, us; a bare "
                                                             "number is microseconds): write 5us"),
    ("rate 1mbit pie tupdate 15000nsecs", "pie tupdate", "tupdate", "pie's times are whole microseconds (s, ms, us; a "
                                                                    "bare number is microseconds): write 15us"),
])
def test_ns_is_refused_as_tc_refuses_it_with_the_spelling_tc_takes(options, where, option, spelling) -> None:
    word = options.split()[-1]
    assert problems(options) == [f'{where}: "{word}": tc refuses nanoseconds here (Illegal "{option}"): tc-{spelling}']


def test_a_time_of_nanoseconds_tc_cannot_say_points_to_the_yaml() -> None:
    assert problems("rate 1mbit codel target 1500ns") == [
        'codel target: "1500ns": tc refuses nanoseconds here (Illegal "target"): tc-codel\'s times are whole '
        "microseconds (s, ms, us; a bare number is microseconds): it is not a whole number of them; the profile's "
        "YAML takes nanoseconds (codel's aqm.target)"]
    # pie's tupdate is 1ms..1s in a profile anyway: no YAML to point to.
    assert problems("rate 1mbit pie tupdate 1500ns")[0].endswith("it is not a whole number of them")


def test_what_tc_takes_is_taken_as_tc_takes_it() -> None:
    profile, warnings = profile_from_netem("rate 1mbit codel target 5MS interval 100000")  # case; bare: us
    assert (str(profile.downlink.aqm.target), str(profile.downlink.aqm.interval)) == ("5ms", "100ms")
    assert warnings == []
    # The fraction of a microsecond is dropped (the double goes to an unsigned int), with a warning.
    profile, warnings = profile_from_netem("rate 1mbit codel target 5.5us interval 0.1secs")
    assert (int(profile.downlink.aqm.target), int(profile.downlink.aqm.interval)) == (5_000, 100_000_000)
    assert warnings == ["codel target 5.5us: tc reads whole microseconds (it drops the fraction), so codel's is 5us; "
                        "that is what the profile takes"]
    profile, warnings = profile_from_netem("rate 1mbit pie target 20000.9 tupdate 30msec")
    assert (int(profile.downlink.aqm.target), int(profile.downlink.aqm.tupdate)) == (20_000_000, 30_000_000)
    assert warnings == ["pie target 20000.9: tc reads whole microseconds (it drops the fraction), so pie's is "
                        "20000us; that is what the profile takes"]


def test_slot_keeps_get_time64s_ns() -> None:
    # q_netem.c reads slot's times with get_time64, which has ns (a bare number is ns there).
    profile, _ = profile_from_netem("slot 1500ns 3000")
    assert (int(profile.downlink.slot.min), int(profile.downlink.slot.max)) == (1_500, 3_000)
