"""Mahimahi-style trace-driven links, played as a timeline of in-place rate changes.

A Mahimahi trace (mm-link) is a text file with one integer per line: a millisecond timestamp at
which the link can deliver one 1500-byte packet (a "delivery opportunity"); several lines with
the same timestamp are several opportunities in that millisecond, and the trace repeats with a
period of its last timestamp. p4netem's link is a rate and a queue, not a list of
opportunities, so a trace becomes a rate per window: the opportunities in the window times
one 1500-byte packet's 1514-byte frame, over the window. Windows without any opportunity are merged into the window that
follows (the rate over the merged span), since rate 0 in a profile means "unlimited" and the
smallest rate would hold a queued packet for seconds. The rates play as a Timeline of `set`
steps, in place (the queue carries on), through the ordinary TimelinePlayer.

What this cannot do (docs/control.md, "Trace-driven links", has the measured figures): a
packet's departure time is fixed when it is queued, at the rate in force then, so a change of
rate reaches the packets queued after it: with a standing queue the delivered rate follows the
trace late by the queue's drain time; and within a window the link is smooth, where Mahimahi
delivers in bursts of opportunities.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from ..profiles import Profile, ProfileError
from ..profiles.errors import Problem, blame_both, problems_from_validation_error
from ..profiles.profile import shadowed_both_problems
from ..profiles.fields import LinkRate
from ..profiles.units import Duration, Rate
from .timeline import Timeline, TimelineError

__all__ = ["MahimahiTrace", "TraceError", "load_trace", "parse_trace", "window_rates", "trace_timeline",
           "traced_profile", "unused_rates",
           "MTU_BYTES", "FRAME_BYTES"]

# One delivery opportunity carries one 1500-byte IP packet (Mahimahi's mm-link): a 1514-byte
# Ethernet frame, which is what p4netem's rate counts, so a full-size packet gets exactly one
# opportunity's time (a small packet gets its 14 header bytes' less than Mahimahi gives it).
MTU_BYTES = 1500
FRAME_BYTES = MTU_BYTES + 14
MS = 1_000_000
_MAX_LINES = 10_000_000
# The rates a profile's link takes (profiles.fields.LinkRate; 0 would mean unlimited).
MIN_RATE_BPS = 1_000
MAX_RATE_BPS = 100 * 10**9


class TraceError(TimelineError):
    """A trace file that cannot be read (every problem with its line)."""


@dataclass(frozen=True)
class MahimahiTrace:
    opportunities_ms: tuple[int, ...]  # sorted timestamps, one per opportunity
    source: str = ""

    @property
    def period_ms(self) -> int:
        """The trace repeats after its last timestamp (as mm-link loops it)."""
        return self.opportunities_ms[-1]

    @property
    def mean_rate_bps(self) -> float:
        return len(self.opportunities_ms) * FRAME_BYTES * 8 / (self.period_ms / 1000)

    def count(self, start_ns: int, end_ns: int) -> int:
        """Opportunities at times in [start, end) of the looped trace: mm-link plays line i of
        loop m at (t_i + m * period) ms, every line of every loop (a line at the period and a
        line at 0 of the next loop are two opportunities at the same time)."""
        return self._before(end_ns) - self._before(start_ns)

    def _before(self, x_ns: int) -> int:
        """Opportunities of the looped trace at times < x. With x = loops * period + r: every line of
        the loops before the last whole one; of that one (loop loops - 1) every line too but, when r is
        0, those at the period (they are at x); of loop `loops` the lines before r, i.e. the whole-ms
        timestamps t < r/MS, which are those t < ceil(r/MS). Integers only: one bisection (the 1 ms
        windows of a 100 s run make 100000 of these; with a Fraction each took seconds)."""
        ts = self.opportunities_ms
        loops, r = divmod(x_ns, ts[-1] * MS)
        total = loops * len(ts) + bisect_left(ts, -(-r // MS))
        if loops and not r:
            total -= len(ts) - bisect_left(ts, ts[-1])  # the lines at the period
        return total


# mm-link reads each line with strtol, base 10, the whole line: digits with an optional sign (Python's
# int() would also take "1_0" and non-ASCII digits, which no Mahimahi trace has).
_TIMESTAMP = re.compile(r"[+-]?[0-9]+")


def _lines(text: str) -> list[str]:
    """The lines as mm-link's `getline` loop reads them (link_queue.cc): split at "\\n" only, the newline
    that ends the last line does not start another (an empty line after it would be one); a "\\r" before
    the "\\n" is taken off (p4netem reads CRLF files; mm-link would refuse "1\\r")."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the last line's newline (or an empty file)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def parse_trace(text: str, source: str = "<trace>") -> MahimahiTrace:
    """A trace from its text; every malformed line is named (TraceError). An empty or blank line is
    refused, as mm-link refuses it (LinkQueue: "invalid empty line"; a line of spaces is not a
    number to its myatoi), also at the end of the file: one newline may end the last line."""
    out: list[int] = []
    problems: list[Problem] = []
    last = 0
    lines = _lines(text)
    for number, line in enumerate(lines, 1):
        word = line.strip()
        if not word:
            end = " (the file may end with one newline, not with an empty line)" if number == len(lines) else ""
            why = "(\"invalid empty line\")" if not line else "(spaces only: its strtol finds no number)"
            problems.append(Problem(f"line {number}", f"is {'empty' if not line else 'blank'}: mm-link refuses it "
                                                      f"{why}; remove it{end}"))
            if len(problems) >= 10:
                break
            continue
        if len(out) >= _MAX_LINES:
            problems.append(Problem(f"line {number}", f"more than {_MAX_LINES} opportunities"))
            break
        if _TIMESTAMP.fullmatch(word) is None:
            problems.append(Problem(f"line {number}", f"{word!r} is not a whole number of milliseconds"))
            continue
        value = int(word)
        if value < 0:
            problems.append(Problem(f"line {number}", f"{value} is negative"))
        elif value < last:
            problems.append(Problem(f"line {number}", f"{value} is before the line above ({last}): timestamps "
                                                      "must not decrease"))
        else:
            out.append(value)
            last = value
        if len(problems) >= 10:
            break
    if not problems and not out:
        problems.append(Problem("", "no delivery opportunities (one millisecond timestamp per line)"))
    elif not problems and out[-1] == 0:
        problems.append(Problem("", "the last timestamp (the trace's period) is 0 ms; it must be positive"))
    if problems:
        raise TraceError(problems, source)
    return MahimahiTrace(tuple(out), source)


