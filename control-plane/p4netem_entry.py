"""The `p4netem` command's entry point (control-plane/pyproject.toml, [project.scripts]).

A Ctrl-C while the command line starts (its imports: the P4Runtime protobufs, grpc, typer, every
command group; about half a second, more on a loaded machine) printed a KeyboardInterrupt traceback.
Here it ends the command quietly with exit 130, as a shell's commands do. Once a command runs,
its own handling of Ctrl-C holds (click's "Aborted!", a lab's or a timeline's exit 130).
It also keeps gRPC core's own log lines off the command's stderr (quiet_grpc_logs).

A top-level module, outside the p4netem package: importing anything in p4netem runs
p4netem/__init__.py first, itself a good part of those imports. What runs before this module
(the interpreter and its `site`) is Python's own.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

# gRPC core's own log level (grpcio reads it when grpc is imported).
GRPC_VERBOSITY = "GRPC_VERBOSITY"
GRPC_TRACE = "GRPC_TRACE"


def quiet_grpc_logs(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """gRPC core logs a refused TLS handshake itself, on stderr, at each reconnect attempt (grpcio
    1.85: `I1130 ... ssl_transport_security.cc:2563] Handshake failed ... CERTIFICATE_VERIFY_FAILED`
    for a wrong CA; `E1130 ... TLSV1_ALERT_CERTIFICATE_REQUIRED` ... `Decryption error` under mutual
    TLS without a client certificate), several lines before the command's own one-line error,
    which already names the cause and the options that fix it. So the command line runs grpc at
    level NONE (ERROR still prints the E lines), unless the user set GRPC_VERBOSITY or asked for
    gRPC's traces (GRPC_TRACE): then their choice holds. Only the `p4netem` command: a program
    that imports p4netem keeps gRPC's defaults. Set in the environment, before grpc is imported
    (the commands import it when they need it), so the processes a command starts inherit it;
    a command that runs the user's own programs takes it back (restore_grpc_logs). Returns what
    it set (name -> value)."""
    if GRPC_VERBOSITY in environ or GRPC_TRACE in environ:
        return {}
    environ[GRPC_VERBOSITY] = "NONE"
    return {GRPC_VERBOSITY: "NONE"}


# What main's quiet_grpc_logs set in this process's environment: ours, not the user's.
_injected: dict[str, str] = {}


def restore_grpc_logs() -> None:
    """Takes what the command line set in the environment (quiet_grpc_logs) out of it again, for a
    command that runs the user's own programs with it: a lab's host shells (`p4netem lab up`, its
    --cmd and interactive commands, `sh`, `xterm`) inherit this process's environment, and a gRPC
    program of the user's run there would have logged nothing, not even its errors. A
    GRPC_VERBOSITY the user set is theirs and stays. grpc is imported first: it reads the level
    then (grpcio 1.85; later changes to the environment do not reach it), so the command itself
    keeps gRPC quiet."""
    if not _injected:
        return
    import grpc  # noqa: F401 (for the level it reads)

    for name, value in list(_injected.items()):
        if os.environ.get(name) == value:
            del os.environ[name]
        del _injected[name]


@contextmanager
def sigint_after_imports() -> Iterator[None]:
    """Ctrl-C while the block imports is only noted, and raised as KeyboardInterrupt once the block
    is done: a handler that raised it during an import could land in code whose exceptions Python
    drops (an import lock's weakref callback: "Exception ignored in: <function
    _get_module_lock.<locals>.cb>", then the command ran on as if no Ctrl-C had come). Also used
    by the command line for the command modules it imports later and for the help's imports
    (p4netem/cli/lazy_group.py). Raised also when the block ended by an exception (an import
    that failed, click's exit once a help is printed): the user asked to stop, exit 130."""
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: interrupted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if interrupted:
            raise KeyboardInterrupt  # (in place of the block's own exception, if any)


def main() -> int | None:
    _injected.update(quiet_grpc_logs())
    try:
        with sigint_after_imports():
            from p4netem.cli import main as cli_main
        return cli_main()
    except KeyboardInterrupt:
        return 130
    finally:
        # The command is done (or raised SystemExit, as click does): a Ctrl-C from here on, while
        # the interpreter exits, ends it at once, without a traceback either.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
