"""A stop signal (SIGTERM, Ctrl-C's SIGINT) that is not lost when Python discards its exception.

Python runs a signal's handler in the main thread at the next bytecode, which may be in code whose
exceptions it discards: subprocess's fork runs the os.register_at_fork callbacks (logging's, for
one), and an exception raised there is printed as "Exception ignored" and dropped. A handler that
only raised lost the stop: `p4netem switch` went on starting a switch nobody would stop, and a lab
process of `experiment run --parallel` went on waiting for its driver's next message while the
driver waited for it to close. `StopSignals` raises and also remembers the stop; `check()` raises
it again where the program goes on (after a fork, at the top of a loop), and `wait()` waits for a
process while looking every second.

Where the stop must end a program that has no handle on the handler (a command's lab CLI, its page
loads, the experiment driver: `p4netem.cli.signals.interrupt_on_termination`), `handling()`
installs a StopSignals for a block and `check_pending()`, called at the top of the few loops and
waits where such a program spends its time, raises the stop it remembered. Python discards it
also in finalizers (`__del__`, e.g. subprocess.Popen's, run for every Popen a lab drops, weakref
and gc callbacks), not only in at-fork callbacks.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator


class StopSignals:
    """A signal handler (`signal.signal(sig, stops)`) that raises `exception(signum)` in the main
    thread and remembers the signal. `once`: later signals are ignored, so that they do not cut
    into the cleanup the first one started (the latest one counts otherwise)."""

    def __init__(self, exception: Callable[[int], BaseException], *, once: bool = False) -> None:
        self.signum: int | None = None
        self._exception = exception
        self._once = once

    def __call__(self, signum: int, _frame: object) -> None:
        if self._once and self.signum is not None:
            return
        self.signum = signum
        self.check()

    def check(self) -> None:
        """Raise the remembered stop, if any (again, when Python discarded it)."""
        if self.signum is not None:
            raise self._exception(self.signum)

    def wait(self, proc: subprocess.Popen, *, period: float = 1.0, tick: Callable[[], None] | None = None) -> int:
        """proc.wait(), raising a remembered stop within `period` seconds, and calling `tick` (if
        any) once per period while the process runs (p4netem switch's watchdog keep-alive)."""
        while True:
            try:
                return proc.wait(timeout=period)
            except subprocess.TimeoutExpired:
                self.check()
                if tick is not None:
                    tick()


# The StopSignals of the `handling` blocks being run, innermost last.
_handling: list[StopSignals] = []


@contextlib.contextmanager
def handling(stops: StopSignals, signums: tuple[int, ...]) -> Iterator[StopSignals]:
    """`stops` handles `signums` for the block (the handlers before it again after it), and
    check_pending() raises what it remembered."""
    saved = {s: signal.signal(s, stops) for s in signums}
    _handling.append(stops)
    try:
        yield stops
    finally:
        _handling.remove(stops)
        for s, h in saved.items():
            signal.signal(s, h)


def check_pending() -> None:
    """Raise a stop that the StopSignals of a `handling` block remembered (none outside one: a
    library caller, a test). For the top of a long loop or wait that goes on by itself (a loop
    over page loads, the wait for a host command), never for a close: the stop is raised again
    each time."""
    for stops in _handling:
        stops.check()


def communicate(proc: subprocess.Popen, timeout: float) -> tuple:
    """proc.communicate(timeout=timeout), raising a pending stop (check_pending) within a second.
    subprocess.TimeoutExpired after `timeout` as communicate's own; the process is left running."""
    deadline = time.monotonic() + timeout
    while True:
        check_pending()
        left = deadline - time.monotonic()
        try:
            return proc.communicate(timeout=max(0.0, min(1.0, left)))
        except subprocess.TimeoutExpired:
            if left <= 1.0:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None


@contextlib.contextmanager
def held_for_children(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """`signums` blocked in the calling thread for the block, for a child started in it: the signal
    mask is per thread, a fork (subprocess's, from the calling thread) copies the thread's, and
    exec keeps it. A program that blocks its stop signals first thing in main (p4netem-switch,
    dataplane/src/main.rs `stop_signals`) and honours a pending one as a clean stop was still
    killed by one that came between the fork and its main (its dynamic loader runs first): now
    such a signal waits, pending, until the program has held them off itself.

    The mask the block found is restored on the way out, also when the block raises. A signal
    sent to this process meanwhile is not lost either: another thread that does not block it
    takes it at once, or it is delivered at the restore (Python runs its handler at the next
    bytecode, so a Ctrl-C becomes a KeyboardInterrupt raised from the `with`: keep in the block
    what must not be left half done, e.g. recording the child that was started)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
