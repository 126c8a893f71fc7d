"""Mahimahi's shell chains to a p4netem Profile: bring `mm-delay 20 mm-loss uplink 0.01 mm-link UP DOWN ...`.

    chain = parse_mahimahi("mm-delay 20 mm-link up.trace down.trace --downlink-queue=droptail "
                           "--downlink-queue-args=packets=100")
    chain.traces          # {"uplink": Path("up.trace"), "downlink": Path("down.trace")}
    profile = chain.profile({"uplink": placement, "downlink": placement})  # Controller.load_trace's

A chain is read as the shells read their own arguments (Mahimahi's src/frontend): `mm-delay MS`,
`mm-loss uplink|downlink RATE`, `mm-onoff uplink|downlink MEAN_ON MEAN_OFF` and `mm-link UPTRACE
DOWNTRACE [OPTIONS]`, each followed by the command it runs, which is the next shell of the chain.
mm-link reads its options with GNU getopt_long: `--name=value` or `--name value`, any unambiguous
prefix of a name, anywhere after it (getopt permutes) up to a `--`; the short options `-u FILE`/
`-d FILE` are the logs. Queue arguments are mm-link's `NAME=NUMBER[, NAME=NUMBER...]`, whole
numbers. What each shell and option becomes, and where p4netem differs (its stages run in a fixed
order, its byte limit counts Ethernet frames, its on/off link starts at the first packet), is in
docs/profiles.md ("From Mahimahi"). What p4netem cannot do (drop-head queues, Mahimahi's red, `--once`,
a second mm-onoff on one direction, other shells) is an error that names the word and says why: a profile that
silently did less than the command would be worse than none. Options that only show or record
(`--meter-*`, the logs, mm-meter) are accepted with a warning naming p4netem's own view.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from .errors import Problem, ProfileError
from .fields import MAX_32, MAX_48
from .link import TracePlacement
from .profile import Profile
from .units import is_huge, quote

__all__ = ["MahimahiChain", "parse_mahimahi", "MAHIMAHI_SHELLS"]

DIRECTIONS = ("uplink", "downlink")
# The shells this module maps; the others are refused with what they do (_OTHER_SHELLS).
MAHIMAHI_SHELLS = ("mm-delay", "mm-loss", "mm-onoff", "mm-link", "mm-meter")
_OTHER_SHELLS = {
    "mm-webrecord": "records web pages; it is not a network condition (p4netem emulates the link only)",
    "mm-webreplay": "replays recorded web pages; it is not a network condition (run the replay servers on the "
                    "server host, behind p4netem's link)",
}
# mm-link's long options (linkshell.cc), whether each takes an argument, and its two short ones.
_LINK_OPTIONS = {"uplink-log": True, "downlink-log": True, "once": False, "meter-uplink": False,
                 "meter-downlink": False, "meter-uplink-delay": False, "meter-downlink-delay": False,
                 "meter-all": False, "uplink-queue": True, "downlink-queue": True, "uplink-queue-args": True,
                 "downlink-queue-args": True}
_LINK_SHORT = {"u": "uplink-log", "d": "downlink-log"}
_METER_OPTIONS = {"meter-uplink": False, "meter-downlink": False}
# mm-link's queue types; the argument names each reads (dropping_packet_queue.cc's get_arg).
_QUEUE_ARGS = {"infinite": (), "droptail": ("packets", "bytes"), "codel": ("packets", "bytes", "target", "interval"),
               "pie": ("packets", "bytes", "qdelay_ref", "max_burst")}
_ALL_QUEUE_ARGS = ("packets", "bytes", "target", "interval", "qdelay_ref", "max_burst", "wq", "minthresh",
                   "maxthresh")
_REFUSED_QUEUES = {
    "drophead": "p4netem has no drop-head queue: its rate queue fixes each packet's departure when it admits it, "
                "so a queued packet cannot be dropped to make room (droptail with the same limits drops the "
                "arriving packet instead)",
    "red": "Mahimahi's red (a packet average against fractions of the packet limit) is not p4netem's RED "
           "(tc-red's byte average); give p4netem's in a profile, aqm: {kind: red, max: ...}",
}
_ALLOWED_QUEUES = "infinite (the default), droptail, codel, pie"
# Profile ranges, in the units mm-link's arguments use.
_MAX_DELAY_MS = MAX_48 // 10**6  # delay_ns is bit<48>
_MAX_CODEL_MS = (2**32 - 1) // 10**6  # CoDel's times are 32-bit ns (link.py CodelTime)
_MAX_PIE_MS = (2**32 - 1) // 10**6  # so are PIE's target and burst allowance (pie_target_ns, pie_max_burst_ns)
_MAHIMAHI_PIE_TUPDATE_MS = 30  # pie_packet_queue.cc: t_update_ ( 30 )
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_QUEUE_ARG = re.compile(r"([a-z_]+)=(\d+)")


class _Bad(Exception):
    """One problem, raised where it is found and collected by parse_mahimahi."""

    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.problem = Problem(where, message)


@dataclass
class _Direction:
    """What the chain asks of one direction, in Mahimahi's terms."""

    delay_ms: int = 0
    survive: Decimal = Decimal(1)  # product of (1 - rate) over the mm-loss shells of the direction
    onoff: dict[str, str] | None = None  # mm-onoff's means, as profile durations
    onoff_given: bool = False  # an mm-onoff for the direction, even one that does nothing
    after_link: list[str] = field(default_factory=list)  # shells Mahimahi runs after the link (_order_warning)
    trace: Path | None = None
    queue: dict[str, Any] = field(default_factory=dict)
    aqm: dict[str, Any] | None = None


