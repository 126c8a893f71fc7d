"""PIE's settings (RFC 8033 with Linux sch_pie's arithmetic): defaults, ranges and the encoding of
its two gains.

A profile gives PIE's alpha and beta as decimals in Hz (probability per second of queue delay
error, per update), as RFC 8033 does; tc-pie(8) takes them as integers in sixteenths (`alpha 2` is
0.125 Hz, `beta 20` is 1.25 Hz). The data plane takes each as

    pie_alpha = floor(alpha * 2^56 / 10^9)

the probability (Q56, 2^56 = 1) added per nanosecond of delay error at each update, computed
exactly (Fraction, never a float): 0.125 -> 9007199, 1.25 -> 90071992. One step of the encoding
is 10^9 / 2^56 Hz (about 1.4e-8), so many decimals share an integer; `decode_gain` reads an
integer back as the decimal with the fewest significant digits that encodes to it (as percents,
rates and the on/off link's means are read back), so encode(decode(t)) == t, and a gain written
with no more digits than the step allows reads back as written.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any

from .fields import annotate, duration
from .units import Duration, UnitError, parse_decimal, quote, simplest_decimal

__all__ = ["PIE_GAIN_ONE", "PIE_DEFAULT_TARGET", "PIE_DEFAULT_TUPDATE", "PIE_DEFAULT_ALPHA", "PIE_DEFAULT_BETA",
           "PIE_DEFAULT_MAX_BURST", "PIE_ALPHA_MIN", "PIE_GAIN_MAX", "PIE_SIXTEENTHS_MAX", "PieUpdate", "PieBurst",
           "PieAlpha", "PieBeta", "encode_gain", "decode_gain", "gain_text", "gain_from_sixteenths", "ALPHA_ZERO_REASON"]

PIE_GAIN_ONE = 2**56  # the data plane's probability 1 (Q56)
_NS_PER_S = 10**9

# Linux's `tc qdisc add ... pie` defaults (sch_pie.c pie_params_init; alpha 2 and beta 20 sixteenths).
PIE_DEFAULT_TARGET = Duration(15_000_000)
PIE_DEFAULT_TUPDATE = Duration(15_000_000)
PIE_DEFAULT_ALPHA = Decimal("0.125")
PIE_DEFAULT_BETA = Decimal("1.25")
PIE_DEFAULT_MAX_BURST = Duration(150_000_000)

# The gains' range: 1/64 .. 2 Hz for alpha (tc's 1..32 sixteenths, and finer below), 0 .. 2 for beta.
PIE_ALPHA_MIN = Decimal("0.015625")  # 1/64
PIE_GAIN_MAX = Decimal(2)
PIE_SIXTEENTHS_MAX = 32  # tc-pie: alpha and beta 0..32 ("Illegal \"alpha\"" above)
ALPHA_ZERO_REASON = ("with alpha 0 an idle queue brings the probability down only by Linux's decay of 1/64 per "
                     "update, which stalls a few units above 0: it never settles (and the update clock never stops)")

# The update period: 1 ms .. 1 s (Linux: at least a jiffy; pie_tupdate_ns is 32-bit ns). The burst
# allowance: any 32-bit ns (0 = none).
PieUpdate = duration(10**6, 10**9)
PieBurst = duration(0, 2**32 - 1)


def encode_gain(value: Decimal) -> int:
    """pie_alpha / pie_beta for a gain in Hz: floor(value * 2^56 / 10^9), exact."""
    return (Fraction(value) * PIE_GAIN_ONE) // _NS_PER_S


def decode_gain(raw: int, lo: Decimal = Decimal(0), hi: Decimal = PIE_GAIN_MAX) -> Decimal:
    """The decimal in Hz with the fewest significant digits (ties: nearest the middle of its interval) whose
    encoding is `raw`, kept inside [lo, hi] where the integer's interval reaches into it (so a
    value a valid profile wrote reads back valid); an integer outside the range's image reads back
    as the simplest decimal of its own interval (the profile then names it out of range)."""
    if raw < 0:
        raise ValueError(f"gain {raw} is negative")
    # encode_gain(x) == raw  <=>  raw * 10^9 / 2^56 <= x < (raw + 1) * 10^9 / 2^56
    start = Fraction(raw * _NS_PER_S, PIE_GAIN_ONE)
    end = Fraction((raw + 1) * _NS_PER_S, PIE_GAIN_ONE)
    low, high, high_closed = max(start, Fraction(lo)), min(end, Fraction(hi)), Fraction(hi) < end
    if not (low < high or (low == high and high_closed)):  # no valid value encodes to it
        low, high, high_closed = start, end, False
    value = simplest_decimal(low, high, lo_closed=True, hi_closed=high_closed, near=(low + high) / 2)
    return Decimal(gain_text(value))  # 0 rather than 0E+2


def gain_from_sixteenths(n: int) -> Decimal:
    """tc-pie's integer alpha/beta (sixteenths of a Hz) as the profile's decimal: 2 -> 0.125."""
    return Decimal(n) / 16


def gain_text(value: Decimal) -> str:
    """A gain (or any decimal) without exponent or trailing zeros, every digit kept (normalize() would
    round to the context's 28): 1.250 -> "1.25", 2E+0 -> "2"."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _gain(lo: Decimal, hi: Decimal, what: str, zero_reason: str | None = None) -> Any:
    """A gain in Hz in [lo, hi] (0 refused with `zero_reason` when given): a YAML number or a
    numeric string, optionally with "Hz"; written back as a YAML number (exact: a decimal a float
    would not hold is written as a string)."""
    allowed = f"{gain_text(lo)}..{gain_text(hi)} (Hz; tc-pie's {what} N is N/16)"

    def validate(raw: Any) -> Decimal:
        text = raw
        if isinstance(raw, str) and raw.strip().lower().endswith("hz"):
            text = raw.strip()[:-2]
        try:
            value = parse_decimal(text)
        except UnitError:
            raise ValueError(f"{quote(raw)} is not a number (Hz); allowed {allowed}") from None
        if value == 0 and zero_reason:
            raise ValueError(f"0 is refused: {zero_reason}; allowed {allowed}")
        if not lo <= value <= hi:
            raise ValueError(f"{gain_text(value)} out of range {allowed}")
        return Decimal(gain_text(value))

    def serialize(value: Decimal) -> Any:
        if value == value.to_integral_value():
            return int(value)
        as_float = float(value)
        return as_float if Decimal(repr(as_float)) == value else gain_text(value)

    return Annotated[Decimal, *annotate(validate, serialize,
                                      {"type": "number", "description": f"PIE {what} in Hz, {allowed}"})]


PieAlpha = _gain(PIE_ALPHA_MIN, PIE_GAIN_MAX, "alpha", ALPHA_ZERO_REASON)
PieBeta = _gain(Decimal(0), PIE_GAIN_MAX, "beta")
