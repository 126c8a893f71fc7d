"""`p4netem show` (what the switch holds) and `p4netem stats` (a live table of its counters, and with
--switch-metrics each port's kernel receive ring and whether the data plane runs, as the switch's
--metrics-addr reports them)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .apply_cmd import ProfilesOpt, gather_profiles
from .radio_cmd import DEFAULT_LIMIT, Limit, radio_table, report_note
from .common import (DEFAULT_ADDR, DeviceId, ElectionId, Json, SwitchAddr, connect, console, guarded,
                     stdout_is_terminal)

# The controller and the rest are imported by the functions that use them (cli.common says why).
if TYPE_CHECKING:
    from ..control import Controller, SwitchStats


@guarded
def show(
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Show the port map and every rule with the profile it has.

    Shows the port map, every rule with the profile it has (read back from the switch), and
    the entries other controllers wrote. Read-only: needs no election and disturbs nobody."""
    from ..p4rt.encoding import format_mac
    from ..profiles.summary import link_summary, radio_summary

    with connect(addr, device_id, election_id, write=False, profiles=gather_profiles(profiles)) as ctl:
        state = ctl.state()
        applied = [ctl.applied_rule(m, state) for m in state.managed.values()]
        if as_json:
            typer.echo(json.dumps({
                "switch": addr, "device_id": device_id,
                "port_map": {str(k): v for k, v in sorted(state.port_map.items())},
                "l2": {format_mac(k): v for k, v in sorted(state.l2.items())},
                "rules": [a.to_dict() for a in applied],
                "unmanaged_entries": len(state.unmanaged), "broken_entries": len(state.broken),
            }, indent=2))
            return
        pm = ", ".join(f"{k} -> {v}" for k, v in sorted(state.port_map.items())) or (
            "empty" if state.l2 else "empty (nothing is forwarded)")
        console.print(f"switch {addr} device {device_id}: port map {pm}", highlight=False)
        if state.l2:
            l2 = ", ".join(f"{format_mac(k)} -> {v}" for k, v in sorted(state.l2.items()))
            console.print(f"L2 forwarding (by destination MAC, ahead of the port map): {l2}", highlight=False)
        if not applied:
            console.print("no rules: unclassified traffic gets profile 0 (no impairment)", highlight=False)
        else:
            table = Table("#", "traffic", "ue", "prio", "profile", "downlink", "uplink", "radio", "ids")
            for a in applied:
                down = link_summary(a.profile.downlink) if a.profile else "entries missing"
                up = link_summary(a.profile.uplink) if a.profile else "entries missing"
                radio = radio_summary(a.profile) if a.profile else "-"
                table.add_row(str(a.number), a.rule.describe(), a.rule.ue_label(), str(a.rule.priority), a.label,
                              down, up, radio, f"{a.profile_id}/{a.spare_id}")
            console.print(table)
            unknown = [f"#{a.number}" for a in applied if a.profile_name is None]
            if unknown:
                console.print(f"  {', '.join(unknown)}: profile not built-in and not given here (the switch holds "
                              "no names): pass its file (profile or timeline) with --profiles to see its name",
                              highlight=False)
            for a in applied:
                for diff in a.modified:
                    console.print(f"  #{a.number} {diff}", highlight=False)
        if state.unmanaged or state.broken:
            console.print(f"{len(state.unmanaged)} classifier entries from other controllers"
                          + (f", {len(state.broken)} incomplete p4netem entries" if state.broken else ""),
                          highlight=False)


def _rate(now: int, before: int | None, dt: float) -> str:
    if before is None or dt <= 0:
        return "-"
    return f"{(now - before) * 8 / dt / 1e6:.3f}"


# `p4netem web --switch-metrics` names the same URL.
SwitchMetrics = Annotated[Optional[str], typer.Option(
    "--switch-metrics", metavar="URL",
    help="The switch's own health metrics (p4netem-switch --metrics-addr), e.g. http://127.0.0.1:9560/metrics: "
         "adds each port's frames received by the kernel, frames the kernel dropped on a full receive ring "
         "(the switch never saw them: they are in no counter of the table), the packet I/O path, and whether "
         "the data plane runs (each thread's heartbeat against the switch's timeout).")]

PORT_KEYS = ("port", "iface", "io", "kernel_rx", "ring_drops")


