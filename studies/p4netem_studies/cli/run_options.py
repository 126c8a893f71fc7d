"""Options shared by `p4netem measure` and `p4netem experiment run`: what a run keeps, where it
runs, and its comparison with a saved baseline (one definition, so the two commands spell and
explain them the same way)."""

from __future__ import annotations

import typer

KEEP_PCAPS = typer.Option(False, "--keep-pcaps", help="Keep each load's capture.")
TARGET = typer.Option("p4netem", "--target", help="p4netem or bmv2.")
QUIET = typer.Option(False, "--quiet", help="No line per load.")
BASELINE = typer.Option(None, "--baseline", metavar="DIR", help="Compare the run's medians with "
                        "DIR/baseline.json: exit 1 and a table when one is worse by more than its "
                        "tolerance.")
SAVE_BASELINE = typer.Option(False, "--save-baseline", help="Store the run's medians as --baseline "
                             "DIR instead of comparing.")
TOLERANCE = typer.Option([], "--tolerance", metavar="COLUMN=PCT", help="Tolerance of the medians "
                         "named (fnmatch), e.g. plt_ms_median=15 (default 10). Repeatable.")
