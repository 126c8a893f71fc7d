"""`p4netem replay`: send a capture through a profile and report what the link did to each packet."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from .apply_cmd import NetemOpt, ProfilesOpt, gather_profiles, netem_profile
from .common import EXIT_PROBLEM, console, error, guarded, warning

if TYPE_CHECKING:
    from ..profiles import Profile


@guarded
def replay(
    pcap: Annotated[Path, typer.Argument(help="A classic Ethernet pcap (tcpdump -w).", exists=True, dir_okay=False)],
    profile: Annotated[Optional[str], typer.Option(
        "--profile", "-P", help="A built-in profile, a name from --profiles, or a YAML file (default: lan).")] = None,
    netem: NetemOpt = None,
    profiles: ProfilesOpt = None,
    mbps: Annotated[Optional[float], typer.Option("--mbps", min=0.001, help="Send at this rate instead of as captured.")] = None,
    topspeed: Annotated[bool, typer.Option("--topspeed", help="Send as fast as tcpreplay can.")] = False,
    csv_path: Annotated[Optional[Path], typer.Option("--csv", help="Write one row per packet (its fate) here.")] = None,
    plot_path: Annotated[Optional[Path], typer.Option("--plot", help="Write a PNG: delay per packet, throughput.")] = None,
    expect: Annotated[Optional[str], typer.Option(
        "--expect", metavar="METRIC<=V,...",
        help="Thresholds, e.g. 'loss_pct<=8,delay_p50_ms<25': exit 1 when one does not hold (regression tests).")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Switch PRNG seed (reproducible loss/jitter).")] = None,
    keep: Annotated[Optional[Path], typer.Option("--keep", help="Keep the captures and the switch log in DIR.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Replay FILE.pcap through a profile and report each packet's fate.

    Builds its own two-host lab (needs root): tcpreplay sends the capture from h1 into switch
    port 1, tcpdump records what h1 sent and what left port 2; frames are matched by their bytes.
    Reports delay, loss (and bursts), reordering, duplicates, corruption and throughput over time."""
    from ..replay import check_expectations, parse_expectations
    from ..replay.pcapfile import PcapError
    from ..replay.report import ExpectError
    from ..replay.run import Pace, replay as run_replay

    if mbps is not None and topspeed:
        raise typer.BadParameter("give --mbps or --topspeed, not both", param_hint="'--mbps'")
    try:
        expectations = parse_expectations(expect or "")
    except ExpectError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--expect'") from None
    if netem is not None and profile is not None:
        raise typer.BadParameter("give --profile or --netem, not both", param_hint="'--profile'")
    chosen: Profile | str = netem_profile(netem, None, None, "netem").profile if netem is not None else (profile or "lan")
    if isinstance(chosen, str):
        # Resolved here, before a lab is built for it: an unknown name is an error at once.
        from ..control.catalog import resolve_profile
        from ..profiles import builtin_profiles

        chosen = resolve_profile(chosen, {**builtin_profiles(), **{p.name: p for p in gather_profiles(profiles)}})
    try:
        with tempfile.TemporaryDirectory(prefix="p4netem-replay-") as tmp:
            report = run_replay(pcap, chosen, keep or tmp, pace=Pace(mbps=mbps, topspeed=topspeed), seed=seed)
    except PcapError as exc:  # a capture that cannot be replayed (checked before any lab starts)
        error(str(exc))
        raise typer.Exit(EXIT_PROBLEM) from None
    m = report.metrics()
    if report.meta.get("held_at_end"):
        warning(f"the switch still held {report.meta['held_at_end']} packet(s) when the replay stopped waiting "
                "(60 s after the last frame sent): they are counted as lost")
    dropped, unseen = report.meta.get("capture_dropped") or {}, report.meta.get("arrived_not_seen_sent", 0)
    if dropped.get("sent") or unseen:
        warning(f"the sender's capture missed {dropped.get('sent', 0)} frame(s) (tcpdump: dropped by kernel) of "
                f"{report.meta['frames_in_file']}: `sent` counts the {report.sent} it saw; {unseen} of the missed "
                "ones arrived and are left out (no send time); pace the replay slower (--mbps)")
    if dropped.get("received"):
        warning(f"the receiver's capture missed {dropped['received']} frame(s) (tcpdump: dropped by kernel): they "
                "are counted as lost; pace the replay slower (--mbps)")
    if csv_path:
        report.write_csv(csv_path)
    if plot_path:
        report.plot(plot_path)
    if as_json:
        typer.echo(json.dumps({"meta": report.meta, "metrics": m}, indent=2))
    else:
        console.print(metrics_table(f"{pcap.name} through {report.meta['profile']}", m))
    failed = check_expectations(m, expectations)
    for line in failed:
        error(f"expectation not met: {line}")
    if failed:
        raise typer.Exit(EXIT_PROBLEM)


def metrics_table(title: str, metrics: dict[str, float | int | None]) -> Table:
    """The metrics' table, each value as a failed --expect line shows it (format_metric)."""
    from ..replay.report import format_metric

    table = Table("metric", "value", title=title)
    for name, value in metrics.items():
        table.add_row(name, format_metric(value))
    return table


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
