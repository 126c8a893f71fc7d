"""What every study's analysis shares: runs as flat rows joined with what their condition means,
medians and quartiles per group, and the result type (CSV files: harness.results.write_csv).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from ...harness.results import quartiles

ETH_HEADER = 14     # bytes of link header in every captured frame (wire_len counts them)


@dataclass
class Analysis:
    """What an analysis produced: tables to print, files written, headline numbers."""

    tables: list[Table] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    findings: dict = field(default_factory=dict)


def run_rows(records, cells: dict) -> list[dict]:
    """One dict per successful load: the harness's row, the cell's client/mode/factors and the
    derived byte counts (TCP/IP header bytes and overhead, packets and bytes in both directions)."""
    rows = []
    for rec in records:
        if not rec.ok:
            continue
        row = rec.row()
        cell = cells.get(rec.condition.key)
        if cell is not None:
            row.update(client=cell.client, mode=cell.mode or "-", profile_given=cell.profile)
            row.update({f"f_{k}": v for k, v in cell.factors.items()})
        pkts = row["packets_up"] + row["packets_down"]
        wire = row["bytes_up"] + row["bytes_down"]
        payload = row["payload_up"] + row["payload_down"]
        ip_bytes = wire - ETH_HEADER * pkts
        row["packets"] = pkts
        row["ip_bytes"] = ip_bytes
        row["tcpip_header_bytes"] = ip_bytes - payload
        row["header_overhead_pct"] = (100.0 * (ip_bytes - payload) / ip_bytes) if ip_bytes else None
        conns = row.get("connections_opened") or 0
        row["retransmissions_per_connection"] = (row["retransmissions_down"] / conns
                                                 if conns else None)
        rows.append(row)
    return rows


def group_stats(rows: list[dict], by: list[str], metrics: list[str]) -> list[dict]:
    """Per group of `by` values (in first-seen order): n, and median/q1/q3 of each metric."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in by), []).append(r)
    out = []
    for key, rs in groups.items():
        row = dict(zip(by, key))
        row["n"] = len(rs)
        for m in metrics:
            q = quartiles([r[m] for r in rs if r.get(m) is not None])
            row[f"{m}_q1"], row[f"{m}_median"], row[f"{m}_q3"] = (
                tuple(round(v, 3) for v in q) if q else (None, None, None))
        # Carry what is constant in the group (initcwnd for the environment columns).
        for k in ("initcwnd", "tls", "protocol", "page", "profile", "profile_label"):
            vals = {r.get(k) for r in rs}
            if k not in row and len(vals) == 1:
                row[k] = vals.pop()
        # Loads the RTT audit found stalled (a wait no window explains): the table flags them.
        row["stalled_loads"] = sum(1 for r in rs if (r.get("stalls") or 0) > 0)
        # What was negotiated, over every load of the group (each file says the TLS version).
        for k in ("tls_versions", "alpn"):
            row[k] = " ".join(sorted({v for r in rs for v in str(r.get(k) or "").split()})) or "-"
        out.append(row)
    return out


def fmt_s(ms: float | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000.0
    return f"{s:.3f}" if s < 1 else f"{s:.2f}" if s < 10 else f"{s:.1f}"


def stall_flag(row: dict) -> str:
    """' !N' when N loads of a group stalled (RTT audit: stalls, stall_ms in the runs CSV), so a
    table never shows a lab artefact as a protocol's time without saying so."""
    n = row.get("stalled_loads") or 0
    return f" !{n}" if n else ""


def fmt_q(row: dict, metric: str, scale: float = 1000.0) -> str:
    """'median [q1-q3]' of a metric in seconds (scale 1000: ms in) or raw (scale 1)."""
    med = row.get(f"{metric}_median")
    if med is None:
        return "-"
    q1, q3 = row[f"{metric}_q1"], row[f"{metric}_q3"]
    if scale == 1000.0:
        return f"{fmt_s(med)} [{fmt_s(q1)}-{fmt_s(q3)}]"
    return f"{med / scale:.3g} [{q1 / scale:.3g}-{q3 / scale:.3g}]"


def median_of(rows: list[dict], metric: str, **match) -> float | None:
    vals = sorted(r[metric] for r in rows
                  if r.get(metric) is not None and all(r.get(k) == v for k, v in match.items()))
    if not vals:
        return None
    q = quartiles(vals)
    return q[1] if q else None
