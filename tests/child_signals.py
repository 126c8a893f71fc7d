"""SIGINT of child processes in tests that send Ctrl-C to a command (shared by the CLI and lab
tests; tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """preexec_fn for a child the test will send SIGINT: start it with SIGINT at its default
    disposition, as an interactive shell does. A test run started with `&` or under nohup has
    SIGINT ignored, children inherit that, and Python then never installs its Ctrl-C handler:
    the test would be testing how it was started, not the command (issue 13, defect 8)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_ignored(pid: int) -> bool:
    """Whether the process ignores SIGINT (its SigIgn mask in /proc)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False
