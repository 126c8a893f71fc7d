"""Timelines: timed profile changes (a handover, an outage, congestion), from YAML or Python.

    name: handover
    rules: [{client: 10.0.0.1, ue: 1}]     # optional; default: all traffic between ports 1 and 2
    profiles:                               # optional inline profiles, applied by name
      - {name: weak-cell, both: {delay: 80ms, loss: 2%}}
    steps:
      - apply: lte                          # at 0s (a step without `at` starts when the last ended)
      - at: 10s
        set: {downlink.rate: 2Mbit, delay: 40ms}   # change parameters of the current profile
      - at: 20s
        outage: 3s                          # every packet dropped for 3 s, then back as before
      - apply: weak-cell                    # at 23s
      - wait: 5s
      - restore                             # the last applied profile again (undoes `set`)

Steps (exactly one action each, optional `at:` = time from the start, `note:` = free text):
  apply: NAME      a profile: inline, built-in, known to the controller, or a YAML file (relative
                   to the timeline file)
  set: {FIELD: VALUE, ...}  change fields of the profile in force; FIELD is a profile path:
                   `downlink.rate`, `uplink.loss`, `both.delay` or just `delay` (both directions),
                   `downlink.queue.packets`, `radio.promotion`; a value of null puts the field back
                   to its default; `radio.model: umts` (or `radio: umts`) changes the radio model,
                   starting from that model's defaults (the step's other `radio.*` fields on top)
  outage: DURATION every packet dropped (loss 100% both ways) for DURATION, then the profile in
                   force before comes back; `outage: open` lasts until a `restore` step
  restore          end an open outage; otherwise re-apply the last `apply` (undoing `set` steps)
  wait: DURATION   nothing happens for DURATION (a trailing wait holds the last state)

`set_mode: in-place` (the default) makes `set` steps, and a `restore` of the profile in force,
in-place changes (the rule's queue carries on at the new parameters); `set_mode: switch` makes
them switch to the spare id (a new, empty queue) like `apply` does.

Loading and compiling check everything (profile names, every `set` against the profile model,
times that go backwards) and raise one TimelineError listing every problem with its step and
field, before the player writes anything. TimelinePlayer (Controller.run_timeline) prepares each
change ahead of its time (write A) and sends only the one atomic flip (write B) at the step time;
it records, per change, how late the switch acknowledged it.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ..profiles import Profile, ProfileError
from ..profiles.errors import KNOWN_FIELDS, FieldProblems, Problem, problems_from_validation_error
from ..profiles.fields import annotate, duration, one_line
from ..profiles.units import Duration, quote
from ..profiles.yaml_files import _parse_yaml, load_profile
from ..safe_yaml import YamlInputError, read_text
from .realtime import GrpcThreadsRealtime, Realtime
from .rules import Rule

__all__ = ["Step", "Timeline", "TimelineError", "Event", "EventResult", "TimelineResult", "TimelinePlayer",
           "OUTAGE", "modify_profile"]

ACTIONS = ("apply", "set", "outage", "restore", "wait")
_HOUR = 3600 * 10**9
StepTime = duration(0, 24 * _HOUR)

Note = one_line("note")
Name = one_line("name")

OUTAGE = Profile.parse({"name": "outage", "title": "Outage", "description": "every packet dropped",
                        "both": {"loss": "100%"}})


class TimelineError(ProfileError):
    """A timeline that is not valid; `problems` name the step and field (`steps[2].set.rate`)."""


def _outage_value(raw: Any) -> Duration | str:
    if isinstance(raw, str) and raw.strip().lower() == "open":
        return "open"
    try:
        value = Duration.parse(raw)
    except Exception as exc:  # UnitError
        raise ValueError(f"{exc}; allowed a duration (e.g. 3s) or open") from None
    if not 0 < value <= 24 * _HOUR:
        raise ValueError(f"{value} out of range (0s..24h], or open")
    return value


OutageLength = Annotated[Duration | str, *annotate(_outage_value, str, {"description": "duration or open"})]


def _changes(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{quote(raw)} is not a mapping of profile fields to values "
                         "(e.g. {downlink.rate: 2Mbit})")
    bad = [k for k in raw if not isinstance(k, str) or not k]
    if bad:
        raise ValueError(f"{quote(bad[0])} is not a profile field path")
    return dict(raw)


Changes = Annotated[dict[str, Any], *annotate(_changes, dict, {"type": "object"})]


class Step(BaseModel):
    """One timeline step: an optional time and exactly one action."""

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    at: StepTime | None = None
    apply: str | None = None
    set: Changes | None = None
    outage: OutageLength | None = None
    restore: bool | None = None
    wait: StepTime | None = None
    note: Note = ""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str) and data.strip() == "restore":
            return {"restore": True}
        if isinstance(data, Mapping) and "restore" in data and data["restore"] is None:
            return {**data, "restore": True}  # `- restore:` with no value
        if not isinstance(data, (Mapping, Step)):
            raise ValueError(f"{quote(data)} is not a step (a mapping with one of "
                             f"{', '.join(ACTIONS)}, or `restore`)")
        return data

    @field_validator("apply")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("empty profile name")
        return value.strip() if value else value

    @model_validator(mode="after")
    def _one_action(self) -> "Step":
        given = [a for a in ACTIONS if getattr(self, a) is not None and getattr(self, a) is not False]
        if len(given) != 1:
            what = "no action" if not given else f"{len(given)} actions ({', '.join(given)})"
            raise FieldProblems([Problem("", f"{what}; a step has exactly one of {', '.join(ACTIONS)}")])
        return self

    @property
    def action(self) -> str:
        # By identity, as _one_action counts them: `wait: 0s` is a Duration equal to False, in which a
        # test by equality found no action (StopIteration out of compile and duration_ns).
        fields = self.__dict__
        for a in ACTIONS:
            value = fields[a]
            if value is not None and value is not False:
                return a
        raise AssertionError("a validated step has exactly one action")

    def describe(self) -> str:
        a = self.action
        if a == "apply":
            return f"apply {self.apply}"
        if a == "set":
            return "set " + ", ".join(f"{k}={'null' if v is None else v}" for k, v in (self.set or {}).items())
        if a == "outage":
            return f"outage {self.outage}"
        if a == "wait":
            return f"wait {self.wait}"
        return "restore"


KNOWN_FIELDS.update(Step.model_fields)


@dataclass(frozen=True)
class Event:
    """One profile change of a compiled timeline."""

    at_ns: int  # from the start
    step: int  # index of the step that makes it
    action: str  # what it is, one line
    profile: Profile  # the profile in force from then on
    # True: the rule's current profile entries are modified where they are (the same queue goes
    # on at the new parameters: `set`, `restore` of the applied profile); False: the rule flips
    # to its spare id (a new profile: `apply`, outages). See docs/control.md.
    in_place: bool = False


SET_MODES = ("in-place", "switch")


def _set_mode(raw: Any) -> str:
    if isinstance(raw, str) and raw.strip().lower() in SET_MODES:
        return raw.strip().lower()
    raise ValueError(f"{quote(raw)} is not a set mode; allowed {', '.join(SET_MODES)}")


SetMode = Annotated[str, *annotate(_set_mode, str, {"enum": list(SET_MODES)})]


class Timeline(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True)

    name: Name = ""
    # How `set` and `restore` steps change the link: in place (the rule's queue carries on at the
    # new parameters, as `tc qdisc change` does) or by switching to the spare profile id (a new,
    # empty queue next to the old one draining). `apply` and outages always switch.
    set_mode: SetMode = "in-place"
    rules: list[Rule] = []
    profiles: list[Profile] = []
    steps: list[Step]
    base_dir: Path | None = None  # for profile files named by relative path (not a YAML key)
    source: str | None = None  # the file, for error messages (not a YAML key)

    @field_validator("steps")
    @classmethod
    def _non_empty(cls, steps: list[Step]) -> list[Step]:
        if not steps:
            raise ValueError("must be a non-empty list of steps")
        return steps

    # ---- construction ----------------------------------------------------------------------------

    @classmethod
    def parse(cls, data: Any, source: str | None = None, base_dir: Path | None = None) -> "Timeline":
        if isinstance(data, list):
            data = {"steps": data}  # a bare list of steps
        if not isinstance(data, Mapping):
            raise TimelineError([Problem("", f"{quote(data)} is not a timeline (a mapping with `steps:`)")],
                                source)
        for key in ("base_dir", "source"):
            if key in data:
                raise TimelineError([Problem(key, "unknown field")], source)
        try:
            return cls.model_validate({**data, "base_dir": base_dir, "source": source})
        except ValidationError as exc:
            raise TimelineError(problems_from_validation_error(exc, data), source) from None

    @classmethod
    def loads(cls, text: str, source: str = "<timeline>", base_dir: Path | None = None) -> "Timeline":
        try:
            data = _parse_yaml(text, source)
        except ProfileError as exc:
            raise TimelineError(exc.problems, source) from None
        return cls.parse(data, source, base_dir)

    @classmethod
    def load(cls, path: str | Path) -> "Timeline":
        path = Path(path)
        try:
            text = read_text(path)
        except YamlInputError as exc:
            raise TimelineError([Problem(exc.where, exc.message)], str(path)) from None
        except OSError as exc:
            raise TimelineError([Problem("", f"cannot read: {exc.strerror or exc}")], str(path)) from None
        except UnicodeDecodeError as exc:
            raise TimelineError([Problem("", f"not UTF-8 text: {exc.reason}")], str(path)) from None
        return cls.loads(text, str(path), path.parent)

    # ---- compile ---------------------------------------------------------------------------------

    @property
    def needs_base(self) -> bool:
        """True when the first step that needs a profile in force comes before any `apply`: the
        player then starts from the profile the switch has."""
        for step in self.steps:
            if step.action == "apply":
                return False
            if step.action in ("set", "outage", "restore"):
                return True
        return False

    def compile(self, resolve: Callable[[str | Path], Profile], base: Profile | None = None) -> list[Event]:
        """The profile changes with their times. `resolve` turns a name or file into a Profile
        (Controller.resolve_profile); `base` is the profile in force before the first step.
        Raises TimelineError listing every problem."""
        inline = {p.name: p for p in self.profiles}
        problems: list[Problem] = []
        events: list[Event] = []
        derived: dict[tuple, tuple[Profile, Profile]] = {}  # _modified's memos
        documents: dict[tuple, Profile] = {}
        cursor = 0
        current, applied, before_outage = base, base, None
        for i, step in enumerate(self.steps):
            where = f"steps[{i}]"
            t = cursor
            if step.at is not None:
                if step.at < cursor:
                    problems.append(Problem(f"{where}.at", f"{step.at} is before the end of the previous step "
                                            f"({Duration(cursor)})"))
                t = int(step.at)
            action = step.action
            if action == "wait":
                cursor = t + int(step.wait)
                continue
            if action == "apply":
                name = step.apply
                try:
                    if name in inline:
                        profile = inline[name]
                    else:
                        name = self._resolvable(name)
                        profile = resolve(name)
                except ProfileError as exc:
                    # A profile file's problems say which file (the step's value), as own_profiles does.
                    what = f"{step.apply}: " if Path(str(step.apply)).suffix in (".yaml", ".yml") else ""
                    problems += [Problem(f"{where}.apply", what + (p.message if not p.path else str(p)))
                                 for p in exc.problems]
                    cursor = t
                    continue
                if before_outage is not None:
                    before_outage = None  # an apply ends an open outage too
                current = applied = profile
                events.append(Event(t, i, f"apply {profile.name}", profile))
            elif action == "set":
                if current is None:
                    problems.append(Problem(f"{where}.set", "no profile in force to change; apply one first"))
                elif before_outage is not None:
                    problems.append(Problem(f"{where}.set", "inside an open outage; restore first"))
                else:
                    try:
                        current = _modified(current, step.set or {}, derived, documents)
                        events.append(Event(t, i, step.describe(), current, in_place=self.in_place_sets))
                    except ProfileError as exc:
                        problems += exc.prefixed(f"{where}.set")
            elif action == "outage":
                if current is None:
                    problems.append(Problem(f"{where}.outage", "no profile in force to come back to; apply one first"))
                elif before_outage is not None:
                    problems.append(Problem(f"{where}.outage", "already in an outage"))
                else:
                    events.append(Event(t, i, f"outage {step.outage}", OUTAGE))
                    if step.outage == "open":
                        before_outage = current
                    else:
                        t += int(step.outage)
                        events.append(Event(t, i, f"end of outage, back to {current.name}", current))
            elif action == "restore":
                if before_outage is not None:
                    current, before_outage = before_outage, None
                    events.append(Event(t, i, f"end of outage, back to {current.name}", current))
                elif applied is None:
                    problems.append(Problem(where, "restore: nothing was applied before"))
                else:
                    # The same profile's parameters back on the same link: like a `set`.
                    in_place = self.in_place_sets and current is not None and current.name == applied.name
                    current = applied
                    events.append(Event(t, i, f"restore {applied.name}", applied, in_place=in_place))
            cursor = t
        if problems:
            raise TimelineError(problems, self.source)
        # Changes due at the same instant collapse into the last one (one flip, not two); in
        # place only if every one of them was (an `apply` in the group needs its new id).
        merged: list[Event] = []
        for event in events:
            if merged and merged[-1].at_ns == event.at_ns:
                event = Event(event.at_ns, event.step, f"{merged[-1].action}; {event.action}", event.profile,
                              in_place=merged[-1].in_place and event.in_place)
                merged.pop()
            merged.append(event)
        return merged

    def _resolvable(self, name: str) -> str:
        """What `resolve` gets for `apply: NAME` (NAME not an inline profile): a YAML file name
        relative to the timeline's directory, any other name as it is."""
        path = Path(name)
        if self.base_dir is not None and path.suffix in (".yaml", ".yml") and not path.is_absolute():
            return str(self.base_dir / path)
        return name

    def own_profiles(self) -> list[Profile]:
        """The profiles this timeline defines: its inline `profiles:`, then the profiles of the
        YAML files its `apply` steps name (relative to the timeline file). Names of built-in or
        otherwise known profiles are not looked up. What `--profiles TIMELINE` makes known by name.
        Raises TimelineError naming the step of a file that cannot be loaded."""
        inline = {p.name for p in self.profiles}
        profiles = list(self.profiles)
        problems: list[Problem] = []
        files: set[str] = set()
        for i, step in enumerate(self.steps):
            if step.action != "apply" or step.apply in inline:
                continue
            name = self._resolvable(str(step.apply))
            if Path(name).suffix not in (".yaml", ".yml") or name in files:
                continue
            files.add(name)
            try:
                profiles.append(load_profile(name))
            except ProfileError as exc:
                problems += [Problem(f"steps[{i}].apply", f"{step.apply}: {p.message if not p.path else p}")
                             for p in exc.problems]
        if problems:
            raise TimelineError(problems, self.source)
        return profiles

    @property
    def in_place_sets(self) -> bool:
        return self.set_mode == "in-place"

    def duration_ns(self) -> int:
        """When the last step ends (its time plus any outage or wait), ignoring `at` errors."""
        cursor = 0
        for step in self.steps:
            t = max(cursor, int(step.at)) if step.at is not None else cursor
            if step.action == "wait":
                t += int(step.wait)
            elif step.action == "outage" and step.outage != "open":
                t += int(step.outage)
            cursor = t
        return cursor


