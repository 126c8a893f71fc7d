"""`p4netem trace run|check`: Mahimahi-style trace-driven links (p4netem.control.trace)."""

from __future__ import annotations

import gc
import json
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional, TypeVar

import typer

from ..profiles.errors import Problem, ProfileError
from ..profiles.units import Duration, Rate, UnitError
from .apply_cmd import ProfilesOpt, RuleOpt, RulesFile, _is_timeline, gather_profiles, gather_rules
from .common import (DEFAULT_ADDR, EXIT_INTERRUPTED, DeviceId, ElectionId, Json, SwitchAddr, connect, console,
                     error, guarded, warning)
from .timeline_cmd import print_lateness

# The traces, the profiles and the controller are imported by the functions that use them
# (cli.common says why).
if TYPE_CHECKING:
    from ..control.trace import MahimahiTrace
    from ..profiles import Profile
    from ..profiles.link import TracePlacement

app = typer.Typer(help="Trace-driven links: play Mahimahi delivery traces as rate changes "
                       "(see docs/control.md#trace-driven-links).", no_args_is_help=True)

TraceOpt = Optional[Path]
UplinkOpt = Annotated[TraceOpt, typer.Option(
    "--uplink", metavar="FILE", help="Mahimahi trace of the uplink (client to server): one ms timestamp per "
                                     "1500-byte delivery opportunity; it repeats.")]
DownlinkOpt = Annotated[TraceOpt, typer.Option(
    "--downlink", metavar="FILE", help="Mahimahi trace of the downlink (server to client).")]
WindowOpt = Annotated[str, typer.Option(
    "--window", metavar="DURATION", help="Rate window: each window's opportunities become one rate (1ms..10s).")]
DurationOpt = Annotated[Optional[str], typer.Option(
    "--duration", metavar="DURATION", help="How long to play (the traces loop). Default: one period of the "
                                           "longer trace.")]
BaseOpt = Annotated[Optional[str], typer.Option(
    "--profile", metavar="PROFILE", help="Profile for everything but the traced directions' rates (delay, loss, "
                                         "queue...): a built-in, a name from --profiles or a YAML file; it may "
                                         "be only a queue limit and an AQM (both: {queue: 100, aqm: codel}). "
                                         "Default: none (unlimited queue as mm-link's default).")]


T = TypeVar("T")
MAX_DURATION_NS = 24 * 3600 * 10**9  # a timeline's steps are at most 24 h from its start


def _load(uplink: Path | None, downlink: Path | None, window: str, duration: str | None):
    from ..control.trace import load_trace, trace_duration

    problems = []
    try:
        window_ns = int(Duration.parse(window))
        if not 10**6 <= window_ns <= 10 * 10**9:
            problems.append(Problem("--window", f"{window} out of range 1ms..10s"))
    except UnitError as exc:
        problems.append(Problem("--window", str(exc)))
    if uplink is None and downlink is None:
        problems.append(Problem("", "give --uplink FILE, --downlink FILE or both"))
    if problems:
        raise ProfileError(problems)
    traces = {d: load_trace(p) for d, p in (("uplink", uplink), ("downlink", downlink)) if p is not None}
    try:
        duration_ns = int(Duration.parse(duration)) if duration else trace_duration(list(traces.values()))
    except UnitError as exc:
        raise ProfileError([Problem("--duration", str(exc))]) from None
    if duration_ns > MAX_DURATION_NS:
        raise ProfileError([Problem("--duration" if duration else "", f"{Duration(duration_ns)} out of range "
                                    f"{Duration(window_ns)}..{Duration(MAX_DURATION_NS)} (a timeline's steps "
                                    "are at most 24h from its start)" + ("" if duration else
                                                                         ": the trace's period; give --duration"))])
    if duration_ns < window_ns:
        if duration:
            raise ProfileError([Problem("--duration", f"{Duration(duration_ns)} is shorter than the window "
                                                      f"{Duration(window_ns)}")])
        raise ProfileError([Problem("--window", f"{Duration(window_ns)} is longer than the trace's period "
                                                f"{Duration(duration_ns)}, the default --duration: give a "
                                                "shorter --window or a --duration of at least the window")])
    return traces, window_ns, duration_ns


def _summary(direction: str, trace: MahimahiTrace, series: list[tuple[int, int]], window_ns: int,
             duration_ns: int) -> str:
    """One line on a trace and its window_rates `series`."""
    rates = [r for _, r in series]
    return (f"{direction}: {trace.source}: {len(trace.opportunities_ms)} opportunities over {trace.period_ms} ms "
            f"(mean {_kbit(trace.mean_rate_bps)}); {len(rates)} rate changes of {Duration(window_ns)} "
            f"windows over {Duration(duration_ns)}, rates {_kbit(min(rates))}..{_kbit(max(rates))}")


