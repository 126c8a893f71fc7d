"""Commands that build labs turn SIGTERM and SIGHUP into an exception that unwinds the stack, so
the `with` blocks owning namespaces, servers and the switch always run their cleanup.

The exception is a SystemExit, not a KeyboardInterrupt: Mininet's CLI catches KeyboardInterrupt
to interrupt the command running on a host (Ctrl-C at its prompt), which must stay so, while a
termination request must end the whole lab.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


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