def load_trace(path: str | Path) -> MahimahiTrace:
    path = Path(path)
    return parse_trace(path.read_text(encoding="utf-8"), str(path))


def window_rates(trace: MahimahiTrace, window_ns: int, duration_ns: int, *,
                 check: bool = True) -> list[tuple[int, int]]:
    """[(start_ns, rate bit/s)] over [0, duration): the looped trace's opportunities per window
    as a rate; a run of empty windows is merged into the next non-empty one (the rate over the
    merged span), trailing empty windows into the last non-empty one. Consecutive equal rates
    are one entry. With `check`, a rate no profile takes (below 1kbit or above 100Gbit) is a
    TraceError naming its window (as `trace check` says it, before `trace run` writes anything)."""
    if window_ns <= 0:
        raise ValueError("window must be positive")
    spans: list[tuple[int, int, int]] = []  # (start, end, opportunities)
    pending_start: int | None = None
    t = 0
    before_t = 0  # trace._before(t): a boundary's count serves both windows (count() would take it twice)
    while t < duration_ns:
        end = min(t + window_ns, duration_ns)
        before_end = trace._before(end)
        n = before_end - before_t
        before_t = before_end
        start = t if pending_start is None else pending_start
        if n == 0:
            pending_start = start
        else:
            spans.append((start, end, n))
            pending_start = None
        t = end
    if pending_start is not None:
        if spans:
            s, _, n = spans.pop()
            spans.append((s, duration_ns, n))
        else:
            raise TraceError([_none_in_run(trace, duration_ns)], trace.source)
    out: list[tuple[int, int]] = []
    bad: list[tuple[int, int, int, int]] = []
    for start, end, n in spans:
        rate = round(n * FRAME_BYTES * 8 * 10**9 / (end - start))
        if check and not MIN_RATE_BPS <= rate <= MAX_RATE_BPS:
            bad.append((start, end, n, rate))
        if not out or out[-1][1] != rate:
            out.append((start, rate))
    if bad:
        problems = [_unplayable(*b) for b in bad[:3]]
        if len(bad) > 3:
            problems.append(Problem("", f"and {len(bad) - 3} more windows out of range"))
        raise TraceError(problems, trace.source)
    return out


