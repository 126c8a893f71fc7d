"""`p4netem profiles`: the built-in library and profile files (no switch needed)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ..profiles import ProfileError, builtin_profiles, load_profiles
from ..profiles.summary import radio_summary
from ..profiles.yaml_files import dumps

app = typer.Typer(help="List, show and validate impairment profiles.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


@app.command("list")
def list_profiles() -> None:
    """List the built-in profiles with a one-line description each."""
    table = Table("name", "description", "radio")
    for name, profile in builtin_profiles().items():
        table.add_row(name, profile.description, radio_summary(profile))
    console.print(table)


@app.command("show")
def show(name: str = typer.Argument(..., help="A built-in profile name or a YAML file.")) -> None:
    """Print a profile as YAML (human units), with its source."""
    profiles = builtin_profiles()
    if name in profiles:
        typer.echo(dumps(profiles[name]), nl=False)
        return
    path = Path(name)
    if not path.exists():
        err.print(f"[red]no built-in profile or file {name!r}[/]; built-ins: {', '.join(profiles)}")
        raise typer.Exit(1)
    try:
        loaded = load_profiles(path)
        typer.echo(dumps(loaded[0] if len(loaded) == 1 else loaded), nl=False)
    except ProfileError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(1)


@app.command("validate")
def validate(files: list[Path] = typer.Argument(..., help="Profile YAML files.")) -> None:
    """Check profile files; every problem is printed with its field, value and allowed range."""
    bad = 0
    for path in files:
        try:
            loaded = load_profiles(path)
        except (ProfileError, OSError) as exc:
            bad += 1
            err.print(f"[red]{path}: invalid[/]\n{exc}")
            continue
        console.print(f"{path}: ok ({', '.join(p.name for p in loaded)})")
    if bad:
        raise typer.Exit(1)
