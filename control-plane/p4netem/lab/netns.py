"""Network namespaces, veth pairs and processes for test labs, with cleanup of exactly what we made.

Everything created here is named with the prefix "p4n" plus a token of this process (tokens.py),
and is recorded in a `Resources` object; `Resources.close()` (called by context managers and, as a
last resort, at interpreter exit) kills the processes it started and deletes the namespaces and
links it created, newest first, and nothing else. Given an `owner_prefix`, it also keeps a
LabRecord (owner.py) of them on disk, so that if this process is killed outright the next run
removes them (`clean_dead_labs`).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shlex
import signal
import subprocess
import threading
import weakref
from collections.abc import Sequence

from . import tokens
from .owner import LabRecord, open_record, record_exists, stop_processes
from .tokens import PREFIX
_counter = itertools.count()
_counter_lock = threading.Lock()


class LabError(RuntimeError):
    """A lab command failed; the message holds the command and its stderr."""


def unique_token() -> str:
    """A token (tokens.py) unique among this machine's live processes and their labs: this
    process's pid and a counter, fixed-width, so no token begins another. A number whose lab
    record is still there is skipped: a dead process that had our pid left it, and its names are
    what a cleaner will remove (clean_dead_labs)."""
    pid = os.getpid()
    while True:
        with _counter_lock:
            n = next(_counter)
        if n >= tokens.COUNTER_LIMIT:
            raise LabError(f"this process has made {tokens.COUNTER_LIMIT} lab tokens, the most one "
                           "process can (names must fit Linux's 15 characters): run more labs from "
                           "another process")
        token = tokens.make(pid, n)
        if not record_exists(f"{PREFIX}{token}"):
            return token


def run(
    cmd: Sequence[str], netns: str | None = None, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a command (in `netns` when given), capturing output; raise LabError on failure."""
    full = (["ip", "netns", "exec", netns] if netns else []) + list(cmd)
    try:
        # errors="replace": a command that prints bytes that are not UTF-8 (a binary body through
        # curl) still gives its text and status; strict decoding raised UnicodeDecodeError instead.
        proc = subprocess.run(full, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise LabError(f"timed out after {timeout} s: {shlex.join(full)}") from err
    if check and proc.returncode != 0:
        raise LabError(f"command failed ({proc.returncode}): {shlex.join(full)}\n{proc.stderr.strip()}")
    return proc


def disable_offloads(dev: str, netns: str | None = None) -> None:
    """Turn off checksum and segmentation offloads: a raw-socket switch between veths needs real
    checksums and wire-sized packets (otherwise TCP never connects, and shaping counts super-packets)."""
    run(["ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off", "tso", "off", "gro", "off"], netns)


class Namespace:
    """A network namespace this process created."""

    def __init__(self, name: str, resources: Resources):
        self.name = name
        self._resources = resources

    def run(self, cmd: Sequence[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run(cmd, self.name, check, timeout)

    def popen(self, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen:
        """Start a process in the namespace; it is killed when the lab closes if still running."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.name, *cmd], **kwargs)  # type: ignore[call-overload]
        self._resources.track_process(proc)
        return proc

    def __repr__(self) -> str:
        return f"Namespace({self.name!r})"


class Resources:
    """What one lab created, so that cleanup removes exactly that.

    `owner_prefix`: the prefix every name of this lab starts with; when given, the lab is recorded
    in run_dir() (owner.LabRecord) before its first namespace, link or process exists."""

    def __init__(self, owner_prefix: str | None = None, kind: str = "lab") -> None:
        self._namespaces: list[str] = []
        self._links: list[tuple[str, str | None]] = []
        self._processes: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self.closed = False
        self.owner_prefix = owner_prefix
        self.kind = kind
        self._record: LabRecord | None = None
        _open_resources.add(self)

    def _recorded(self) -> LabRecord | None:
        if self._record is None and self.owner_prefix is not None:
            self._record = open_record(self.owner_prefix, self.kind)
        return self._record

    def namespace(self, name: str) -> Namespace:
        if not name.startswith(PREFIX):
            raise LabError(f"namespace {name!r}: lab namespaces must start with {PREFIX!r}")
        record = self._recorded()
        if record is not None:
            record.add_namespace(name)
        run(["ip", "netns", "add", name])
        with self._lock:
            self._namespaces.append(name)
        ns = Namespace(name, self)
        ns.run(["ip", "link", "set", "lo", "up"])
        return ns

    def veth(self, name_a: str, name_b: str, ns_a: Namespace | None = None, ns_b: Namespace | None = None) -> None:
        """A veth pair; each end moved into its namespace (None = this one). Ends are left down."""
        if len(name_a) > 15 or len(name_b) > 15:
            raise LabError(f"interface names are limited to 15 characters: {name_a!r}, {name_b!r}")
        cmd = ["ip", "link", "add", name_a]
        if ns_a:
            cmd += ["netns", ns_a.name]
        cmd += ["type", "veth", "peer", "name", name_b]
        if ns_b:
            cmd += ["netns", ns_b.name]
        where = (name_a, ns_a.name if ns_a else None)
        with self._lock:
            known = where in self._links  # a pair deleted and created again (TwoHostLab.replug)
        record = self._recorded()
        if record is not None and ns_a is None and not known:
            record.add_link(name_a)
        run(cmd)
        with self._lock:
            # Deleting one end deletes the pair; remember one end and where it lives.
            if not known:
                self._links.append(where)

    def track_process(self, proc: subprocess.Popen) -> None:
        record = self._recorded()
        if record is not None:
            record.add_process(proc.pid)
        with self._lock:
            self._processes.append(proc)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            processes, self._processes = self._processes[::-1], []
            links, self._links = self._links[::-1], []
            namespaces, self._namespaces = self._namespaces[::-1], []
        for proc in processes:
            stop_process(proc)
        # What else still runs in the namespaces was started there by the lab's user (a server
        # that daemonized, `cmd &` in a run): it would outlive the deleted namespace for good.
        stop_processes(namespaces)
        for name, netns in links:
            # The link may already be gone with its namespace; that is fine.
            run(["ip", "link", "del", name], netns, check=False)
        for name in namespaces:
            run(["ip", "netns", "del", name], check=False)
        if self._record is not None:
            self._record.remove()
        _open_resources.discard(self)

    def __enter__(self) -> Resources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL. Returns the exit code."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass
    return proc.returncode


_open_resources: weakref.WeakSet[Resources] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for res in list(_open_resources):
        res.close()
