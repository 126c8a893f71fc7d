"""Running things inside a network namespace, and name resolution for it.

Every lab process (server or loader) is a child started with `ip netns exec NS ...` in its own
process group, so stopping it ends exactly the processes it started (nginx's workers included)
and nothing else. `ns=None` means the caller's own namespace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

NETNS_ETC = Path("/etc/netns")


def ns_argv(ns: str | None, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv] if ns else list(argv)


def run(ns: str | None, argv: list[str], *, check: bool = True, timeout: float = 60,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command to completion in `ns`; a failure raises with the command's own stderr."""
    proc = subprocess.run(ns_argv(ns, argv), capture_output=True, text=True, timeout=timeout,
                          input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(ns_argv(ns, argv))} failed ({proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


class NsProcess:
    """A long-running child in a namespace, in its own session so it can be ended as a group."""

    def __init__(self, ns: str | None, argv: list[str], log_path: str | Path,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None):
        self.ns = ns
        self.argv = ns_argv(ns, argv)
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "ab")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=full_env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the process group, SIGKILL it if it has not gone after `timeout` seconds."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        # Children that outlived their leader (a worker mid-request) are still in the group.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()
        return self.proc.returncode


def listening(ns: str | None, port: int, proto: str = "tcp") -> bool:
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    out = run(ns, ["ss", flag, f"sport = :{port}"], check=False).stdout
    return bool(out.strip())


def wait_listening(ns: str | None, ports: list[int], proc: NsProcess, timeout: float = 10.0) -> None:
    """Block until every port listens; raise with the process log if it died or never listened."""
    deadline = time.monotonic() + timeout
    pending = list(ports)
    while pending:
        if not proc.alive():
            raise RuntimeError(f"{proc.argv[-1] if proc.argv else proc} exited "
                               f"({proc.proc.returncode}) before listening:\n{proc.log_text()}")
        pending = [p for p in pending if not listening(ns, p)]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"ports {pending} not listening in {ns} after {timeout}s:\n"
                               f"{proc.log_text()}")
        time.sleep(0.05)


# --- name resolution -------------------------------------------------------------------------

def hosts_text(mapping: dict[str, str]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    by_ip: dict[str, list[str]] = {}
    for name, ip in mapping.items():
        by_ip.setdefault(ip, []).append(name)
    lines += [f"{ip}\t{' '.join(names)}" for ip, names in by_ip.items()]
    return "\n".join(lines) + "\n"


def write_netns_hosts(ns: str, mapping: dict[str, str]) -> Path:
    """Write /etc/netns/NS/hosts, which `ip netns exec NS` bind-mounts over /etc/hosts.

    Only processes started through `ip netns exec` see it (Mininet hosts do not): loaders and
    Chromium also take the map directly, and this file is for tools like curl.
    """
    d = NETNS_ETC / ns
    d.mkdir(parents=True, exist_ok=True)
    path = d / "hosts"
    path.write_text(hosts_text(mapping))
    return path


def remove_netns_hosts(ns: str) -> None:
    d = NETNS_ETC / ns
    (d / "hosts").unlink(missing_ok=True)
    try:
        d.rmdir()
    except OSError:
        pass  # other files someone else put there stay


def parse_hosts(text: str) -> dict[str, str]:
    """host -> IP from /etc/hosts syntax (first address wins for a name)."""
    mapping: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2:
            for name in fields[1:]:
                mapping.setdefault(name.lower(), fields[0])
    return mapping