@dataclass
class MahimahiChain:
    """A Mahimahi command read: each direction's LinkParams fields (profile YAML form, without the
    trace), the trace file of each direction mm-link plays, warnings worth printing, and the
    command as given. `profile(placements)` is the Profile once the traces are in a switch."""

    fields: dict[str, dict[str, Any]]
    traces: dict[str, Path]
    warnings: list[str]
    text: str
    name: str = "mahimahi"

    def profile(self, placements: Mapping[str, TracePlacement | Mapping[str, Any]]) -> Profile:
        """The Profile with each traced direction's `trace` (Controller.load_trace's placement).
        Raises ProfileError for a value out of p4netem's range, named by profile field."""
        missing = [d for d in self.traces if d not in placements]
        if missing:
            raise ValueError(f"no trace placement for {', '.join(missing)}")
        source = f"mahimahi {self.text}"
        doc: dict[str, Any] = {"name": self.name, "description": _clip(f"from {source}", 500),
                               "source": _clip(source, 1000)}
        for direction in DIRECTIONS:
            link = dict(self.fields[direction])
            if direction in self.traces:
                where = placements[direction]
                link["trace"] = where.model_dump() if isinstance(where, TracePlacement) else dict(where)
            doc[direction] = link
        try:
            return Profile.parse(doc)
        except ProfileError as exc:
            raise exc.with_source("mahimahi command") from None


def parse_mahimahi(text: str | Sequence[str], name: str = "mahimahi") -> MahimahiChain:
    """Read a Mahimahi shell chain. Raises ProfileError naming every word or option that is
    unknown, malformed or not supported (all of them, not just the first)."""
    words = _split(text)
    if not words:
        raise ProfileError([Problem("", "no Mahimahi command given; e.g. mm-delay 20 mm-link up.trace down.trace")],
                           "mahimahi command")
    dirs = {d: _Direction() for d in DIRECTIONS}
    warnings: list[str] = []
    problems: list[Problem] = []
    shells: list[str] = []  # shells read so far, outermost first
    rest = words
    while rest:
        shell = os.path.basename(rest[0])
        if shell not in MAHIMAHI_SHELLS:
            try:
                _not_a_shell(rest, shells, warnings)
            except _Bad as bad:
                problems.append(bad.problem)
            break
        try:
            if shell == "mm-delay":
                rest = _delay(rest[1:], dirs)
            elif shell == "mm-loss":
                rest = _loss(rest[1:], dirs, "mm-link" in shells)
            elif shell == "mm-onoff":
                rest = _onoff(rest[1:], dirs, "mm-link" in shells, warnings)
            elif shell == "mm-link":
                if "mm-link" in shells:
                    raise _Bad("mm-link", "given twice: p4netem has one queue per direction, so two links in "
                                          "series cannot be emulated")
                rest = _link(rest[1:], dirs, warnings)
            else:
                rest = _meter(rest[1:], warnings)
        except _Bad as bad:
            problems.append(bad.problem)
            break  # the words after a bad shell cannot be told apart from its arguments
        shells.append(shell)
    if problems:
        raise ProfileError(problems, "mahimahi command")
    warnings += [_order_warning(shell, d) for d in DIRECTIONS if dirs[d].trace is not None
                 for shell in dirs[d].after_link]
    fields = {d: _fields(dirs[d]) for d in DIRECTIONS}
    traces = {d: dirs[d].trace for d in DIRECTIONS if dirs[d].trace is not None}
    return MahimahiChain(fields, traces, warnings, shlex.join(words), name)


