"""P4Runtime byte strings: canonical encoding, widths, textual values, errors with status codes."""

from __future__ import annotations

import grpc
import pytest

from p4netem.p4rt import P4RuntimeError, decode, encode, to_int
from p4netem.p4rt.encoding import format_ipv4, format_mac, mask_of_prefix


@pytest.mark.parametrize(
    ("value", "width", "expected"),
    [
        (0, 9, b"\x00"),  # zero is one zero byte
        (1, 9, b"\x01"),
        (0x1FF, 9, b"\x01\xff"),
        (0x100, 16, b"\x01\x00"),  # leading zero bytes removed, inner ones kept
        (0xFFFFFFFF, 32, b"\xff\xff\xff\xff"),
        ("10.0.0.1", 32, b"\x0a\x00\x00\x01"),
        ("0.0.0.7", 32, b"\x07"),
        ("02:00:00:00:00:01", 48, b"\x02\x00\x00\x00\x00\x01"),
        ("00:00:00:00:00:ff", 48, b"\xff"),
        ("::1", 128, b"\x01"),
        ("0x2a", 8, b"\x2a"),
        ("42", 8, b"\x2a"),
        (b"\x00\x00\x05", 16, b"\x05"),
        (True, 1, b"\x01"),
    ],
)
def test_canonical_encoding(value, width, expected) -> None:
    assert encode(value, width) == expected
    assert decode(expected) == to_int(value)


def test_too_wide_is_out_of_range() -> None:
    with pytest.raises(P4RuntimeError) as err:
        encode(512, 9, "port")
    assert err.value.code == grpc.StatusCode.OUT_OF_RANGE
    assert "port" in err.value.message and "9 bits" in err.value.message


def test_negative_and_garbage_values() -> None:
    with pytest.raises(P4RuntimeError) as neg:
        encode(-1, 8)
    assert neg.value.code == grpc.StatusCode.OUT_OF_RANGE
    with pytest.raises(P4RuntimeError) as bad:
        encode("ten", 8)
    assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(P4RuntimeError):
        encode(1.5, 8)  # type: ignore[arg-type]


def test_decode_accepts_padded_strings() -> None:
    assert decode(b"\x00\x00\x01\x02") == 0x102


def test_prefix_masks_and_formatting() -> None:
    assert mask_of_prefix(24, 32) == 0xFFFFFF00
    assert mask_of_prefix(0, 32) == 0
    assert mask_of_prefix(48, 48) == (1 << 48) - 1
    with pytest.raises(P4RuntimeError):
        mask_of_prefix(33, 32)
    assert format_mac(0x020000000001) == "02:00:00:00:00:01"
    assert format_ipv4(0x0A000002) == "10.0.0.2"
