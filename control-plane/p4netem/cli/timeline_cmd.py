"""`p4netem timeline run|check FILE`: scripted profile changes over time."""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from .apply_cmd import ProfilesOpt, RuleOpt, RulesFile, gather_profiles, gather_rules
from .common import (DEFAULT_ADDR, EXIT_INTERRUPTED, EXIT_PROBLEM, DeviceId, ElectionId, Json, SwitchAddr,
                     connect, console, error, guarded)

# The timeline and the profiles are imported by the commands (cli.common says why).
if TYPE_CHECKING:
    from ..control.timeline import EventResult

app = typer.Typer(help="Run scripted, timed profile changes (see docs/control.md#timelines).", no_args_is_help=True)

TimelineFile = Annotated[Path, typer.Argument(help="Timeline YAML: `steps:` of apply / set / outage / restore / wait.")]


def _ms(ns: int) -> str:
    return f"{ns / 1e6:+.2f} ms"


def print_lateness(errors_ms: list[float]) -> None:
    """The one-line summary of a played timeline (timeline run, trace run): how long after its
    scheduled time each change came into force."""
    if errors_ms:
        console.print(f"{len(errors_ms)} changes; in force after their time: median "
                      f"{statistics.median(errors_ms):.2f} ms, max {max(errors_ms):.2f} ms", highlight=False)


@app.command("check")
@guarded
def check(file: TimelineFile, profiles: ProfilesOpt = None) -> None:
    """Validate a timeline (no switch needed) and print its schedule.

    Prints the changes and their times.
    A timeline that starts from the switch's profile (no `apply` first) is checked from LAN."""
    from ..control.catalog import resolve_profile
    from ..control.timeline import Timeline
    from ..profiles.library import builtin_profiles
    from ..profiles.units import Duration

    timeline = Timeline.load(file)
    known = dict(builtin_profiles())
    known.update({p.name: p for p in gather_profiles(profiles)})
    events = timeline.compile(functools.partial(resolve_profile, known=known),
                              known["lan"] if timeline.needs_base else None)
    table = Table("at", "step", "change", "profile in force")
    for e in events:
        table.add_row(str(Duration(e.at_ns)), str(e.step), e.action, e.profile.name)
    console.print(table)
    console.print(f"{file}: ok, {len(events)} changes over {Duration(timeline.duration_ns())}", highlight=False)


@app.command("run")
@guarded
def run(
    file: TimelineFile,
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    lead: Annotated[float, typer.Option("--lead", min=0.05, help="Seconds between the start and t=0.")] = 0.2,
    max_error: Annotated[Optional[float], typer.Option(
        "--max-error", metavar="MS", min=0,
        help="Exit 1 if any change came into force later than this (ms, 0 or more).")] = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Run a timeline on the switch.

    Every step is checked before the first change; each change
    is prepared ahead and made at its time in one atomic write. Prints when each change came into
    force relative to its schedule. Rules: --rule/--rules, else the file's `rules:`, else all
    traffic between ports 1 and 2. Ctrl-C stops it (exit 130) and leaves the last profile on."""
    from ..control.timeline import Timeline
    from ..profiles.units import Duration

    timeline = Timeline.load(file)
    rules = gather_rules(rule, rules_file)
    with connect(addr, device_id, election_id, profiles=gather_profiles(profiles)) as ctl:
        def on_event(er: EventResult) -> None:
            if not as_json:
                console.print(f"{str(Duration(er.event.at_ns)):>10}  {er.event.action:<48} {_ms(er.error_ns)}",
                              highlight=False)

        result = ctl.run_timeline(timeline, rules or None, lead_s=lead, on_event=on_event)
    errors = result.errors_ms
    if as_json:
        typer.echo(json.dumps({
            "timeline": timeline.name or str(file), "interrupted": result.interrupted,
            "start_wall_ns": result.start_wall_ns,
            "events": [{"at_ms": e.event.at_ns / 1e6, "step": e.event.step, "action": e.event.action,
                        "profile": e.event.profile.name, "error_ms": round(e.error_ns / 1e6, 3),
                        "send_error_ms": round(e.send_error_ns / 1e6, 3), "wall_ns": e.wall_ns}
                       for e in result.events],
            "max_error_ms": round(result.max_error_ms, 3),
        }, indent=2))
    else:
        print_lateness(errors)
    if result.interrupted:
        error(f"interrupted after {len(result.events)} of the timeline's changes; the switch keeps the last one")
        raise typer.Exit(EXIT_INTERRUPTED)
    if max_error is not None and errors and max(errors) > max_error:
        error(f"a change came into force {max(errors):.2f} ms after its time (--max-error {max_error} ms)")
        raise typer.Exit(EXIT_PROBLEM)
