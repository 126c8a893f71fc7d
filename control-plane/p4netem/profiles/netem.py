"""netem's command-line syntax to a p4netem Profile: bring `tc qdisc ... netem OPTIONS` along.

    profile, warnings = profile_from_netem("delay 100ms 10ms distribution normal loss 1% rate 1mbit")
    profile, warnings = profile_from_netem(uplink="rate 400kbit", downlink="delay 50ms rate 3mbit")

The options are read the way tc(8) reads them (iproute2's tc/q_netem.c and tc_util.c): keywords
may be abbreviated to any prefix, tried in tc's order (`d` is delay, `di` distribution); a bare
time is microseconds (slot's: nanoseconds, tc's get_time64); delay and jitter are tc's get_ticks
(whole microseconds, no ns, at most 274877906us); `limit` is a size (`1k` is 1024 packets); a value
is read after an option only when it starts with a digit (`-` too for rate's overheads), as tc's
NEXT_IS_NUMBER (`delay 10ms .5ms` is refused, as tc refuses it); a bare rate is bit/s and `bps` means
BYTES per second (`kbps` = 8000 bit/s, `KiBps` = 8192); a percentage may omit the `%`; a leading
`tc qdisc add dev X root netem` is skipped. What each option becomes, and where p4netem differs,
is in docs/profiles.md ("From netem"). netem's CORRELATION after delay, loss, duplicate, corrupt and reorder, and
`gap`, become the profile's `correlation` block and `reorder.gap` (the switch runs netem's
correlated generator); netem's `ecn` (mark instead of losing) becomes `loss_ecn` (an `ecn` among
codel's, red's or pie's options is theirs: `aqm.ecn`); `rate`'s CELLSIZE and CELLOVERHEAD become
`cell_size` and `cell_overhead` (the link time counts cells, as netem's packet_time_ns);
PACKETOVERHEAD and CELLOVERHEAD may be negative, as in netem (-32768..32767: a negative overhead
strips a header, e.g. -14 for Ethernet's; a frame shorter than -PACKETOVERHEAD takes no link time,
where Linux's u64 sum would wrap). An option the pipeline does not have (seed) is an error that
names the token and says what is allowed, and so is a CELLOVERHEAD without a CELLSIZE (netem would
ignore it); a value out of p4netem's range (an overhead outside -32768..32767, a cell left with
fewer than one byte by its CELLOVERHEAD) is named by profile field with the range. A profile that
silently did less than the netem command would be worse than none. One netem qdisc shapes one
direction: the same options go to both directions unless `uplink`/`downlink` give a direction its
own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .distribution import DistTable, find_netem_dist, load_dist
from .errors import Problem, ProfileError
from .link import red_wlog_for_burst
from .pie import PIE_SIXTEENTHS_MAX, gain_from_sixteenths, gain_text
from .profile import Profile
from .units import is_huge, quote

__all__ = ["NetemLink", "NetemSetup", "parse_netem", "profile_from_netem", "netem_setup", "NETEM_DEFAULT_LIMIT"]

# netem's queue limit when `limit` is not given (tc/q_netem.c: opt.limit = 1000).
NETEM_DEFAULT_LIMIT = 1000

# tc's keyword order: `matches()` accepts any prefix, and the first keyword it fits wins.
_KEYWORDS = ("limit", "latency", "delay", "loss", "drop", "ecn", "reorder", "corrupt", "gap",
             "duplicate", "distribution", "rate", "slot", "seed", "codel", "red", "pie")
_AQM_KEYWORDS = ("codel", "red", "pie")
# Keywords taken only whole: `p`/`pi` would otherwise be pie (slot's `packets` may be abbreviated to them).
_WHOLE_KEYWORDS = ("pie",)
# `codel [target TIME] [interval TIME] [ecn|noecn]`: tc's codel qdisc options (tc-codel(8)), which a
# p4netem profile puts on the rate queue (netem itself has no AQM: the two would be stacked qdiscs).
_CODEL_OPTIONS = ("target", "interval", "ecn", "noecn")
# `red [limit BYTES] [min BYTES] [max BYTES] [avpkt BYTES] [burst PACKETS] [probability P]
# [bandwidth RATE] [ecn|noecn] [gentle]`: tc-red(8)'s options (gentle is p4netem's: Linux's RED has
# none), on the rate queue as codel's are; red's limit is the rate queue's byte limit.
_RED_OPTIONS = ("limit", "min", "max", "avpkt", "burst", "probability", "bandwidth", "ecn", "noecn",
                "gentle", "harddrop", "adaptive", "nodrop")
# `pie [limit PACKETS] [target TIME] [tupdate TIME] [alpha INT] [beta INT] [ecn|noecn] [bytemode|nobytemode]
# [dq_rate_estimator|no_dq_rate_estimator]`: tc-pie(8)'s options, on the rate queue as codel's are; pie's
# limit is the rate queue's packet limit (netem's `limit`), alpha and beta are sixteenths of a Hz.
_PIE_OPTIONS = ("limit", "target", "tupdate", "alpha", "beta", "ecn", "noecn", "bytemode", "nobytemode",
                "dq_rate_estimator", "no_dq_rate_estimator")
# tc_util.c get_size: bytes, with k/m/g (1024-based) and kbit/mbit/gbit (bits) multiples.
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3,
               "gb": 1024**3, "kbit": 1024 // 8, "mbit": 1024**2 // 8, "gbit": 1024**3 // 8}
_ALLOWED = ("delay TIME [JITTER [CORR]] [distribution uniform|normal|pareto|paretonormal|FILE.dist], "
            "loss [random] PERCENT [CORR], loss gemodel P [R [1-H [1-K]]], loss state P13 [P31 [P32 [P23 [P14]]]], "
            "ecn (with a loss model), duplicate PERCENT [CORR], corrupt PERCENT [CORR], "
            "reorder PERCENT [CORR] [gap N], "
            "rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]], limit PACKETS, "
            "codel [target TIME] [interval TIME] [ecn], "
            "red [limit BYTES] [min BYTES] max BYTES [avpkt BYTES] [burst PACKETS] [probability P] [ecn] [gentle], "
            "pie [limit PACKETS] [target TIME] [tupdate TIME] [alpha 1..32] [beta 0..32] [ecn], "
            "slot MIN [MAX] [packets N] [bytes B], "
            "slot distribution uniform|normal|pareto|paretonormal|FILE.dist DELAY JITTER [packets N] [bytes B]")

# tc_util.c get_time64: case-insensitive units; a bare number is microseconds.
_TIME_UNITS = {"s": 10**9, "sec": 10**9, "secs": 10**9, "ms": 10**6, "msec": 10**6, "msecs": 10**6,
               "us": 10**3, "usec": 10**3, "usecs": 10**3, "ns": 1, "nsec": 1, "nsecs": 1, "": 10**3}
# tc_util.c get_rate64 (strcasecmp): bit and SI/IEC multiples; "Bps" forms are bytes/s.
_RATE_UNITS = {"": 1, "bit": 1, "kibit": 1024, "kbit": 1000, "mibit": 1024**2, "mbit": 10**6,
               "gibit": 1024**3, "gbit": 10**9, "tibit": 1024**4, "tbit": 10**12,
               "bps": 8, "kibps": 8 * 1024, "kbps": 8000, "mibps": 8 * 1024**2, "mbps": 8 * 10**6,
               "gibps": 8 * 1024**3, "gbps": 8 * 10**9, "tibps": 8 * 1024**4, "tbps": 8 * 10**12}
# Distributions p4netem's jitter has (netem's tables plus its table-less uniform).
_DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"^[+-]?0[xX][0-9a-fA-F]+")
_DIGITS = "0123456789"  # C's isdigit: what tc's NEXT_IS_NUMBER and `loss` look at
# netem's delay and jitter go to the kernel as 32-bit psched ticks of 64 ns (tc's get_ticks: get_time's
# whole microseconds times 15.625; tc_core_time2big refuses a time whose ticks need more than 32 bits).
NETEM_MAX_DELAY_US = (2**32 - 1) * 64 // 1000  # 274877906 us, about 274.88 s
# tc's get_size (netem's `limit` is read with it, as a size): an unsigned 32-bit result.
_U32_MAX = 2**32 - 1


@dataclass
class NetemLink:
    """One direction read from netem options: LinkParams fields (profile YAML form), the
    warnings worth printing, and the options as given."""

    fields: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    text: str = ""
    user_table: DistTable | None = None  # `distribution FILE`: the table for the switch's user slot


@dataclass
class NetemSetup:
    """What netem options ask of a switch: the profile, warnings worth printing, and the table for
    the switch's user slot when `distribution FILE` names one (None otherwise)."""

    profile: Profile
    warnings: list[str]
    user_table: DistTable | None = None


