"""Run a p4netem-switch process: start it on given ports, wait until its gRPC port answers, stop it."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..paths import switch_binary
from ..stop_signals import held_for_children
from .free import free_tcp_port
from .netns import PREFIX, LabError, Resources, stop_process, unique_token
from .owner import LabRecord, open_record


@dataclass(frozen=True)
class SwitchTls:
    """The switch's side of TLS (docs/security.md): its certificate and key, and for mutual TLS the
    CA client certificates must chain to."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def args(self) -> list[str]:
        out = ["--grpc-cert", str(self.cert), "--grpc-key", str(self.key)]
        return out + (["--grpc-client-ca", str(self.client_ca)] if self.client_ca else [])


def owner_death_prefix() -> list[str]:
    """Words before a command that has it sent SIGTERM when this process dies, even by SIGKILL:
    util-linux's setpriv sets PR_SET_PDEATHSIG and execs the command (same pid). Not a
    preexec_fn: that forks instead of vfork, and gRPC, whose threads run in a lab's process, logs
    "skipping fork() handlers" on stderr for each. Empty without setpriv, and from a thread other
    than the main one: the signal follows the thread that started the child, which may end long
    before the process. (An owner killed in the milliseconds before setpriv runs is missed.)"""
    if threading.current_thread() is not threading.main_thread() or not shutil.which("setpriv"):
        return []
    return ["setpriv", "--pdeathsig", "TERM", "--"]


def _listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP socket listening on `port` (its namespace's
    /proc/PID/net/tcp{,6} LISTEN entries on that port, matched by inode to the process's fds)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return False
        for line in lines:
            fields = line.split()
            # local_address is HEXIP:HEXPORT; st 0A is LISTEN; field 9 is the socket's inode.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


class SwitchProcess:
    """One p4netem-switch. `ports` maps P4 port numbers to Linux interface names.

    The switch's stdout and stderr go to `log_path`, by default /tmp/p4netem-switch-PORT.log; when it
    fails to start, the exception includes the end of that log. A `log_path` of the caller's is
    always kept (read it after stop(), e.g. for the switch's shutdown report). The default log is
    removed by a normal stop(), so that scripts and labs leave no file per run, and kept when it has
    something to tell: the switch failed to start, ended by itself before stop(), or did not end
    on stop()'s SIGTERM; so is the log of a switch whose owner was killed (never stopped).
    `die_with_owner`: the switch gets SIGTERM
    when the process that started it dies, even by SIGKILL (for owners with no crash record and
    no reaper); see owner_death_prefix().

    A switch nobody else records (no `resources` that keep a lab record, no `on_start`: a user's
    own script, a P4NetemSwitch in a user's Mininet script) keeps a lab record of its own while it
    runs (lab/owner.py, kind "switch"), so that the owner's reaper ends it if the owner is killed
    outright, from any thread.
    """

    def __init__(
        self,
        ports: Mapping[int, str],
        binary: str | Path | None = None,
        grpc_host: str = "127.0.0.1",
        grpc_port: int | None = None,
        device_id: int = 1,
        cpu_port: int | None = None,
        pcap_dir: str | Path | None = None,
        seed: int | None = None,
        extra_args: Sequence[str] = (),
        log_path: str | Path | None = None,
        resources: Resources | None = None,
        tls: SwitchTls | None = None,
        on_start: Callable[[int], None] | None = None,
        die_with_owner: bool = False,
    ):
        self.ports = dict(ports)
        self.die_with_owner = die_with_owner
        self.tls = tls
        self.binary = Path(binary) if binary else switch_binary()
        self.grpc_host = grpc_host
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.pcap_dir = pcap_dir
        self.seed = seed
        self.extra_args = list(extra_args)
        self.log_path = Path(log_path) if log_path else None
        self._own_log = log_path is None  # the default /tmp file: ours to remove after a normal stop
        self._listening = False
        self._resources = resources
        self._on_start = on_start  # told the pid as soon as the process exists (crash records)
        self.proc: subprocess.Popen | None = None
        self._record: LabRecord | None = None  # its own, when nobody else records it

    def _recorded_elsewhere(self) -> bool:
        return self._on_start is not None or (self._resources is not None
                                              and self._resources.owner_prefix is not None)

    @property
    def grpc_addr(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"

    def command(self) -> list[str]:
        cmd = [str(self.binary)]
        for number, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{number}@{iface}"]
        cmd += ["--grpc-addr", self.grpc_addr, "--device-id", str(self.device_id)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        if self.pcap_dir is not None:
            cmd += ["--pcap", str(self.pcap_dir)]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.tls is not None:
            cmd += self.tls.args()
        return cmd + self.extra_args

    def start(self, timeout: float = 30.0) -> SwitchProcess:
        if not self.binary.exists():
            raise LabError(f"switch binary {self.binary} not found: build it with 'make build'")
        if self.grpc_port is None:
            self.grpc_port = free_tcp_port(self.grpc_host)
        if self.log_path is None:
            self.log_path = Path(f"/tmp/p4netem-switch-{self.grpc_port}.log")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if not self._recorded_elsewhere():
            self._record = open_record(f"{PREFIX}{unique_token()}", "switch")
        try:
            # SIGTERM and SIGINT held for the child from the fork on: the switch holds them off
            # itself first thing in main and takes one that came during start-up as a clean stop
            # (exit 0), but one that came before main (in its dynamic loader) killed it outright.
            # A Ctrl-C of ours in that window is raised once the block ends (then stopped below).
            with held_for_children(), open(self.log_path, "wb") as log:
                # Its own session: a Ctrl-C at a lab's prompt (SIGINT to the terminal's process
                # group) interrupts the command on a host, as in Mininet, and must not stop the
                # data plane under the still-running lab. The owner stops it (stop(), the lab's
                # reaper).
                prefix = owner_death_prefix() if self.die_with_owner else []
                self.proc = subprocess.Popen(prefix + self.command(), stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            if self._resources is not None:
                self._resources.track_process(self.proc)
            if self._on_start is not None:
                self._on_start(self.proc.pid)
            if self._record is not None:
                self._record.add_process(self.proc.pid)
            self._wait_listening(timeout)
        except BaseException:
            self.stop()
            raise
        self._listening = True
        return self

    def _wait_listening(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LabError(
                    f"p4netem-switch exited with code {self.proc.returncode} during start-up:\n{self.log_tail()}"
                )
            # Its own listening socket, not just an open port: the port was free when picked, but
            # another process (a parallel test's switch) may have taken it since, and then this
            # switch fails to bind while a connect would reach the other one.
            if _listens(self.proc.pid, self.grpc_port):
                return
            time.sleep(0.05)
        self.stop()
        raise LabError(f"p4netem-switch did not open gRPC port {self.grpc_addr} in {timeout} s:\n{self.log_tail()}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds. Returns the exit code (None if never
        started); subprocess.TimeoutExpired when it did not end `grace` seconds after SIGKILL."""
        if self.proc is None:  # never started (Popen failed): its record only
            self._close_record()
            return None
        ended_before = self.proc.poll() is not None  # by itself (a crash), or an earlier stop()
        code = stop_process(self.proc, grace)
        self._close_record()
        # Our SIGTERM ends it with 0, also during its start-up (dataplane/src/main.rs stop_signals).
        if (self._own_log and self._listening and not ended_before and code == 0
                and self.log_path is not None):
            self.log_path.unlink(missing_ok=True)
        return code

    def _close_record(self) -> None:
        if self._record is not None:
            self._record.remove()
            self._record = None

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def __enter__(self) -> SwitchProcess:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
