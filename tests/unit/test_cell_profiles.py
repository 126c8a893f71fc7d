"""netem's cell framing (`rate RATE PACKETOVERHEAD CELLSIZE CELLOVERHEAD`) as profile fields:
`cell_size` and `cell_overhead`. The contract's three params (cell_bytes, cell_overhead_bytes and the
derived cell_recip), the table encoding both ways, field-named refusals (a cell size without a rate,
a cell overhead without cells, a cell left less than one byte, out of range), YAML, the one-line
summary, and the data plane's division-free cell count (p4src/include/rate.p4 service_ns) run step
for step against exact ceiling division with the encoder's cell_recip. The signed overheads (`overhead`
and `cell_overhead`, -32768..32767, written as the bit<16>'s two's complement) are here too. The
netem spelling is in tests/unit/test_netem.py."""

from __future__ import annotations

import random

import pytest

from p4netem.profiles import IMPAIRMENT_PARAMS, LinkParams, Profile, ProfileError, decode_link, dumps, encode_link
from p4netem.profiles import loads_profiles
from p4netem.profiles.summary import link_summary

CELL_PARAMS = ("cell_bytes", "cell_overhead_bytes", "cell_recip")
WIDTHS = {name: bits for _, name, bits in IMPAIRMENT_PARAMS}
MAN_PAGE = {"rate": "5kbit", "overhead": 20, "cell_size": 100, "cell_overhead": 5}  # tc-netem(8)'s example
ATM = {"rate": "1Mbit", "cell_size": 48, "cell_overhead": 5}  # `rate 1mbit 0 48 5`
NO_RATE = "needs a rate (cells only count in the rate computation)"
NO_CELLS = "has no effect without cell_size (it is each cell's header; without cells nothing adds it)"
# The cell sizes the data-plane arithmetic is checked at: the smallest, ATM's payload and cell, odd
# ones, Ethernet's MTU and frame sizes, a jumbo frame and the largest.
CELLS = [1, 2, 3, 7, 47, 48, 53, 100, 1499, 1500, 1514, 9000, 65535]
U64 = 2**64 - 1


def _down(**link) -> Profile:
    return Profile.parse({"name": "cells", "downlink": link})


