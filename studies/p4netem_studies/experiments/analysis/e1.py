"""E1: the 1997 study's tables: per network and client strategy, first-time and revalidation,
the packets (both directions), bytes (IP level), TCP/IP header overhead, connections and elapsed
time; and the single GET of the HTML, plain vs deflated, over the modem.

Files: e1-table.csv (one row per network x client x test, medians and quartiles),
e1-runs.csv (every load with the derived counts), e1.png (elapsed time and packets per client,
first-time vs revalidation, one column per network; the single GET as the last panel).

The full variant also runs the 90 ms WAN with the era's bottlenecks (the definition's
`options.wan_rates`: unlimited, T3, T1), since the study gives the WAN's RTT but not its rate;
e1-wan-rates.csv and its table put each client's time at every rate side by side, with its
speed-up over HTTP/1.0 at that rate: whether the study's ranking holds does not hang on the
unknown rate.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ...harness.results import write_csv
from .common import Analysis, fmt_q, group_stats, run_rows, stall_flag
from .plots import grouped_bars, legend, pyplot, save

METRICS = ["plt_ms", "rtts", "stalls", "stall_ms", "loader_elapsed_ms", "packets", "packets_up", "packets_down", "ip_bytes",
           "payload_down", "tcpip_header_bytes", "header_overhead_pct", "connections_opened",
           "retransmissions_down"]


def analyze(exp, built, records, metadata: dict, out: Path) -> Analysis:
    rows = run_rows(records, built.cells)
    res = Analysis()
    res.files["e1_runs"] = write_csv(out / "e1-runs.csv", rows, metadata)
    stats = group_stats(rows, ["profile_label", "page", "client", "mode", "initcwnd"], METRICS)
    res.files["e1_table"] = write_csv(out / "e1-table.csv", stats, metadata)
    if not stats:
        return res

    t = Table(title=escape("E1: Microscape, medians of the loads (time: median [q1-q3] s, first SYN to "
                    "last server packet)"), title_justify="left")
    for col in ("network", "IW", "client", "test", "packets", "down/up", "IP bytes",
                "hdr ovh %", "conns", "time s"):
        t.add_column(col, justify="left" if col in ("network", "client", "test") else "right")
    last = None
    for s in stats:
        if last is not None and (s["profile_label"], s["page"]) != last:
            t.add_section()
        last = (s["profile_label"], s["page"])
        test = ("revalidate" if s["mode"] == "reval" else "first-time"
                if s["page"] == "microscape" else "HTML only")
        t.add_row(s["profile_label"], str(s["initcwnd"]), s["client"], test,
                  f"{s['packets_median']:.0f}",
                  f"{s['packets_down_median']:.0f}/{s['packets_up_median']:.0f}",
                  f"{s['ip_bytes_median']:.0f}", f"{s['header_overhead_pct_median']:.1f}",
                  f"{s['connections_opened_median']:.0f}", fmt_q(s, "plt_ms") + stall_flag(s))
    res.tables.append(t)
    res.files["e1_plot"] = _plot(stats, out / "e1.png")
    wan = wan_rates(stats, exp.options.get("wan_rates") or [], _rates(exp))
    if wan:
        res.files["e1_wan_rates"] = write_csv(out / "e1-wan-rates.csv", wan, metadata)
        res.tables.append(_wan_table(wan))
    res.findings = {f"{s['profile_label']}|iw{s['initcwnd']}|{s['client']}|{s['mode']}|{s['page']}":
                    {"packets": s["packets_median"], "ip_bytes": s["ip_bytes_median"],
                     "overhead_pct": s["header_overhead_pct_median"],
                     "connections": s["connections_opened_median"],
                     "plt_s": (s["plt_ms_median"] or 0) / 1000.0} for s in stats}
    if wan:
        res.findings["wan_rates"] = {
            f"{w['profile_label']}|iw{w['initcwnd']}|{w['client']}|{w['mode']}":
            {"plt_s": w["plt_s"], "speedup_vs_http1.0": w["speedup_vs_http1.0"],
             "vs_unlimited": w["vs_first_rate"]} for w in wan}
    return res


def _rates(exp) -> dict[str, int]:
    """Profile name -> downlink rate in bit/s (0: no limit) of the experiment's profiles."""
    from ..pageload import register_profiles
    from ...harness.plan import resolve_profile
    register_profiles(exp)
    out = {}
    for name in exp.options.get("wan_rates") or []:
        try:
            out[name] = int(resolve_profile(name).downlink.rate)
        except (KeyError, ValueError):
            out[name] = None
    return out


def wan_rates(stats: list[dict], names: list[str], rates: dict[str, int | None]) -> list[dict]:
    """The WAN bottleneck axis: per rate (in `names`' order, the first the reference), IW,
    client and test, the median time and packets, the speed-up over HTTP/1.0 at the same rate,
    IW and test (PLT(http1.0) / PLT(client), > 1 faster), and the time relative to the first
    rate's. Empty unless at least two of `names` were run."""
    page = [s for s in stats if s["page"] == "microscape" and s["profile_label"] in names]
    present = [n for n in names if any(s["profile_label"] == n for s in page)]
    if len(present) < 2:
        return []
    index = {(s["profile_label"], s["initcwnd"], s["client"], s["mode"]): s for s in page}
    out = []
    for name in present:
        for s in (s for s in page if s["profile_label"] == name):
            plt = s["plt_ms_median"]
            h10 = index.get((name, s["initcwnd"], "http1.0", s["mode"]))
            ref = index.get((present[0], s["initcwnd"], s["client"], s["mode"]))
            out.append({
                "profile_label": name, "rate_bps": rates.get(name), "initcwnd": s["initcwnd"],
                "client": s["client"], "mode": s["mode"], "n": s["n"],
                "plt_s": None if plt is None else round(plt / 1000.0, 4),
                "plt_q1_s": None if s["plt_ms_q1"] is None else round(s["plt_ms_q1"] / 1000.0, 4),
                "plt_q3_s": None if s["plt_ms_q3"] is None else round(s["plt_ms_q3"] / 1000.0, 4),
                "packets": s["packets_median"], "ip_bytes": s["ip_bytes_median"],
                "speedup_vs_http1.0": (round(h10["plt_ms_median"] / plt, 3)
                                       if h10 and h10["plt_ms_median"] and plt else None),
                "vs_first_rate": (round(plt / ref["plt_ms_median"], 3)
                                  if ref and ref["plt_ms_median"] and plt else None)})
    return out


