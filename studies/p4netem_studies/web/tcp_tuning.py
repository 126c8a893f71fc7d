"""Server TCP settings the experiments vary or must pin, applied per namespace and recorded.

The initial congestion window (E2, E3, E5) is a route attribute on Linux: `ip route change ...
initcwnd N initrwnd N` in the server's namespace. Modern kernels also cache per-destination metrics
and collapse cwnd after idle, which would leak one run's state into the next, so labs set
tcp_no_metrics_save=1 and tcp_slow_start_after_idle=0. Each helper returns what it set, for the
result file (experiments.md asks for kernel, congestion control, initial window and sysctls).

Congestion control is a route attribute too (`congctl NAME`), and that is how labs choose it: a
namespace other than the root one may only make an algorithm of the machine-wide
net.ipv4.tcp_allowed_congestion_control (`reno bbr` here) its default, but a route's congctl
takes any algorithm the kernel has loaded (tcp_available_congestion_control: cubic too), for
every connection that uses the route, both ends of it (measured: tests/web/test_web_helpers.py).
So `--cc cubic` changes nothing machine-wide and there is nothing to restore after a crash. Only
algorithms already available are accepted: naming another would make the kernel load its module,
a machine-wide change.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys

from .netns import ns_argv, run

# Route flags `ip route show` prints that `ip route change` does not accept back.
_SHOW_ONLY = {"linkdown", "dead", "offload", "trap", "rt_offload", "rt_trap", "offload_failed"}

STANDARD_SYSCTLS = {
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.tcp_slow_start_after_idle": "0",
}

ALLOWED_CC = "net.ipv4.tcp_allowed_congestion_control"
AVAILABLE_CC = "net.ipv4.tcp_available_congestion_control"

RECORDED_SYSCTLS = [
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_early_retrans", "net.ipv4.tcp_recovery",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn", "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_autocorking", "net.ipv4.tcp_notsent_lowat",
]


def _strip(route: str, drop: tuple[str, ...]) -> list[str]:
    """The route's tokens without the attributes in `drop` (each with its value, and the `lock`
    modifier `ip route` may print between them) and without the flags `ip route change` refuses."""
    tokens = route.split()
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in drop:
            i += 3 if i + 1 < len(tokens) and tokens[i + 1] == "lock" else 2
            continue
        if tok not in _SHOW_ONLY:
            out.append(tok)
        i += 1
    return out


def routes(ns: str | None, family: str = "4") -> list[str]:
    out = run(ns, ["ip", f"-{family}", "-o", "route", "show", "table", "main"]).stdout
    return [line.strip().replace("\\", " ") for line in out.splitlines() if line.strip()]


def _window_of(route: str, key: str) -> int | None:
    m = re.search(rf"\b{key} (\d+)", route)
    return int(m.group(1)) if m else None


def path_to(ns: str | None, dst: str) -> list[str]:
    """`via GATEWAY dev DEV` (or `dev DEV` on-link) of the route `ns` takes to `dst`, for a
    more specific route that goes the same way."""
    out = run(ns, ["ip", "-4", "-o", "route", "get", dst]).stdout.split()
    path = []
    for key in ("via", "dev"):
        if key in out:
            path += [key, out[out.index(key) + 1]]
    if "dev" not in path:
        raise RuntimeError(f"no route to {dst} in {ns}: {' '.join(out)}")
    return path


def set_initial_window(ns: str | None, initcwnd: int, initrwnd: int | None = None,
                       families: tuple[str, ...] = ("4",)) -> list[dict]:
    """Set initcwnd (and initrwnd, default the same) on every main-table route of `ns`.

    Returns one record per route as read back from the kernel; raises if a route did not take it.

    Note for labs: a Linux receiver advertises only 10 segments in its first window unless its
    own route has a larger initrwnd, so a server initcwnd above 10 needs
    `set_initial_window(client_ns, 10, N)` on the client too, or the first flight stays at 10.
    Measured on this kernel (tests/web/test_web_wire.py): with the client's pure ACKs withheld
    and tail loss probes off, nginx's first flight equals initcwnd for 1, 2, 3, 5, 6, 8, 10, 20
    and 30 segments, but is 3 for initcwnd 4 (not explained yet).
    """
    if not 1 <= initcwnd <= 1024:
        raise ValueError(f"initcwnd must be in 1..1024, not {initcwnd}")
    initrwnd = initcwnd if initrwnd is None else initrwnd
    if not 0 <= initrwnd <= 1024:
        raise ValueError(f"initrwnd must be in 0..1024, not {initrwnd}")
    record = []
    for fam in families:
        before = routes(ns, fam)
        if not before:
            raise RuntimeError(f"namespace {ns} has no IPv{fam} routes to set an initial window on")
        for route in before:
            spec = _strip(route, ("initcwnd", "initrwnd"))
            extra = ["initcwnd", str(initcwnd)]
            if initrwnd:
                extra += ["initrwnd", str(initrwnd)]
            run(ns, ["ip", f"-{fam}", "route", "change", *spec, *extra])
        for route in routes(ns, fam):
            got_c, got_r = _window_of(route, "initcwnd"), _window_of(route, "initrwnd")
            if got_c != initcwnd or (initrwnd and got_r != initrwnd):
                raise RuntimeError(f"route in {ns} did not take initcwnd {initcwnd}: {route}")
            record.append({"family": fam, "route": route, "initcwnd": got_c, "initrwnd": got_r})
    return record


def available_congestion_control() -> list[str]:
    """The algorithms the kernel has loaded (machine-wide; every namespace reads the same)."""
    return (read_sysctls(None, [AVAILABLE_CC])[AVAILABLE_CC] or "").split()


def check_congestion_control(name: str) -> str:
    """`name` if the kernel has it loaded; else a one-line error naming the allowed values."""
    available = available_congestion_control()
    if name not in available:
        raise ValueError(f"congestion control {name!r} is not available on this machine: "
                         f"{AVAILABLE_CC} lists {' '.join(available) or 'nothing'} (the labs do "
                         "not load kernel modules)")
    return name


def congctl_args(name: str | None) -> list[str]:
    """The `ip route` arguments that give a route's connections `name` (none for None)."""
    return ["congctl", name] if name else []