def _modified(profile: Profile, changes: Mapping[str, Any], memo: dict[tuple, tuple[Profile, Profile]],
              documents: dict[tuple, Profile]) -> Profile:
    """modify_profile within one compile, each profile and changes validated once: a trace played in
    1 ms windows (p4netem.control.trace) is tens of thousands of `set` steps among a few rates, and a
    Profile.parse each took seconds before the first change (and left as many profiles for the garbage
    collector to walk). The same changes on the same profile object give the same profile object;
    equal documents (a profile set back to earlier rates) give the profile parsed from the first, so
    that the objects, and the keys, repeat. Values are keyed with their type (True == 1, but
    `loss: true` is no `loss: 1`); a block or list value is not worth a key."""
    try:
        key = (id(profile), tuple((k, type(v), v) for k, v in changes.items()))
        hit = memo.get(key)
    except TypeError:  # an unhashable value
        return modify_profile(profile, changes)
    if hit is not None and hit[0] is profile:  # the memo holds `profile`, so its id is not reused
        return hit[1]
    modified = modify_profile(profile, changes, parsed=documents)
    memo[key] = (profile, modified)
    return modified


def _frozen(value: Any) -> Any:
    """A key for a profile document (dicts of dicts, lists and scalars), each scalar with its type;
    TypeError for anything else."""
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list):
        return (list, tuple(_frozen(v) for v in value))
    hash(value)
    return type(value), value


