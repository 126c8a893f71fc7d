"""TCP settings of the lab's hosts for a comparison, applied per namespace and recorded.

- every host: tcp_no_metrics_save=1 (no per-destination metrics carried from one load into the
  next) and tcp_slow_start_after_idle=0;
- congestion control (`set_congestion_control`): the plan's algorithm on every route of every
  host (`congctl`, which a lab namespace may set to any loaded algorithm, CUBIC included, while
  its default may only be one the machine allows: web/tcp_tuning.py), and as the namespace
  default where the machine allows it; then one probe connection per client and per server
  says what the sockets really run. None: the namespaces' default, probed and recorded too;
- clients: receive buffers (tcp_rmem) when the plan sets them, and an initial receive window at
  least as large as the servers' initial window (a Linux receiver advertises 10 segments at first,
  which would cap a server IW above 10);
- servers: the initial congestion window (initcwnd) of the condition.

Each function returns what the kernel reads back, for the result file.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..web import tcp_tuning
from ..web.tcp_tuning import STANDARD_SYSCTLS

CLIENT_DEFAULT_INITRWND = 10
PARALLEL_PROBES = 4     # congestion-control probes at once (two processes each)


ALLOWED_CC = tcp_tuning.ALLOWED_CC
CC_SYSCTL = "net.ipv4.tcp_congestion_control"
CC_RECORD = "congestion_control"


def tune_hosts(lab, congestion_control: str | None = None, client_rmem: str | None = None) -> dict:
    """Standard sysctls everywhere, client receive buffers, congestion control
    (set_congestion_control; None: the namespaces' default). Returns per host the sysctls as read
    back, and under "congestion_control" set_congestion_control's record."""
    record = {}
    for h in lab.topology.hosts:
        ns = lab.ns(h.name)
        values: dict[str, str] = dict(STANDARD_SYSCTLS)
        if h.role == "client" and client_rmem:
            values["net.ipv4.tcp_rmem"] = client_rmem
        record[h.name] = tcp_tuning.set_sysctls(ns, values)
    # Host names never contain "_" (topology.py), so the key cannot shadow a host's.
    record[CC_RECORD] = set_congestion_control(lab, congestion_control)
    return record


def set_congestion_control(lab, name: str | None) -> dict:
    """`name` on every route of every host (and as the namespace default where the machine's
    allowed list has it); None leaves the namespaces' default. Then probes one connection per
    client host (to the first server) and per server host (from the first client) and raises if
    a socket runs anything but `name`. Nothing machine-wide changes.

    Returns what the metadata records: requested, how, the machine's lists, per host the
    namespace default and the routes' congctl, and the probes."""
    machine = tcp_tuning.read_sysctls(None, [ALLOWED_CC, tcp_tuning.AVAILABLE_CC])
    doc: dict = {"requested": name,
                 "mechanism": "route congctl" if name else "namespace default",
                 "machine_allowed": machine[ALLOWED_CC],
                 "machine_available": machine[tcp_tuning.AVAILABLE_CC],
                 "machine_changed": False, "hosts": {}, "probes": []}
    if name:
        tcp_tuning.check_congestion_control(name)
    for h in lab.topology.hosts:
        ns = lab.ns(h.name)
        host: dict = {}
        if name:
            allowed = (tcp_tuning.read_sysctls(ns, [ALLOWED_CC])[ALLOWED_CC] or "").split()
            if name in allowed:
                tcp_tuning.set_sysctls(ns, {CC_SYSCTL: name})
            host["routes"] = tcp_tuning.set_route_congestion_control(ns, name)
        host["namespace_default"] = tcp_tuning.read_sysctls(ns, [CC_SYSCTL])[CC_SYSCTL]
        doc["hosts"][h.name] = host
    clients, servers = lab.topology.clients, lab.topology.servers
    pairs = [(c, servers[0]) for c in clients] + [(clients[0], s) for s in servers[1:]]
    # A few probes at once: each is its own connection between its own two processes (a probe's
    # listening socket takes a port of its own), and one after the other they took seconds of
    # a big lab's start, mostly interpreters starting. Checked in the pairs' order, as before.
    with ThreadPoolExecutor(max_workers=PARALLEL_PROBES) as pool:
        probes = [pool.submit(tcp_tuning.probe_congestion_control, lab.ns(c.name), lab.ns(s.name),
                              s.ip) for c, s in pairs]
    for (c, s), probe in zip(pairs, probes):
        got = probe.result()
        doc["probes"].append({"client": c.name, "server": s.name, **got})
        if name and (got["client"], got["server"]) != (name, name):
            raise RuntimeError(f"congestion control {name} did not take: a connection from "
                               f"{c.name} to {s.name} ran {got['client']} (client) and "
                               f"{got['server']} (server)")
    doc["client"] = " ".join(sorted({p["client"] for p in doc["probes"]}))
    doc["server"] = " ".join(sorted({p["server"] for p in doc["probes"]}))
    return doc


def set_initial_windows(lab, initcwnd: int, initrwnd: int | None = None) -> dict:
    """Servers: initcwnd (and initrwnd, default the same); clients: initrwnd max(10, initcwnd)."""
    record = {}
    for h in lab.topology.servers:
        record[h.name] = tcp_tuning.set_initial_window(lab.ns(h.name), initcwnd, initrwnd)
    client_rwnd = max(CLIENT_DEFAULT_INITRWND, initcwnd)
    for h in lab.topology.clients:
        record[h.name] = tcp_tuning.set_initial_window(lab.ns(h.name), CLIENT_DEFAULT_INITRWND,
                                                       client_rwnd)
    return record


def environment(lab) -> dict:
    """Kernel, sysctls that change TCP behaviour and routes (with their windows), per host."""
    return {h.name: tcp_tuning.tcp_environment(lab.ns(h.name)) for h in lab.topology.hosts}