class _Tokens:
    """The option words with tc's lookahead (NEXT_IS_NUMBER: the next word starts a number)."""

    def __init__(self, words: list[str]):
        self.words = words
        self.i = 0

    def more(self) -> bool:
        return self.i < len(self.words)

    def take(self, what: str, after: str) -> str:
        if not self.more():
            raise _Bad(after, f"expects {what} after it")
        word = self.words[self.i]
        self.i += 1
        return word

    def next_is_number(self, signed: bool = False) -> bool:
        """tc's NEXT_IS_NUMBER (q_netem.c: the next word starts with a digit) or, `signed`,
        NEXT_IS_SIGNED_NUMBER (a digit or `-`). Only the first character counts: `.5ms` and `+5` are
        not numbers to tc, which then reads them as options (`delay 10ms .5ms`: What is ".5ms"?)."""
        if not self.more():
            return False
        first = self.words[self.i][:1]
        return first in _DIGITS or (signed and first == "-")


class _Bad(Exception):
    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.problem = Problem(where, message)


def _split(text: str | Sequence[str]) -> list[str]:
    try:
        words = shlex.split(text) if isinstance(text, str) else [str(w) for w in text]
    except ValueError as exc:  # an unbalanced quote
        raise ProfileError([Problem("", f"cannot split {quote(text)} into words: {exc}")], "netem options") from None
    # A pasted tc command: skip everything up to the qdisc kind.
    if words and words[0] in ("tc", "netem") and "netem" in words:
        words = words[words.index("netem") + 1:]
    return words


def _keyword(word: str) -> str | None:
    """tc's matches(): the first keyword that `word` is a prefix of (case-sensitive, as tc)."""
    for keyword in _KEYWORDS:
        if word and keyword.startswith(word) and (word == keyword or keyword not in _WHOLE_KEYWORDS):
            return keyword
    return None


def _number_unit(word: str, where: str, kind: str) -> tuple[Decimal, str]:
    match = _NUMBER.match(word)
    if match is None:
        raise _Bad(where, f"{quote(word)} is not {kind}")
    return _sane(Decimal(match.group(0)), word, where), word[match.end():]


def _sane(number: Decimal, word: str, where: str) -> Decimal:
    """A number whose exponent no netem value has (1e100000000) is refused here: scaled by its unit it
    would overflow Decimal's context (a traceback), and every value tc takes fits in 64 bits."""
    if is_huge(number):
        raise _Bad(where, f"{quote(word)} is too large")
    return number


def _time(word: str, where: str, bare_ns: bool = False) -> str:
    """A time as tc's get_time64 reads it (q_netem.c's slot times): s, ms, us or ns, a bare number
    nanoseconds (`slot 2us 1500` is refused by tc: 1500ns is below 2us). delay, jitter and codel's and
    pie's times are get_time's, which has no ns: _tick_time and _get_time."""
    number, unit = _number_unit(word, where, "a time")
    scale = 1 if bare_ns and not unit else _TIME_UNITS.get(unit.lower())
    if scale is None:
        raise _Bad(where, f"{quote(word)} has an unknown time unit {quote(unit)}; tc's units: s, ms, us, ns "
                          f"(also sec, msec, usec, nsec; a bare number is {'nano' if bare_ns else 'micro'}seconds)")
    if number < 0:
        raise _Bad(where, f"{quote(word)} is negative")
    ns = number * scale
    if ns != ns.to_integral_value():
        raise _Bad(where, f"{quote(word)} is not a whole number of nanoseconds")
    return f"{int(ns)}ns"


def _get_time(word: str, where: str, option: str, warnings: list[str], owner: str, ns_hint: str) -> int:
    """Whole microseconds of a time as tc's get_time reads it (tc_util.c): units s, ms and us (also sec,
    msec, usec and their plurals), case-insensitive, a bare number microseconds, and no ns (get_time64 has
    them, get_time not: tc fails with Illegal "OPTION"); the double goes to an unsigned int, which drops a
    fraction of a microsecond (a warning says so: that is what the profile takes, as `owner`'s)."""
    number, unit = _number_unit(word, where, "a time")
    if unit.lower() in ("ns", "nsec", "nsecs"):
        raise _Bad(where, f"{quote(word)}: tc refuses nanoseconds here (Illegal {quote(option)}): {ns_hint}")
    scale = _TIME_UNITS.get(unit.lower())
    if scale is None:
        raise _Bad(where, f"{quote(word)} has an unknown time unit {quote(unit)}; tc's units here: s, ms, us (also "
                          "sec, msec, usec; a bare number is microseconds)")
    if number < 0:
        raise _Bad(where, f"{quote(word)} is negative")
    exact = number * scale / 1000  # microseconds
    micros = int(exact)
    if micros != exact:
        warnings.append(f"{where} {word}: tc reads whole microseconds (it drops the fraction), so {owner} is "
                        f"{micros}us; that is what the profile takes")
    return micros


