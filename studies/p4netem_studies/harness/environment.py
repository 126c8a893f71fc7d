"""The TCP environment of a run as flat columns, so every result file (not only results.json)
says what the stack was: kernel, congestion control, the sysctls that change TCP behaviour and
the initial window the servers' routes really carried (experiments.md asks for them in every
result file, because modern Linux differs from the stacks of the original studies).

The values come from what the harness read back from the kernel per initial window
(`tcp_environment_by_initcwnd` in the metadata: per host, sysctls and routes); a server value is
the first server's, and a column says when the servers disagree.
"""

from __future__ import annotations

import re

from ..web.tcp_tuning import RECORDED_SYSCTLS

_PREFIX = "net.ipv4."


def _short(name: str) -> str:
    return name[len(_PREFIX):] if name.startswith(_PREFIX) else name


def _route_window(routes: list[str], key: str) -> int | None:
    for r in routes:
        m = re.search(rf"\b{key} (\d+)", r)
        if m:
            return int(m.group(1))
    return None


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
    cols: dict = {"kernel": (metadata.get("host") or {}).get("kernel")}
    if not env:
        return cols
    servers = [h for h, role in roles.items() if role == "server" and h in env]
    clients = [h for h, role in roles.items() if role == "client" and h in env]
    if servers:
        first = env[servers[0]]
        for name in RECORDED_SYSCTLS:
            cols[_short(name)] = first["sysctls"].get(name)
        cols["server_route_initcwnd"] = _route_window(first.get("routes", []), "initcwnd")
        differ = [h for h in servers[1:] if env[h]["sysctls"] != first["sysctls"]]
        cols["servers_differ"] = " ".join(differ)
    if clients:
        c = env[clients[0]]["sysctls"]
        cols["client_tcp_congestion_control"] = c.get(f"{_PREFIX}tcp_congestion_control")
        cols["client_tcp_rmem"] = c.get(f"{_PREFIX}tcp_rmem")
        cols["client_route_initrwnd"] = _route_window(env[clients[0]].get("routes", []),
                                                      "initrwnd")
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
