"""`p4netem profiles`: the built-in library and profile files (no switch needed)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .common import EXIT_PROBLEM, error, guarded, stdout_console, warning

app = typer.Typer(help="List, show and validate impairment profiles; convert netem and Mahimahi command lines to them.",
                  no_args_is_help=True)
console = stdout_console()
err = Console(stderr=True)


@app.command("list")
def list_profiles() -> None:
    """List the built-in profiles with a one-line description each."""
    from ..profiles.library import builtin_profiles
    from ..profiles.summary import radio_summary

    table = Table("name", "description", "radio")
    for name, profile in builtin_profiles().items():
        table.add_row(name, profile.description, radio_summary(profile))
    console.print(table)


@app.command("show")
def show(name: str = typer.Argument(..., help="A built-in profile name or a YAML file.")) -> None:
    """Print a profile as YAML (human units), with its source."""
    from ..profiles.errors import ProfileError
    from ..profiles.library import builtin_profiles
    from ..profiles.yaml_files import dumps, load_profiles

    profiles = builtin_profiles()
    if name in profiles:
        typer.echo(dumps(profiles[name]), nl=False)
        return
    path = Path(name)
    if not path.exists():
        error(f"no built-in profile or file {name!r}; built-ins: {', '.join(profiles)}")
        raise typer.Exit(EXIT_PROBLEM)
    try:
        loaded = load_profiles(path)
        typer.echo(dumps(loaded[0] if len(loaded) == 1 else loaded), nl=False)
    except ProfileError as exc:
        error(str(exc))
        raise typer.Exit(EXIT_PROBLEM)


@app.command("validate")
def validate(files: list[Path] = typer.Argument(..., help="Profile YAML files.")) -> None:
    """Check profile files; every problem is printed with its field, value and allowed range."""
    from ..profiles.errors import ProfileError
    from ..profiles.yaml_files import load_profiles

    bad = 0
    for path in files:
        try:
            loaded = load_profiles(path)
        except (ProfileError, OSError) as exc:
            bad += 1
            error(f"{path}: invalid\n{exc}")
            continue
        console.print(f"{path}: ok ({', '.join(p.name for p in loaded)})")
    if bad:
        raise typer.Exit(EXIT_PROBLEM)


@app.command("from-netem")
@guarded
def from_netem(
    options: Optional[str] = typer.Argument(
        None, metavar="'OPTIONS'",
        help="netem options for both directions, quoted, as tc takes them: 'delay 100ms 10ms loss 1% rate 1mbit' "
             "(a pasted `tc qdisc add dev X root netem ...` works too)."),
    uplink: Optional[str] = typer.Option(None, "--uplink", metavar="'OPTIONS'",
                                         help="netem options of the uplink (client to server) only."),
    downlink: Optional[str] = typer.Option(None, "--downlink", metavar="'OPTIONS'",
                                           help="netem options of the downlink (server to client) only."),
    name: str = typer.Option("netem", "--name", help="Name of the profile."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE.yaml",
                                          help="Write the YAML to FILE instead of printing it."),
) -> None:
    """Convert netem options to a p4netem profile and print it as YAML.

    Units as tc reads them: a bare time is microseconds, `kbps` is kilobytes/s, `kbit`
    kilobits/s. `rate RATE PACKETOVERHEAD CELLSIZE CELLOVERHEAD` keeps netem's cells (e.g. ATM's
    `rate 1mbit 0 48 5`) and its signed overheads (`rate 1mbit -14` strips Ethernet's header). An
    option the pipeline does not have (seed) is refused, named (exit 1). docs/profiles.md, "From
    netem", has the mapping."""
    from ..profiles.netem import profile_from_netem
    from ..profiles.yaml_files import dumps

    profile, warnings = profile_from_netem(options, uplink=uplink, downlink=downlink, name=name)
    for text in warnings:
        warning(text)
    text = dumps(profile)
    _emit(text, output, profile.name)


def _emit(text: str, output: Path | None, name: str) -> None:
    """A converted profile's YAML: printed, or written to `output` (said on stderr)."""
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        error(f"cannot write {output}: {exc.strerror}")
        raise typer.Exit(EXIT_PROBLEM) from None
    err.print(f"wrote {escape(str(output))} (profile {name})", highlight=False, soft_wrap=True)


@app.command("from-mahimahi")
@guarded
def from_mahimahi(
    command: str = typer.Argument(
        ..., metavar="'COMMAND'",
        help="A Mahimahi shell chain, quoted: 'mm-delay 20 mm-loss uplink 0.01 mm-link up.trace down.trace "
             "--downlink-queue=droptail --downlink-queue-args=packets=100'."),
    name: str = typer.Option("mahimahi", "--name", help="Name of the profile."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE.yaml",
                                          help="Write the YAML to FILE instead of printing it."),
) -> None:
    """Convert a Mahimahi command (mm-delay, mm-loss, mm-onoff, mm-link) to a p4netem profile and print it as YAML.

    mm-link's traces are read (they must exist) and listed: the profile plays them exactly in the
    data plane once they are in the switch, which `p4netem apply --mahimahi 'COMMAND'` does (it
    loads them and applies the profile), or for the file written, `p4netem trace load --uplink UP
    --downlink DOWN --profile FILE.yaml` (the file's comment gives the command). What Mahimahi does
    that p4netem cannot (drophead and red queues, --once, a second mm-onoff on one direction, ...)
    is refused, named (exit 1). docs/profiles.md, "From Mahimahi", has the mapping."""
    from ..profiles.yaml_files import dumps
    from .apply_cmd import mahimahi_setup

    chain, traces, profile = mahimahi_setup(command, name)
    # The trace cells are the switch's to choose: the YAML says which files the profile needs.
    needs = [f"{d}: {t.source} ({len(t.opportunities_ms)} opportunities over {t.period_ms} ms)"
             for d, t in traces.items()]
    header = ""
    if needs:
        # Applied alone, the file is refused until the switch holds the traces at its cells.
        load = " ".join(f"--{d} {shlex.quote(str(t.source))}" for d, t in traces.items())
        header = ("# needs the Mahimahi traces in the switch: " + "; ".join(needs) + ".\n"
                  f"# Play it with: p4netem trace load {load} --profile {shlex.quote(str(output or 'FILE.yaml'))}\n"
                  "# (it loads them and sets each direction's trace cells; p4netem apply --mahimahi does both too)\n")
        for line in needs:
            err.print(f"needs trace {escape(line)}", highlight=False, soft_wrap=True)
    text = header + dumps(profile)
    _emit(text, output, profile.name)
