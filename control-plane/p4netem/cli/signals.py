"""Commands that build labs turn SIGTERM and SIGHUP into an exception that unwinds the stack, so
the `with` blocks owning namespaces, servers and the switch always run their cleanup.

The exception is a SystemExit, not a KeyboardInterrupt: Mininet's CLI catches KeyboardInterrupt
to interrupt the command running on a host (Ctrl-C at its prompt), which must stay so, while a
termination request must end the whole lab.

The stop is also remembered (p4netem.stop_signals): Python runs the handler at the next bytecode,
which may be in a finalizer (a dropped subprocess.Popen's __del__) or an at-fork callback, where it
prints the exception as "Exception ignored" and drops it; the command then went on (a lab stayed up
at its prompt, a measure ran its remaining loads). The loops where these commands spend their time
(the lab CLI's commands and host-command waits, measure's loads and the loader's wait, the
experiment driver's loop) raise it again with stop_signals.check_pending().
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import typer

from ..stop_signals import StopSignals, handling
from .common import error, warning

T = TypeVar("T")


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived; exit code 128 + signal number."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    with handling(StopSignals(Terminated), (signal.SIGTERM, signal.SIGHUP)):
        yield


def run_recording(what: str, out_dir: Path, job: Callable[[], T]) -> T:
    """Run a job that records results into `out_dir` as it goes (measure run, experiment run).

    Ctrl-C exits 130 and SIGTERM/SIGHUP 128 + the signal, after the lab's cleanup has run and
    saying where the partial results are; a lab that fails exits 1 naming `what` failed."""
    from ..lab.netns import LabError  # here: the studies' commands import this module to build their help

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
