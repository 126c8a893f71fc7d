"""TCP settings of the lab's hosts for a comparison, applied per namespace and recorded.

- every host: congestion control (by default the namespace's, recorded), tcp_no_metrics_save=1 (no per-destination metrics carried from
  one load into the next) and tcp_slow_start_after_idle=0;
- clients: receive buffers (tcp_rmem) when the plan sets them, and an initial receive window at
  least as large as the servers' initial window (a Linux receiver advertises 10 segments at first,
  which would cap a server IW above 10);
- servers: the initial congestion window (initcwnd) of the condition.

Each function returns what the kernel reads back, for the result file.
"""

from __future__ import annotations

from ..web import tcp_tuning
from ..web.tcp_tuning import STANDARD_SYSCTLS

CLIENT_DEFAULT_INITRWND = 10


ALLOWED_CC = "net.ipv4.tcp_allowed_congestion_control"


def tune_hosts(lab, congestion_control: str | None = None, client_rmem: str | None = None) -> dict:
    """Standard sysctls everywhere, congestion control (None: the namespaces' default, which a
    new namespace takes from the machine's), client receive buffers."""
    record = {}
    for h in lab.topology.hosts:
        ns = lab.ns(h.name)
        values: dict[str, str] = dict(STANDARD_SYSCTLS)
        if congestion_control:
            # Outside the root namespace only the machine-wide allowed list can be chosen.
            allowed = (tcp_tuning.read_sysctls(ns, [ALLOWED_CC])[ALLOWED_CC] or "").split()
            if congestion_control not in allowed:
                raise ValueError(
                    f"congestion control {congestion_control!r} cannot be set in a lab namespace: "
                    f"{ALLOWED_CC} (machine-wide, set in the root namespace) allows only "
                    f"{' '.join(allowed) or 'none'}")
            values["net.ipv4.tcp_congestion_control"] = congestion_control
        if h.role == "client" and client_rmem:
            values["net.ipv4.tcp_rmem"] = client_rmem
        record[h.name] = tcp_tuning.set_sysctls(ns, values)
    return record


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
