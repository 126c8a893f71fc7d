"""Human units of impairment profiles: parsing, formatting and fixed-point quantisation.

Values are exact: numbers are parsed as decimals (never through binary floats), durations are
whole nanoseconds, rates are decimal bit/s, probabilities are decimal percents. Each quantity
type is a subclass of int or Decimal, so it compares and hashes like a number, and its str()
is the human form ("50ms", "3Mbit", "1%") that parses back to the same value.

Parse errors are `UnitError`s whose message says what the value is not, and never carries a
field path: the model layer adds the path and the allowed range.
"""

from __future__ import annotations

import decimal
import reprlib
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "UnitError",
    "Duration",
    "Rate",
    "Percent",
    "ByteSize",
    "quote",
    "parse_decimal",
    "simplest_decimal",
    "PROB_ONE",
    "PROB_MAX",
    "percent_to_prob",
    "fraction_to_prob",
    "prob_to_percent",
    "prob_resolution",
    "RATE_Q16_NUMERATOR",
    "rate_to_ns_per_byte_q16",
    "ns_per_byte_q16_to_rate",
]


class UnitError(ValueError):
    """A value that is not a valid quantity of its kind (syntax, sign, missing unit)."""


# Longest rendering of a raw input in an error message: a value can be a whole file's worth of
# text or a list of thousands of items, and an error must stay a readable line.
QUOTE_LIMIT = 80
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, QUOTE_LIMIT, QUOTE_LIMIT
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8


def quote(raw: object) -> str:
    """Render a raw input for an error message: strings in double quotes, the rest as is
    (containers without building the text of all their items), cut to QUOTE_LIMIT characters."""
    if isinstance(raw, str):
        text = '"' + raw[:QUOTE_LIMIT].replace('"', '\\"') + '"'
    elif isinstance(raw, (list, tuple, dict, set, frozenset)):
        text = _SHORT.repr(raw)
    else:
        text = str(raw)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 1] + "…"


# A decimal number with an optional unit suffix; spaces between them are allowed ("50 ms").
_NUMBER_UNIT = re.compile(
    r"^\s*(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-zµ%/]*)\s*$"
)

# Enough digits for any value we handle exactly (2^48 ns, 100 Gbit/s, 2^-32 probabilities).
_CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)


def parse_decimal(raw: object) -> Decimal:
    """An exact decimal from a number or a numeric string; floats via their shortest repr."""
    if isinstance(raw, bool):
        raise UnitError(f"{quote(raw)} is not a number")
    if isinstance(raw, Decimal):
        value = raw
    elif isinstance(raw, int):
        value = Decimal(raw)
    elif isinstance(raw, float):
        # repr() is the shortest string that round-trips, so YAML's 0.1 becomes exactly 0.1.
        value = Decimal(repr(raw))
    elif isinstance(raw, str):
        try:
            value = Decimal(raw.strip())
        except decimal.InvalidOperation:
            raise UnitError(f"{quote(raw)} is not a number") from None
    else:
        raise UnitError(f"{quote(raw)} is not a number")
    if not value.is_finite():
        raise UnitError(f"{quote(raw)} is not a finite number")
    return _not_huge(value, raw)


# Larger than any value a profile takes (2^48 ns is 2.8e14) by far, and small enough that scaling by
# a unit and printing in _CTX cannot overflow: 1e100000000 would end in a decimal.Overflow traceback.
_MAX_ADJUSTED_EXPONENT = 30


def is_huge(value: Decimal) -> bool:
    """Beyond any value a profile (or a netem or Mahimahi option) takes, by orders of magnitude:
    refuse it before it is scaled or printed (the converters name it their own way)."""
    return bool(value) and value.adjusted() > _MAX_ADJUSTED_EXPONENT


def _not_huge(value: Decimal, raw: object) -> Decimal:
    if is_huge(value):
        raise UnitError(f"{quote(raw)} is too large")
    return value


def _split(raw: str) -> tuple[Decimal, str] | None:
    match = _NUMBER_UNIT.match(raw)
    if match is None:
        return None
    return _not_huge(Decimal(match.group("num")), raw), match.group("unit")


