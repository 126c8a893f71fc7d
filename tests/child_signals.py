"""SIGINT of child processes in tests that send Ctrl-C to a command (shared by the CLI and lab
tests; tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import signal


def default_sigint(cmd: list[str]) -> list[str]:
    """`cmd` started with SIGINT at its default disposition, as an interactive shell does, for a
    child the test will send SIGINT. A test run started with `&` or under nohup has SIGINT
    ignored, children inherit that, and Python then never installs its Ctrl-C handler: the test
    would be testing how it was started, not the command (issue 13, defect 8).

    coreutils' `env --default-signal` execs the command in the same process, so its pid is the
    command's. Not a preexec_fn: that makes Popen fork() instead of vfork(), fork runs gRPC's
    atfork handlers while this process's channels are busy, and grpcio 1.80-1.85 then aborts the
    child before it execs (grpc/grpc#43055; seen as exit -6 and "epoll_wait error: Bad file
    descriptor")."""
    return ["env", "--default-signal=INT", *cmd]


def sigint_ignored(pid: int) -> bool:
    """Whether the process ignores SIGINT (its SigIgn mask in /proc)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False