def _tick_time(word: str, where: str, warnings: list[str]) -> str:
    """netem's delay or jitter as tc reads it (q_netem.c get_ticks): get_time's whole microseconds (no ns:
    Illegal "latency"); a time whose 64 ns ticks overflow 32 bits (above NETEM_MAX_DELAY_US) is refused as
    tc refuses it ("Illegal ... time (too large)"; from 2^32 us on, tc's unsigned int wraps around and it
    would take a different, small time: refused here too)."""
    late: list[str] = []  # the fraction's warning, after the range check (a refused time warns of nothing)
    micros = _get_time(word, where, "latency", late, "netem's",
                       "netem's delay and jitter are whole microseconds (s, ms, us; a bare number is "
                       "microseconds); for a delay below 1us write the profile's YAML (e.g. delay: 500ns)")
    if micros > NETEM_MAX_DELAY_US:
        raise _Bad(where, f"{quote(word)} is above netem's largest delay and jitter, {NETEM_MAX_DELAY_US}us (about "
                          "274.88s: the kernel takes them as 32 bits of 64 ns ticks); tc refuses it too (\"Illegal "
                          "time (too large)\")")
    warnings += late
    return f"{micros * 1000}ns"


def _aqm_time(word: str, aqm: str, option: str, warnings: list[str]) -> str | None:
    """codel's target and interval, pie's target and tupdate: tc-codel and tc-pie read them with get_time
    (q_codel.c, q_pie.c), so whole microseconds and no ns, as tc 6.1 refuses `codel target 5000ns`
    (Illegal "target"); the refusal names the spelling tc takes (5000ns: 5us)."""
    where = f"{aqm} {option}"
    number, _ = _number_unit(word, where, "a time")  # the hint is read only when the unit is ns
    if number >= 0 and number == number.to_integral_value() and int(number) % 1000 == 0:
        hint = f"write {int(number) // 1000}us"
    else:  # no spelling of tc's says it; a target or interval of nanoseconds is in range for a profile
        hint = "it is not a whole number of them" + ("" if option == "tupdate" else
                                                     f"; the profile's YAML takes nanoseconds ({aqm}'s aqm.{option})")
    micros = _get_time(word, where, option, warnings, f"{aqm}'s",
                       f"tc-{aqm}'s times are whole microseconds (s, ms, us; a bare number is microseconds): {hint}")
    if micros == 0:
        return _tc_default(where, warnings)
    return f"{micros * 1000}ns"


# What the kernel uses for an option tc-codel/tc-pie leave out of their netlink message: both send
# an option only when it is not 0 (`if (target) addattr_l(...)`, q_codel.c and q_pie.c), so a 0 is
# the qdisc's default, not a 0 (`pie beta 0` is beta 20 sixteenths, not a beta of nothing).
_TC_DEFAULTS = {"codel target": "5ms", "codel interval": "100ms", "pie target": "15ms", "pie tupdate": "15ms",
                "pie alpha": "2 (0.125 Hz)", "pie beta": "20 (1.25 Hz)", "pie limit": "the rate queue's, netem's `limit` (1000 packets unless given)"}


def _tc_default(where: str, warnings: list[str]) -> None:
    """A 0 that tc does not send: the option is left out (the profile's default is the kernel's)."""
    warnings.append(f"{where} 0: tc sends no {where.split()[1]} when it is 0, so the kernel's default applies: "
                    f"{_TC_DEFAULTS[where]}, as here")
    return None


def _limit(raw: str, warnings: list[str]) -> int:
    """netem's `limit`, which q_netem.c reads with get_size: a number (decimal with a fraction or an
    exponent, or 0x hex) with tc's size units (k/kb = 1024, m/mb, g/gb; kbit/mbit/gbit an eighth of
    those; b = 1), case-insensitive, truncated to an unsigned 32-bit count of packets (`limit 1k` is
    1024 packets); a negative value or one of 2^32 or more is refused, as tc refuses it."""
    where = "limit"
    hexa = _HEX.match(raw)
    if hexa is not None:
        number, unit = Decimal(int(hexa.group(0), 16)), raw[hexa.end():]
    else:
        match = _NUMBER.match(raw)
        if match is None:
            raise _Bad(where, f"{quote(raw)} is not a number of packets")
        number, unit = _sane(Decimal(match.group(0)), raw, where), raw[match.end():]
    scale = _SIZE_UNITS.get(unit.lower())
    if scale is None:
        raise _Bad(where, f"{quote(raw)} has an unknown unit {quote(unit)}; tc reads limit as a size: a number of "
                          "packets, optionally with k, m or g (1024-based multiples: limit 1k is 1024 packets) or "
                          "kbit, mbit, gbit (an eighth of those)")
    value = number * scale
    if value < 0 or value > _U32_MAX:
        raise _Bad(where, f"{quote(raw)} out of range 0..{_U32_MAX} packets (tc refuses it too: Illegal \"limit\")")
    packets = int(value)
    if packets == 0:
        # netem takes it and then drops every packet (netem_enqueue: qlen >= limit); p4netem's queue
        # limit 0 is "unlimited", the opposite.
        raise _Bad(where, f"{quote(raw)} is 0 packets: netem then drops every packet, where a p4netem queue limit of 0 "
                          "is unlimited; for a link that loses everything give loss 100%")
    if packets != value or scale != 1:
        unit = "packet" if packets == 1 else "packets"
        warnings.append(f"limit {raw}: tc reads it as a size (k = 1024, fractions dropped): {packets} {unit}")
    return packets


def _percent(word: str, where: str) -> Decimal:
    text = word[:-1] if word.endswith("%") else word
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise _Bad(where, f"{quote(word)} is not a percentage (e.g. 1% or 1)")
    return _sane(Decimal(text), word, where)