def _plain(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros: 1.50 -> '1.5', 1E+2 -> '100'."""
    text = format(value.normalize(_CTX), "f")
    return "0" if text in ("-0", "") else text


def simplest_decimal(
    lo: Fraction, hi: Fraction, *, lo_closed: bool, hi_closed: bool, near: Fraction
) -> Decimal:
    """The decimal with the fewest significant digits in the interval (lo, hi), ties broken
    by closeness to `near`.

    Quantisation maps a whole interval of human values to one integer; reading the integer
    back, this picks the value a person would have written ("1.5Gbit" rather than
    "1500001430bit"), so a profile written with a few digits survives the round trip exactly.
    """
    if hi < lo or (hi == lo and not (lo_closed and hi_closed)):
        raise ValueError("empty interval")
    top = max(abs(lo), abs(hi))
    exponent = len(str(math.floor(top))) + 1  # a step larger than any value in the interval
    while True:
        step = Fraction(10) ** exponent
        k_min = math.ceil(lo / step)
        if not lo_closed and k_min * step == lo:
            k_min += 1
        k_max = math.floor(hi / step)
        if not hi_closed and k_max * step == hi:
            k_max -= 1
        if k_min <= k_max:
            k = min(max(round(near / step), k_min), k_max)
            return Decimal(k).scaleb(exponent, _CTX)
        exponent -= 1


class _Quantity:
    """Lets pydantic handle a bare quantity type (JSON-schema defaults, TypeAdapter): parse on
    input, human string on output. Model fields add ranges on top (fields.py)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # only when pydantic asks

        return core_schema.no_info_plain_validator_function(
            cls.parse, serialization=core_schema.plain_serializer_function_ser_schema(str))


class Duration(_Quantity, int):
    """A time in whole nanoseconds. Parses "50ms", "1.5s", "200us", "0"; str() -> "50ms"."""

    UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9,
             "h": 3600 * 10**9}
    _FORMAT_UNITS = (("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1))

    def __new__(cls, value: int = 0) -> "Duration":
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, raw: object) -> "Duration":
        if isinstance(raw, Duration):
            return raw
        units = "ns, us, ms, s, min, h"
        if isinstance(raw, (int, float, Decimal)) and not isinstance(raw, bool):
            # A bare number is ambiguous (tc reads microseconds, people mean milliseconds):
            # only zero, which means the same in every unit, is accepted without a unit.
            if parse_decimal(raw) == 0:
                return cls(0)
            raise UnitError(f"{quote(raw)} has no unit; write e.g. \"{raw}ms\" (units: {units})")
        if not isinstance(raw, str):
            raise UnitError(f"{quote(raw)} is not a duration (units: {units})")
        split = _split(raw)
        if split is None:
            raise UnitError(f"{quote(raw)} is not a duration (units: {units})")
        number, unit = split
        if unit == "":
            if number == 0:
                return cls(0)
            raise UnitError(f"{quote(raw)} has no unit (units: {units})")
        if unit not in cls.UNITS:
            raise UnitError(f"{quote(raw)} has an unknown unit \"{unit}\" (units: {units})")
        if number < 0:
            raise UnitError(f"{quote(raw)} is not a duration (negative)")
        ns = number * cls.UNITS[unit]
        if ns != ns.to_integral_value():
            raise UnitError(f"{quote(raw)} is not a whole number of nanoseconds")
        return cls(int(ns))

    def __str__(self) -> str:
        if self == 0:
            return "0s"
        for unit, scale in self._FORMAT_UNITS:
            if self >= scale:
                return _plain(Decimal(int(self)) / scale) + unit
        return f"{int(self)}ns"  # negative values never pass parse(); kept printable anyway

    def __repr__(self) -> str:
        return f"Duration({str(self)!r})"

    def __format__(self, spec: str) -> str:  # f-strings show the human form too
        return format(str(self), spec)


class ByteSize(_Quantity, int):
    """A size in bytes. Parses 1500, "1500B", "64KB" (1000), "64KiB" (1024); str() is exact."""

    UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "kib": 2**10, "mib": 2**20, "gib": 2**30}

    def __new__(cls, value: int = 0) -> "ByteSize":
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, raw: object) -> "ByteSize":
        if isinstance(raw, ByteSize):
            return raw
        units = "B, KB, MB, GB (x1000), KiB, MiB, GiB (x1024)"
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise UnitError(f"{quote(raw)} is not a size in bytes ({units})")
        if isinstance(raw, int):
            number, unit = Decimal(raw), "b"
        else:
            split = _split(raw)
            if split is None:
                raise UnitError(f"{quote(raw)} is not a size in bytes ({units})")
            number, unit = split[0], (split[1].lower() or "b")
        if unit not in cls.UNITS:
            raise UnitError(f"{quote(raw)} has an unknown unit (units: {units})")
        if number < 0:
            raise UnitError(f"{quote(raw)} is not a size (negative)")
        size = number * cls.UNITS[unit]
        if size != size.to_integral_value():
            raise UnitError(f"{quote(raw)} is not a whole number of bytes")
        return cls(int(size))

    def __str__(self) -> str:
        if self == 0:
            return "0B"
        for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10),
                            ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
            if self >= scale and self % scale == 0:
                return f"{int(self) // scale}{unit}"
        return f"{int(self)}B"

    def __repr__(self) -> str:
        return f"ByteSize({str(self)!r})"

    def __format__(self, spec: str) -> str:  # f-strings show the human form too
        return format(str(self), spec)


