"""netem's slots as a profile field: the two forms, field-named errors with the allowed ranges, the
table encoding both ways, and `slot ...` from netem options as iproute2's q_netem.c reads it."""

from __future__ import annotations

import pytest

from p4netem import pipeline as pl
from p4netem.profiles import Profile, ProfileError
from p4netem.profiles.netem import profile_from_netem


def _down(**link) -> Profile:
    return Profile.parse({"name": "slots", "downlink": link})


def _slot_params(link) -> dict[str, int]:
    return {k: v for k, v in link.to_table_params().items() if k.startswith("slot_")}


def test_range_form_encodes_min_and_span_and_reads_back() -> None:
    p = _down(slot={"min": "2ms", "max": "6ms", "packets": 4, "bytes": "3000B"})
    assert _slot_params(p.downlink) == {"slot_delay_ns": 2_000_000, "slot_span_ns": 4_000_000,
                                        "slot_dist": pl.SLOT_RANGE, "slot_packets": 4, "slot_bytes": 3000}
    back = Profile.from_table_params("slots", p.uplink.to_table_params(), p.downlink.to_table_params(), None)
    assert back.downlink == p.downlink
    # Shorthand and max defaulting to min (tc: `slot MIN` is MIN == MAX).
    s = _down(slot="10ms").downlink.slot
    assert (str(s.min), str(s.max), s.packets, int(s.bytes)) == ("10ms", "10ms", 0, 0)
    # No slot: all zero, and zero reads back as no slot.
    assert set(_slot_params(_down(delay="5ms").downlink).values()) == {0}
    plain = _down(delay="5ms").downlink.to_table_params()
    assert Profile.from_table_params("x", plain, plain, None).downlink.slot is None


def test_distribution_form_encodes_mean_and_jitter() -> None:
    p = _down(slot={"distribution": "pareto", "delay": "10ms", "jitter": "3ms", "packets": 2})
    assert _slot_params(p.downlink) == {"slot_delay_ns": 10_000_000, "slot_span_ns": 3_000_000,
                                        "slot_dist": int(pl.JitterDist.PARETO), "slot_packets": 2, "slot_bytes": 0}
    back = Profile.from_table_params("slots", p.uplink.to_table_params(), p.downlink.to_table_params(), None)
    assert back.downlink == p.downlink


@pytest.mark.parametrize("slot, field, words", [
    ({"min": "5ms", "max": "2ms"}, "downlink.slot.max", "at least min 5ms"),
    ({"min": 0}, "downlink.slot.min", "turns slotting off"),
    ({"max": "5ms"}, "downlink.slot.min", "is needed"),
    ({"min": "61s"}, "downlink.slot.min", "out of range 0s..60s"),
    ({"min": "1ms", "packets": -1}, "downlink.slot.packets", "0..2147483647"),
    ({"min": "1ms", "bytes": "3GB"}, "downlink.slot.bytes", "out of range"),
    ({"distribution": "normal", "delay": "5ms"}, "downlink.slot.jitter", "above 0"),
    ({"distribution": "none", "delay": "5ms", "jitter": "1ms"}, "downlink.slot.distribution", "not a slot distribution"),
    ({"distribution": "normal", "min": "1ms", "jitter": "1ms"}, "downlink.slot.min", "min/max form"),
    ({"min": "1ms", "jitter": "1ms"}, "downlink.slot.jitter", "distribution form"),
    ({"distribution": "gauss", "jitter": "1ms"}, "downlink.slot.distribution", "allowed none, uniform"),
])
def test_bad_slot_names_the_field_and_range(slot, field, words) -> None:
    with pytest.raises(ProfileError) as err:
        _down(slot=slot)
    assert field in str(err.value) and words in str(err.value), str(err.value)


def test_netem_slot_options() -> None:
    s = profile_from_netem("slot 10ms packets 4")[0].downlink.slot
    assert (str(s.min), str(s.max), s.packets) == ("10ms", "10ms", 4)
    s = profile_from_netem("delay 5ms slot 800us 2ms bytes 64k")[0].downlink.slot
    assert (str(s.min), str(s.max), int(s.bytes)) == ("800us", "2ms", 65536)
    s = profile_from_netem("slot distribution normal 10ms 2ms packets 3 bytes 1500 rate 1mbit")[0].uplink.slot
    assert (s.distribution.value, str(s.delay), str(s.jitter), s.packets, int(s.bytes)) == \
        ("normal", "10ms", "2ms", 3, 1500)
    # tc's matches(): any prefix of packets/bytes; a bare slot time is nanoseconds (tc's get_time64).
    s = profile_from_netem("slot 500 p 2 b 100")[0].downlink.slot
    assert (str(s.min), s.packets, int(s.bytes)) == ("500ns", 2, 100)


@pytest.mark.parametrize("options, words", [
    ("slot 5ms 2ms", 'slot max_delay: "2ms" is below MIN_DELAY "5ms"'),
    ("slot distribution normal 10ms 0", "slot jitter: must be above 0"),
    ("slot sometimes", 'slot: "sometimes" is not a slot parameter'),
    ("slot distribution nosuch 1ms 1ms", "slot distribution"),
    ("slot 1ms packets lots", 'slot packets: "lots" is not a number of packets'),
])
def test_bad_netem_slot_names_the_token(options, words) -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_netem(options)
    assert words in str(err.value), str(err.value)