def _rate(word: str, where: str) -> str:
    if word.endswith("%"):
        raise _Bad(where, f"{quote(word)}: a rate in percent of the device's speed has no meaning on a "
                          "p4netem rule; give bit/s (kbit, mbit, gbit) or bytes/s (kbps, mbps)")
    number, unit = _number_unit(word, where, "a rate")
    scale = _RATE_UNITS.get(unit.lower())
    if scale is None:
        raise _Bad(where, f"{quote(word)} has an unknown rate unit {quote(unit)}; tc's units: bit, kbit, mbit, "
                          "gbit, tbit, kibit..tibit (bits/s), bps, kbps, mbps, gbps, tbps, kibps..tibps "
                          "(BYTES/s); a bare number is bit/s")
    if number < 0:
        raise _Bad(where, f"{quote(word)} is negative")
    return f"{number * scale}bit"


def _packets(raw: str, where: str) -> int:
    """A count of packets (limit, gap): decimal or 0x hex (int base 0; unlike tc's strtol, 010 is refused)."""
    try:
        return int(raw, 0)
    except ValueError:
        raise _Bad(where, f"{quote(raw)} is not a number of packets") from None


def _correlation(tokens: _Tokens, out: dict[str, Any], field: str, where: str) -> None:
    """netem's optional CORRELATION after a value (tc's NEXT_IS_NUMBER: a percentage, `%`
    optional): the profile's correlation.<field>; 0 (netem's independent draws) is left out."""
    if tokens.next_is_number():
        value = _percent(tokens.take("a correlation", where), f"{where} correlation")
        if value != 0:
            out.setdefault("correlation", {})[field] = f"{value}%"


def parse_netem(text: str | Sequence[str]) -> NetemLink:
    """The LinkParams fields of one direction from netem options. Raises ProfileError naming
    each token that is unknown, malformed or not supported (all of them, not just the first)."""
    words = _split(text)
    tokens = _Tokens(words)
    out: dict[str, Any] = {}
    warnings: list[str] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    gap: int | None = None
    distribution: str | None = None
    user_table: DistTable | None = None
    limit: int | None = None
    red_limit: int | None = None
    pie_limit: int | None = None
    loss_model: str | None = None  # "random", "gemodel" or "state" once `loss` has been read
    while tokens.more():
        word = tokens.take("an option", "")
        keyword = _keyword(word)
        try:
            if keyword is None:
                if _NUMBER.match(word):
                    # A value tc's NEXT_IS_NUMBER did not take (`delay 10ms .5ms`: What is ".5ms"?).
                    raise _Bad("", f"{quote(word)} is not a netem option, and tc takes a value after an option "
                                   "only when it starts with a digit (or, for rate's overheads, with -); tc refuses "
                                   f"it too (What is {quote(word)}?): write {_digit_first(word)}")
                raise _Bad("", f"{quote(word)} is not a netem option p4netem knows; allowed: {_ALLOWED}")
            if keyword in ("latency", "delay"):
                keyword = "delay"
            if keyword == "drop":
                keyword = "loss"
            if keyword in seen and keyword not in ("ecn",):
                raise _Bad(keyword, f"given twice ({quote(seen[keyword])} and {quote(word)})")
            if keyword in _AQM_KEYWORDS and "aqm" in out:
                raise _Bad(keyword, f"is a second AQM after {out['aqm']['kind']}: the rate queue has one; give one "
                                    "of them")
            seen[keyword] = word
            if keyword == "limit":
                limit = _limit(tokens.take("a number of packets", "limit"), warnings)
            elif keyword == "delay":
                out["delay"] = _tick_time(tokens.take("a time", "delay"), "delay", warnings)
                if tokens.next_is_number():
                    out["jitter"] = _tick_time(tokens.take("a jitter", "delay"), "delay jitter", warnings)
                    _correlation(tokens, out, "delay", "delay")
            elif keyword == "loss":
                loss_model = _loss(tokens, out)
            elif keyword in ("duplicate", "corrupt"):
                out[keyword] = f"{_percent(tokens.take('a percentage', keyword), keyword)}%"
                _correlation(tokens, out, keyword, keyword)
            elif keyword == "reorder":
                out["reorder"] = {"probability": f"{_percent(tokens.take('a percentage', 'reorder'), 'reorder')}%"}
                _correlation(tokens, out, "reorder", "reorder")
            elif keyword == "gap":
                raw = tokens.take("a distance", "gap")
                gap = _packets(raw, "gap")
                if gap < 0:
                    raise _Bad("gap", f"{quote(raw)} is negative")
            elif keyword == "distribution":
                name = tokens.take("a distribution", "distribution")
                if name in _DISTRIBUTIONS:
                    distribution = name
                else:
                    table = _user_table(name)
                    if user_table is not None and user_table.values != table.values:
                        raise _Bad("distribution", f"{table.source} and the slot's {user_table.source} are "
                                                   "different tables; the switch has one user table")
                    user_table = table
                    distribution = "user"
            elif keyword == "rate":
                _rate_option(tokens, out)
            elif keyword == "ecn":
                pass  # netem's own (tc sets TCA_NETEM_ECN, once however often given): checked with the loss below
            elif keyword == "codel":
                out["aqm"] = _codel(tokens, warnings)
            elif keyword == "red":
                out["aqm"], red_limit = _red(tokens, warnings)
            elif keyword == "pie":
                out["aqm"], pie_limit = _pie(tokens, warnings)
            elif keyword == "slot":
                out["slot"], table = _slot(tokens)
                if table is not None:
                    if user_table is not None and user_table.values != table.values:
                        raise _Bad("slot distribution", f"{table.source} and the delay's {user_table.source} are "
                                                        "different tables; the switch has one user table")
                    user_table = table
            elif keyword == "seed":
                raise _Bad("seed", "a p4netem switch has one PRNG seed for everything "
                                   "(p4netem-switch --seed / p4netem switch --seed), not one per profile")
        except _Bad as bad:
            problems.append(bad.problem)
            # Skip the rest of this option's arguments: resynchronise on the next keyword, so that
            # every bad option is reported, each once.
            while tokens.more() and _keyword(tokens.words[tokens.i]) is None:
                tokens.i += 1
    if "rate" in out and Decimal(out["rate"][:-3]) == 0:
        # tc takes rate 0 and netem then shapes nothing (sch_netem's netem_enqueue adds a packet's link
        # time only `if (q->rate)`; its overheads and cells go with it): no rate, as the profile's
        # (whose own rate 0 is refused as out of range, and whose queue limit would need a rate).
        for key in ("rate", "overhead", "cell_size", "cell_overhead"):
            out.pop(key, None)
        warnings.append("rate 0: netem shapes nothing at rate 0 (no rate limit), so the profile has no rate")
    loss_corr = out.get("correlation", {}).get("loss")
    if loss_corr is not None and "loss" in out:
        warnings.append(f"loss {out['loss']} {loss_corr}: netem's loss correlation is deprecated (tc-netem(8): "
                        "\"bad behavior\"): its correlated numbers bunch around the middle, so a loss below 50 % is hit "
                        "less often than it says and one above more often (loss 1% 25% loses about 0.0003 %; "
                        "docs/profiles.md, "
                        "\"Correlation\"). p4netem does what netem does; for bursty loss at a given rate use "
                        "loss gemodel or loss state")
    # tc acts on a non-zero reorder probability only (reorder 0% is no reordering).
    reordering = "reorder" in out and Decimal(out["reorder"]["probability"][:-1]) != 0
    if gap:  # gap 0 is tc's "not given": gap 1 with a reorder probability
        if not reordering:
            problems.append(Problem("gap", f"{gap} without a reorder probability: tc refuses it too (\"gap "
                                           "specified without reorder probability\"); add reorder PERCENT"))
        else:
            out["reorder"]["gap"] = gap
    # tc checks the latency it sends, in whole microseconds (`delay 0ms 1ms` has none; the jitter does not
    # count; `delay 0.5us` is 0: _tick_time truncates as tc does).
    if reordering and int(out.get("delay", "0ns")[:-2]) == 0:
        problems.append(Problem("reorder", "reordering needs some delay (tc refuses it too): add delay TIME"))
    if "ecn" in seen:
        _ecn(seen, loss_model, out, problems)
    if distribution is not None:
        if "jitter" not in out:
            problems.append(Problem("distribution", "needs delay TIME JITTER (tc refuses it too)"))
        elif int(out["delay"][:-2]) == 0 or int(out["jitter"][:-2]) == 0:
            # q_netem.c: `dist_data && (opt.latency == 0 || opt.jitter == 0)`, in whole microseconds.
            zero = " and ".join(name for name in ("delay", "jitter") if int(out[name][:-2]) == 0)
            problems.append(Problem("distribution", f"needs a delay and a jitter above 0 (whole microseconds), and "
                                                    f"the {zero} {'are' if ' and ' in zero else 'is'} 0: tc refuses it "
                                                    "too (\"distribution specified but no latency and jitter "
                                                    "values\"); leave distribution out or give both"))
        else:
            out["jitter_distribution"] = distribution
    elif "jitter" in out:
        # netem without a distribution table draws jitter uniformly from +/- JITTER (the kernel's
        # tabledist without a table; the man page's "default is normal" is not what it does).
        out["jitter_distribution"] = "uniform"
    if "jitter" in out:
        # netem's tfifo sends packets in time-to-send order, so jitter reorders them.
        out.setdefault("reorder", {})["keep_order"] = False
    if "aqm" in out and "rate" not in out:
        problems.append(Problem(out["aqm"]["kind"], "needs rate RATE: an AQM manages the rate queue, which only "
                                                   "a rate has"))
    if pie_limit is not None:
        # pie's limit and netem's are the same thing here: the rate queue's packet limit.
        if limit is not None and limit != pie_limit:
            problems.append(Problem("pie limit", f"{pie_limit} and netem's limit {limit} would both be the rate "
                                                 "queue's packet limit; give one of them"))
        limit = pie_limit
    if "rate" in out:
        out["queue"] = {"packets": limit if limit is not None else NETEM_DEFAULT_LIMIT}
        if red_limit is not None:
            out["queue"]["bytes"] = red_limit
    elif limit is not None:
        warnings.append(f"limit {limit} without rate: p4netem's limit bounds the rate queue, so it has no "
                        "effect here; netem would drop beyond that many packets held in its delay")
    if problems:
        raise ProfileError(problems, f"netem {quote(' '.join(words))}")
    return NetemLink(out, warnings, " ".join(words), user_table)


