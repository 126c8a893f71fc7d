"""Telling a service manager how the service is doing: systemd's sd_notify protocol.

A unit with `Type=notify` gives its main process the address of a datagram socket in
$NOTIFY_SOCKET; the process sends newline-separated `KEY=value` lines there: `READY=1` once it
does its job (only then does `systemctl start` return and do units ordered after it start),
`STATUS=...` for `systemctl status`, `STOPPING=1` when it begins to stop (sd_notify(3)). A unit
with `WatchdogSec=` also sets $WATCHDOG_USEC (and $WATCHDOG_PID, the process meant): the service
must send `WATCHDOG=1` more often than that once it is ready, or systemd kills it (SIGABRT) and
`Restart=` brings it back (sd_watchdog_enabled(3)).

Written here rather than taken from a library: the protocol is one sendto() on an AF_UNIX
datagram socket, and the PyPI options are a C extension needing libsystemd's headers to build
(systemd-python) or unmaintained since 2017 (sdnotify). Without $NOTIFY_SOCKET (not run by
systemd, or a unit of another Type) every call does nothing.
"""

from __future__ import annotations

import os
import socket
import sys

ENV = "NOTIFY_SOCKET"
WATCHDOG_USEC = "WATCHDOG_USEC"
WATCHDOG_PID = "WATCHDOG_PID"


def watchdog_from_environment() -> float | None:
    """The watchdog's timeout in seconds that systemd asks this process to keep (None: none), as
    sd_watchdog_enabled(3) with unset_environment: $WATCHDOG_USEC, for this process only if
    $WATCHDOG_PID names it (a variable inherited from a parent that a unit watches is not ours),
    both taken out of the environment so the processes started from here do not inherit them."""
    usec, pid = os.environ.pop(WATCHDOG_USEC, None), os.environ.pop(WATCHDOG_PID, None)
    if not usec:
        return None
    if pid is not None and pid.strip() != str(os.getpid()):
        return None
    try:
        value = int(usec)
    except ValueError:
        value = 0
    if value <= 0:
        print(f"warning: {WATCHDOG_USEC}={usec!r} is not a positive number of microseconds: no watchdog "
              "keep-alive is sent", file=sys.stderr)
        return None
    return value / 1e6


class ServiceNotifier:
    """The service manager's notification socket, or nothing when there is none."""

    def __init__(self, address: str | None, watchdog_s: float | None = None) -> None:
        self._address: str | None = None
        self._sock: socket.socket | None = None
        # The watchdog's timeout (seconds) to keep with keep_alive() once ready; None: no watchdog
        # (also with no socket to send WATCHDOG=1 to).
        self.watchdog_s: float | None = None
        if not address:
            return
        if address.startswith("@"):
            # An abstract socket: the name is the rest, after a NUL byte instead of the '@'.
            self._address = "\0" + address[1:]
        elif address.startswith("/"):
            self._address = address
        else:  # e.g. systemd 254's vsock:CID:PORT for a VM's manager: not ours to reach
            print(f"warning: {ENV}={address!r} is not an AF_UNIX socket (a path or @name): "
                  "the service manager is not told when the service is ready", file=sys.stderr)
            return
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.watchdog_s = watchdog_s

    @classmethod
    def from_environment(cls) -> "ServiceNotifier":
        """The socket of $NOTIFY_SOCKET, taken out of the environment (as sd_notify's
        unset_environment does) so that the processes this one starts do not inherit it: they are
        not the unit's main process, whose messages alone a `NotifyAccess=main` unit accepts."""
        return cls(os.environ.pop(ENV, None), watchdog_from_environment())

    @property
    def active(self) -> bool:
        return self._sock is not None

    def send(self, **fields: str) -> None:
        """One message: each field a `KEY=value` line (STATUS="..." etc.; a value is one line).
        A message that cannot be sent is named on stderr (the journal), never raised: the
        service itself works on, and systemd's start timeout tells the rest."""
        if self._sock is None or self._address is None:
            return
        text = "".join(f"{key}={' '.join(str(value).splitlines())}\n" for key, value in fields.items())
        try:
            self._sock.sendto(text.encode(), self._address)
        except OSError as exc:
            print(f"warning: cannot notify the service manager at {ENV}: {exc}", file=sys.stderr)

    def status(self, text: str) -> None:
        self.send(STATUS=text)

    def ready(self, status: str) -> None:
        self.send(READY="1", STATUS=status)

    def keep_alive(self) -> None:
        """WATCHDOG=1: the service is alive (send it more often than watchdog_s)."""
        self.send(WATCHDOG="1")

    def stopping(self, status: str) -> None:
        self.send(STOPPING="1", STATUS=status)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "ServiceNotifier":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