def switch_ports(health) -> dict:
    """The switch's ports as its --metrics-addr reports them (the summary of /api/health,
    switch_health.SwitchHealth): {"url", "ports": [{"port", "iface", "io", "kernel_rx",
    "ring_drops"}] (empty for a switch without ports), "ring_drops", "dataplane": {"serving",
    "timeout_s", "threads", "stalled"}}, or {"url", "error"} when they cannot be read or the URL
    serves no switch's metrics."""
    from ..switch_health import HealthUnavailable

    try:
        summary = health.summary()
    except HealthUnavailable as exc:
        return {"url": health.url, "error": str(exc)}
    ports = summary["ports"]
    # A switch serves its uptime and its data-plane heartbeats whether or not it has ports: one with
    # none (P4Runtime only) is not an error, and whether its data plane runs is known all the same.
    if not ports and not (summary["uptime_s"] > 0 or summary["dataplane"]["serving"] is not None):
        return {"url": health.url, "error": f"no p4netem-switch metrics at {health.url} "
                                            "(not a p4netem-switch --metrics-addr?)"}
    rows = [{k: p.get(k) for k in PORT_KEYS} for p in ports]
    return {"url": health.url, "ports": rows, "ring_drops": sum(p["ring_drops"] or 0 for p in rows),
            "dataplane": summary["dataplane"]}


def dataplane_line(dataplane: dict) -> Text:
    """Whether the data plane runs: a stalled thread forwards nothing, and no counter says so
    (they stand still, as on an idle link)."""
    from ..switch_health import stall_message

    stalled = stall_message(dataplane)
    if stalled is not None:
        return Text(stalled.replace("data plane stalled", "data plane: STALLED", 1), style="bold red")
    if dataplane["serving"] is None:
        return Text("data plane: liveness unknown (the switch exports no heartbeats: a build from before them)",
                    style="dim")
    oldest = max(t["age_s"] for t in dataplane["threads"])
    # An idle loop turns every 100 ms: ages under a second read in ms ("0.0 s" said nothing).
    ago = f"{oldest * 1000:.0f} ms" if oldest < 1 else f"{oldest:.1f} s"
    return Text(f"data plane: running (every thread ran within the last {ago}; stalled after "
                f"{dataplane['timeout_s']:g} s)")


def ports_part(ports: dict | None) -> list:
    """The table's part about the kernel's receive rings."""
    if ports is None:
        # The counters start where the switch takes a frame: a full ring's drops are not in them.
        return [Text("kernel ring drops: unknown (--switch-metrics URL reads them)", style="dim")]
    if "error" in ports:
        return [Text(f"kernel ring drops: unknown: {ports['error']}")]
    if not ports["ports"]:
        return [Text("switch ports: none (the switch has no ports, so no kernel receive ring to read)"),
                dataplane_line(ports["dataplane"])]
    table = Table("port", "iface", "I/O", "kernel rx", "ring drops",
                  title="switch ports (kernel receive rings, read by the switch once a second)")
    for p in ports["ports"]:
        table.add_row(*("-" if p[k] is None else str(p[k]) for k in PORT_KEYS))
    parts: list = [table, dataplane_line(ports["dataplane"])]
    if ports["ring_drops"]:
        parts.append(Text(f"kernel ring drops: {ports['ring_drops']} frames dropped on full receive rings before "
                          "the switch saw them (in no counter above)"))
    return parts


def stats_table(stats: SwitchStats, previous: SwitchStats | None, ports: dict | None = None) -> Group:
    dt = (stats.time_ns - previous.time_ns) / 1e9 if previous else 0.0
    before = {(r.label, r.direction): r.counters for r in previous.rows} if previous else {}
    table = Table("rule", "dir", "profile", "in", "out", "Mbit/s out", "dup", "corrupt", "ecn marked", "dropped",
                  "drops by reason", "held", title="p4netem counters (cumulative; rate over the last refresh)")
    for row in stats.rows:
        c = row.counters
        old = before.get((row.label, row.direction))
        reasons = ", ".join(f"{r.name.lower()} {n}" for r, n in c.drops.items() if n) or "-"
        table.add_row(row.label, row.direction, row.profile, str(c.profile_in), str(c.profile_out),
                      _rate(c.bytes_out, old.bytes_out if old else None, dt), str(c.profile_dup),
                      str(c.profile_corrupt), str(c.ecn_marked), str(c.dropped), reasons,
                      str(c.conservation_gap()))
    parser = ", ".join(f"{e.name.lower()} {n}" for e, n in stats.parser_errors.items() if n) or "none"
    parts = [table, Text(f"parser errors: {parser}"), *ports_part(ports)]
    if stats.radio.ues:
        parts.append(radio_table(stats.radio))
        note = report_note(stats.radio)
        if note:
            parts.append(Text(note))
    else:
        # The report cannot tell "no rule has a radio" from "a by-address rule's UEs were all idle so
        # far" (it scans for active UEs), so it says both, as `radio show` does.
        parts.append(Text("radio: no UE to show (no rule has a radio, or no by-address UE was active yet)"))
    return Group(*parts)