def _slot(tokens: _Tokens) -> tuple[dict[str, Any], DistTable | None]:
    """`slot MIN [MAX] [packets N] [bytes B]` or `slot distribution TYPE DELAY JITTER [packets N]
    [bytes B]`, read as iproute2's q_netem.c reads them (MAX defaults to MIN and may not be below
    it; the distribution form needs a jitter above 0). Returns the slot block and the user table a
    `distribution FILE` names."""
    table = None
    if tokens.next_is_number():
        low = tokens.take("MIN_DELAY", "slot")
        slot: dict[str, Any] = {"min": _time(low, "slot min_delay", bare_ns=True)}
        if tokens.next_is_number():
            high = tokens.take("MAX_DELAY", "slot")
            slot["max"] = _time(high, "slot max_delay", bare_ns=True)
            if int(slot["max"][:-2]) < int(slot["min"][:-2]):
                raise _Bad("slot max_delay", f"{quote(high)} is below MIN_DELAY {quote(low)} (tc refuses it too)")
    else:
        word = tokens.take("MIN_DELAY or distribution", "slot")
        if word != "distribution":
            raise _Bad("slot", f"{quote(word)} is not a slot parameter; allowed: slot MIN_DELAY [MAX_DELAY] "
                               "or slot distribution TYPE DELAY JITTER, then [packets N] [bytes B]")
        name = tokens.take("a distribution", "slot distribution")
        if name in _DISTRIBUTIONS:
            dist = name
        else:
            table, dist = _user_table(name, "slot distribution"), "user"
        slot = {"distribution": dist,
                "delay": _time(tokens.take("DELAY", "slot distribution"), "slot delay", bare_ns=True),
                "jitter": _time(tokens.take("JITTER", "slot distribution"), "slot jitter", bare_ns=True)}
        if slot["jitter"] == "0ns":
            raise _Bad("slot jitter", "must be above 0 (tc: Non-positive jitter)")
    # tc reads `packets` and then `bytes`, each once, in that order (matches(): any prefix).
    for option in ("packets", "bytes"):
        if tokens.more() and tokens.words[tokens.i] and option.startswith(tokens.words[tokens.i]) \
                and _keyword(tokens.words[tokens.i]) is None:
            tokens.take(option, "slot")
            raw = tokens.take(f"a number of {option}", f"slot {option}")
            value = _packets(raw, "slot packets") if option == "packets" else _size(raw, "slot bytes")
            if value < 0:
                raise _Bad(f"slot {option}", f"{quote(raw)} is negative")
            slot[option] = value
    return slot, table


