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


def main() -> int | None:
    try:
        from p4netem.cli import main as cli_main
        return cli_main()
    except KeyboardInterrupt:
        # A second Ctrl-C during the interpreter's exit ends it at once, without a traceback either.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        return 130