def _problems(doc: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        Profile.parse({"name": "cells", **doc})
    return [str(p) for p in info.value.problems]


def _cells(link: LinkParams) -> dict[str, int]:
    return {k: v for k, v in link.to_table_params().items() if k in CELL_PARAMS}


# ---- the params, in contract order --------------------------------------------------------------

def test_the_params_are_the_contracts_54_to_56() -> None:
    assert IMPAIRMENT_PARAMS[53:56] == ((54, "cell_bytes", 16), (55, "cell_overhead_bytes", 16), (56, "cell_recip", 64))


@pytest.mark.parametrize("link", [MAN_PAGE, ATM, {"rate": "10Mbit", "cell_size": 1500}], ids=["man", "atm", "mtu"])
def test_encode_and_decode_round_trip(link: dict) -> None:
    down = _down(**link).downlink
    params = down.to_table_params()
    assert list(params) == [name for _, name, _ in IMPAIRMENT_PARAMS]  # param-id order
    cell = link["cell_size"]
    assert _cells(down) == {"cell_bytes": cell, "cell_overhead_bytes": link.get("cell_overhead", 0),
                            "cell_recip": 2**32 // cell}
    assert decode_link(params) == down and encode_link(decode_link(params)) == params
    # The same direction without cells differs in these params only, all 0.
    plain = _down(**{k: v for k, v in link.items() if not k.startswith("cell_")}).downlink.to_table_params()
    assert {k for k in params if params[k] != plain[k]} == {k for k in CELL_PARAMS if params[k]}
    assert all(plain[k] == 0 for k in CELL_PARAMS)
    assert (decode_link(plain).cell_size, decode_link(plain).cell_overhead) == (0, 0)


def test_cell_recip_is_derived_and_not_read_back() -> None:
    # floor(2^32 / cell_size): 2^32 itself for 1-byte cells (a bit<64>, so it fits), 0 without cells.
    for cell in CELLS:
        recip = LinkParams(rate="1Mbit", cell_size=cell).to_table_params()["cell_recip"]
        assert recip == 2**32 // cell and recip < 2 ** WIDTHS["cell_recip"], cell
    assert _cells(LinkParams(rate="1Mbit", cell_size=1)) == {"cell_bytes": 1, "cell_overhead_bytes": 0,
                                                            "cell_recip": 2**32}
    assert _cells(LinkParams(rate="1Mbit", cell_size=48))["cell_recip"] == 89_478_485
    assert _cells(LinkParams(rate="1Mbit", cell_size=65535))["cell_recip"] == 65537
    assert _cells(LinkParams()) == {"cell_bytes": 0, "cell_overhead_bytes": 0, "cell_recip": 0}
    # A switch's cell_recip is not read back: decoding ignores it, encoding recomputes it.
    params = _down(**ATM).downlink.to_table_params()
    stale = decode_link({**params, "cell_recip": 12345})
    assert stale == decode_link(params) and encode_link(stale) == params


# ---- refusals, each at its field ----------------------------------------------------------------

def test_a_cell_size_needs_a_rate() -> None:
    assert _problems({"downlink": {"cell_size": 48}}) == [f"downlink.cell_size: 48 bytes {NO_RATE}"]
    # As overhead, which is named the same way; a trace-driven direction has no rate either.
    assert _problems({"uplink": {"overhead": 8, "cell_size": 48, "cell_overhead": 5}}) == [
        "uplink.overhead: 8 bytes needs a rate (overhead only counts in the rate computation)",
        f"uplink.cell_size: 48 bytes {NO_RATE}"]
    assert _problems({"downlink": {"trace": {"opportunities": 10, "period": 100}, "cell_size": 53}}) == [
        f"downlink.cell_size: 53 bytes {NO_RATE}"]
    # Under both, named once as both.
    assert _problems({"both": {"cell_size": 48}}) == [f"both.cell_size: 48 bytes {NO_RATE}"]


def test_a_cell_overhead_needs_a_cell_size() -> None:
    assert _problems({"downlink": {"rate": "1Mbit", "cell_overhead": 5}}) == [
        f"downlink.cell_overhead: 5 bytes {NO_CELLS}"]
    assert _problems({"downlink": {"rate": "1Mbit", "cell_size": 0, "cell_overhead": 5}}) == [
        f"downlink.cell_overhead: 5 bytes {NO_CELLS}"]
    # Without a rate both are named.
    assert _problems({"downlink": {"cell_overhead": 5}}) == [f"downlink.cell_overhead: 5 bytes {NO_CELLS}"]
    # 0 is never a problem; cells without a cell overhead are fine.
    assert _down(cell_size=0, cell_overhead=0).downlink == LinkParams()
    assert _down(rate="1Mbit", cell_size=48).downlink.cell_overhead == 0


@pytest.mark.parametrize("field, allowed", [("cell_size", "0..65535"), ("overhead", "-32768..32767"),
                                            ("cell_overhead", "-32768..32767")])
@pytest.mark.parametrize("value, message", [
    (65536, "65536 out of range {}"),
    (-40000, "-40000 out of range {}"),
    ("48.5", '"48.5" is not a whole number of bytes; allowed {}'),
    ("48B", '"48B" is not a number of bytes; allowed {}'),
    (True, "True is not a number of bytes; allowed {}"),
])
def test_values_out_of_range_are_named_with_the_range(field: str, allowed: str, value, message: str) -> None:
    link = {"rate": "1Mbit", "cell_size": 48, field: value}
    assert _problems({"downlink": link}) == [f"downlink.{field}: {message.format(allowed)}"]


@pytest.mark.parametrize("field, value, allowed", [
    ("cell_size", -1, "0..65535"), ("overhead", 32768, "-32768..32767"), ("overhead", -32769, "-32768..32767"),
    ("cell_overhead", 32768, "-32768..32767"), ("cell_overhead", -32769, "-32768..32767")])
def test_the_edges_of_the_16_bit_ranges(field: str, value: int, allowed: str) -> None:
    # One past each end: the cell size is unsigned, the overheads are signed (two's complement bit<16>).
    link = {"rate": "1Mbit", "cell_size": 48, field: value}
    assert _problems({"downlink": link}) == [f"downlink.{field}: {value} out of range {allowed}"]
    schema = LinkParams.model_json_schema()["properties"][field]
    assert schema["description"] == f"bytes {allowed}"


# ---- signed overheads (netem's PACKETOVERHEAD and CELLOVERHEAD may be negative) ----------------

@pytest.mark.parametrize("overhead, cell_overhead, raw_overhead, raw_cell_overhead", [
    (-14, -5, 0xFFF2, 0xFFFB),  # Ethernet's header stripped, a 5-byte compressed cell header
    (-32768, -47, 0x8000, 0xFFD1),  # the lowest overhead; the lowest cell overhead with 48-byte cells
    (32767, 32767, 0x7FFF, 0x7FFF),  # the highest of both
    (-1, 1, 0xFFFF, 1),
])
def test_negative_overheads_are_the_16_bit_twos_complement(overhead: int, cell_overhead: int, raw_overhead: int,
                                                           raw_cell_overhead: int) -> None:
    down = _down(rate="1Mbit", overhead=overhead, cell_size=48, cell_overhead=cell_overhead).downlink
    assert (down.overhead, down.cell_overhead) == (overhead, cell_overhead)
    params = encode_link(down)
    assert (params["overhead_bytes"], params["cell_overhead_bytes"]) == (raw_overhead, raw_cell_overhead)
    assert params["cell_bytes"] == 48  # the cell size stays unsigned
    back = decode_link(params)
    assert (back.overhead, back.cell_overhead) == (overhead, cell_overhead)
    assert back == down and encode_link(back) == params
    # P4Runtime's bytestrings (big-endian, unsigned) read back the same.
    as_bytes = {name: value.to_bytes((WIDTHS[name] + 7) // 8, "big") for name, value in params.items()}
    assert decode_link(as_bytes) == down


def test_16_bit_overheads_read_back_and_encode_to_themselves() -> None:
    # encode(decode(t)) == t for the bit<16>s a switch may hold: 32768..65535 are the negative values.
    # Both ends, both sides of the sign bit, and a stride through the rest (all 65536 take seconds).
    base = _down(rate="1Mbit", cell_size=65535).downlink.to_table_params()
    edges = [0, 1, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFF2, 0xFFFE, 0xFFFF]
    for raw in edges + list(range(3, 2**16, 251)):
        back = decode_link({**base, "overhead_bytes": raw, "cell_overhead_bytes": raw})
        signed = raw - 2**16 if raw >= 2**15 else raw
        assert (back.overhead, back.cell_overhead) == (signed, signed), raw
        params = encode_link(back)
        assert (params["overhead_bytes"], params["cell_overhead_bytes"]) == (raw, raw), raw


def test_a_negative_overhead_below_any_frame_is_a_profile() -> None:
    # The wire bytes are max(0, frame + overhead): a frame shorter than -overhead takes no link time
    # (Linux would wrap); nothing to refuse. YAML loads and dumps the sign.
    (profile,) = loads_profiles("name: strip\nboth:\n  rate: 10Mbit\n  overhead: -32768\n")
    assert profile.downlink.overhead == profile.uplink.overhead == -32768
    assert "overhead: -32768" in dumps(profile) and loads_profiles(dumps(profile)) == [profile]
    assert _down(rate="1Mbit", overhead="-14").downlink.overhead == -14  # a digit string, as for any integer field
    # Still needs a rate, named as a positive one is.
    assert _problems({"uplink": {"overhead": -14}}) == [
        "uplink.overhead: -14 bytes needs a rate (overhead only counts in the rate computation)"]


def test_a_cell_must_keep_at_least_one_byte_on_the_link() -> None:
    def zero(size: int, overhead: int) -> str:
        return (f"downlink.cell_overhead: {overhead} bytes leaves each {size}-byte cell {size + overhead} bytes on "
                f"the link (a packet would take no link time at the rate); allowed {1 - size}..32767 with "
                f"cell_size {size}")

    assert _problems({"downlink": {"rate": "1Mbit", "cell_size": 48, "cell_overhead": -48}}) == [zero(48, -48)]
    assert _problems({"downlink": {"rate": "1Mbit", "cell_size": 48, "cell_overhead": -32768}}) == [zero(48, -32768)]
    assert _problems({"downlink": {"rate": "1Mbit", "cell_size": 1, "cell_overhead": -1}}) == [zero(1, -1)]
    # One byte left is a cell; a cell size above 32768 cannot be emptied by any cell overhead.
    assert _down(rate="1Mbit", cell_size=48, cell_overhead=-47).downlink.cell_overhead == -47
    assert _down(rate="1Mbit", cell_size=32769, cell_overhead=-32768).downlink.cell_overhead == -32768
    # Without cells the cell overhead is refused for having nothing to add to, whatever its sign.
    assert _problems({"downlink": {"rate": "1Mbit", "cell_overhead": -5}}) == [
        f"downlink.cell_overhead: -5 bytes {NO_CELLS}"]
    # A switch may hold such a pair (read back as it is, lenient); the check still names it.
    params = {**LinkParams().to_table_params(), "ns_per_byte_q16": 524_288_000, "cell_bytes": 48,
              "cell_overhead_bytes": 0x10000 - 48, "cell_recip": 2**32 // 48}
    back = decode_link(params)
    assert (back.cell_size, back.cell_overhead) == (48, -48) and encode_link(back) == params
    assert [f"downlink.{p}" for p in back.ineffective_settings()] == [zero(48, -48)]


def test_a_switch_may_hold_cells_without_a_rate() -> None:
    # Read back (lenient): shown as they are, the ineffective settings still named.
    params = {**LinkParams().to_table_params(), "cell_bytes": 48, "cell_overhead_bytes": 5, "cell_recip": 2**32 // 48}
    back = decode_link(params)
    assert (back.cell_size, back.cell_overhead) == (48, 5) and encode_link(back) == params
    assert [str(p) for p in back.ineffective_settings()] == [f"cell_size: 48 bytes {NO_RATE}"]
    assert link_summary(back) == "cells 48B + 5B"
    # Out of its 16 bits: named by param.
    with pytest.raises(ProfileError) as info:
        decode_link({**params, "cell_overhead_bytes": 2**16})
    assert [str(p) for p in info.value.problems] == ["cell_overhead_bytes: 65536 out of range 0..65535 (bit<16>)"]


# ---- YAML and the summary -----------------------------------------------------------------------

def test_yaml_loads_and_dumps_them() -> None:
    text = """
name: adsl
description: ADSL over ATM cells
both:
  overhead: 8
  cell_size: 48
  cell_overhead: 5
downlink:
  rate: 8Mbit
uplink:
  rate: 1Mbit
  cell_overhead: 0
"""
    (profile,) = loads_profiles(text)
    assert (profile.downlink.cell_size, profile.downlink.cell_overhead) == (48, 5)
    assert (profile.uplink.cell_size, profile.uplink.cell_overhead) == (48, 0)
    assert _cells(profile.uplink) == {"cell_bytes": 48, "cell_overhead_bytes": 0, "cell_recip": 2**32 // 48}
    dumped = dumps(profile)
    assert "cell_size: 48" in dumped and "cell_overhead: 5" in dumped and "cell_overhead: 0" not in dumped
    assert loads_profiles(dumped) == [profile]
    # Without cells nothing is written.
    assert "cell_" not in dumps(_down(rate="1Mbit", overhead=4))
    # A misspelt field gets the hint; the JSON schema says what they are.
    assert _problems({"downlink": {"rate": "1Mbit", "cell_sise": 48}}) == [
        "downlink.cell_sise: unknown field; did you mean 'cell_size'?"]
    schema = LinkParams.model_json_schema()["properties"]
    assert schema["cell_size"]["type"] == schema["cell_overhead"]["type"] == "integer"


def test_the_summary_shows_them_with_the_rate() -> None:
    assert link_summary(_down(**MAN_PAGE).downlink) == "rate 5kbit (overhead 20B, cells 100B + 5B)"
    assert link_summary(_down(**ATM).downlink) == "rate 1Mbit (cells 48B + 5B)"
    assert link_summary(_down(rate="1Mbit", cell_size=1500).downlink) == "rate 1Mbit (cells 1500B)"
    with_overhead = _down(rate="1Mbit", overhead=24, delay="5ms").downlink
    assert link_summary(with_overhead) == "rate 1Mbit (overhead 24B), delay 5ms"
    assert link_summary(_down(rate="1Mbit").downlink) == "rate 1Mbit"
    # Negative overheads: the packet's as it is, the cell's as a difference.
    assert link_summary(_down(rate="1Mbit", overhead=-14).downlink) == "rate 1Mbit (overhead -14B)"
    negative = _down(rate="1Mbit", overhead=-14, cell_size=48, cell_overhead=-5).downlink
    assert link_summary(negative) == "rate 1Mbit (overhead -14B, cells 48B - 5B)"
    # A cell overhead without cells, only ever read back from a switch: shown with its sign.
    alone = decode_link({**LinkParams().to_table_params(), "cell_overhead_bytes": 0xFFFB})
    assert link_summary(alone) == "cell overhead -5B"


# ---- the data plane's cell count ----------------------------------------------------------------

def _p4_cell_link_bytes(cell: int, cell_overhead_bytes: int) -> int:
    """p4src/include/rate.p4 cell_link_bytes: the cell plus its overhead, the bit<16> param read as
    two's complement, a negative one subtracted saturating at 0 (|-|)."""
    if cell_overhead_bytes >> 15:
        return max(0, cell - ((0 - cell_overhead_bytes) & 0xFFFF))
    return cell + cell_overhead_bytes


def _p4_link_bytes(wire: int, cell: int, cell_overhead: int, recip: int) -> int:
    """p4src/include/rate.p4 service_ns's byte count, step for step in bit<64> (each result wraps
    mod 2^64, as P4's unsigned arithmetic does); cell_overhead as the profile holds it (signed)."""
    q = ((wire * recip) & U64) >> 32
    if (wire - q * cell) & U64 >= cell:
        q += 1
    if wire > (q * cell) & U64:
        q += 1
    return (q * _p4_cell_link_bytes(cell, cell_overhead & 0xFFFF)) & U64


def _exact(wire: int, cell: int, cell_overhead: int) -> int:
    """Linux's packet_time_ns: ceil(wire / cell) cells of cell + cell_overhead bytes."""
    return -(-wire // cell) * (cell + cell_overhead)


@pytest.mark.parametrize("cell", CELLS)
def test_the_data_planes_division_is_exact_ceiling_division(cell: int) -> None:
    cell_overhead = 5
    recip = _down(rate="1Mbit", cell_size=cell, cell_overhead=cell_overhead).downlink.to_table_params()["cell_recip"]
    for wire in range(70_001):  # every frame + overhead a packet can have (and more)
        # The floor estimate never overshoots, so the first correction cannot wrap below 0.
        assert (wire * recip) >> 32 <= wire // cell
        assert _p4_link_bytes(wire, cell, cell_overhead, recip) == _exact(wire, cell, cell_overhead), (cell, wire)
    # Far beyond a frame, for any wire below 2^32 (a bit<32> length): the multiples of the cell and
    # their neighbours near the top, and a random sample.
    rng = random.Random(cell)
    top = (2**32 - 1) // cell * cell
    wires = [w for k in range(4) for w in (top - k * cell - 1, top - k * cell, top - k * cell + 1) if w < 2**32]
    wires += [2**32 - 1] + [rng.randrange(2**32) for _ in range(2000)]
    for wire in wires:
        assert _p4_link_bytes(wire, cell, cell_overhead, recip) == _exact(wire, cell, cell_overhead), (cell, wire)


@pytest.mark.parametrize("cell", [2, 3, 48, 53, 1500, 65535])
def test_a_negative_cell_overhead_takes_bytes_off_each_cell(cell: int) -> None:
    # The encoded param (two's complement) read back by the data plane's rule is the profile's
    # signed value: ceil(wire / cell) cells of cell + cell_overhead bytes, as Linux's packet_time_ns.
    # The lowest a profile takes: the cell keeps 1 byte, or -32768 (a cell above 32768 bytes keeps more).
    lowest = max(1 - cell, -32768)
    for cell_overhead in sorted({-1, -5, lowest} & set(range(lowest, 0))):
        down = _down(rate="1Mbit", cell_size=cell, cell_overhead=cell_overhead).downlink
        params = down.to_table_params()
        assert _p4_cell_link_bytes(cell, params["cell_overhead_bytes"]) == cell + cell_overhead >= 1
        for wire in (0, 1, cell - 1, cell, cell + 1, 1514, 3 * cell + 7):
            want = _exact(wire, cell, cell_overhead)
            assert _p4_link_bytes(wire, cell, cell_overhead, params["cell_recip"]) == want, (cell, cell_overhead, wire)
    # A pair the profile refuses but a switch may hold: the data plane counts max(0, ...) bytes a cell.
    if cell <= 32768:
        assert _p4_cell_link_bytes(cell, 0x10000 - cell) == 0
    assert _p4_cell_link_bytes(cell, 0x8000) == max(0, cell - 32768)


def test_the_atm_example_of_the_docs() -> None:
    # docs/profiles.md: a 100-byte frame on ATM cells is 3 cells, 159 bytes of link time.
    recip = _cells(_down(**ATM).downlink)["cell_recip"]
    assert _p4_link_bytes(100, 48, 5, recip) == _exact(100, 48, 5) == 159
    assert _p4_link_bytes(1500, 48, 5, recip) == 1696