def _kbit(bps: float) -> Rate:
    """For display: to the kbit/s (the switch gets the exact rate); below 1 kbit/s to the bit/s."""
    return Rate(round(bps, -3)) if bps >= 1000 else Rate(round(bps))


@app.command("check")
@guarded
def check(uplink: UplinkOpt = None, downlink: DownlinkOpt = None, window: WindowOpt = "20ms",
          duration: DurationOpt = None) -> None:
    """Read traces (no switch needed) and print what they become: rates per window."""
    from ..control.trace import window_rates

    traces, window_ns, duration_ns = _load(uplink, downlink, window, duration)
    for d, t in traces.items():
        console.print(_summary(d, t, window_rates(t, window_ns, duration_ns), window_ns, duration_ns), highlight=False)


@app.command("run")
@guarded
def run(
    uplink: UplinkOpt = None,
    downlink: DownlinkOpt = None,
    window: WindowOpt = "20ms",
    duration: DurationOpt = None,
    profile: BaseOpt = None,
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Play Mahimahi traces on the rules (default: all traffic between ports 1 and 2).

    Each window's delivery opportunities (x 1500 bytes) become that direction's rate; the
    rates change in place at the window boundaries (the queue carries on), played by the
    timeline player, on --profile's delay, loss and queue (a traced direction's rate in it is
    replaced; the profile may be only a queue limit and an AQM, as for `trace load`). Everything
    is checked before the first change. Ctrl-C stops it (exit 130) and leaves the last rate on."""
    from ..control.trace import trace_timeline, traced_profile, window_rates

    traces, window_ns, duration_ns = _load(uplink, downlink, window, duration)
    # The garbage collector is paused while the timeline is built and compiled: 1 ms windows make up to
    # 100000 steps, and its passes over them were a third of the time before the first change. The
    # player pauses it for the run anyway (after one full collection); it is back when the run ends.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        rates = {d: window_rates(t, window_ns, duration_ns) for d, t in traces.items()}  # once: they are many
        # The base as `load` takes it (a queue limit or an AQM and no rate is a whole link with the
        # traces' rates in place), checked with the first windows' rates as the timeline applies it.
        first = {d: {"rate": f"{series[0][1]}bit"} for d, series in rates.items()}
        known, partial = _library(profiles, lambda doc: traced_profile(doc, first))
        base, source = _base_document(profile, known, partial)
        _sourced(source, lambda: traced_profile(base, first))
        _warn_unused_rates(base, source, traces, "sets the rate window by window")
        timeline = trace_timeline(traces.get("uplink"), traces.get("downlink"), window_ns=window_ns,
                                  duration_ns=duration_ns, base=base, rates=rates)
        rules = gather_rules(rule, rules_file)
        if not as_json:
            for d, t in traces.items():
                console.print(_summary(d, t, rates[d], window_ns, duration_ns), highlight=False)
        with connect(addr, device_id, election_id, profiles=list(known.values())) as ctl:
            result = ctl.run_timeline(timeline, rules or None)
    finally:
        if gc_was_enabled:
            gc.enable()
    errors = result.errors_ms
    if as_json:
        typer.echo(json.dumps({
            "window_ms": window_ns / 1e6, "duration_ms": duration_ns / 1e6, "interrupted": result.interrupted,
            "start_wall_ns": result.start_wall_ns, "changes": len(errors),
            "error_ms": {"median": round(statistics.median(errors), 3), "max": round(max(errors), 3)} if errors else None,
            "events": [{"at_ms": e.event.at_ns / 1e6, "action": e.event.action, "error_ms": round(e.error_ns / 1e6, 3),
                        "wall_ns": e.wall_ns} for e in result.events],
        }, indent=2))
    else:
        print_lateness(errors)
    if result.interrupted:
        error(f"interrupted after {len(result.events)} changes; the switch keeps the last rate")
        raise typer.Exit(EXIT_INTERRUPTED)


def _library(files: list[Path] | None,
             complete: Callable[[dict], Profile]) -> tuple[dict[str, Profile], dict[str, dict]]:
    """--profiles of `run` and `load`: the profiles by name, as gather_profiles reads them, and the
    documents of profile files that are whole profiles only with the traces in place (a queue limit
    or an AQM and no rate, as a --profile file may be: `_base_document`), checked with them
    (`complete`: the traced directions' rates or placements put in), by name. A later file's name
    wins, as among gather_profiles'."""
    from ..profiles.yaml_files import load_profile_library

    known: dict[str, Profile] = {}
    partial: dict[str, dict] = {}
    for path in files or []:
        if _is_timeline(path):  # a timeline's profiles are whole: its steps apply them alone
            found, docs = gather_profiles([path]), {}
        else:
            found, docs = load_profile_library(path, complete)
        for p in found:
            known[p.name] = p
            partial.pop(p.name, None)
        for name, doc in docs.items():
            partial[name] = doc
            known.pop(name, None)
    return known, partial


def _base_document(profile: str | None, known: dict[str, Profile],
                   partial: dict[str, dict]) -> tuple[dict, str | None]:
    """--profile of `run` and `load` as a profile document, and the file it is from (None for a
    name): a document of --profiles that is whole only with the traces in place (`partial`, as
    _library reads them), a built-in or known name as that profile, a file as written; not
    validated yet, so that a base which is a whole link only with its trace (a queue limit or an
    AQM and no rate: mm-link's --uplink-queue and --uplink-queue-args) is taken; `traced_profile`
    checks it once the traces (`load`) or their rates (`run`) are in."""
    from ..control.catalog import resolve_profile
    from ..profiles.library import builtin_profiles
    from ..profiles.yaml_files import load_profile_document

    if profile is None:
        return {"name": "trace"}, None
    if profile in partial:
        return partial[profile], None
    pool = {**builtin_profiles(), **known}
    path = Path(profile)
    if profile in pool or not (path.suffix in (".yaml", ".yml") or path.exists()):
        return resolve_profile(profile, pool).to_dict(), None
    return load_profile_document(path), str(path)


def _sourced(source: str | None, check: Callable[[], T]) -> T:
    """check(), its ProfileError naming the --profile file the base came from (as a profile file's
    problems are named everywhere else)."""
    try:
        return check()
    except ProfileError as exc:
        raise (exc.with_source(source) if source and exc.source is None else exc) from None


def _warn_unused_rates(base: dict, source: str | None, traced: Iterable[str], how: str) -> None:
    """A rate of the base that no direction uses, since the trace replaces it (`unused_rates`): taken,
    as a direction's block overrides `both` and `--netem-uplink` overrides `--netem`, and named, as
    the netem and Mahimahi converters name what they ignore; a bad one was refused already."""
    from ..control.trace import unused_rates

    where = f"{source or base.get('name')}: "
    for field, rate in unused_rates(base, list(traced)):
        warning(f"{where}{field}: {rate} is not used: the trace {how}; leave it out")


def _exact_profile(base: dict, placed: dict[str, TracePlacement]) -> Profile:
    """The base document with each traced direction's `trace` set and its rate left out (also
    one given under `both`; a rate that is not one is an error), validated: what `load` applies."""
    from ..control.trace import traced_profile

    doc = dict(base)
    if isinstance(doc.get("name"), str):  # a missing or bad name is Profile.parse's to report
        doc["name"] = f"{doc['name']}-exact"
    return traced_profile(doc, {d: {"trace": where.model_dump()} for d, where in placed.items()})


@app.command("load")
@guarded
def load(
    uplink: UplinkOpt = None,
    downlink: DownlinkOpt = None,
    profile: BaseOpt = None,
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Play Mahimahi traces exactly, in the data plane (default rules: ports 1 and 2).

    The traces are written into the switch's trace registers and the rules get the profile
    (--profile, default none) with each traced direction's `trace` set: every delivery
    opportunity carries its 1504 bytes at its millisecond, as Mahimahi's mm-link, repeating
    (docs/control.md#exact-delivery-in-the-data-plane). The profile's rate does not apply to a
    traced direction (a bad one is an error, a valid one a warning); its queue limit and AQM do
    (mm-link's default queue is unlimited; its `--uplink-queue=codel` is the profile's `aqm: codel`)."""
    from ..control.trace import load_trace
    from ..profiles.link import TracePlacement

    if uplink is None and downlink is None:
        raise ProfileError([Problem("", "no trace: give --uplink FILE, --downlink FILE or both")])
    traces = {d: load_trace(p) for d, p in (("uplink", uplink), ("downlink", downlink)) if p is not None}
    # The profiles are checked before the traces are written (a rate the base needs, e.g. for its
    # overhead or bearers, is left out): a refused one writes nothing.
    unwritten = {d: TracePlacement(opportunities=len(t.opportunities_ms), period=t.period_ms)
                 for d, t in traces.items()}
    known, partial = _library(profiles, lambda doc: _exact_profile(doc, unwritten))
    base, source = _base_document(profile, known, partial)
    rules = gather_rules(rule, rules_file)
    _sourced(source, lambda: _exact_profile(base, unwritten))
    _warn_unused_rates(base, source, traces, "is the link (its delivery opportunities)")
    with connect(addr, device_id, election_id, profiles=list(known.values())) as ctl:
        placed = ctl.load_traces(traces)
        ctl.apply(_exact_profile(base, placed), rules or None)
    if as_json:
        typer.echo(json.dumps({d: {"source": traces[d].source, **where.model_dump()} for d, where in placed.items()},
                              indent=2))
    else:
        for d, where in placed.items():
            t = traces[d]
            console.print(f"{d}: {t.source}: {where.opportunities} opportunities over {where.period} ms "
                          f"(mean {_kbit(t.mean_rate_bps)}), in the data plane at cells {where.cells}",
                          highlight=False)