@guarded
def stats(
    interval: Annotated[float, typer.Option("--interval", "-n", min=0.1, help="Seconds between refreshes.")] = 1.0,
    once: Annotated[Optional[bool], typer.Option(
        "--once/--watch", help="Print one snapshot / refresh live until Ctrl-C; not on a terminal, "
                               "--watch prints every refresh after the previous one (default: live on a "
                               "terminal, once otherwise).")] = None,
    count: Annotated[int, typer.Option("--count", min=0, help="Stop after this many refreshes (0: until Ctrl-C).")] = 0,
    radio_ues: Limit = DEFAULT_LIMIT,
    switch_metrics: SwitchMetrics = None,
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Live table of counters per rule and direction, drops by reason, radio per UE.

    Counters per rule and direction: packets in and out, throughput, duplicates, corrupted,
    packets the AQM marked CE, drops by reason (loss_random, loss_burst, queue_full, radio,
    no_route, ..., aqm_drop, link_off) and packets held
    in the delay line; parser errors. Counters of a rule add up over its profile switches.
    Then the radio of the UEs of the rules with a radio (state, time in state, idle time,
    promotions by kind, time per state, energy estimate; see `p4netem radio show`): named UEs,
    and the active UEs of by-address rules, at most --radio-ues of them. Read-only.

    Frames the kernel drops on a full receive ring (a switch that falls behind) never reach the
    switch's counters; --switch-metrics URL (the switch's --metrics-addr) adds them per port, and
    whether the data plane runs (a stalled one forwards nothing, and the counters just stand still)."""
    if once is None:
        once = as_json or not stdout_is_terminal()
    read = _reader(switch_metrics, radio_ues)
    with connect(addr, device_id, election_id, write=False, profiles=gather_profiles(profiles)) as ctl:
        if as_json:
            _json_stats(ctl, read, once, interval, count)
        elif once and count <= 1:
            current, ports = read(ctl)
            console.print(stats_table(current, None, ports))
        else:
            _live(ctl, read, interval, count)


Snapshot = tuple["SwitchStats", Optional[dict]]  # the counters, and the ports (switch_ports) or None


def _reader(switch_metrics: str | None, radio_ues: int):
    """read(ctl) -> (the counters, the ports of --switch-metrics or None), for each refresh."""
    health = None
    if switch_metrics is not None:
        from ..switch_health import SwitchHealth

        health = SwitchHealth(switch_metrics)

    def read(ctl: Controller) -> Snapshot:
        return ctl.stats(radio_ues), (switch_ports(health) if health is not None else None)
    return read


def _json_stats(ctl: Controller, read, once: bool, interval: float, count: int) -> None:
    n = 0
    while True:
        stats, ports = read(ctl)
        out = stats.to_dict()
        if ports is not None:
            out["switch_health"] = ports
        typer.echo(json.dumps(out))
        n += 1
        if once and count <= 1 or (count and n >= count):
            return
        time.sleep(interval)


def _refreshes(ctl: Controller, read, interval: float, count: int) -> Iterator[Group]:
    """The stats tables of a watch: one now, then one per interval (count in all; 0: no end)."""
    current, ports = read(ctl)
    yield stats_table(current, None, ports)
    n = 1
    while not count or n < count:
        time.sleep(interval)
        previous = current
        current, ports = read(ctl)
        yield stats_table(current, previous, ports)
        n += 1


def _live(ctl: Controller, read, interval: float, count: int) -> None:
    tables = _refreshes(ctl, read, interval, count)
    try:
        if not console.is_terminal:
            # A Live display shows only its last frame when stdout is not a terminal (a pipe, a
            # file): print every refresh, each after the previous one.
            for i, table in enumerate(tables):
                if i:
                    console.print()
                console.print(table)
            return
        from rich.live import Live

        with Live(next(tables), console=console, auto_refresh=False) as live:
            for table in tables:
                live.update(table, refresh=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a live view ends


def register(app: typer.Typer) -> None:
    app.command("show")(show)
    app.command("stats")(stats)


__all__ = ["register"]
