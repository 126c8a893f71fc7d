"""A stop signal (SIGTERM, Ctrl-C's SIGINT) that is not lost when Python discards its exception.

Python runs a signal's handler in the main thread at the next bytecode, which may be in code whose
exceptions it discards: subprocess's fork runs the os.register_at_fork callbacks (logging's, for
one), and an exception raised there is printed as "Exception ignored" and dropped. A handler that
only raised lost the stop: `p4netem switch` went on starting a switch nobody would stop, and a lab
process of `experiment run --parallel` went on waiting for its driver's next message while the
driver waited for it to close. `StopSignals` raises and also remembers the stop; `check()` raises
it again where the program goes on (after a fork, at the top of a loop), and `wait()` waits for a
process while looking every second.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable


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

    def wait(self, proc: subprocess.Popen) -> int:
        """proc.wait(), raising a remembered stop within a second."""
        while True:
            try:
                return proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.check()
