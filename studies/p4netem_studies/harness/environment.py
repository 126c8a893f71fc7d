"""The TCP environment of a run as flat columns, so every result file (not only results.json)
says what the stack was: kernel, congestion control, the sysctls that change TCP behaviour and
the initial window the servers' routes really carried (experiments.md asks for them in every
result file, because modern Linux differs from the stacks of the original studies).

The values come from what the harness read back from the kernel per initial window
(`tcp_environment_by_initcwnd` in the metadata: per host, sysctls and routes); a server value is
the first server's, and a column says when the servers disagree. Congestion control has three
sources, each its own column, because they can differ: the namespace default (the sysctl,
`tcp_congestion_control`), the routes' `congctl` (how the labs set it: harness/tcp.py), and what
the probe connections' sockets ran (`tcp_sysctls_set.congestion_control` in the metadata), on
each side.
"""

from __future__ import annotations

import re

from ..web.tcp_tuning import RECORDED_SYSCTLS, route_congctl

_PREFIX = "net.ipv4."


def _short(name: str) -> str:
    return name[len(_PREFIX):] if name.startswith(_PREFIX) else name


def _route_window(routes: list[str], key: str) -> int | None:
    for r in routes:
        m = re.search(rf"\b{key} (\d+)", r)
        if m:
            return int(m.group(1))
    return None


def _routes_congctl(routes: list[str]) -> str | None:
    """The routes' congctl: one name, "default" when they set none, or the distinct values
    joined with "/" when the routes differ (some connections would run another algorithm)."""
    values = sorted({route_congctl(r) or "default" for r in routes})
    return "/".join(values) if values else None


def congestion_control_columns(metadata: dict) -> dict:
    """What the run asked for, how it was set, and what the probe connections' sockets ran on
    each side (harness/tcp.py set_congestion_control)."""
    doc = (metadata.get("tcp_sysctls_set") or {}).get("congestion_control")
    if not doc:
        return {}
    return {"congestion_control_requested": doc.get("requested"),
            "congestion_control_via": doc.get("mechanism"),
            "server_socket_congestion_control": doc.get("server"),
            "client_socket_congestion_control": doc.get("client")}


def _first_window(key) -> int | None:
    try:
        return int(str(key).split("/")[0])
    except ValueError:
        return None


def environment_columns(metadata: dict, initcwnd: int | None, roles: dict[str, str]) -> dict:
    """Flat columns for rows run at server initial window `initcwnd`.

    `roles`: host name -> client | server (the topology's)."""
    # Keys are initial windows, as ints (in memory) or strings (read back from JSON), or a
    # workload's "A/B" labels (first half of the client hosts at A): the row's initcwnd is A.
    by_iw = {_first_window(k): v
             for k, v in (metadata.get("tcp_environment_by_initcwnd") or {}).items()}
    env = by_iw.get(_first_window(initcwnd))
    if env is None and by_iw:
        env = next(iter(by_iw.values()))
    cols: dict = {"kernel": (metadata.get("host") or {}).get("kernel"),
                  **congestion_control_columns(metadata)}
    if not env:
        return cols
    servers = [h for h, role in roles.items() if role == "server" and h in env]
    clients = [h for h, role in roles.items() if role == "client" and h in env]
    if servers:
        first = env[servers[0]]
        for name in RECORDED_SYSCTLS:
            cols[_short(name)] = first["sysctls"].get(name)
        cols["server_route_initcwnd"] = _route_window(first.get("routes", []), "initcwnd")
        cols["server_route_congctl"] = _routes_congctl(first.get("routes", []))
        differ = [h for h in servers[1:] if env[h]["sysctls"] != first["sysctls"]]
        cols["servers_differ"] = " ".join(differ)
    if clients:
        c = env[clients[0]]["sysctls"]
        cols["client_tcp_congestion_control"] = c.get(f"{_PREFIX}tcp_congestion_control")
        cols["client_tcp_rmem"] = c.get(f"{_PREFIX}tcp_rmem")
        cols["client_route_initrwnd"] = _route_window(env[clients[0]].get("routes", []),
                                                      "initrwnd")
        cols["client_route_congctl"] = _routes_congctl(env[clients[0]].get("routes", []))
    return cols


def roles_of(metadata: dict) -> dict[str, str]:
    topo = metadata.get("topology") or {}
    return {h["name"]: h["role"] for h in topo.get("hosts", [])}


def with_environment(rows: list[dict], metadata: dict) -> list[dict]:
    """`rows` (each with an `initcwnd`) with the environment columns appended."""
    roles = roles_of(metadata)
    cache: dict = {}
    out = []
    for row in rows:
        iw = row.get("initcwnd")
        if iw not in cache:
            cache[iw] = environment_columns(metadata, iw, roles)
        out.append({**row, **{k: v for k, v in cache[iw].items() if k not in row}})
    return out