def _codel(tokens: _Tokens, warnings: list[str]) -> dict[str, Any]:
    """tc-codel's options after `codel` (its limit is netem's `limit`, the rate queue's)."""
    aqm: dict[str, Any] = {"kind": "codel"}
    while tokens.more() and tokens.words[tokens.i] in _CODEL_OPTIONS:
        option = tokens.take("a codel option", "codel")
        if option in ("target", "interval"):
            value = _aqm_time(tokens.take("a time", f"codel {option}"), "codel", option, warnings)
            if value is not None:
                aqm[option] = value
            else:
                aqm.pop(option, None)  # a later 0 is the default again, as tc's last word wins
        else:
            aqm["ecn"] = option == "ecn"
    return aqm


def _pie(tokens: _Tokens, warnings: list[str]) -> tuple[dict[str, Any], int | None]:
    """tc-pie's options after `pie` (iproute2 q_pie.c); those left out get tc-pie's defaults from the
    profile (target 15ms, tupdate 15ms, alpha 2 and beta 20 sixteenths). Returns the aqm
    block and pie's packet limit. bytemode and dq_rate_estimator are refused: p4netem's PIE knows
    each packet's exact queue delay and drops by packet."""
    aqm: dict[str, Any] = {"kind": "pie"}
    limit = None
    while tokens.more() and tokens.words[tokens.i] in _PIE_OPTIONS:
        option = tokens.take("a pie option", "pie")
        where = f"pie {option}"
        if option == "limit":
            limit = _packets(tokens.take("a number of packets", where), where)
            if limit < 0:
                raise _Bad(where, f"{limit} is negative")
            if limit == 0:
                limit = _tc_default(where, warnings)
        elif option in ("target", "tupdate", "alpha", "beta"):
            value = (_aqm_time(tokens.take("a time", where), "pie", option, warnings) if option in ("target", "tupdate")
                     else _sixteenths(tokens.take("an integer 0..32", where), option, warnings))
            if value is not None:
                aqm[option] = value
            else:
                aqm.pop(option, None)  # a later 0 is the default again, as tc's last word wins
        elif option in ("ecn", "noecn"):
            aqm["ecn"] = option == "ecn"
        elif option == "bytemode":
            raise _Bad(where, "is not supported: p4netem's PIE drops by packet (its probability is not scaled by "
                              "the packet's size); leave it out (nobytemode, the default)")
        elif option == "dq_rate_estimator":
            raise _Bad(where, "is not supported: p4netem's PIE knows each packet's exact queue delay (the wait "
                              "behind the bytes queued ahead of it), so it needs no drain-rate estimate; leave it "
                              "out (no_dq_rate_estimator, the default)")
        # nobytemode, no_dq_rate_estimator: tc-pie's defaults, which are what p4netem's PIE does.
    return aqm, limit


def _sixteenths(word: str, option: str, warnings: list[str]) -> str | None:
    """tc-pie's alpha/beta: an integer 0..32 in sixteenths of a Hz (get_unsigned: decimal or 0x hex),
    as the profile's decimal in Hz; None for 0, which tc does not send (the kernel's default)."""
    where = f"pie {option}"
    try:
        n = int(word, 0)
    except ValueError:
        raise _Bad(where, f"{quote(word)} is not an integer (tc-pie's {option} is 0..32 sixteenths of a Hz: "
                          f"{option} 2 is 0.125 Hz)") from None
    if not 0 <= n <= PIE_SIXTEENTHS_MAX:
        raise _Bad(where, f"{n} out of range 0..{PIE_SIXTEENTHS_MAX} (sixteenths of a Hz; tc refuses it too: "
                          f"Illegal \"{option}\")")
    if n == 0:
        return _tc_default(where, warnings)
    return gain_text(gain_from_sixteenths(n))


def _size(word: str, where: str) -> int:
    number, unit = _number_unit(word, where, "a size")
    scale = _SIZE_UNITS.get(unit.lower())
    if scale is None:
        raise _Bad(where, f"{quote(word)} has an unknown size unit {quote(unit)}; tc's units: b, k/kb, m/mb, "
                          "g/gb (1024-based bytes), kbit, mbit, gbit; a bare number is bytes")
    if number < 0 or number * scale != int(number * scale):
        raise _Bad(where, f"{quote(word)} is not a whole number of bytes")
    return int(number * scale)


