"""The on/off link of a profile direction (Mahimahi's `mm-onoff`) and its two table params.

The link alternates between on and off, for exponentially distributed periods of mean `mean_on`
and `mean_off`: a two-state Markov chain in continuous time. The data plane samples it at each
of the direction's packets (contract stage 3, p4src/include/onoff.p4): it starts on at the
direction's first packet, and a packet that finds it off is dropped (reason `link_off`). The
chain is described to the data plane by two numbers:

  onoff_on_prob  pi = mean_on / (mean_on + mean_off), the share of time on, in Q32:
                 round_half_up(mean_on * 2^32 / (mean_on + mean_off)), clamped to 1..2^32-1.
  onoff_recip    2^64 / (tau ln 2), tau = mean_on * mean_off / (mean_on + mean_off) ns the
                 chain's relaxation time (P(on) after dt relaxes to pi as e^(-dt/tau)), rounded
                 to the nearest integer (computed exactly, ln 2 to 60 digits), clamped to
                 1..2^64-1; 0 = no on/off link.

Read back: tau = 2^64 / (recip ln 2), mean_on = tau / (1 - pi), mean_off = tau / pi. The two
params hold less than the two means (32 bits for pi, about 2^64 / (tau ln 2) steps for tau), so
many pairs of means share an encoding; `decode` returns the simplest pair (fewest significant
digits, as percents and rates are read back) that encodes exactly to the params, so
encode(decode(t)) == t, and a pair written with few enough digits reads back as written.

Validation keeps the encoding inside its clamps: each mean in 1us..7 days, and neither more than
2^32 times the other (past that the share of time on or off is below the 2^-32 step of pi).
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any, Iterator, Mapping

from pydantic import BaseModel, ConfigDict, model_validator

from .errors import KNOWN_FIELDS, FieldProblems, Problem
from .fields import duration
from .units import Duration, quote, simplest_decimal

__all__ = ["OnOff", "ONOFF_MIN_NS", "ONOFF_MAX_NS", "ONOFF_MAX_RATIO", "encode_onoff", "decode_onoff"]

ONOFF_MIN_NS = 1_000  # 1 us
ONOFF_MAX_NS = 7 * 86_400 * 10**9  # 7 days
# The longer mean at most this many times the shorter: onoff_on_prob then stays in 1..2^32-1.
ONOFF_MAX_RATIO = 2**32
OnOffTime = duration(ONOFF_MIN_NS, ONOFF_MAX_NS)

_Q32 = 2**32
_Q64 = 2**64
# ln 2 to 60 digits: onoff_recip is the exact value rounded (a float's 53 bits would be a few units off
# where it passes 2^53, for tau below 3us).
_LN2 = Fraction(decimal.Context(prec=60).ln(Decimal(2)))
_K = _Q64 / _LN2  # onoff_recip = round(K (1/mean_on + 1/mean_off))
_HALF = Fraction(1, 2)


class OnOff(BaseModel):
    """Mahimahi's on/off link (`mm-onoff uplink|downlink MEAN_ON MEAN_OFF`): the direction's link
    alternates between on and off, for exponentially distributed periods of mean `mean_on` and
    `mean_off`. It starts on at the direction's first packet (a profile id's first use: a profile
    switch starts a new chain). While it is off every packet is dropped, reason `link_off`, never
    marked CE (whatever `loss_ecn` says); the loss models (`loss`, `gilbert_elliott`,
    `loss_state`) come after it and do not see a packet it dropped. It combines with every other
    setting. Each mean is 1us..7 days, and neither may be more than 2^32 times the other."""

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    mean_on: OnOffTime
    mean_off: OnOffTime

    @model_validator(mode="before")
    @classmethod
    def _block(cls, data: Any) -> Any:
        if isinstance(data, (Mapping, OnOff)):
            return data
        raise ValueError(f"{quote(data)} is not an onoff block ({{mean_on, mean_off}}, two durations)")

    @model_validator(mode="after")
    def _ratio(self) -> "OnOff":
        problem = _ratio_problem(int(self.mean_on), int(self.mean_off))
        if problem:
            raise FieldProblems([problem])
        return self

    @property
    def off_share(self) -> float:
        """The long-run share of time the link is off (and of packets it drops), 0..1."""
        return int(self.mean_off) / (int(self.mean_on) + int(self.mean_off))


def _ratio_problem(on: int, off: int) -> Problem | None:
    if on > ONOFF_MAX_RATIO * off:
        return Problem("mean_on", f"{Duration(on)} is more than 2^32 times mean_off {Duration(off)}: the share of "
                                  "time off is below the 2^-32 step of onoff_on_prob (leave onoff out for a link "
                                  "that is always on)")
    if off > ONOFF_MAX_RATIO * on:
        return Problem("mean_off", f"{Duration(off)} is more than 2^32 times mean_on {Duration(on)}: the share of "
                                   "time on is below the 2^-32 step of onoff_on_prob (for a link that is never on, "
                                   "use loss: 100%)")
    return None


def encode_onoff(on: int, off: int) -> tuple[int, int]:
    """(onoff_on_prob, onoff_recip) for mean_on `on` and mean_off `off` ns (both above 0)."""
    total = on + off
    on_prob = min(max((2 * on * _Q32 + total) // (2 * total), 1), _Q32 - 1)
    recip = min(max(math.floor(_K * Fraction(total, on * off) + _HALF), 1), _Q64 - 1)
    return on_prob, recip


def decode_onoff(on_prob: int, recip: int) -> tuple[Duration, Duration]:
    """(mean_on, mean_off) for the params, onoff_recip non-zero: of the pairs of valid means that
    encode to exactly these params, the one with the fewest significant digits in all (then the
    nearest to the exact inverse); where none does (params no profile writes), the exact inverse
    in whole nanoseconds. Raises ValueError for onoff_on_prob 0 (a link on for no share of the
    time: no mean_off is long enough)."""
    if not on_prob:
        raise ValueError("0 with onoff_recip set: the link would be on for no share of the time (no mean_off is "
                         "long enough; a profile writes 1 or more)")
    pi = Fraction(on_prob, _Q32)
    tau = _K / recip
    estimate = {"on": tau / (1 - pi), "off": tau / pi}
    found = set(_candidates(on_prob, recip, estimate))
    if not found:
        return Duration(round(estimate["on"])), Duration(round(estimate["off"]))
    on, off = min(found, key=lambda pair: (_digits(pair[0]) + _digits(pair[1]),
                                           abs(pair[0] - estimate["on"]) + abs(pair[1] - estimate["off"])))
    return Duration(on), Duration(off)


def _digits(ns: int) -> int:
    return len(str(ns).rstrip("0"))


def _candidates(on_prob: int, recip: int, estimate: Mapping[str, Fraction]) -> Iterator[tuple[int, int]]:
    """Valid pairs that encode to (on_prob, recip): for each power of ten, one mean the multiple
    of it nearest its exact inverse (or a step either side), the other the simplest value its
    interval allows given that one."""
    for exponent in range(len(str(ONOFF_MAX_NS)), -1, -1):
        step = 10**exponent
        for fixed in ("on", "off"):
            near = round(estimate[fixed] / step)
            for a in (near * step, (near - 1) * step, (near + 1) * step):
                if not ONOFF_MIN_NS <= a <= ONOFF_MAX_NS:
                    continue
                for b in _other_means(fixed, a, on_prob, recip, estimate):
                    pair = (a, b) if fixed == "on" else (b, a)
                    if _ratio_problem(*pair) is None and encode_onoff(*pair) == (on_prob, recip):
                        yield pair
                        break


def _other_means(fixed: str, a: int, on_prob: int, recip: int, estimate: Mapping[str, Fraction]) -> Iterator[int]:
    """Whole-ns values of the other mean that may encode to the params with `fixed` = a: the
    simplest in the interval the two params allow, then the ones nearest the exact inverse and at
    the interval's ends."""
    # onoff_on_prob: P - 1/2 <= 2^32 on / (on + off) < P + 1/2.
    share_lo, share_hi = (on_prob - _HALF) / _Q32, (on_prob + _HALF) / _Q32
    if fixed == "on":  # off = on (1 - share) / share, falling with the share
        lo, hi = a * (1 - share_hi) / share_hi, a * (1 - share_lo) / share_lo
    else:  # on = off share / (1 - share), rising with it
        lo, hi = a * share_lo / (1 - share_lo), a * share_hi / (1 - share_hi)
    # onoff_recip: R - 1/2 <= K (1/a + 1/b) < R + 1/2.
    inv_lo, inv_hi = (recip - _HALF) / _K - Fraction(1, a), (recip + _HALF) / _K - Fraction(1, a)
    if inv_hi <= 0:
        return
    lo = max(lo, 1 / inv_hi, Fraction(ONOFF_MIN_NS))
    if inv_lo > 0:
        hi = min(hi, 1 / inv_lo)
    hi = min(hi, Fraction(ONOFF_MAX_NS))
    if lo > hi:
        return
    other = "off" if fixed == "on" else "on"
    simplest = simplest_decimal(lo, hi, lo_closed=True, hi_closed=True, near=estimate[other])
    if simplest == simplest.to_integral_value():
        yield int(simplest)
    exact = 1 / (recip / _K - Fraction(1, a)) if recip / _K > Fraction(1, a) else estimate[other]
    for b in (round(exact), math.ceil(lo), math.floor(hi)):
        if lo <= b <= hi:
            yield b


KNOWN_FIELDS.update(OnOff.model_fields)