def _split(text: str | Sequence[str]) -> list[str]:
    """The words as a POSIX shell splits them (the CLI takes the chain as one quoted string)."""
    if not isinstance(text, str):
        return [str(w) for w in text]
    try:
        return shlex.split(text)
    except ValueError as exc:  # an unbalanced quote
        raise ProfileError([Problem("", f"cannot split {quote(text)} into words: {exc}")], "mahimahi command") from None


def _not_a_shell(rest: list[str], shells: list[str], warnings: list[str]) -> None:
    """A word where a shell could be: another Mahimahi shell (refused with what it does), a word
    that looks like a misspelt shell (refused), or, after the shells, the program they would run:
    p4netem runs no program (its rules choose the traffic), so it is left out with a warning."""
    word = rest[0]
    shell = os.path.basename(word)
    if shell in _OTHER_SHELLS:
        raise _Bad(shell, f"is not supported: it {_OTHER_SHELLS[shell]}")
    if shell.startswith("mm") or not shells:
        raise _Bad(word, f"is not a Mahimahi shell p4netem can emulate; allowed: {', '.join(MAHIMAHI_SHELLS)} "
                         "(a chain starts with one of them)")
    warnings.append(f"the program after the shells is not run: {quote(shlex.join(rest))}; p4netem impairs the "
                    "traffic its rules select (--rule), so run the program on a client host behind the switch")


def _delay(args: list[str], dirs: dict[str, _Direction]) -> list[str]:
    """`mm-delay MS [COMMAND...]`: MS one-way in each direction (delayshell.cc: a whole number)."""
    if not args:
        raise _Bad("mm-delay", "expects a delay in milliseconds: mm-delay MS [COMMAND...]")
    word = args[0]
    # delayshell.cc reads it with myatoi (strtol, the whole word): digits, and strtol's leading '+'.
    if not re.fullmatch(r"\+?[0-9]+", word):
        raise _Bad(f"mm-delay {word}", "the delay must be a whole number of milliseconds with no unit "
                                       f"(0..{_MAX_DELAY_MS}), e.g. mm-delay 20")
    for d in dirs.values():
        d.delay_ms += int(word)  # nested mm-delay shells add up
    total = max(d.delay_ms for d in dirs.values())
    if total > _MAX_DELAY_MS:
        raise _Bad(f"mm-delay {word}", f"the delay (in all: {total} ms) must be at most {_MAX_DELAY_MS} ms")
    return args[1:]


def _loss(args: list[str], dirs: dict[str, _Direction], inside_link: bool) -> list[str]:
    """`mm-loss uplink|downlink RATE [COMMAND...]`: each packet of that direction lost with
    probability RATE, independently (lossshell.cc: IIDLoss, 0 <= RATE <= 1)."""
    if len(args) < 2:
        raise _Bad("mm-loss", "expects a direction and a rate: mm-loss uplink|downlink RATE [COMMAND...]")
    direction, word = args[0], args[1]
    if direction not in DIRECTIONS:
        raise _Bad(f"mm-loss {direction}", "the direction must be uplink or downlink")
    where = f"mm-loss {direction} {word}"
    if not _NUMBER.fullmatch(word):
        raise _Bad(where, "the rate must be a number between 0 and 1 (0.01 is 1 %)")
    rate = Decimal(word)
    if not 0 <= rate <= 1:
        raise _Bad(where, "rate must be between 0 and 1")
    d = dirs[direction]
    d.survive *= 1 - rate  # nested mm-loss shells are independent: a packet survives each of them
    if rate:
        _mark_order(d, "mm-loss", direction, inside_link)
    return args[2:]


