"""The `p4netem` command line (typer). One module per command group; this module only assembles
them, so each group's options and help live next to the code they drive.

Exit codes a script can rely on (every command):
  0  done
  1  the command ran and found a problem (validation failed, a check did not pass)
  2  bad usage (unknown option, missing argument: typer/click's own code)
  3  the switch could not be reached or refused the request (the gRPC status is printed)
"""

from __future__ import annotations

import typer

from . import lab_cmd, measure_cmd, profiles_cmd

app = typer.Typer(
    name="p4netem",
    help="p4netem: a P4-programmable network emulator. Profiles, switch control, labs.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(profiles_cmd.app, name="profiles")
app.add_typer(lab_cmd.app, name="lab")
app.command("measure")(measure_cmd.measure)


def main() -> None:
    app()
