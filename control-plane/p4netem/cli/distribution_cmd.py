"""`p4netem distribution load|show|make`: the switch's user jitter distribution table.

`load` writes a netem `.dist` table (or one built from delay samples, --from-samples) into the
user slot of dist_table, which profiles with `jitter_distribution: user` draw from; it must be the
primary controller. `show` only reads (no arbitration). `make` needs no switch: iproute2's
maketable, a `.dist` file from delay samples. docs/cli.md shows each; the table format and its
construction are in p4netem/profiles/distribution.py and docs/profiles.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..profiles.distribution import (DistTable, format_dist, load_dist, load_samples, summary_line,
                                     table_summary)
from .common import DEFAULT_ADDR, DeviceId, ElectionId, Json, SwitchAddr, connect, console, guarded, warning

app = typer.Typer(help="The user jitter distribution table (jitter_distribution: user): load, show, make.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

FromSamples = Annotated[bool, typer.Option(
    "--from-samples", help="FILE holds delay samples (numbers in one unit, e.g. measured one-way delays in ms), "
                           "not a table: build the table from them as iproute2's maketable does.")]


def read_table(path: Path, from_samples: bool) -> DistTable:
    return load_samples(path) if from_samples else load_dist(path)


def samples_hint(table: DistTable) -> str:
    return (f"to reproduce the samples: delay {table.mean:g} jitter {table.sigma:g} (in the samples' unit) "
            "with jitter_distribution: user")


@app.command("load")
@guarded
def load(
    path: Annotated[Path, typer.Argument(
        metavar="FILE", help="A netem .dist table (4096 integers in sigma/8192 units, or a power of two "
                             "fewer; `#` comments), e.g. one made by iproute2's maketable.")],
    from_samples: FromSamples = False,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Load FILE into the switch's user distribution table.

    Profiles with `jitter_distribution: user` (or `--netem '... distribution FILE'`) draw their
    jitter from it: each packet gets a uniformly chosen cell times jitter / 8192, so the profile's
    jitter is the sigma. The file is checked first (a bad entry is named by its line; nothing is
    written); the whole table goes in one write. It lasts until the next load, `reset --hard` or a
    switch restart."""
    table = read_table(path, from_samples)
    if table.clamped:
        warning(f"{table.clamped} cells beyond +/-4 sigma clamped to +/-32767 (the int16 range)")
    with connect(addr, device_id, election_id) as ctl:
        ctl.load_distribution(table)
    if as_json:
        typer.echo(json.dumps({"loaded": table.source, "entries": table.entries, "samples": table.samples,
                               "mean": table.mean, "sigma": table.sigma, "clamped": table.clamped,
                               "shape": table_summary(table.values)}, indent=2))
        return
    console.print(f"loaded the user distribution table: {table.describe()}", highlight=False)
    console.print(f"  {summary_line(table.values)}", highlight=False)
    if table.samples:
        console.print(f"  {samples_hint(table)}", highlight=False)


@app.command("show")
@guarded
def show(
    which: Annotated[str, typer.Option(
        "--table", "-t", metavar="NAME", help="Which table: user (default), or the built-in normal, pareto, "
                                              "paretonormal.")] = "user",
    dist: Annotated[bool, typer.Option(
        "--dist", help="Print the table as a .dist file (tc and `distribution load` read it back).")] = False,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Show a distribution table as the switch holds it: its shape in sigma units (read-only)."""
    from ..control.distributions import table_distribution

    table_distribution(which, "--table")  # before connecting: a bad name is a usage problem
    with connect(addr, device_id, election_id, write=False) as ctl:
        values = ctl.distribution(which)
    name = which.strip().lower()
    if dist:
        typer.echo(format_dist(values, f"p4netem {name} distribution table read from {addr}"), nl=False)
        return
    if as_json:
        typer.echo(json.dumps({"table": name, **table_summary(values), "values": list(values)}, indent=2))
        return
    console.print(f"{name} distribution table ({len(values)} cells): {summary_line(values)}", highlight=False)


@app.command("make")
@guarded
def make(
    path: Annotated[Path, typer.Argument(metavar="SAMPLES", help="Delay samples: numbers in one unit, `#` comments.")],
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the .dist table here instead of stdout.")] = None,
) -> None:
    """Build a .dist table from delay samples (as iproute2's maketable; no switch needed).

    The samples are standardised with their mean and standard deviation; the table is their
    inverse CDF at 4096 evenly spaced probabilities, in sigma/8192 units. The mean and sigma to
    use as the profile's delay and jitter are printed on stderr."""
    table = load_samples(path)
    text = format_dist(table.values, f"p4netem distribution table from {table.samples} samples of {path.name}\n"
                                     f"mean {table.mean:g}, sigma {table.sigma:g} (in the samples' unit)")
    if table.clamped:
        warning(f"{table.clamped} cells beyond +/-4 sigma clamped to +/-32767 (the int16 range)")
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
    typer.echo(f"{table.describe()}; {samples_hint(table)}", err=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="distribution")


__all__ = ["app", "register"]
