"""Commands that build labs turn SIGTERM and SIGHUP into the same unwinding as Ctrl-C, so the
`with` blocks that own namespaces, servers and the switch always run their cleanup."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