def _mark_order(d: _Direction, shell: str, direction: str, inside_link: bool) -> None:
    """The uplink leaves through the shells from the inside out, the downlink comes in from the
    outside: a loss or on/off shell outside mm-link drops uplink packets after the link, one inside
    it downlink packets. p4netem's loss stage (the on/off link and the loss models) is always
    before its queue."""
    if (direction == "uplink") != inside_link and shell not in d.after_link:
        d.after_link.append(shell)


def _onoff(args: list[str], dirs: dict[str, _Direction], inside_link: bool, warnings: list[str]) -> list[str]:
    """`mm-onoff uplink|downlink MEAN_ON MEAN_OFF [COMMAND...]`: that direction's link is on and off
    for exponentially distributed periods of these means, in seconds (onoffshell.cc: strtod of the
    whole word, each 0 or more, not both 0). A mean on-time of 0 keeps the link off, a mean off-time
    of 0 keeps it on."""
    if len(args) < 3:
        raise _Bad("mm-onoff", "expects a direction and two mean times in seconds: mm-onoff uplink|downlink "
                               "MEAN_ON MEAN_OFF [COMMAND...]")
    direction, on_word, off_word = args[0], args[1], args[2]
    if direction not in DIRECTIONS:
        raise _Bad(f"mm-onoff {direction}", "the direction must be uplink or downlink")
    where = f"mm-onoff {direction} {on_word} {off_word}"
    on, off = (_seconds(where, name, word) for name, word in (("MEAN_ON", on_word), ("MEAN_OFF", off_word)))
    if on == 0 and off == 0:
        raise _Bad(where, "MEAN_ON and MEAN_OFF cannot both be 0 seconds (mm-onoff refuses them too)")
    d = dirs[direction]
    if d.onoff_given:
        raise _Bad(where, f"a second mm-onoff on the {direction}: p4netem has one on/off link per direction "
                          "(two in series are a link that is on when both are)")
    d.onoff_given = True
    if on == 0:
        # Mahimahi switches the link on for 0 ms at the end of each off period: never on for a packet.
        d.survive = Decimal(0)
        warnings.append(f"{where}: a mean on-time of 0 keeps the link off, so every {direction} packet is lost: "
                        "loss: 100%")
    elif off == 0:
        warnings.append(f"{where}: a mean off-time of 0 keeps the link on: nothing to emulate (left out)")
    else:
        d.onoff = {"mean_on": f"{_plain_seconds(on)}s", "mean_off": f"{_plain_seconds(off)}s"}
        _mark_order(d, "mm-onoff", direction, inside_link)
    return args[3:]


def _seconds(where: str, name: str, word: str) -> Decimal:
    """A mean time of mm-onoff (seconds, a decimal number, 0 or more)."""
    if not _NUMBER.fullmatch(word):
        raise _Bad(where, f"{name} {quote(word)} is not a number of seconds (0 or more, e.g. 10 or 0.5)")
    value = Decimal(word)
    if value < 0:
        raise _Bad(where, f"{name} {word} must be 0 seconds or more (mm-onoff refuses a negative mean)")
    if is_huge(value):
        raise _Bad(where, f"{name} {word} is too large (the profile's means are at most 604800 seconds)")
    return value


