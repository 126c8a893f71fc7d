"""E5: page loads of multi-domain site replicas over cellular profiles with the radio on.

Per network (profile, radio idled before the load or pre-woken), site, client, IW and TLS:
promotions the switch counted during the load (and the first one's duration from its digests),
page-load time (first SYN to the last server packet before the silence; median [q1-q3]), the
browser's onload (Chromium clients), the first SYN to its SYN-ACK (where an idle radio's
promotion shows), connections opened and used, request-header bytes (HTTP/1.x request text;
HTTP/2 HEADERS frames, HPACK-compressed; not measured for SPDY and the browser), and bytes per
direction on the client's wire.

Files: e5-table.csv, e5-runs.csv, e5.png (one panel per site: page-load time per network and
client, at the largest IW; with TLS when both were run).
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ...harness.results import write_csv
from .common import Analysis, fmt_q, group_stats, run_rows, stall_flag
from .plots import grouped_bars, legend, pyplot, save

METRICS = ["plt_ms", "rtts", "stalls", "stall_ms", "onload_ms", "loader_elapsed_ms", "first_syn_to_synack_ms",
           "handshake_excess_ms", "connections_opened", "connections_used",
           "request_header_bytes", "bytes_up", "bytes_down", "packets_up", "packets_down",
           "retransmissions_down", "radio_promotions", "radio_wake_ms", "radio_prewake_ms"]


def _network(row: dict) -> str:
    """'hspa+radio' (idled before the load), 'hspa+prewoken' (idled, then woken), 'lte+radio'."""
    return row["profile_label"]


def analyze(exp, built, records, metadata: dict, out: Path) -> Analysis:
    res = Analysis()
    rows = run_rows(records, built.cells)
    for r in rows:
        r["network"] = _network(r)
        r["tls_label"] = "TLS" if r["tls"] else "plain"
    res.files["e5_runs"] = write_csv(out / "e5-runs.csv", rows, metadata)
    stats = group_stats(rows, ["network", "page", "client", "initcwnd", "tls_label"], METRICS)
    res.files["e5_table"] = write_csv(out / "e5-table.csv", stats, metadata)
    if not stats:
        return res
    radio = {r["network"]: (r.get("radio_model"), r.get("radio_applied"), r.get("radio_idle"))
             for r in rows}
    t = Table(title=escape("E5: page-load time median [q1-q3] s (first SYN to last server "
                           "packet), onload, first SYN-ACK, connections, request-header and "
                           "wire bytes (medians)"), title_justify="left")
    # The browser's onload exists only for the Chromium clients: no column without them.
    onload = any(st["onload_ms_median"] is not None for st in stats)
    cols = ("network", "radio", "site", "client", "IW", "TLS", "PLT s") + \
        (("onload s",) if onload else ()) + ("SYN-ACK ms", "promotions", "conns open/used",
                                               "req hdr B", "bytes up/down")
    for col in cols:
        t.add_column(col, justify="left" if col in ("network", "radio", "site", "client")
                     else "right")
    last = None
    for s in stats:
        if last is not None and s["network"] != last:
            t.add_section()
        last = s["network"]
        model, applied, idle = radio.get(s["network"], (None, None, None))
        rad = "-" if not model or model == "none" else (
            f"{model}, {idle}" if applied else f"{model} NOT applied")
        t.add_row(s["network"], rad, s["page"], s["client"], str(s["initcwnd"]),
                  s["tls_label"], fmt_q(s, "plt_ms") + stall_flag(s),
                  *((fmt_q(s, "onload_ms"),) if onload else ()),
                  _n(s["first_syn_to_synack_ms_median"]), _n(s["radio_promotions_median"]),
                  f"{_n(s['connections_opened_median'])}/{_n(s['connections_used_median'])}",
                  _n(s["request_header_bytes_median"]),
                  f"{_n(s['bytes_up_median'])}/{_n(s['bytes_down_median'])}")
    res.tables.append(t)
    res.files["e5_plot"] = _plot(stats, out / "e5.png")
    res.findings = {f"{s['network']}|{s['page']}|{s['client']}|iw{s['initcwnd']}|{s['tls_label']}":
                    {"plt_s": (s["plt_ms_median"] or 0) / 1000,
                     "synack_ms": s["first_syn_to_synack_ms_median"],
                     "connections": s["connections_opened_median"],
                     "request_header_bytes": s["request_header_bytes_median"]}
                    for s in stats}
    return res


def _n(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def _plot(stats: list[dict], path: Path) -> Path:
    plt = pyplot()
    iw = max(s["initcwnd"] for s in stats)
    tls_values = {s["tls_label"] for s in stats}
    chosen = [s for s in stats if s["initcwnd"] == iw]
    sites = list(dict.fromkeys(s["page"] for s in chosen))
    nets = list(dict.fromkeys(s["network"] for s in chosen))
    series = list(dict.fromkeys(
        s["client"] + (f" {s['tls_label']}" if len(tls_values) > 1 else "") for s in chosen))
    ncols = min(4, len(sites))
    nrows = (len(sites) + ncols - 1) // ncols
    width = max(7.5, 0.55 * len(nets) * len(series))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 4.4 * nrows + 0.8),
                             squeeze=False)
    for k, site in enumerate(sites):
        ax = axes[k // ncols][k % ncols]

        def match(net, name, site=site):
            for s in chosen:
                label = s["client"] + (f" {s['tls_label']}" if len(tls_values) > 1 else "")
                if (s["page"], s["network"], label) == (site, net, name):
                    return s
            return None

        def value(net, name):
            s = match(net, name)
            return None if s is None or s["plt_ms_median"] is None else s["plt_ms_median"] / 1e3

        def err(net, name):
            s = match(net, name)
            if s is None or s["plt_ms_median"] is None:
                return None
            return ((s["plt_ms_median"] - s["plt_ms_q1"]) / 1e3,
                    (s["plt_ms_q3"] - s["plt_ms_median"]) / 1e3)

        grouped_bars(ax, nets, series, value, err=err, rotate=len(series) > 3)
        ax.tick_params(axis="x", labelrotation=15)
        ax.set_title(site, fontsize=10)
        if k % ncols == 0:
            ax.set_ylabel("page-load time, s (median, IQR)")
    for k in range(len(sites), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    legend(axes[0][0], fontsize=7, loc="upper right")
    fig.suptitle(f"E5: site replicas over cellular profiles, radio idled before every load "
                 f"(or pre-woken); server IW {iw}", fontsize=11, wrap=True)
    return save(fig, path)
