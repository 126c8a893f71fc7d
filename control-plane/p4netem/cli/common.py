"""What every switch command shares: the connection options, the exit codes, error printing.

Errors go to stderr as one line starting with `error:` (more lines may follow with the problems of
a file); warnings start with `warning:`. The exit code says what kind of failure it was (see
p4netem.cli). Scripts should rely on the exit code and on `--json` output, not on table layout.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..control.primary_wait import CLI_WAIT_S, MAX_WAIT_S

if TYPE_CHECKING:
    from ..control import Controller

# The command modules import what a command needs inside it, not at the top: every `p4netem`
# command imports all of them to build the command line, and `p4netem --help` or `profiles list`
# must not pay for grpc, the controller and every model (tests/unit/test_cli_startup.py).

EXIT_OK = 0
EXIT_PROBLEM = 1  # bad profile/rule/timeline, a check that failed, the switch process failed
EXIT_USAGE = 2  # typer/click usage errors
EXIT_SWITCH = 3  # the switch could not be reached or refused the request
EXIT_INTERRUPTED = 130  # Ctrl-C during a timeline (the shell's convention for SIGINT)

DEFAULT_ADDR = "127.0.0.1:9559"

# Width of stdout when it is not a terminal (a pipe, a file) and COLUMNS is not set: rich would
# take 80 columns there (or the width of whatever terminal stderr or stdin is) and squeeze tables
# into it, cutting headers to `pro…`. Tables take only the width they need, so this is an upper bound.
PIPED_WIDTH = 400


def stdout_console(**kwargs: Any) -> Console:
    """A console on stdout: on a terminal, or with COLUMNS set, as wide as rich makes it; otherwise
    PIPED_WIDTH wide so that tables keep their whole headers and cells."""
    con = Console(**kwargs)
    if not con.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        con = Console(width=PIPED_WIDTH, **kwargs)
    return con


console = stdout_console(soft_wrap=True)  # status lines stay one line (scripts grep them)
err_console = Console(stderr=True)

SwitchAddr = Annotated[str, typer.Option(
    "--switch", "-s", envvar="P4NETEM_ADDR", metavar="HOST:PORT",
    help="P4Runtime address of the switch (env P4NETEM_ADDR).")]
# P4Runtime carries the device id as uint64 and the election id as uint128: larger values are
# bad usage like any other out-of-range option, not a failure while encoding the request.
DeviceId = Annotated[int, typer.Option(
    "--device-id", envvar="P4NETEM_DEVICE_ID", min=0, max=2**64 - 1,
    help="P4Runtime device id (env P4NETEM_DEVICE_ID).")]
ElectionId = Annotated[int, typer.Option(
    "--election-id", envvar="P4NETEM_ELECTION_ID", min=1, max=2**128 - 1,
    help="Election id for arbitration: the highest live one is primary and may write "
         "(env P4NETEM_ELECTION_ID).")]
# How long a write command waits for the primary role while another live controller holds it
# (control/primary_wait.py says why and what is waited on; its CLI_WAIT_S, the default).
PrimaryWait = Annotated[float, typer.Option(
    "--primary-wait", envvar="P4NETEM_PRIMARY_WAIT", metavar="SECONDS", min=0.0, max=MAX_WAIT_S,
    help="How long a command that writes waits for the primary role while another live controller holds it "
         "(our election id, or a higher one primary), before exit 3; 0: at once (env P4NETEM_PRIMARY_WAIT).")]
_primary_wait_s = CLI_WAIT_S


def use_primary_wait(seconds: float) -> None:
    """The wait of every write command of this process (the global --primary-wait), and a line on
    stderr when one waits (`warning: waiting up to 5 s for the primary role: ...`, logged by
    control/primary_wait.py; `p4netem web` shows its writes' waits the same way)."""
    global _primary_wait_s
    _primary_wait_s = seconds
    waits = logging.getLogger(PRIMARY_WAIT_LOGGER)
    if not any(isinstance(h, _ShownAsWarning) for h in waits.handlers):
        waits.addHandler(_ShownAsWarning())
        waits.setLevel(logging.INFO)
        waits.propagate = False


PRIMARY_WAIT_LOGGER = "p4netem.control.primary_wait"


class _ShownAsWarning(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        warning(record.getMessage())


GrpcCa = Annotated[Optional[Path], typer.Option(
    "--grpc-ca", envvar="P4NETEM_GRPC_CA", metavar="PEM",
    help="TLS: trust switches whose certificate this CA signed (env P4NETEM_GRPC_CA). Without any "
         "--grpc-* option the connection is plaintext, which p4netem-switch serves only on loopback.")]
GrpcCert = Annotated[Optional[Path], typer.Option(
    "--grpc-cert", envvar="P4NETEM_GRPC_CERT", metavar="PEM",
    help="Mutual TLS: this client's certificate (env P4NETEM_GRPC_CERT); needs --grpc-key.")]
GrpcKey = Annotated[Optional[Path], typer.Option(
    "--grpc-key", envvar="P4NETEM_GRPC_KEY", metavar="PEM",
    help="Mutual TLS: the private key of --grpc-cert (env P4NETEM_GRPC_KEY).")]
GrpcServerName = Annotated[Optional[str], typer.Option(
    "--grpc-server-name", envvar="P4NETEM_GRPC_SERVER_NAME", metavar="NAME",
    help="TLS: check the switch's certificate against NAME instead of the host of --switch "
         "(env P4NETEM_GRPC_SERVER_NAME).")]


def use_tls(ca: Path | None, cert: Path | None, key: Path | None, server_name: str | None) -> None:
    """Make every P4Runtime client of this process (and of the processes it starts) use this TLS.
    The clients read it from the environment (p4netem.p4rt.tls), so the commands of other packages
    (lab, measure, experiment) reach a secured switch without options of their own."""
    if not any((ca, cert, key, server_name)):
        return
    from ..p4rt.tls import ENV_CA, ENV_CERT, ENV_KEY, ENV_SERVER_NAME, GrpcTls, TlsConfigError  # grpc: only now

    try:
        tls = GrpcTls(ca=ca, cert=cert, key=key, server_name=server_name)
        tls.credentials()  # reads the files now: a bad one is named before any command runs
    except TlsConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    for var in (ENV_CA, ENV_CERT, ENV_KEY, ENV_SERVER_NAME):
        os.environ.pop(var, None)
    os.environ.update(tls.env())


Json = Annotated[bool, typer.Option("--json", help="Print JSON (stable, for scripts) instead of tables.")]


def error(message: str) -> None:
    # Messages quote user input (a netem token "[x]", a YAML value): never read it as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def warning(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def connect(addr: str, device_id: int, election_id: int, *, write: bool = True,
            profiles: list | None = None) -> Controller:
    """A Controller; for write commands it must be primary (else exit 3 with the reason), after
    waiting for the role for up to --primary-wait while another live controller holds it."""
    from ..control.controller import Controller
    from ..p4rt.errors import P4RuntimeError

    wait = _primary_wait_s if write else 0.0
    start = time.monotonic()
    ctl = Controller.connect(addr, device_id=device_id, election_id=election_id, primary=write,
                             timeout=5.0, profiles=profiles or (), primary_wait=wait)
    if write and not ctl.is_primary:
        highest = ctl.client.primary_election_id
        ctl.close()
        raise P4RuntimeError(
            _permission_denied(),
            f"not the primary controller of device {device_id} at {addr}: our election id {election_id}"
            + (f" is below the switch's highest, {highest}" if highest is not None else "")
            + "; pass a higher --election-id to take over"
            + (f"; waited {time.monotonic() - start:.1f} s for the primary role" if wait else ""))
    return ctl


def _permission_denied():
    import grpc

    return grpc.StatusCode.PERMISSION_DENIED


F = TypeVar("F", bound=Callable[..., Any])


def _raised(module: str, name: str, exc: Exception) -> bool:
    """isinstance(exc, module.name), without importing the module (commands import what they use,
    and an exception of a class whose module was never imported cannot have been raised)."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(exc, getattr(loaded, name))


def guarded(fn: F) -> F:
    """Map the package's exceptions to messages and exit codes."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            # ProfileError: also RuleError and TimelineError; bad input, nothing was written.
            if _raised("p4netem.profiles.errors", "ProfileError", exc):
                error(str(exc))
                raise typer.Exit(EXIT_PROBLEM) from None
            if _raised("p4netem.p4rt.errors", "P4RuntimeError", exc):
                error(f"switch {kwargs.get('addr', '')}: {exc.code.name}: {exc.message}".replace("switch : ", "switch: "))
                raise typer.Exit(EXIT_SWITCH) from None
            if _raised("p4netem.lab.netns", "LabError", exc) or isinstance(exc, OSError):
                error(str(exc))
                raise typer.Exit(EXIT_PROBLEM) from None
            raise

    return wrapper  # type: ignore[return-value]


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()