def _plain_seconds(value: Decimal) -> str:
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _link(args: list[str], dirs: dict[str, _Direction], warnings: list[str]) -> list[str]:
    """`mm-link UPTRACE DOWNTRACE [OPTIONS] [COMMAND...]` (linkshell.cc)."""
    options, positional = _getopt("mm-link", args, _LINK_OPTIONS, _LINK_SHORT)
    if len(positional) < 2:
        raise _Bad("mm-link", "expects two trace files: mm-link UPTRACE DOWNTRACE [OPTIONS] [COMMAND...]")
    for direction, path in zip(DIRECTIONS, positional):
        dirs[direction].trace = Path(path)
    queue_options: dict[str, str] = {}  # "uplink-queue" / "uplink-queue-args" ... -> value
    for option, value, given in options:
        if option == "once":
            raise _Bad(given, "is not supported: p4netem's data plane repeats a trace with its period, "
                              "so the link cannot end after one pass")
        if option.startswith("meter-"):
            warnings.append(f"{given}: mm-link's live graph is not drawn; `p4netem stats` shows each rule's "
                            "throughput, drops by reason and packets held, live")
        elif option.endswith("-log"):
            warnings.append(f"{given}: no per-packet log is written to {quote(value)}; `p4netem stats --json "
                            "--watch` records each rule's counters (packets in and out, drops by reason)")
        elif option in queue_options:  # getopt would keep the last one: say which is meant instead
            raise _Bad(f"--{option}", f"is given twice ({quote(queue_options[option])} and {quote(value)})")
        else:
            queue_options[option] = value or ""
    # An empty --x-queue-args= is no arguments, as mm-link reads it.
    queue_options = {k: v for k, v in queue_options.items() if v or not k.endswith("-args")}
    for direction in DIRECTIONS:
        kind = queue_options.get(f"{direction}-queue", "infinite")  # mm-link's default: an unlimited queue
        _queue(direction, kind, queue_options.get(f"{direction}-queue-args"), dirs[direction], warnings)
    return positional[2:]


def _meter(args: list[str], warnings: list[str]) -> list[str]:
    """`mm-meter [--meter-uplink] [--meter-downlink] [COMMAND...]`: only draws graphs."""
    options, positional = _getopt("mm-meter", args, _METER_OPTIONS, {})
    shown = ", ".join(given for _, _, given in options) or "no direction"
    warnings.append(f"mm-meter ({shown}): its live graph is not drawn; `p4netem stats` shows each rule's "
                    "throughput, drops by reason and packets held, live")
    return positional


def _getopt(shell: str, args: list[str], longs: Mapping[str, bool],
            shorts: Mapping[str, str]) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    """GNU getopt_long as the shells call it: options anywhere (getopt permutes the rest to the
    end) up to `--`; `--name=value` or `--name value`; a name may be any unambiguous prefix (an
    exact name wins); `-x VALUE` or `-xVALUE` for the short ones. Returns [(name, value, as
    given)] in order and the other words."""
    options: list[tuple[str, str | None, str]] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            positional += args[i:]
            break
        if word.startswith("--"):
            given, eq, value = word[2:].partition("=")
            name = _long_name(shell, given, longs)
            if longs[name] and not eq:
                if i == len(args):
                    raise _Bad(f"--{name}", f"needs a value: --{name}=VALUE or --{name} VALUE")
                value, i = args[i], i + 1
            elif not longs[name] and eq:
                raise _Bad(word, f"--{name} takes no value")
            options.append((name, value if longs[name] else None, f"--{name}" + (f"={value}" if longs[name] else "")))
        elif word.startswith("-") and word != "-":
            name = shorts.get(word[1])
            if name is None:
                raise _Bad(word, f"is not an option of {shell}; {_allowed(shell, longs, shorts)}")
            value = word[2:]
            if not value:
                if i == len(args):
                    raise _Bad(word, f"needs a value: -{word[1]} FILE")
                value, i = args[i], i + 1
            options.append((name, value, f"-{word[1]} {value}"))
        else:
            positional.append(word)
    return options, positional


