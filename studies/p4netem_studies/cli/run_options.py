"""Options shared by `p4netem measure` and `p4netem experiment run`: what a run keeps, where it
runs, and its comparison with a saved baseline (one definition, so the two commands spell and
explain them the same way)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

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

# The switch targets a lab can run (mininet/lab.py's TARGETS, without importing Mininet here).
TARGET_NAMES = ("p4netem", "bmv2")


def check_target(target: str) -> None:
    """Refuse an unknown --target before a lab is built (ValueError names the option)."""
    if target not in TARGET_NAMES:
        raise ValueError(f"--target must be one of {', '.join(TARGET_NAMES)}, not {target!r}")


def check_out_dir(path: str | Path, option: str = "--out") -> Path:
    """Check that the result directory can be created or written, so that one that cannot (a
    path through a file, a read-only place) is a one-line error before a lab comes up, not a
    traceback after. Nothing is left here: a run refused later (a bad --ray) writes nothing."""
    path = Path(path)
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"{option} {path}: cannot create it: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: cannot create it: {probe} is not writable")
    # access() answers yes to root for places where nothing can be made all the same (/proc,
    # /sys, a directory that refuses new entries): make and remove one entry to be sure.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".p4netem-out-check-", dir=probe))
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot create it in {probe}: "
                         f"{exc.strerror or exc}") from None
    return path