def _none_in_run(trace: MahimahiTrace, duration_ns: int) -> Problem:
    """No opportunity in [0, duration): no window has a rate to merge the empty ones into. Said as
    what is wrong with the trace: a lone `60000` (its one opportunity falls at the end of each period,
    so a run of one period, the default, has none) is a trace too sparse for any rate, as a window's
    rate below 1kbit is (`_unplayable`); a denser trace whose first opportunity comes at or after the
    end of the run needs a longer run."""
    ts = trace.opportunities_ms
    none = f"none in 0s..{Duration(duration_ns)}, the first is at {ts[0]} ms"
    mean = round(trace.mean_rate_bps)
    if mean < MIN_RATE_BPS:
        n = len(ts)
        return Problem("", f"{n} delivery opportunit{'y' if n == 1 else 'ies'} per {Duration(trace.period_ms * MS)} "
                           f"period ({none}) {'is' if n == 1 else 'are'} {Rate(mean)}/s, below the lowest rate a "
                           f"profile takes ({Rate(MIN_RATE_BPS)}): a rate cannot play so sparse a trace "
                           "(`p4netem trace load` plays it exactly)")
    return Problem("", f"no delivery opportunity in the run ({none}): a rate needs at least one; run it for longer "
                       f"than {ts[0]} ms (--duration), or play the trace exactly with `p4netem trace load`")


def _unplayable(start: int, end: int, n: int, rate: int) -> Problem:
    """A window whose rate no profile takes (LinkRate: 1kbit..100Gbit; 0 is "unlimited")."""
    what = (f"{n} delivery opportunit{'y' if n == 1 else 'ies'} in {Duration(start)}..{Duration(end)} "
            f"{'is' if n == 1 else 'are'} {Rate(rate)}/s")
    if rate < MIN_RATE_BPS:
        return Problem("", f"{what}, below the lowest rate a profile takes ({Rate(MIN_RATE_BPS)}): a rate "
                           "cannot play so sparse a trace (`p4netem trace load` plays it exactly)")
    return Problem("", f"{what}, above the highest rate a profile takes ({Rate(MAX_RATE_BPS)})")


def trace_timeline(uplink: MahimahiTrace | None, downlink: MahimahiTrace | None, *, window_ns: int,
                   duration_ns: int, base: Profile | Mapping[str, Any] | None = None, name: str = "trace",
                   set_mode: str = "in-place",
                   rates: Mapping[str, list[tuple[int, int]]] | None = None) -> Timeline:
    """A Timeline that applies `base` (default: no impairment) with each direction's first
    window rate, then sets each direction's rate at every window where it changes (in place;
    set_mode="switch" gives each window a new, empty queue instead, for comparison). A
    direction without a trace keeps `base`'s parameters. `base` may be a profile document as read
    (`trace run --profile FILE`), checked as `traced_profile` checks it: one that is a whole link
    only with the rates in place (a queue limit or an AQM and no rate) is taken, as `trace load`
    takes it. `rates` may give a direction's window_rates(trace, window_ns, duration_ns) when the
    caller has them (`trace run` prints them first): they are not worked out again."""
    if uplink is None and downlink is None:
        raise TraceError([Problem("", "no trace: give an uplink or a downlink trace (or both)")])
    rates = {d: (rates or {}).get(d) or window_rates(t, window_ns, duration_ns)
             for d, t in (("uplink", uplink), ("downlink", downlink)) if t is not None}
    doc = base.to_dict() if isinstance(base, Profile) else dict(base) if base is not None else {"name": name}
    if isinstance(doc.get("name"), str):  # a missing or bad name is Profile.parse's to report, as for `load`
        doc["name"] = name
    start = traced_profile(doc, {d: {"rate": f"{series[0][1]}bit"} for d, series in rates.items()})
    # A 100 s trace in 1 ms windows is up to 100000 steps: each rate's text is made once, and the
    # times go in as Durations, which the steps take as they are (a "123000000ns" was parsed again).
    texts: dict[int, str] = {}
    changes: dict[int, dict[str, Any]] = {}
    for d, series in rates.items():
        key = f"{d}.rate"
        for at, rate in series[1:]:
            text = texts.get(rate)
            if text is None:
                text = texts[rate] = str(Rate(rate))
            changes.setdefault(at, {})[key] = text
    steps: list[dict[str, Any]] = [{"apply": name}]
    steps += [{"at": Duration(at), "set": changes[at]} for at in sorted(changes)]
    steps.append({"at": Duration(duration_ns - 1), "wait": "1ns"})  # hold the last rate until the end
    source = " ".join(f"{d}={t.source}" for d, t in (("uplink", uplink), ("downlink", downlink)) if t is not None)
    return Timeline.parse({"name": name, "set_mode": set_mode, "profiles": [start.to_dict()], "steps": steps},
                          source=f"traces {source}")


