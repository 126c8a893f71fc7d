"""Commands that build labs turn SIGTERM and SIGHUP into an exception that unwinds the stack, so
the `with` blocks owning namespaces, servers and the switch always run their cleanup.

The exception is a SystemExit, not a KeyboardInterrupt: Mininet's CLI catches KeyboardInterrupt
to interrupt the command running on a host (Ctrl-C at its prompt), which must stay so, while a
termination request must end the whole lab.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import typer

from ..lab.netns import LabError
from .common import error, warning

T = TypeVar("T")


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived; exit code 128 + signal number."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    def handler(signum, frame):  # noqa: ARG001
        raise Terminated(signum)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def run_recording(what: str, out_dir: Path, job: Callable[[], T]) -> T:
    """Run a job that records results into `out_dir` as it goes (measure run, experiment run).

    Ctrl-C exits 130 and SIGTERM/SIGHUP 128 + the signal, after the lab's cleanup has run and
    saying where the partial results are; a lab that fails exits 1 naming `what` failed."""
    with interrupt_on_termination():
        try:
            return job()
        except KeyboardInterrupt:
            warning(f"interrupted; partial results (if any) in {out_dir}")
            raise typer.Exit(130) from None
        except Terminated as exc:
            warning(f"terminated; partial results (if any) in {out_dir}")
            raise typer.Exit(exc.code) from None
        except (LabError, RuntimeError, ValueError) as exc:
            error(f"{what} failed: {exc}")
            raise typer.Exit(1) from None
