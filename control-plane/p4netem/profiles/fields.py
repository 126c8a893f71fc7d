"""Pydantic field types for profile models: a unit parser plus the allowed range.

Each builder returns an `Annotated` type whose validator parses the human form, checks the
range and raises a ValueError naming the value and the range (the path is added by
errors.py), and whose serializer writes the human form back (str() of the quantity).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Callable

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from .units import (ByteSize, Duration, Percent, Rate, UnitError, parse_decimal,
                    percent_to_prob, prob_resolution, quote)

__all__ = ["duration", "rate", "percent", "byte_size", "integer", "decimal_number",
           "Delay48", "Probability", "PositiveProbability", "LinkRate", "Overhead16", "CellBytes16",
           "QueueBytes32", "QueuePackets32",
           "one_line", "flag", "annotate", "MAX_48", "MAX_32", "MAX_16", "MIN_S16", "MAX_S16"]

MAX_48 = 2**48 - 1
MAX_32 = 2**32 - 1
MAX_16 = 2**16 - 1
# A bit<16> the data plane reads as two's complement (the overheads, which netem lets be negative).
MIN_S16 = -(2**15)
MAX_S16 = 2**15 - 1


def annotate(validate: Callable[[Any], Any], serialize: Callable[[Any], Any],
           schema: dict) -> Any:
    return (PlainValidator(validate), PlainSerializer(serialize), WithJsonSchema(schema))


def duration(lo: int = 0, hi: int = MAX_48) -> Any:
    """A Duration in [lo, hi] nanoseconds."""
    allowed = f"{Duration(lo)}..{Duration(hi)}"

    def validate(raw: Any) -> Duration:
        try:
            value = Duration.parse(raw)
        except UnitError as exc:
            raise ValueError(f"{exc}; allowed {allowed}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} out of range {allowed}")
        return value

    return Annotated[Duration, *annotate(validate, str,
                                       {"type": "string", "description": f"duration {allowed}"})]


def rate(lo: Rate = Rate("1e3"), hi: Rate = Rate("1e11"), *, unlimited: bool = True) -> Any:
    """A Rate in [lo, hi] bit/s, or 0 ("unlimited") if allowed."""
    allowed = f"{lo}..{hi}" + (' or "unlimited"' if unlimited else "")

    def validate(raw: Any) -> Rate:
        try:
            value = Rate.parse(raw)
        except UnitError as exc:
            raise ValueError(f"{exc}; allowed {allowed}") from None
        if value == 0 and unlimited:
            return value
        if not lo <= value <= hi:
            raise ValueError(f"{value} out of range {allowed}")
        return value

    return Annotated[Rate, *annotate(validate, str,
                                   {"type": "string", "description": f"rate {allowed}"})]


def percent(*, positive: bool = False) -> Any:
    """A Percent in 0..100% that the contract's bit<32> probabilities can express: a non-zero
    value that would quantise to 0 (below about 2.3e-8%) is refused rather than dropped."""
    allowed = "0..100%" if not positive else "(0..100]%"
    resolution = f"{float(prob_resolution()):.3g}%"

    def validate(raw: Any) -> Percent:
        try:
            value = Percent.parse(raw)
        except UnitError as exc:
            raise ValueError(f"{exc}; allowed {allowed}") from None
        if not 0 <= value <= 100 or (positive and value == 0):
            raise ValueError(f"{value} out of range {allowed}")
        if value != 0 and percent_to_prob(value) == 0:
            raise ValueError(f"{value} is below the resolution of a bit<32> probability "
                             f"({resolution}) and would be 0")
        return value

    return Annotated[Percent, *annotate(validate, str,
                                      {"type": "string", "description": f"percent {allowed}"})]


def byte_size(lo: int = 0, hi: int = MAX_32, *, zero_word: str | None = None) -> Any:
    """A ByteSize in [lo, hi]; `zero_word` (e.g. "unlimited") is accepted for 0."""
    allowed = f"{ByteSize(lo)}..{ByteSize(hi)}" + (f" (0 = {zero_word})" if zero_word else "")

    def validate(raw: Any) -> ByteSize:
        if zero_word and isinstance(raw, str) and raw.strip().lower() == zero_word:
            return ByteSize(0)
        try:
            value = ByteSize.parse(raw)
        except UnitError as exc:
            raise ValueError(f"{exc}; allowed {allowed}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} out of range {allowed}")
        return value

    def serialize(value: ByteSize) -> str:
        return zero_word if (zero_word and value == 0) else str(value)

    return Annotated[ByteSize, *annotate(validate, serialize,
                                       {"type": "string", "description": f"bytes {allowed}"})]


def integer(lo: int, hi: int, what: str, *, zero_word: str | None = None) -> Any:
    """A plain integer count in [lo, hi] (YAML ints or digit strings; no bools, no fractions)."""
    allowed = f"{lo}..{hi}" + (f" (0 = {zero_word})" if zero_word else "")

    def validate(raw: Any) -> int:
        if zero_word and isinstance(raw, str) and raw.strip().lower() == zero_word:
            return 0
        if isinstance(raw, bool):
            raise ValueError(f"{quote(raw)} is not a number of {what}; allowed {allowed}")
        try:
            value = parse_decimal(raw)
        except UnitError:
            raise ValueError(f"{quote(raw)} is not a number of {what}; allowed {allowed}") from None
        if value != value.to_integral_value():
            raise ValueError(f"{quote(raw)} is not a whole number of {what}; allowed {allowed}")
        if not lo <= value <= hi:
            raise ValueError(f"{_plain_int(value)} out of range {allowed}")
        return int(value)

    def serialize(value: int) -> Any:
        return zero_word if (zero_word and value == 0) else value

    return Annotated[int, *annotate(validate, serialize,
                                  {"type": "integer", "description": f"{what} {allowed}"})]


def decimal_number(lo: Decimal, hi: Decimal, unit: str) -> Any:
    """A decimal quantity in [lo, hi] written as a number with an optional unit suffix."""
    allowed = f"{lo}..{hi} {unit}"

    def validate(raw: Any) -> Decimal:
        text = raw
        if isinstance(raw, str) and raw.strip().endswith(unit):
            text = raw.strip()[: -len(unit)]
        try:
            value = parse_decimal(text)
        except UnitError:
            raise ValueError(f"{quote(raw)} is not a number of {unit}; allowed {allowed}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} {unit} out of range {allowed}")
        return value

    def serialize(value: Decimal) -> str:
        return f"{format(value.normalize(), 'f')}{unit}"

    return Annotated[Decimal, *annotate(validate, serialize,
                                      {"type": "string", "description": f"{unit} {allowed}"})]


def one_line(what: str, *, required: bool = False, max_len: int = 500) -> Any:
    """A single line of text (names, titles, descriptions, citations)."""

    def validate(raw: Any) -> str:
        if not isinstance(raw, str):
            raise ValueError(f"{quote(raw)} is not a string ({what}: one line of text)")
        text = raw.strip()
        if "\n" in text or "\r" in text:
            raise ValueError("has a line break; must be one line")
        if required and not text:
            raise ValueError("must not be empty")
        if len(text) > max_len:
            raise ValueError(f"{len(text)} characters out of range 0..{max_len}")
        return text

    return Annotated[str, *annotate(validate, str, {"type": "string", "description": what})]


def _plain_int(value: Decimal) -> str:
    return format(value.normalize(), "f") if abs(value) < 10**30 else str(value)


# The contract's widths, as field types shared by the models.
Delay48 = duration(0, MAX_48)  # delay_ns / jitter_ns: bit<48> nanoseconds
Probability = percent()  # bit<32> fractions of 2^32
PositiveProbability = percent(positive=True)
LinkRate = rate()  # ns_per_byte_q16 bit<48>; 1kbit..100Gbit keeps it well inside
# overhead_bytes, cell_overhead_bytes: bit<16> read as signed (netem's PACKETOVERHEAD and CELLOVERHEAD
# are signed: a negative one strips a header or models header compression).
Overhead16 = integer(MIN_S16, MAX_S16, "bytes")
CellBytes16 = integer(0, MAX_16, "bytes")  # cell_bytes bit<16>
QueueBytes32 = byte_size(0, MAX_32, zero_word="unlimited")  # queue_limit_bytes bit<32>
QueuePackets32 = integer(0, MAX_32, "packets", zero_word="unlimited")  # queue_limit_pkts bit<32>


def flag(what: str) -> Any:
    """A YAML boolean (true/false); strings such as "yes" are refused, not guessed."""

    def validate(raw: Any) -> bool:
        if not isinstance(raw, bool):
            raise ValueError(f"{quote(raw)} is not true or false ({what})")
        return raw

    return Annotated[bool, *annotate(validate, bool, {"type": "boolean", "description": what})]
