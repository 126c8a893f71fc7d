"""`p4netem radio show` (per-UE radio state) and `p4netem radio watch` (live state changes).

`show` is read-only. `watch` must be the primary controller: the switch sends digests to the
primary only (P4Runtime), so it arbitrates with --election-id and enables radio_state_digest_t.
A controller that takes over with a higher election id (e.g. `p4netem apply --election-id 2`)
receives the digests while it is connected; the watch says so on stderr and, once the switch has
no primary again, takes it back with the highest election id the switch has seen (the next writer
then needs a higher one). State changes in between are not delivered to it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from ..control.radio_view import DEFAULT_LIMIT, switch_clock_ns
from ..pipeline import PromotionKind, RadioState
from .apply_cmd import ProfilesOpt, gather_profiles
from .common import DEFAULT_ADDR, DeviceId, ElectionId, Json, SwitchAddr, connect, console, guarded, warning

# grpc, the controller and the watcher are imported by the functions that use them (cli.common
# says why).
if TYPE_CHECKING:
    from ..control import Controller, RadioReport
    from ..radio import RadioEvent, RadioWatcher

app = typer.Typer(help="Radio (RRC) state of the UEs: per-UE state, live state changes.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

_KIND = {PromotionKind.IDLE_DCH: "IDLE->DCH", PromotionKind.FACH_DCH: "FACH->DCH",
         PromotionKind.IDLE_CONNECTED: "IDLE->CONNECTED", PromotionKind.TO_READY: "->READY"}

Limit = Annotated[int, typer.Option(
    "--radio-ues", min=0, help="Read at most this many UEs in full (about 0.1 ms each; 0: no limit).")]


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}s" if value < 10 else f"{value:.1f}s"


def radio_table(report: RadioReport, title: str = "radio per UE (state as of its last packet)") -> Table:
    """The rich table of a RadioReport (stats and radio show)."""
    table = Table("ue", "rules", "model", "state", "in state", "idle", "promotions", "time per state",
                  "energy", title=title)
    for view in report.ues:
        r = view.radio
        promos = ", ".join(f"{_KIND.get(k, k.name)} {n}" for k, n in r.promotions.items()) or "-"
        times = ", ".join(f"{s.name} {_secs(ns / 1e9)}" for s, ns in r.time_in_state_ns.items()) or "-"
        energy = view.energy
        joules = "-" if energy is None else f"{energy.total_joules:.3f} J" + (
            "" if energy.complete else " (no power for " + ", ".join(s.name for s in energy.unknown) + ")")
        table.add_row(str(view.ue_id), ", ".join(view.rules) or "-",
                      view.model.model if view.model is not None else "-", view.state_name,
                      _secs(view.in_state_s), _secs(view.idle_s), promos, times, joules)
    return table


def report_note(report: RadioReport) -> str | None:
    notes = []
    if report.found > len(report.ues):
        notes.append(f"{report.found - len(report.ues)} more UEs not shown (--radio-ues)")
    if report.unchecked:
        notes.append(f"{report.unchecked} UE ids of by-address rules not checked (beyond the first "
                     "4096 of each rule)")
    return "; ".join(notes) or None


@app.command("show")
@guarded
def show(
    ues: Annotated[Optional[list[int]], typer.Argument(
        metavar="[UE]...", help="UE ids (default: the UEs of the rules with a radio: named ones, and "
                                "the active ones of by-address rules).")] = None,
    limit: Limit = DEFAULT_LIMIT,
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Radio state of UEs: state, time in state, promotions, time per state, energy.

    The state is as of the UE's last packet (the switch replays timers when the next one comes):
    `idle` says how long ago that was. Time per state and the energy estimate (from the power
    figures of the radio model of the rule covering the UE) count up to the UE's last state
    change. Read-only."""
    with connect(addr, device_id, election_id, write=False, profiles=gather_profiles(profiles)) as ctl:
        report = ctl.radio(ues or None, limit=0 if ues else limit)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    if not report.ues:
        console.print("no UE: no rule has a radio (or no by-address UE was active); name UEs to read them",
                      highlight=False)
        return
    console.print(radio_table(report))
    note = report_note(report)
    if note:
        console.print(note, highlight=False)


# ---- watch ----------------------------------------------------------------------------------------


def _state(s: RadioState | int) -> str:
    return s.name if isinstance(s, RadioState) else str(s)


class _Clock:
    """Switch timestamps (its CLOCK_MONOTONIC) as wall-clock times, when the switch is local."""

    def __init__(self, addr: str):
        self.local = switch_clock_ns(addr) is not None
        self.offset = time.time_ns() - time.monotonic_ns()

    def wall_ns(self, ts: int) -> int | None:
        return ts + self.offset if self.local else None

    def text(self, ts: int) -> str:
        wall = self.wall_ns(ts)
        if wall is None:
            return f"{ts / 1e9:.6f}"
        return datetime.fromtimestamp(wall / 1e9).strftime("%H:%M:%S.%f")