_RATE = TypeAdapter(LinkRate, config=ConfigDict(defer_build=True))  # built on first use
_DIRECTIONS = ("uplink", "downlink")


def _links(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, Mapping[str, Any]]] | None:
    """The `both` block and each direction's own block of a profile document, or None when one is
    not a mapping (Profile.parse reports that)."""
    both = doc.get("both") or {}
    own = {d: doc.get(d) or {} for d in _DIRECTIONS}
    if not isinstance(both, Mapping) or not all(isinstance(link, Mapping) for link in own.values()):
        return None
    return both, own


def traced_profile(base: Mapping[str, Any], traced: Mapping[str, Mapping[str, Any]]) -> Profile:
    """`base`, a profile document as read (not validated yet: it may be a whole link only with its
    traces, e.g. a queue limit and an AQM and no rate, as mm-link's --downlink-queue=codel), with
    each traced direction's rate (its own or the one under `both`) replaced by the fields of
    `traced[direction]` (`trace load`: its `trace` placement; `trace run`: its first window's
    rate), validated: a ProfileError lists every problem. The replaced rate is still checked as a
    rate, where it was written (`downlink.rate` or `both.rate`): "fast" is an error, not dropped
    unread; a valid one is taken, since a whole profile (a built-in, `both: {rate: 1Mbit, queue: 3}`)
    is a base and its rate may serve the direction without a trace (`unused_rates` names one that
    serves none)."""
    doc = dict(base)
    problems: list[Problem] = shadowed_both_problems(base)
    links = _links(doc)
    if links is not None:
        both, own = links
        doc.pop("both", None)  # expanded here, as Profile.parse would, to take the rate out of it
        for d in _DIRECTIONS:
            link = {**both, **own[d]}
            if d in traced:
                if "rate" in link:
                    where = f"{d}.rate" if "rate" in own[d] else "both.rate"
                    try:
                        _RATE.validate_python(link.pop("rate"))
                    except ValidationError as exc:
                        problems += [Problem(where, p.message) for p in problems_from_validation_error(exc)]
                link.update(traced[d])
            doc[d] = link
    try:
        profile = Profile.parse(doc)
    except ProfileError as exc:
        problems += _where_written(exc.problems, base)
    if problems:
        raise ProfileError(list(dict.fromkeys(problems)))  # a bad `both.rate` of two traces once
    return profile


def _where_written(problems: Sequence[Problem], base: Mapping[str, Any]) -> list[Problem]:
    """Problems of the profile `traced_profile` expanded from `base`: one that a field given under
    `both` has in every direction (a bad value: `uplink.queue` and `downlink.queue`) is reported
    once where it was written (`both.queue`), as Profile.parse reports it; one that only a direction
    has (a queue without a rate where only the other direction is traced) stays that direction's."""
    out = []
    for problem in problems:
        blamed = blame_both(problem, base)
        if blamed != problem:
            rest = problem.path.partition(".")[2]
            if not all(Problem(f"{d}.{rest}", problem.message) in problems for d in _DIRECTIONS):
                blamed = problem
        out.append(blamed)
    return out


def unused_rates(base: Mapping[str, Any], traced: Sequence[str]) -> list[tuple[str, Rate]]:
    """(field, rate) of each valid rate of `base` (a profile document; `traced_profile` refuses a
    bad one it replaces) that `traced_profile` replaces and no direction uses: one in a traced
    direction's own block, or under `both` when every direction is traced or has a rate of its own.
    A warning's worth, not an error: the trace sets the link, as a direction's block overrides
    `both`. A rate of 0 ("unlimited") states no rate and is not named."""
    links = _links(base)
    if links is None:
        return []
    both, own = links
    given = [(f"{d}.rate", own[d]["rate"]) for d in _DIRECTIONS if d in traced and "rate" in own[d]]
    if "rate" in both and all(d in traced or "rate" in own[d] for d in _DIRECTIONS):
        given.append(("both.rate", both["rate"]))
    out = []
    for field, raw in given:
        try:
            rate = _RATE.validate_python(raw)
        except ValidationError:  # refused by traced_profile (shadowed_both_problems for one every direction overrides)
            continue
        if rate != 0:
            out.append((field, rate))
    return out


def trace_duration(traces: Sequence[MahimahiTrace | None]) -> int:
    """One period of the longest trace, in ns (the default length of a run)."""
    return max(t.period_ms for t in traces if t is not None) * MS
