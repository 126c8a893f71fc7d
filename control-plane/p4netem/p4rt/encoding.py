"""Values <-> P4Runtime byte strings.

P4Runtime carries every bit<W> value as a big-endian byte string. We always send the canonical form
(spec "Bytestrings": most significant zero bytes removed, zero is a single zero byte) and accept any
width on the way back. Values may be given as ints, bytes, MAC strings ("aa:bb:cc:dd:ee:ff"), IPv4 or
IPv6 address strings, or integer strings ("42", "0x2a").
"""

from __future__ import annotations

import ipaddress
import re

import grpc

from .errors import P4RuntimeError

Value = int | bytes | str

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


def to_int(value: Value, bitwidth: int | None = None, what: str = "value") -> int:
    """The integer a value stands for; with `bitwidth`, checked to fit in that many bits."""
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, (bytes, bytearray)):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str):
        number = _parse_str(value.strip(), what)
    else:
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{what}: unsupported value type {type(value).__name__}")
    if number < 0:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{what}: negative value {number}")
    if bitwidth is not None and number >> bitwidth:
        raise P4RuntimeError(
            grpc.StatusCode.OUT_OF_RANGE, f"{what}: value {number:#x} does not fit in {bitwidth} bits"
        )
    return number


def _parse_str(text: str, what: str) -> int:
    if _MAC_RE.match(text):
        return int(re.sub("[:-]", "", text), 16)
    if "." in text or ":" in text:
        try:
            return int(ipaddress.ip_address(text))
        except ValueError:
            pass
    try:
        return int(text, 0)
    except ValueError:
        raise P4RuntimeError(
            grpc.StatusCode.INVALID_ARGUMENT, f"{what}: cannot read {text!r} as a number, MAC or IP address"
        ) from None


def encode(value: Value, bitwidth: int, what: str = "value") -> bytes:
    """Canonical P4Runtime byte string of `value` for a field of `bitwidth` bits."""
    number = to_int(value, bitwidth, what)
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    """Integer value of a P4Runtime byte string (any width, padded or canonical)."""
    return int.from_bytes(data, "big")


def mask_of_prefix(prefix_len: int, bitwidth: int) -> int:
    """The mask with the `prefix_len` most significant bits of a `bitwidth`-bit field set."""
    if not 0 <= prefix_len <= bitwidth:
        raise P4RuntimeError(
            grpc.StatusCode.OUT_OF_RANGE, f"prefix length {prefix_len} outside 0..{bitwidth}"
        )
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)


def format_mac(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def format_ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))