class Rate(_Quantity, Decimal):
    """A link rate in bit/s (SI prefixes: 1kbit = 1000 bit/s). 0 means unlimited.

    Parses "3Mbit", "60kbit", "1.544Mbit/s", "1Gbit", "unlimited". "bps" forms are refused:
    tc reads "Mbps" as megabytes per second, most people as megabits.
    """

    UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
    _FORMAT_UNITS = (("Gbit", 10**9), ("Mbit", 10**6), ("kbit", 10**3), ("bit", 1))

    def __new__(cls, value: object = 0) -> "Rate":
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, raw: object) -> "Rate":
        if isinstance(raw, Rate):
            return raw
        units = "bit, kbit, Mbit, Gbit (optionally /s), or \"unlimited\""
        if isinstance(raw, (int, float, Decimal)) and not isinstance(raw, bool):
            if parse_decimal(raw) == 0:
                return cls(0)
            raise UnitError(f"{quote(raw)} has no unit; write e.g. \"{raw}kbit\" (units: {units})")
        if not isinstance(raw, str):
            raise UnitError(f"{quote(raw)} is not a rate (units: {units})")
        if raw.strip().lower() == "unlimited":
            return cls(0)
        split = _split(raw)
        if split is None:
            raise UnitError(f"{quote(raw)} is not a rate (units: {units})")
        number, unit = split
        key = unit.lower()
        if key.endswith("/s"):
            key = key[:-2]
        if key.endswith("bps"):
            raise UnitError(f"{quote(raw)} is ambiguous (tc reads \"bps\" as bytes/s); "
                            f"write bit/kbit/Mbit/Gbit")
        if key == "":
            if number == 0:
                return cls(0)
            raise UnitError(f"{quote(raw)} has no unit; write e.g. \"{raw.strip()}kbit\" "
                            f"(units: {units})")
        if key not in cls.UNITS:
            raise UnitError(f"{quote(raw)} is not a rate (units: {units})")
        if number < 0:
            raise UnitError(f"{quote(raw)} is not a rate (negative)")
        return cls(_CTX.multiply(number, Decimal(cls.UNITS[key])))

    @property
    def unlimited(self) -> bool:
        return self == 0

    def __str__(self) -> str:
        if self == 0:
            return "unlimited"
        value = Decimal(self)
        for unit, scale in self._FORMAT_UNITS:
            if value >= scale:
                return _plain(_CTX.divide(value, Decimal(scale))) + unit
        return _plain(value) + "bit"

    def __repr__(self) -> str:
        return f"Rate({str(self)!r})"

    def __format__(self, spec: str) -> str:  # f-strings show the human form too
        return format(str(self), spec)