def _long_name(shell: str, given: str, longs: Mapping[str, bool]) -> str:
    if given in longs:
        return given
    matches = [name for name in longs if given and name.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise _Bad(f"--{given}", f"is ambiguous: it could be {', '.join('--' + m for m in matches)}")
    raise _Bad(f"--{given}", f"is not an option of {shell}; {_allowed(shell, longs, {})}")


def _allowed(shell: str, longs: Mapping[str, bool], shorts: Mapping[str, str]) -> str:
    names = [f"--{n}=VALUE" if takes else f"--{n}" for n, takes in longs.items()]
    names += [f"-{s} FILE" for s in shorts]
    # getopt reads every option after the shell, the program's own too, up to a `--`.
    return f"allowed: {', '.join(names)} (put -- before the options of a program {shell} runs)"


def _queue(direction: str, kind: str, raw: str | None, d: _Direction, warnings: list[str]) -> None:
    """mm-link's `--DIRECTION-queue=TYPE --DIRECTION-queue-args=ARGS` as the direction's queue
    limits and AQM (link_queue.cc plays the trace; the queue type only decides what it drops)."""
    where = f"--{direction}-queue={kind}"
    if kind in _REFUSED_QUEUES:
        raise _Bad(where, f"is not supported: {_REFUSED_QUEUES[kind]}")
    if kind not in _QUEUE_ARGS:
        raise _Bad(where, f"is not a queue type; allowed: {_ALLOWED_QUEUES}")
    args = _queue_args(direction, raw)
    arg_where = f"--{direction}-queue-args={raw}"
    if kind == "infinite":
        if raw is not None:  # mm-link: "InfinitePacketQueue does not take arguments."
            raise _Bad(arg_where, f"the {kind} queue takes no arguments (give --{direction}-queue=droptail "
                                  "or codel for a limit)")
        return
    unused = [n for n in args if n not in _QUEUE_ARGS[kind]]
    if unused:
        raise _Bad(arg_where, f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not an argument of the "
                              f"{kind} queue; allowed: {', '.join(_QUEUE_ARGS[kind])}")
    # mm-link: 0 is "not given"; a dropping queue needs one limit ("must have a byte or packet limit").
    if not args.get("packets") and not args.get("bytes"):
        raise _Bad(arg_where if raw is not None else where,
                   f"the {kind} queue needs a limit: --{direction}-queue-args=packets=N and/or bytes=N "
                   f"(1..{MAX_32} each)")
    for limit in ("packets", "bytes"):
        if args.get(limit, 0) > MAX_32:
            raise _Bad(arg_where, f"{limit}={args[limit]} must be at most {MAX_32}")
        if args.get(limit):
            d.queue[limit] = args[limit]
    if kind == "codel":
        d.aqm = _codel(args, arg_where)
    elif kind == "pie":
        d.aqm = _pie(args, arg_where)
        warnings.append(_pie_warning(where))


def _queue_args(direction: str, raw: str | None) -> dict[str, int]:
    """mm-link's QUEUE_ARGS, "NAME=NUMBER[, NAME2=NUMBER2, ...]", whole numbers. Stricter than
    its get_arg, which finds a name anywhere in the text and reads the digits after its `=`: an
    unknown name (a typo it would skip) or a value that is not all digits is refused here."""
    if raw is None:
        return {}
    where = f"--{direction}-queue-args={raw}"
    args: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        match = _QUEUE_ARG.fullmatch(item)
        if match is None:
            raise _Bad(where, f"{quote(item)} is not NAME=NUMBER (a whole number, e.g. packets=100)")
        arg, value = match.group(1), int(match.group(2))
        if arg not in _ALL_QUEUE_ARGS:
            raise _Bad(where, f"{quote(arg)} is not a queue argument; mm-link's are {', '.join(_ALL_QUEUE_ARGS)}")
        if arg in args:
            raise _Bad(where, f"{arg} is given twice")
        args[arg] = value
    return args


def _codel(args: Mapping[str, int], where: str) -> dict[str, Any]:
    """CoDel's target and interval, both required by mm-link ("CoDel queue must have target and
    interval arguments"), in milliseconds. Mahimahi's CoDel drops and never marks: ecn off."""
    for name in ("target", "interval"):
        if not args.get(name):
            raise _Bad(where, f"the codel queue needs {name}=MS (milliseconds, 1..{_MAX_CODEL_MS}), as mm-link does")
        if args[name] > _MAX_CODEL_MS:
            raise _Bad(where, f"{name}={args[name]} must be at most {_MAX_CODEL_MS} ms (CoDel's times are 32-bit ns)")
    if args["target"] >= args["interval"]:
        raise _Bad(where, f"target={args['target']} must be below interval={args['interval']} "
                          "(p4netem's CoDel, RFC 8289: target is 5-10 % of the interval)")
    return {"kind": "codel", "target": f"{args['target']}ms", "interval": f"{args['interval']}ms", "ecn": False}


def _pie(args: Mapping[str, int], where: str) -> dict[str, Any]:
    """PIE's qdelay_ref and max_burst, both required and non-zero by mm-link ("PIE AQM queue must have
    qdelay_ref and max_burst parameters"), in milliseconds; Mahimahi's PIE updates every 30 ms and
    only drops: ecn off. alpha and beta are left at RFC 8033's 0.125 and 1.25 (Mahimahi's too)."""
    for name, what in (("qdelay_ref", "the target queue delay"), ("max_burst", "the burst allowance")):
        if not args.get(name):
            raise _Bad(where, f"the pie queue needs {name}=MS ({what}, milliseconds, 1..{_MAX_PIE_MS}), as mm-link "
                              "does")
        if args[name] > _MAX_PIE_MS:
            raise _Bad(where, f"{name}={args[name]} must be at most {_MAX_PIE_MS} ms (PIE's times are 32-bit ns)")
    return {"kind": "pie", "target": f"{args['qdelay_ref']}ms", "max_burst": f"{args['max_burst']}ms",
            "tupdate": f"{_MAHIMAHI_PIE_TUPDATE_MS}ms", "ecn": False}


def _pie_warning(where: str) -> str:
    return (f"{where}: p4netem runs RFC 8033's PIE with Linux's arithmetic (sch_pie) on each packet's exact queue "
            f"delay, updated every {_MAHIMAHI_PIE_TUPDATE_MS} ms as Mahimahi's; Mahimahi's PIE estimates the queue "
            "delay from an averaged drain rate in whole milliseconds and scales alpha and beta by 1/128, 1/32 or "
            "1/16 by probability band (below 1 %, below 10 %, from 10 %) of that delay in milliseconds, so its "
            "probability moves 62.5 times as fast as Linux's (faster still below 0.1 %); it also decays an idle "
            "queue's probability by 2 % per update (Linux: 1/64), draws each drop on its own (Linux spreads them "
            "out: RFC 8033's de-randomisation) and starts with no burst allowance. The same target, burst allowance and update period: not the "
            "same drops")


def _fields(d: _Direction) -> dict[str, Any]:
    """One direction's LinkParams fields (the trace is added by MahimahiChain.profile)."""
    out: dict[str, Any] = {}
    if d.delay_ms:
        out["delay"] = f"{d.delay_ms}ms"
    if d.survive != 1:
        out["loss"] = _percent(1 - d.survive)
    if d.onoff is not None:
        out["onoff"] = dict(d.onoff)
    if d.queue:
        out["queue"] = dict(d.queue)
    if d.aqm is not None:
        out["aqm"] = dict(d.aqm)
    return out


def _percent(fraction: Decimal) -> str:
    text = format(fraction * 100, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}%"


def _order_warning(shell: str, direction: str) -> str:
    where = "outside" if direction == "uplink" else "inside"
    if shell == "mm-onoff":
        return (f"mm-onoff {direction} is {where} mm-link in the chain, so Mahimahi drops those {direction} packets "
                "after the link while it is off (each used its delivery opportunity, and the off periods catch "
                "packets as they leave the queue); p4netem's on/off link comes before its queue "
                "(docs/pipeline-contract.md), so a dropped packet leaves its opportunity to the next: the same "
                "share of time off, and a little more throughput when the link is full")
    return (f"mm-loss {direction} is {where} mm-link in the chain, so Mahimahi loses those {direction} packets "
            "after the link (each used its delivery opportunity); p4netem's loss comes before its queue "
            "(docs/pipeline-contract.md), so a lost packet leaves its opportunity to the next: the same loss, "
            "and a little more throughput when the link is full")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