def modify_profile(profile: Profile, changes: Mapping[str, Any], *, parsed: dict | None = None) -> Profile:
    """`profile` with fields changed, by path: `downlink.rate`, `uplink.queue.packets`,
    `both.delay` or `delay` (both directions), `radio.promotion`; a value of None deletes the
    field (back to its default). Raises ProfileError naming each bad path as written. `parsed`
    (document key -> Profile) keeps the profiles validated before: an equal document gives the same
    profile without validating it again."""
    doc: dict[str, Any] = {
        "name": profile.name, "title": profile.title, "description": profile.description,
        "source": profile.source,
        "uplink": profile.uplink.model_dump(mode="json", exclude_defaults=True),
        "downlink": profile.downlink.model_dump(mode="json", exclude_defaults=True),
        "radio": profile.radio.model_dump(mode="json"),
    }
    written: dict[str, str] = {}  # target path -> path as written
    problems: list[Problem] = []
    changes = _radio_model_first(doc, changes)
    for key, value in changes.items():
        parts = key.strip().split(".")
        if parts == ["radio"]:
            # `radio: lte` (or null, or a whole block) replaces the radio, as in a profile file.
            doc["radio"] = ({"model": "none"} if value is None else {"model": value} if isinstance(value, str)
                            else value)
            written["radio"] = key
            continue
        if parts[0] in ("uplink", "downlink", "radio"):
            targets = [parts]
        elif parts[0] == "both":
            targets = [["uplink", *parts[1:]], ["downlink", *parts[1:]]]
        elif parts[0] in ("name", "title", "description", "source"):
            problems.append(Problem(key, "cannot be changed by a timeline"))
            continue
        else:
            targets = [["uplink", *parts], ["downlink", *parts]]
        for target in targets:
            if len(target) < 2 or not all(target):
                problems.append(Problem(key, "is not a profile field path (e.g. downlink.rate, delay)"))
                break
            node = doc
            for part in target[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = {} if child is None else child
                    if not isinstance(child, dict):
                        problems.append(Problem(key, f"{'.'.join(target[:-1])} is not a block"))
                        break
                    node[part] = child
                node = child
            else:
                if value is None:
                    node.pop(target[-1], None)
                else:
                    node[target[-1]] = value
                written[".".join(target)] = key
    if problems:
        raise ProfileError(problems)
    if isinstance(doc["radio"], dict) and doc["radio"].get("model") == "none":
        # A profile without radio has no radio fields: one set here would be dropped in silence
        # (only radio.model, or `radio`, can give it a radio).
        dropped = [key for key in changes if key.strip().startswith("radio.") and key.strip() != "radio.model"]
        if dropped:
            raise ProfileError([Problem(key, f"{profile.name!r} has no radio (radio model none): set radio.model "
                                             "too to give it one") for key in dropped])
        doc["radio"] = {"model": "none"}
    key = None
    if parsed is not None:
        try:
            key = _frozen(doc)
        except TypeError:
            pass
        if key in parsed:
            return parsed[key]
    try:
        modified = Profile.parse(doc)
        if key is not None:
            parsed[key] = modified
        return modified
    except ProfileError as exc:
        out: list[Problem] = []
        for p in exc.problems:
            path = p.path
            for target, key in sorted(written.items(), key=lambda kv: -len(kv[0])):
                if path == target or path.startswith(target + "."):
                    path = key + path[len(target):]
                    break
            problem = Problem(path, p.message)
            if problem not in out:
                out.append(problem)
        raise ProfileError(out) from None


def _radio_model_first(doc: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`changes` with the ones that choose the radio model first (`radio: MODEL`, then
    `radio.model`), so that the step's other `radio.*` changes apply on top of them whatever
    their order. A `radio.model` naming another model than the profile's starts the radio block
    from that model's defaults: the old model's fields do not carry over (an lte radio's `tail`
    is no field of umts)."""
    whole = [k for k in changes if k.strip() == "radio"]
    model = [k for k in changes if k.strip() == "radio.model"]
    if model and changes[model[0]] != doc["radio"].get("model"):
        doc["radio"] = {}
    return {**{k: changes[k] for k in whole + model}, **changes}


# ---- running ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventResult:
    """When one change happened, against its schedule (CLOCK_MONOTONIC, ns)."""

    event: Event
    scheduled_ns: int  # absolute
    prepared_ns: int  # write A done (when this is after scheduled_ns, preparing made it late)
    sent_ns: int  # the flip write was sent ...
    done_ns: int  # ... and acknowledged: the new profile is in force
    wall_ns: int  # CLOCK_REALTIME at sent_ns (to line up with packet timestamps)

    @property
    def error_ns(self) -> int:
        """How late the change was in force: acknowledged minus scheduled."""
        return self.done_ns - self.scheduled_ns

    @property
    def send_error_ns(self) -> int:
        return self.sent_ns - self.scheduled_ns


@dataclass
class TimelineResult:
    timeline: Timeline
    start_ns: int  # CLOCK_MONOTONIC of t = 0
    start_wall_ns: int  # CLOCK_REALTIME of t = 0
    events: list[EventResult] = field(default_factory=list)
    interrupted: bool = False

    @property
    def errors_ms(self) -> list[float]:
        return [e.error_ns / 1e6 for e in self.events]

    @property
    def max_error_ms(self) -> float:
        return max(self.errors_ms, default=0.0)


def sleep_until(deadline_ns: int) -> None:
    """Sleep until CLOCK_MONOTONIC reaches deadline_ns. No spinning: a spinning real-time thread
    would take a CPU from the traffic under test right at every change. A sleep overshoots by the
    timer slack (50 us for normal threads, none for real-time ones) plus the wake-up latency."""
    while True:
        left = deadline_ns - time.monotonic_ns()
        if left <= 0:
            return
        time.sleep(left / 1e9)


class TimelinePlayer:
    """Runs a timeline against a Controller (see Controller.run_timeline).

    rt_priority: SCHED_FIFO priority (root only; 0 = off) of the wait-and-flip part of each step
    and, for the run, of this process's gRPC I/O threads: on a busy machine a Write otherwise
    waits milliseconds for a CPU. The default 4 is below p4netem-switch's P4Runtime threads
    (--grpc-rt-priority 5), so the switch handles the Write the moment it arrives, and below its
    data plane (10). Preparing each change (a Read and a Write) runs at normal priority."""

    def __init__(self, controller: Any, timeline: Timeline, rules: Sequence[Rule] | None = None,
                 lead_s: float = 0.2, on_event: Callable[[EventResult], None] | None = None,
                 rt_priority: int = 4, stop: threading.Event | None = None):
        self.ctl = controller
        # Set from another thread (the web server's stop button) to end the run before its next
        # step, as Ctrl-C does: result.interrupted, the last profile stays.
        self.stop = stop
        self.timeline = timeline
        self.rules = list(rules) if rules else (list(timeline.rules) or None)
        self.lead_ns = int(lead_s * 1e9)
        self.on_event = on_event
        self.rt_priority = rt_priority

    def compile(self) -> list[Event]:
        """Everything checked before the first write (the base profile comes from the switch when
        the timeline starts with `set`, `outage` or `restore`)."""
        for profile in self.timeline.profiles:
            self.ctl.add_profile(profile)
        base = None
        if self.timeline.needs_base:
            rules = self.ctl.parse_rules(self.rules)
            state = self.ctl.state()
            managed = state.find(rules[0])
            if managed is not None:
                applied = self.ctl.applied_rule(managed, state)
                base = applied.profile
            if base is None:
                raise TimelineError([Problem("steps[0]", f"the timeline starts without `apply` and rule "
                                                         f"{rules[0].describe()} has no profile on the switch")],
                                    self.timeline.source)
        return self.timeline.compile(self.ctl.resolve_profile, base)

    def _stopped_before(self, deadline_ns: int) -> bool:
        """Wait for `stop` until deadline_ns (at once without one); True if it was set."""
        if self.stop is None:
            return False
        return self.stop.wait(max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9))

    def run(self) -> TimelineResult:
        events = self.compile()
        rules = self.ctl.parse_rules(self.rules)
        end_offset = self.timeline.duration_ns()
        gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a collection in the middle of a step would cost milliseconds (see below)
        start = time.monotonic_ns() + self.lead_ns
        result = TimelineResult(self.timeline, start, time.time_ns() + self.lead_ns)
        grpc_threads = GrpcThreadsRealtime(self.rt_priority).__enter__()
        # A step prepared and not committed (stopped or interrupted before its time): abandoned at
        # the end, which undoes its staged entries and gives its profile ids and rule numbers back
        # to the controller (a long-lived one, the web server's, would otherwise run out of them).
        pending = None
        try:
            for event in events:
                # Normal priority: preparing (a Read and write A) is not time-critical as long as
                # it ends before the step's time, and a real-time thread doing it would take a CPU
                # from the traffic under test for milliseconds at every step.
                prepared = pending = self.ctl.prepare([(rule, event.profile) for rule in rules],
                                                      in_place=event.in_place)
                ready = time.monotonic_ns()
                scheduled = start + event.at_ns
                if scheduled - ready > 50_000_000:
                    gc.collect(1)  # the young generations, well before the step's time
                if self._stopped_before(scheduled - 5_000_000):
                    result.interrupted = True
                    return result
                with Realtime(self.rt_priority):
                    sleep_until(scheduled)
                    wall = time.time_ns()
                    pending = None  # commit() itself undoes and releases what it cannot flip
                    prepared.commit()
                done = prepared.result
                er = EventResult(event, scheduled, ready, done.flip_sent_ns, done.flip_done_ns, wall)
                result.events.append(er)
                if self.on_event:
                    self.on_event(er)
                prepared.cleanup()
            if self._stopped_before(start + end_offset):
                result.interrupted = True
                return result
            sleep_until(start + end_offset)
        except KeyboardInterrupt:
            result.interrupted = True
        finally:
            if pending is not None:
                pending.abandon()
            grpc_threads.__exit__()
            if gc_was_enabled:
                gc.enable()
        return result