def _events(ctl: Controller, watcher: RadioWatcher, timeout: float) -> Iterator[RadioEvent]:
    """Events until `timeout` (0: forever); keeps (or takes back) the primary role digests need."""
    import grpc

    from ..p4rt.errors import P4RuntimeError

    client = ctl.client
    deadline = time.monotonic() + timeout if timeout else None
    lost = False
    while deadline is None or time.monotonic() < deadline:
        left = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
        yield from watcher.events(timeout=left)
        if not client.connected:
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, "the switch closed the stream")
        if client.is_primary:
            continue
        if not lost:
            lost = True
            warning(f"another controller took over (election id {client.primary_election_id}): the switch sends "
                    "radio digests to it; this watch takes them back when it leaves")
        if client.primary_present is False:
            # Nobody is primary: become primary again with an id at least the highest seen.
            if client.arbitrate(max(client.election_id, client.primary_election_id or 0)):
                watcher.start()
                lost = False
                warning(f"primary again with election id {client.election_id}; state changes in between "
                        "were not received")


@app.command("watch")
@guarded
def watch(
    ue: Annotated[Optional[list[int]], typer.Option("--ue", "-u", help="Only these UEs (repeatable).")] = None,
    table: Annotated[bool, typer.Option("--table", help="A live table of each UE's latest state instead of "
                                                        "one line per change.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0, help="Stop after this many seconds "
                                                                    "(0: until Ctrl-C).")] = 0,
    count: Annotated[int, typer.Option("--count", min=0, help="Stop after this many state changes "
                                                              "(0: no limit).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per state change (a line each), "
                                                         "for scripts.")] = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Live radio state changes (from the switch's digests), one line per change.

    Every change of every UE: a promotion reports IDLE -> PROMOTING and PROMOTING -> its target
    (with the time it completes) when it starts; a timer demotion is reported when the UE's next
    packet arrives, with the time it took effect. Per UE the changes come in time order.
    Needs the primary role (the switch sends digests to the primary only): pass an election id
    above the other controllers'; a writer that takes over later (higher id) gets the digests
    while it is connected, then the watch takes them back."""
    import grpc
    from rich.live import Live

    from ..control.rules import RuleError
    from ..p4rt.errors import P4RuntimeError
    from ..profiles.errors import Problem
    from ..radio.events import RadioWatcher

    try:
        ctl = connect(addr, device_id, election_id)
    except P4RuntimeError as err:
        if err.code != grpc.StatusCode.PERMISSION_DENIED:
            raise
        raise P4RuntimeError(err.code, f"radio watch needs the primary role (the switch sends digests to the "
                             f"primary only): {err.message}") from None
    wanted = set(ue or ())
    # A UE the switch has no radio state for never changes state: the watch would wait forever.
    # Refused as `radio show` refuses it (the limit is the switch's, known once connected).
    beyond = sorted(u for u in wanted if not 0 <= u < ctl.ue_ids)
    if beyond:
        ctl.close()
        raise RuleError([Problem("--ue", f"UE ids {beyond} outside the switch's 0..{ctl.ue_ids - 1} "
                                         "(p4netem-switch --ue-ids)")])
    clock = _Clock(addr)
    n = 0
    with ctl:
        watcher = RadioWatcher(ctl.client).start()
        warning(f"watching radio state changes at {addr}" + (f" of UE {', '.join(map(str, sorted(wanted)))}"
                                                              if wanted else "") + " (Ctrl-C to stop)")
        latest: dict[int, tuple[RadioEvent, int]] = {}
        live = Live(_watch_table(latest, clock), console=console, auto_refresh=False) if table else None
        try:
            if live is not None:
                live.start()
            for event in _events(ctl, watcher, timeout):
                if wanted and event.ue_id not in wanted:
                    continue
                n += 1
                if as_json:
                    typer.echo(json.dumps({"ue": event.ue_id, "old": _state(event.old), "new": _state(event.new),
                                           "timestamp_ns": event.timestamp_ns,
                                           "wall_ns": clock.wall_ns(event.timestamp_ns)}), nl=True)
                elif live is not None:
                    latest[event.ue_id] = (event, latest.get(event.ue_id, (None, 0))[1] + 1)
                    live.update(_watch_table(latest, clock), refresh=True)
                else:
                    console.print(f"{clock.text(event.timestamp_ns)}  ue {event.ue_id}: {_state(event.old)} -> "
                                  f"{_state(event.new)}", highlight=False)
                if count and n >= count:
                    break
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a watch ends
        finally:
            if live is not None:
                live.stop()
            try:
                if ctl.client.is_primary:
                    watcher.stop()  # the switch builds radio digests only while one is enabled
            except P4RuntimeError:
                pass


def _watch_table(latest: dict[int, tuple[RadioEvent, int]], clock: _Clock) -> Table:
    table = Table("ue", "state", "since", "previous", "changes", title="radio state changes (live)")
    for ue_id in sorted(latest):
        event, changes = latest[ue_id]
        table.add_row(str(ue_id), _state(event.new), clock.text(event.timestamp_ns), _state(event.old),
                      str(changes))
    return table


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="radio")


__all__ = ["app", "register", "radio_table", "report_note", "Limit"]
