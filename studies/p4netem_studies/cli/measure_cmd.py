"""`p4netem measure`: one comparison in a Mininet lab, as a table, CSV/JSON and a plot.

    p4netem measure --preset make-run
    p4netem measure --profile lte --profile hspa+radio --profile hspa+prewoken \\
        --protocol h1.1 --protocol h2 --iw 3 --iw 10 --page e5-site2 --topology multi-origin \\
        --param servers=3 --reps 5

Every combination of --profile x --iw x --protocol is one condition, loaded --reps times. Exit
code 0 when every load succeeded, 1 when some failed (the table and files still come out), 2 for
bad usage, 130 when interrupted (the runs done so far are written).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import typer
from rich.console import Console

from p4netem.cli.common import error, stdout_console
from p4netem.cli.signals import run_recording

from ..harness.plan import PRESETS, Plan, matrix
from ..harness.protocols import protocol as protocol_of
from . import run_options
from .lab_cmd import parse_params, split_profile

console = stdout_console()  # logs and CI: not squeezed to 80 columns (the table takes about 140 with a radio)
err = Console(stderr=True)


def _duration_ms(text: str) -> float:
    from p4netem.profiles.units import Duration, UnitError
    try:
        return int(Duration.parse(text)) / 1e6
    except UnitError as exc:
        raise typer.BadParameter(str(exc)) from None


def _check_rmem(text: str) -> None:
    """--client-rmem is net.ipv4.tcp_rmem: three byte counts (the kernel takes nothing else)."""
    parts = text.split()
    if (len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts)
            or min(map(int, parts)) < 1):
        raise ValueError(f"--client-rmem takes 'MIN DEFAULT MAX', three byte counts of at least "
                         f"1, not {text!r}")


# The options that make the plan: a --preset is a plan of its own, so these cannot go with it
# (they were ignored without a word: `--preset make-run --cc cubic` ran the kernel's default).
PLAN_OPTIONS = ("profile", "protocol", "iw", "page", "topology", "param", "plain",
                "conns_per_host", "dns", "dns_latency", "gzip", "revalidate", "server_buffering",
                "cc", "client_rmem", "silence", "timeout")
# A load that takes longer than this is no page load (E4's longest took 6000 s).
MAX_SECONDS = 86400.0


def _seconds(option: str, value: float) -> None:
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise ValueError(f"{option} must be a number of seconds above 0 and at most "
                         f"{MAX_SECONDS:g}, not {value}")


def _given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """The options among `names` given on the command line (not left at their defaults)."""
    # By name: typer's ParameterSource need not be click's class.
    sources = {n: getattr(ctx.get_parameter_source(n), "name", None) for n in names}
    return [f"--{n.replace('_', '-')}" for n, src in sources.items()
            if src not in (None, "DEFAULT", "DEFAULT_MAP")]


def _profile_option(text: str) -> tuple[str, bool, bool]:
    """'hspa', 'hspa+radio', 'hspa+prewoken' -> (name, radio on, woken before each load)."""
    if text.endswith("+prewoken"):
        return text[: -len("+prewoken")], True, True
    name, radio = split_profile(text)
    return name, radio, False


def measure(
    ctx: typer.Context,
    preset: str = typer.Option(None, "--preset", help=f"A ready plan: {', '.join(PRESETS)}."),
    profile: list[str] = typer.Option([], "--profile", help="Profile (built-in or YAML file); "
                                      "NAME+radio turns its radio on (idled before each load), "
                                      "NAME+prewoken too and wakes it just before each load. "
                                      "Repeatable."),
    protocol: list[str] = typer.Option([], "--protocol", help="h1.0, h1.1, h1.1-pipelined, h2, "
                                       "spdy, chromium-h2, chromium-h1. Repeatable."),
    iw: list[int] = typer.Option([], "--iw", help="Server initial window (segments). Repeatable."),
    page: str = typer.Option("demo", "--page", help="demo, microscape, e3-a|b|c-1s|2s|4s, "
                             "e5-site1..8, uniform-NxS."),
    reps: int = typer.Option(None, "--reps", min=1, help="Loads per condition (default 5; "
                             "preset's own)."),
    topology: str = typer.Option("inline", "--topology", help="Topology name or file."),
    param: list[str] = typer.Option([], "--param", "-p", help="Topology parameter NAME=N."),
    plain: bool = typer.Option(False, "--plain", help="Without TLS (HTTP/2 then is h2c)."),
    conns_per_host: int = typer.Option(None, "--conns-per-host", help="HTTP/1.x connections "
                                       "per host (default: h1.0 4, h1.1 6, pipelined 1)."),
    dns: bool = typer.Option(False, "--dns", help="Resolve names with dnsmasq on the first "
                             "server instead of a host map."),
    dns_latency: str = typer.Option("0ms", "--dns-latency", help="Extra RTT of DNS lookups "
                                    "(with --dns), e.g. 100ms."),
    gzip: bool = typer.Option(False, "--gzip", help="Servers deflate HTML, CSS and JS (E1)."),
    revalidate: bool = typer.Option(False, "--revalidate", help="Conditional GETs, answered "
                                    "304 (E1's revalidation test)."),
    server_buffering: bool = typer.Option(False, "--server-buffering", help="Serve the plain "
                                          "HTTP/1.x protocols from the server that buffers "
                                          "responses to pipelined requests (Apache, as E1's "
                                          "servers; needs --plain; other protocols keep their "
                                          "servers)."),
    cc: str = typer.Option(None, "--cc", help="Congestion control of every host, set on "
                           "every route of the lab (reno, cubic, bbr: any the kernel has "
                           "loaded; default: the kernel's default for new namespaces)."),
    client_rmem: str = typer.Option(None, "--client-rmem", help="Clients' tcp_rmem, "
                                    "'MIN DEFAULT MAX'."),
    silence: float = typer.Option(10.0, "--silence", help="Seconds of silence that end a load."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds before a load is abandoned."),
    out: Path = typer.Option(None, "--out", help="Result directory (default results/NAME-TIME)."),
    keep_pcaps: bool = run_options.KEEP_PCAPS,
    target: str = run_options.TARGET,
    quiet: bool = run_options.QUIET,
    baseline: Path = run_options.BASELINE,
    save_baseline: bool = run_options.SAVE_BASELINE,
    tolerance: list[str] = run_options.TOLERANCE,
) -> None:
    """Load a page under a matrix of conditions in a Mininet lab; table, CSV/JSON and plot."""
    from ..mininet.topology import TopologyError, load_topology
    try:
        if preset:
            if preset not in PRESETS:
                raise ValueError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
            if extra := _given(ctx, PLAN_OPTIONS):
                raise ValueError(f"--preset {preset} is a whole plan: it takes --reps, --out and "
                                 f"the run's options, not {', '.join(extra)}")
            plan = PRESETS[preset]() if reps is None else PRESETS[preset](repetitions=reps)
        else:
            if not profile or not protocol:
                raise ValueError("give --preset, or at least one --profile and one --protocol")
            _seconds("--silence", silence)
            _seconds("--timeout", timeout)
            if conns_per_host is not None and not 1 <= conns_per_host <= 64:
                raise ValueError(f"--conns-per-host must be 1..64, not {conns_per_host}")
            # Options that would change nothing of this plan were taken without a word.
            if conns_per_host is not None and not any(protocol_of(p).loader.startswith("h1")
                                                      for p in protocol):
                raise ValueError("--conns-per-host is for the scripted HTTP/1.x protocols "
                                 "(h1.0, h1.1, h1.1-pipelined); none is given")
            if _given(ctx, ("dns_latency",)) and not dns:
                raise ValueError("--dns-latency delays the lookups of --dns; without --dns the "
                                 "names come from a host map and nothing is looked up: add --dns")
            if server_buffering and not plain:
                raise ValueError("--server-buffering: the buffering server speaks plain HTTP/1.x; "
                                 "add --plain")
            if server_buffering and not any(protocol_of(p).loader.startswith("h1")
                                            and not protocol_of(p).browser for p in protocol):
                raise ValueError("--server-buffering: no HTTP/1.x protocol to serve buffered "
                                 "(h1.0, h1.1, h1.1-pipelined)")
            conds = []
            for name, radio, prewake in (_profile_option(p) for p in profile):
                conds += matrix([name], protocol, iw or [10], radio_profiles=(name,) if radio else (),
                                tls=not plain, page=page, conns_per_host=conns_per_host,
                                prewake=prewake, server_buffering=server_buffering)
            plan = Plan("measure", conds, topology=topology,
                        topology_params=parse_params(param),
                        repetitions=5 if reps is None else reps,
                        silence_s=silence, timeout_s=timeout, dns=dns,
                        dns_latency_ms=_duration_ms(dns_latency), congestion_control=cc,
                        client_rmem=client_rmem, gzip=gzip, revalidate=revalidate)
            load_topology(plan.topology).expand(plan.topology_params)
        if plan.congestion_control:
            from ..web.tcp_tuning import check_congestion_control
            try:
                check_congestion_control(plan.congestion_control)
            except ValueError as exc:
                raise ValueError(f"--cc: {exc}") from None
        from ..harness.baseline import check_options
        check_options(baseline, save_baseline, tolerance)
        if plan.client_rmem is not None:
            _check_rmem(plan.client_rmem)
        run_options.check_target(target)
        out_dir = out or Path("results") / f"{plan.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        run_options.check_out_dir(out_dir)
        from ..runs.store import RunStore
        if RunStore.exists(out_dir):
            # Its runs.csv, summary.csv and results.json are the experiment's: written over,
            # `experiment report` would read this run's loads as the study's.
            raise ValueError(f"--out {out_dir} holds an experiment's run (run.db); pick another "
                             "--out")
    except (ValueError, TopologyError) as exc:
        error(str(exc))
        raise typer.Exit(2)

    from ..harness import results
    from ..harness.measure import run_plan
    console.print(f"[bold]{plan.name}[/]: {len(plan.conditions)} conditions x "
                  f"{plan.repetitions} loads on the {plan.topology} lab -> {out_dir}")
    outcome = run_recording("measure", out_dir, lambda: run_plan(
        plan, out_dir, console=console, target=target, verbose=not quiet, keep_pcaps=keep_pcaps))
    console.print(results.table(outcome.summary, title=plan.name))
    for kind, path in outcome.paths.items():
        console.print(f"{kind:8} {path}")
    console.print(f"took {outcome.metadata.get('duration_s')} s")
    failed = [r for r in outcome.records if not r.ok]
    if failed:
        error(f"{len(failed)} of {len(outcome.records)} loads failed (see runs.csv)")
        raise typer.Exit(1)
    from ..harness.baseline import report as baseline_report
    if baseline_report(out_dir, baseline, save_baseline, tolerance, console, err):
        raise typer.Exit(1)