def _rate_label(bps: int | None) -> str:
    if bps is None:
        return "?"
    if bps == 0:
        return "no limit"
    return f"{bps / 1e6:g} Mbit/s"


def _wan_table(wan: list[dict]) -> Table:
    names = list(dict.fromkeys(w["profile_label"] for w in wan))
    rate = {w["profile_label"]: w["rate_bps"] for w in wan}
    t = Table(title=escape("E1: the 90 ms WAN's bottleneck rate as a sensitivity axis (time: "
                           "median s, and speed-up over HTTP/1.0 at the same rate)"),
              title_justify="left")
    for col in ("IW", "client", "test"):
        t.add_column(col, justify="right" if col == "IW" else "left")
    for n in names:
        t.add_column(f"{n}\n{_rate_label(rate[n])}", justify="right")
    index = {(w["profile_label"], w["initcwnd"], w["client"], w["mode"]): w for w in wan}
    keys = list(dict.fromkeys((w["initcwnd"], w["client"], w["mode"]) for w in wan))
    last = None
    for iw, client, mode in keys:
        if last is not None and (iw, mode) != last:
            t.add_section()
        last = (iw, mode)
        cells = []
        for n in names:
            w = index.get((n, iw, client, mode))
            if w is None or w["plt_s"] is None:
                cells.append("-")
            else:
                x = w["speedup_vs_http1.0"]
                cells.append(f"{w['plt_s']:.3g} s" + ("" if x is None or client == "http1.0"
                                                       else f" ({x:.2g}x)"))
        t.add_row(str(iw), client, "revalidate" if mode == "reval" else "first-time", *cells)
    return t


def _plot(stats: list[dict], path: Path) -> Path:
    plt = pyplot()
    page = [s for s in stats if s["page"] == "microscape"]
    html = [s for s in stats if s["page"] == "microscape-html"]
    iws = sorted({s["initcwnd"] for s in page}) or sorted({s["initcwnd"] for s in html})
    iw = max(iws)          # the plot shows one IW (the largest); the table has every one
    nets = list(dict.fromkeys(s["profile_label"] for s in page if s["initcwnd"] == iw))
    clients = list(dict.fromkeys(s["client"] for s in page))
    ncols = len(nets) + (1 if html else 0)
    fig, axes = plt.subplots(2, max(1, ncols), figsize=(3.7 * max(1, ncols) + 0.6, 7.2),
                             squeeze=False)

    def cell(net, client, mode):
        m = [s for s in page if s["profile_label"] == net and s["client"] == client
             and s["mode"] == mode and s["initcwnd"] == iw]
        return m[0] if m else None

    tests = [("-", "first-time"), ("reval", "revalidate")]
    for col, net in enumerate(nets):
        for row, (metric, ylabel) in enumerate((("plt_ms", "elapsed time, s (median, IQR)"),
                                                ("packets", "packets, both directions"))):
            ax = axes[row][col]
            scale = 1000.0 if metric == "plt_ms" else 1.0

            def value(client, series, metric=metric, scale=scale, net=net):
                mode = dict((b, a) for a, b in tests)[series]
                c = cell(net, client, mode)
                return None if c is None or c[f"{metric}_median"] is None else \
                    c[f"{metric}_median"] / scale

            def err(client, series, metric=metric, scale=scale, net=net):
                mode = dict((b, a) for a, b in tests)[series]
                c = cell(net, client, mode)
                if c is None or c[f"{metric}_median"] is None:
                    return None
                return ((c[f"{metric}_median"] - c[f"{metric}_q1"]) / scale,
                        (c[f"{metric}_q3"] - c[f"{metric}_median"]) / scale)

            grouped_bars(ax, clients, [b for _, b in tests], value, err=err)
            ax.tick_params(axis="x", labelrotation=20)
            if row == 0:
                ax.set_title(f"{net} (IW {iw})", fontsize=10)
            if col == 0:
                ax.set_ylabel(ylabel)
    if html:
        hs = [s for s in html if s["initcwnd"] == iw]
        names = [s["client"] for s in hs]
        for row, metric, scale, ylabel in ((0, "plt_ms", 1000.0, "elapsed time, s"),
                                           (1, "ip_bytes", 1.0, "IP bytes, both directions")):
            ax = axes[row][-1]

            def hv(client, series, metric=metric, scale=scale):
                m = [s for s in hs if s["client"] == client]
                return m[0][f"{metric}_median"] / scale if m else None

            grouped_bars(ax, names, [ylabel], hv)
            if row == 0:
                ax.set_title(f"{hs[0]['profile_label']}: GET of the 42 KB HTML", fontsize=10)
            legend(ax, fontsize=7, loc="upper right")
    legend(axes[0][0], fontsize=8, loc="upper left")
    fig.suptitle("E1 Microscape: HTTP/1.0 (4 conns) vs HTTP/1.1 serialized vs pipelined "
                 "(+deflate), first-time and revalidation", fontsize=11)
    return save(fig, path)