def _red(tokens: _Tokens, warnings: list[str]) -> tuple[dict[str, Any], int | None]:
    """tc-red's options after `red`, with tc's defaults (iproute2 q_red.c): max = limit / 4,
    min = max / 3, avpkt 1000, probability 2 %, burst (2 min + max) / (3 avpkt) from which the
    weight follows (tc_red_eval_ewma). Returns the aqm block and red's byte limit."""
    got: dict[str, Any] = {}
    while tokens.more() and tokens.words[tokens.i] in _RED_OPTIONS:
        option = tokens.take("a red option", "red")
        where = f"red {option}"
        if option in ("limit", "min", "max", "avpkt"):
            got[option] = _size(tokens.take("a size", where), where)
        elif option == "burst":
            got["burst"] = _packets(tokens.take("a number of packets", where), where)
        elif option == "probability":
            word = tokens.take("a probability", where)
            if _NUMBER.fullmatch(word) is None or not 0 < Decimal(word) <= 1:
                raise _Bad(where, f"{quote(word)} is not a probability in (0, 1] (tc-red: 0.02 is 2 %)")
            got["probability"] = f"{Decimal(word) * 100}%"
        elif option == "bandwidth":
            _rate(tokens.take("a rate", where), where)
            warnings.append("red bandwidth: p4netem ages RED's average over idle time at the profile's rate, "
                            "so bandwidth is not needed; ignored")
        elif option in ("ecn", "noecn", "gentle"):
            got[option] = True
        else:
            raise _Bad(where, {"harddrop": "p4netem's RED with ecn marks above max as Linux's does without "
                                           "harddrop; harddrop is not supported",
                               "adaptive": "adaptive RED (max_p tuned every 500 ms) is not supported; give "
                                           "probability",
                               "nodrop": "nodrop is not supported: with ecn, non-ECN packets are dropped"}[option])
    aqm: dict[str, Any] = {"kind": "red", "ecn": bool(got.get("ecn")), "gentle": bool(got.get("gentle"))}
    maximum = got.get("max", got["limit"] // 4 if "limit" in got else None)
    if maximum is None:
        raise _Bad("red", "needs max BYTES (or limit BYTES, whose quarter tc takes as max)")
    minimum = got.get("min", maximum // 3)
    avpkt = got.get("avpkt", 1000)
    aqm.update(max=maximum, min=minimum, avpkt=avpkt)
    if "probability" in got:
        aqm["probability"] = got["probability"]
    if "burst" in got:
        try:
            aqm["wlog"] = red_wlog_for_burst(minimum, got["burst"], avpkt)
        except ValueError as exc:
            raise _Bad("red burst", str(exc)) from None
    return aqm, got.get("limit")


def _user_table(name: str, where: str = "distribution") -> DistTable:
    """The table of `distribution NAME` when NAME is not one the switch has built in: a .dist
    file (a path, or NAME.dist in tc's library directory, as tc looks it up), checked now so that
    a bad table is refused before anything is written."""
    path = find_netem_dist(name)
    if path is None:
        raise _Bad(where, f"{quote(name)} is not a built-in distribution ({', '.join(_DISTRIBUTIONS)}) "
                                   "and there is no such table in tc's library directory; give the path of a "
                                   ".dist file (e.g. ./mine.dist), which is loaded into the switch's user table")
    try:
        return load_dist(path)
    except ProfileError as exc:
        detail = "; ".join(str(p) for p in exc.problems)
        raise _Bad(where, f"{path}: {detail}") from None
    except OSError as exc:
        raise _Bad(where, f"cannot read {path}: {exc.strerror or exc}") from None


def _loss(tokens: _Tokens, out: dict[str, Any]) -> str:
    """Reads a loss model into `out`; returns which one tc took it for ("random", "gemodel",
    "state")."""
    word = tokens.take("random PERCENT, gemodel P [R [1-H [1-K]]] or state P13 [...]", "loss")
    if word == "random" or word[:1] in _DIGITS:  # tc: isdigit(argv[0][0]) (`loss .5%` is refused)
        raw = tokens.take("a percentage", "loss random") if word == "random" else word
        out["loss"] = f"{_percent(raw, 'loss')}%"
        _correlation(tokens, out, "loss", "loss")
        return "random"
    if word == "gemodel":
        # tc's defaults: r 100% - p, 1-h 100% (h = 0), 1-k 0%: `loss gemodel P` is Bernoulli loss at P, as
        # tc-netem(8) says (iproute2 5.2 on, Debian 12's 6.1 too: "tc: netem: fix r parameter in Bernoulli
        # loss model"; before it tc sent r 100%, a loss of P / (1 + P)).
        args = [_first_percent(tokens.take("P", "loss gemodel"), "loss gemodel p")]
        for name in ("r", "1-h", "1-k"):
            if not tokens.next_is_number():
                break
            args.append(_percent(tokens.take(name, "loss gemodel"), f"loss gemodel {name}"))
        _no_markov_correlation(tokens, "loss gemodel", "P R 1-H 1-K")
        p, r, loss_bad, loss_good = (args + [Decimal(100) - args[0], Decimal(100), Decimal(0)][len(args) - 1:])[:4]
        if p == 0:
            # Never leaves the good state: plain random loss at 1-k.
            if loss_good:
                out["loss"] = f"{loss_good}%"
            return word
        out["gilbert_elliott"] = {"p": f"{p}%", "r": f"{r}%", "loss_bad": f"{loss_bad}%",
                                  "loss_good": f"{loss_good}%"}
        return word
    if word == "state":
        # tc's defaults: p31 = 100% - p13, p32 = 0, p23 = 100%, p14 = 0.
        p13 = _first_percent(tokens.take("P13", "loss state"), "loss state p13")
        args = {"p31": Decimal(100) - p13, "p32": Decimal(0), "p23": Decimal(100), "p14": Decimal(0)}
        for name in ("p31", "p32", "p23", "p14"):
            if not tokens.next_is_number():
                break
            args[name] = _percent(tokens.take(name, "loss state"), f"loss state {name}")
        _no_markov_correlation(tokens, "loss state", "P13 P31 P32 P23 P14")
        if p13 == 0 and args["p14"] == 0:
            return word  # never leaves state 1: no loss
        if args["p32"] != 0 or args["p14"] != 0:
            # The 4-state model proper (bursts with receptions inside, isolated losses).
            out["loss_state"] = {"p13": f"{p13}%", **{n: f"{v}%" for n, v in args.items()}}
            return word
        # States 1 (received) and 3 (lost) only: the packet is lost exactly when the chain moves to
        # or stays in 3, i.e. p4netem's Gilbert-Elliott with p = p13, r = p31, loss 100% / 0%.
        out["gilbert_elliott"] = {"p": f"{p13}%", "r": f"{args['p31']}%", "loss_bad": "100%", "loss_good": "0%"}
        return word
    hint = (f" (tc takes a bare PERCENT only when it starts with a digit: write {_digit_first(word)}; tc refuses "
            f"{quote(word)} too)" if _NUMBER.match(word) else "")
    raise _Bad("loss", f"{quote(word)} is not a loss model; allowed: random PERCENT (or just PERCENT), "
                       f"gemodel P [R [1-H [1-K]]], state P13 [P31 [P32 [P23 [P14]]]]{hint}")


def _digit_first(word: str) -> str:
    """`word` as tc would read it as a number: `.5ms` as 0.5ms, `+5` as 5."""
    body = word[1:] if word[:1] == "+" else word
    return quote(("0" + body) if body.startswith(".") else ("-0" + body[1:]) if body.startswith("-.") else body)


def _first_percent(word: str, where: str) -> Decimal:
    """The first value of a Markov loss model, from which tc derives the defaults of the others (r or
    p31 = 100% - it): out of 0..100 % it is refused here, named as given (tc's parse_percent refuses
    it too), not through a derived value the command does not have (r: -50%)."""
    value = _percent(word, where)
    if not 0 <= value <= 100:
        raise _Bad(where, f"{quote(word)} out of range 0..100% (tc refuses it too)")
    return value


def _ecn(seen: dict[str, str], loss_model: str | None, out: dict[str, Any], problems: list[Problem]) -> None:
    """netem's `ecn`: every loss event of the loss model marks an ECN-capable packet CE instead
    (profile `loss_ecn`). tc refuses it without a loss model (q_netem.c: `opt.loss <= 0 &&
    loss_type == NETEM_LOSS_UNSPEC`): no `loss`, or random loss of 0."""
    if "loss" in seen and loss_model is None:
        return  # the loss option itself was refused (named): no second problem for it
    if loss_model is None or (loss_model == "random" and Decimal(out["loss"][:-1]) == 0):
        given = " (loss 0% is none)" if loss_model is not None else ""
        problems.append(Problem("ecn", f"without a loss model{given}: tc refuses it too (\"ecn requested without loss "
                                       "model\"); netem's ecn marks what the loss model would lose: add loss PERCENT, "
                                       "loss gemodel P [R [1-H [1-K]]] or loss state P13 [...] (for marks where the "
                                       "rate queue is congested: codel ... ecn, red ... ecn or pie ... ecn)"))
    elif not any(key in out for key in ("loss", "gilbert_elliott", "loss_state")):
        # tc takes it (a model is given), but this model never loses: nothing would ever be marked.
        problems.append(Problem("ecn", f"has nothing to mark: loss {loss_model} with these values never "
                                       "loses a packet; leave ecn out (or give the model a loss)"))
    else:
        out["loss_ecn"] = True


def _no_markov_correlation(tokens: _Tokens, where: str, values: str) -> None:
    """A number after a Markov loss model's last value: tc has no correlation there (netem
    correlates only random loss), so it would not be part of the model."""
    if tokens.next_is_number():
        word = tokens.take("", where)
        raise _Bad(where, f"{quote(word)}: {where} takes at most {values}; netem has no correlation for it "
                          "(only random loss is correlated: the Markov chain has its own memory)")


def _rate_option(tokens: _Tokens, out: dict[str, Any]) -> None:
    """`rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`. As tc (q_netem.c), each number is read
    when the next word starts one: PACKETOVERHEAD and CELLOVERHEAD signed (get_s32), CELLSIZE
    unsigned (get_u32). Values outside the profile's ranges (overheads -32768..32767, the cell size
    0..65535, cell_size + cell_overhead at least 1) are named by profile field, with the range."""
    out["rate"] = _rate(tokens.take("a rate", "rate"), "rate")
    if tokens.next_is_number(signed=True):
        overhead = _bytes(tokens.take("a packet overhead", "rate"), "rate packetoverhead")
        if overhead:
            out["overhead"] = overhead
    cell_size = 0
    if tokens.next_is_number():
        cell_size = _bytes(tokens.take("a cell size", "rate"), "rate cellsize")
        if cell_size:  # 0 is netem's "no cells"
            out["cell_size"] = cell_size
    if tokens.next_is_number(signed=True):
        cell_overhead = _bytes(tokens.take("a cell overhead", "rate"), "rate celloverhead")
        if cell_overhead and not cell_size:
            # tc takes it, but the kernel adds it only to cells (packet_time_ns: `if (q->cell_size)`),
            # so it would do nothing; a profile refuses cell_overhead without cell_size.
            raise _Bad("rate celloverhead", f"{cell_overhead} without a CELLSIZE has no effect (netem adds it "
                                            "to each cell, and CELLSIZE 0 is no cells): give the cell size, "
                                            "e.g. rate 1mbit 0 48 5 for ATM, or leave it out")
        if cell_overhead:
            out["cell_overhead"] = cell_overhead


def _bytes(raw: str, where: str) -> int:
    """A whole number of bytes, signed, decimal or 0x hex (int base 0, as tc's get_s32/get_u32 read
    it; unlike their strtol, 010 is refused)."""
    try:
        return int(raw, 0)
    except ValueError:
        raise _Bad(where, f"{quote(raw)} is not a whole number of bytes") from None


def netem_setup(both: str | Sequence[str] | None = None, *, uplink: str | Sequence[str] | None = None,
                downlink: str | Sequence[str] | None = None, name: str = "netem", title: str = "") -> NetemSetup:
    """A Profile from netem options: `both` for both directions, `uplink`/`downlink` for one
    (replacing `both` there), and the user table a `distribution FILE` names (the profile then
    has `jitter_distribution: user`; the caller loads the table, Controller.load_distribution).
    Raises ProfileError: a netem token that cannot be mapped (named, with the direction when
    options are per direction), a table file that is not valid, or a value out of p4netem's range
    (named by field, `both.rate` for shared options)."""
    if both is None and uplink is None and downlink is None:
        raise ProfileError([Problem("", "no netem options given")])
    # Where each direction's options come from: "both" unless given for that direction.
    origin = {"uplink": "uplink" if uplink is not None else "both" if both is not None else None,
              "downlink": "downlink" if downlink is not None else "both" if both is not None else None}
    texts = {"both": both, "uplink": uplink, "downlink": downlink}
    links: dict[str, NetemLink] = {}
    problems: list[Problem] = []
    for key in dict.fromkeys(o for o in origin.values() if o is not None):
        try:
            links[key] = parse_netem(texts[key])
        except ProfileError as exc:
            problems += exc.problems if key == "both" else exc.prefixed(key)
    tables = {key: link.user_table for key, link in links.items() if link.user_table is not None}
    if len({t.values for t in tables.values()}) > 1:
        problems.append(Problem("distribution", "the directions name different tables ("
                                + ", ".join(f"{k}: {t.source}" for k, t in tables.items())
                                + "); the switch has one user table"))
    if problems:
        raise ProfileError(problems, "netem options")
    source = "netem " + "; ".join(link.text if key == "both" else f"{key}: {link.text}"
                                  for key, link in links.items())
    doc: dict[str, Any] = {"name": name, "description": _clip(f"from {source}", 500),
                           "source": _clip(source, 1000)}
    if title:
        doc["title"] = title
    if origin["uplink"] == origin["downlink"] == "both":
        doc["both"] = links["both"].fields  # a value out of range is named once, as both.X
    else:
        # Per-direction options replace the shared ones whole (a profile's `both` would merge
        # them field by field, and the downlink of `--downlink 'delay 5ms'` must have no jitter
        # from the shared options).
        for direction, key in origin.items():
            if key is not None:
                doc[direction] = links[key].fields
    try:
        profile = Profile.parse(doc)
    except ProfileError as exc:
        raise exc.with_source("netem options") from None
    warnings = list(dict.fromkeys(w for link in links.values() for w in link.warnings))
    return NetemSetup(profile, warnings, next(iter(tables.values()), None))


def profile_from_netem(both: str | Sequence[str] | None = None, *, uplink: str | Sequence[str] | None = None,
                       downlink: str | Sequence[str] | None = None, name: str = "netem",
                       title: str = "") -> tuple[Profile, list[str]]:
    """netem_setup's profile and warnings; when the options name a table file, a warning says
    that the profile needs it in the switch's user table (`p4netem distribution load FILE`)."""
    setup = netem_setup(both, uplink=uplink, downlink=downlink, name=name, title=title)
    warnings = list(setup.warnings)
    if setup.user_table is not None:
        warnings.append(f"the profile draws its jitter from the switch's user table (jitter_distribution: user): "
                        f"load {setup.user_table.source} into it with `p4netem distribution load "
                        f"{setup.user_table.source}` (p4netem apply --netem does it for you)")
    return setup.profile, warnings


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
