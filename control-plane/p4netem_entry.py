"""The `p4netem` command's entry point (control-plane/pyproject.toml, [project.scripts]).

A Ctrl-C while the command line starts (its imports: the P4Runtime protobufs, grpc, typer, every
command group; about half a second, more on a loaded machine) printed a KeyboardInterrupt traceback.
Here it ends the command quietly with exit 130, as a shell's commands do. Once a command runs,
its own handling of Ctrl-C holds (click's "Aborted!", a lab's or a timeline's exit 130).

A top-level module, outside the p4netem package: importing anything in p4netem runs
p4netem/__init__.py first, itself a good part of those imports. What runs before this module
(the interpreter and its `site`) is Python's own.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_after_imports() -> Iterator[None]:
    """Ctrl-C while the block imports is only noted, and raised as KeyboardInterrupt once the block
    is done: a handler that raised it during an import could land in code whose exceptions Python
    drops (an import lock's weakref callback: "Exception ignored in: <function
    _get_module_lock.<locals>.cb>", then the command ran on as if no Ctrl-C had come). Also used
    by the command line for the command modules it imports later (p4netem/cli/lazy_group.py)."""
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: interrupted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise KeyboardInterrupt


def main() -> int | None:
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