class Percent(_Quantity, Decimal):
    """A probability in percent. Parses "1%", "0.5 %", 1 (= 1%), 0.01 (= 0.01%); str() -> "1%".

    Convention: a bare number is a percent, never a fraction, so `loss: 1` and `loss: "1%"` mean
    the same thing.
    """

    def __new__(cls, value: object = 0) -> "Percent":
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, raw: object) -> "Percent":
        if isinstance(raw, Percent):
            return raw
        if isinstance(raw, str):
            text = raw.strip()
            if text.endswith("%"):
                text = text[:-1]
            try:
                value = parse_decimal(text)
            except UnitError:
                raise UnitError(f"{quote(raw)} is not a percentage") from None
        else:
            try:
                value = parse_decimal(raw)
            except UnitError:
                raise UnitError(f"{quote(raw)} is not a percentage") from None
        return cls(value)

    @property
    def fraction(self) -> Fraction:
        return Fraction(Decimal(self)) / 100

    def __str__(self) -> str:
        return _plain(Decimal(self)) + "%"

    def __repr__(self) -> str:
        return f"Percent({str(self)!r})"

    def __format__(self, spec: str) -> str:  # f-strings show the human form too
        return format(str(self), spec)


# ---- fixed-point encodings of the pipeline contract -------------------------------------------

PROB_ONE = 2**32  # bit<32> probabilities are fractions of 2^32
PROB_MAX = PROB_ONE - 1  # the contract treats 0xFFFFFFFF as "always"


def percent_to_prob(percent: Percent) -> int:
    """Quantise a percentage to the contract's bit<32> probability: round half up to the
    nearest 1/2^32, 100% (which would be 2^32) saturating to 0xFFFFFFFF ("always")."""
    return fraction_to_prob(Fraction(Decimal(percent)) / 100)


def fraction_to_prob(fraction: Fraction) -> int:
    """Quantise an exact probability in 0..1 like percent_to_prob."""
    return min(math.floor(fraction * PROB_ONE + Fraction(1, 2)), PROB_MAX)


def prob_to_percent(prob: int) -> Percent:
    """The shortest percentage that quantises to `prob` (exact inverse of percent_to_prob on
    its image)."""
    if not 0 <= prob <= PROB_MAX:
        raise ValueError(f"probability {prob} does not fit in 32 bits")
    # percent_to_prob(x) == prob  <=>  prob - 1/2 <= x * 2^32/100 < prob + 1/2  (and x <= 100)
    lo = (Fraction(prob) - Fraction(1, 2)) * 100 / PROB_ONE
    hi = (Fraction(prob) + Fraction(1, 2)) * 100 / PROB_ONE
    hi_closed = False
    if prob == PROB_MAX:  # everything from here up to 100% saturates to PROB_MAX
        hi, hi_closed = Fraction(100), True
    lo = max(lo, Fraction(0))
    return Percent(simplest_decimal(lo, hi, lo_closed=True, hi_closed=hi_closed,
                                    near=Fraction(prob) * 100 / PROB_ONE))


def prob_resolution() -> Percent:
    """The smallest non-zero probability the contract can express, in percent (about 2.3e-8%)."""
    return Percent(_CTX.divide(Decimal(100), Decimal(PROB_ONE)))


# ns per byte at rate r bit/s is 8e9 / r; the contract wants it times 65536, rounded.
RATE_Q16_NUMERATOR = 8 * 10**9 * 65536


def rate_to_ns_per_byte_q16(rate: Rate) -> int:
    """Quantise a rate to ns_per_byte_q16 = round(8e9 * 65536 / bit_per_s), half up; 0 keeps
    meaning unlimited."""
    if rate == 0:
        return 0
    return math.floor(Fraction(RATE_Q16_NUMERATOR) / Fraction(Decimal(rate)) + Fraction(1, 2))


def ns_per_byte_q16_to_rate(q16: int) -> Rate:
    """The shortest rate that quantises to `q16` (exact inverse of rate_to_ns_per_byte_q16 on
    its image)."""
    if q16 < 0:
        raise ValueError("negative ns_per_byte_q16")
    if q16 == 0:
        return Rate(0)
    k = Fraction(RATE_Q16_NUMERATOR)
    # round(K / r) == q  <=>  K/(q + 1/2) < r <= K/(q - 1/2)
    lo = k / (Fraction(q16) + Fraction(1, 2))
    if q16 == 1:
        # Every rate above K/1.5 rounds to 1: pick the simplest in a bounded interval.
        hi = k * 2
    else:
        hi = k / (Fraction(q16) - Fraction(1, 2))
    return Rate(simplest_decimal(lo, hi, lo_closed=False, hi_closed=True, near=k / q16))