def route_congctl(route: str) -> str | None:
    """The congestion control a route sets (`congctl [lock] NAME`), None when it sets none."""
    m = re.search(r"\bcongctl (?:lock )?(\S+)", route)
    return m.group(1) if m else None


def set_route_congestion_control(ns: str | None, name: str | None,
                                 families: tuple[str, ...] = ("4",)) -> list[str]:
    """`congctl NAME` on every main-table route of `ns` (None: none, the namespace default
    again), their other attributes, initcwnd included, kept; returns the routes as read back,
    raises if one did not take it."""
    if name is not None:
        check_congestion_control(name)
    out = []
    for fam in families:
        before = routes(ns, fam)
        if not before:
            raise RuntimeError(f"namespace {ns} has no IPv{fam} routes to set congestion control on")
        for route in before:
            run(ns, ["ip", f"-{fam}", "route", "change", *_strip(route, ("congctl",)),
                     *congctl_args(name)])
        for route in routes(ns, fam):
            if route_congctl(route) != name:
                raise RuntimeError(f"route in {ns} did not take congctl {name}: {route}")
            out.append(route)
    return out


# One connection from the client namespace to the server's address, each end reporting the
# algorithm its socket runs (TCP_CONGESTION, what `ss -ti` prints).
_PROBE_SERVER = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen(1)
s.settimeout(float(sys.argv[2]))
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\\0")[0].decode(),
      flush=True)
c.settimeout(float(sys.argv[2]))
c.recv(1)
"""
_PROBE_CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\\0")[0].decode())
c.close()
"""


# The probes need the standard library only: without site (-S: no site-packages, .pth files)
# and isolated (-I) an interpreter starts in a third of the time, and a lab start runs one pair
# per probe (7 for E2's dumbbell).
_PROBE_PYTHON = [sys.executable, "-I", "-S", "-c"]


def probe_congestion_control(client_ns: str | None, server_ns: str | None, server_ip: str,
                             timeout_s: float = 30.0) -> dict[str, str]:
    """Open one TCP connection from `client_ns` to `server_ip` (in `server_ns`) and return the
    congestion control each end's socket runs: {"client": ..., "server": ...}."""
    server = subprocess.Popen(ns_argv(server_ns, [*_PROBE_PYTHON, _PROBE_SERVER, server_ip,
                                                  str(timeout_s)]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = (server.stdout.readline() or "").strip()
        if not port.isdigit():
            raise RuntimeError(f"congestion control probe in {server_ns} did not listen: "
                               f"{server.stderr.read().strip()[-500:]}")
        client = run(client_ns, [*_PROBE_PYTHON, _PROBE_CLIENT, server_ip, port,
                                 str(timeout_s)], timeout=timeout_s + 10).stdout.strip()
        out, err = server.communicate(timeout=timeout_s + 10)
        if server.returncode != 0:
            raise RuntimeError(f"congestion control probe in {server_ns} failed: {err.strip()[-500:]}")
        return {"client": client, "server": out.strip()}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def read_sysctls(ns: str | None, names: list[str]) -> dict[str, str | None]:
    """Each sysctl's value (whitespace runs made single spaces), None for one that cannot be read.
    One `sysctl` for all of them (a lab start reads a few hundred: a process each cost seconds);
    when one cannot be read, each again on its own, which tells which."""
    if len(names) > 1:
        proc = run(ns, ["sysctl", "-n", *names], check=False)
        lines = proc.stdout.splitlines()
        if proc.returncode == 0 and len(lines) == len(names):
            return {name: " ".join(line.split()) for name, line in zip(names, lines)}
    values: dict[str, str | None] = {}
    for name in names:
        proc = run(ns, ["sysctl", "-n", name], check=False)
        values[name] = " ".join(proc.stdout.split()) if proc.returncode == 0 else None
    return values


def set_sysctls(ns: str | None, values: dict[str, str | int]) -> dict[str, dict]:
    """Set sysctls in `ns`; returns {name: {before, after}} as read from the kernel."""
    before = read_sysctls(ns, list(values))
    for name, value in values.items():
        run(ns, ["sysctl", "-q", "-w", f"{name}={value}"])
    after = read_sysctls(ns, list(values))
    for name, value in values.items():
        if after[name] != " ".join(str(value).split()):
            raise RuntimeError(f"sysctl {name} in {ns} reads {after[name]!r} after setting {value!r}")
    return {n: {"before": before[n], "after": after[n]} for n in values}


def set_standard_sysctls(ns: str | None) -> dict[str, dict]:
    """tcp_no_metrics_save=1 and tcp_slow_start_after_idle=0: each run starts from the same state."""
    return set_sysctls(ns, STANDARD_SYSCTLS)


def tcp_environment(ns: str | None) -> dict:
    """What a result file records about the TCP stack of `ns`."""
    return {
        "namespace": ns,
        "kernel": platform.release(),
        "sysctls": read_sysctls(ns, RECORDED_SYSCTLS),
        "routes": routes(ns, "4"),
    }
