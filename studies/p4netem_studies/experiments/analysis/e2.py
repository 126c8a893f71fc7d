"""E2: per condition (web clients, bulk clients, HTTP model, server IW) the median page delay
(and its quartiles, and per IW group in the 1/3 mix), the bottleneck's utilisation and drop
rate (queue-full drops over packets in, from the switch's counters of the shared slot), goodput
and network power (goodput / median page delay), as RFC 2415 reports them.

Files: e2-table.csv (the workload's summary rows with the TCP environment), e2.png (four panels
against the initial window: median page delay, drop rate, utilisation, power; a line per HTTP
model x web clients x bulk clients).
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ...harness.results import write_csv
from .common import Analysis
from .plots import COLORS, legend, pyplot, save


def _iw_order(label: str) -> tuple:
    parts = [int(p) for p in label.split("/")]
    return (len(parts), parts)


def analyze(exp, outcome, out: Path) -> Analysis:
    res = Analysis()
    rows = outcome.summary
    res.files["e2_table"] = write_csv(out / "e2-table.csv", rows, outcome.metadata)
    if not rows:
        return res
    t = Table(title=escape("E2: web clients sharing a T1 (1.544 Mbit/s, 50 ms each way, 25-packet "
                    "queue); page delay median [q1-q3] s"), title_justify="left")
    for col in ("web", "bulk", "HTTP", "IW", "pages", "page delay s", "by IW group",
                "util down", "drops down %", "goodput kbit/s", "power"):
        t.add_column(col, justify="right")
    for r in sorted(rows, key=lambda r: (r["http"], r["web_clients"], r["bulk_clients"],
                                         _iw_order(r["initcwnd_label"]))):
        med = r["page_delay_median_ms"]
        groups = " ".join(f"iw{k[len('page_delay_median_ms_iw'):]}={v / 1000:.2f}"
                          for k, v in r.items()
                          if k.startswith("page_delay_median_ms_iw") and v is not None)
        t.add_row(str(r["web_clients"]), str(r["bulk_clients"]), r["http"],
                  r["initcwnd_label"], str(r["pages_ok"]),
                  "-" if med is None else
                  f"{med / 1000:.2f} [{r['page_delay_q1_ms'] / 1000:.2f}-"
                  f"{r['page_delay_q3_ms'] / 1000:.2f}]",
                  groups or "-",
                  _f(r.get("utilisation_down"), 2), _f(r.get("drop_rate_down_pct"), 2),
                  _f(r.get("goodput_kbit"), 0), _f(r.get("power_kbit_per_s2"), 0))
    res.tables.append(t)
    res.files["e2_plot"] = _plot(rows, out / "e2.png")
    res.findings = {r["key"]: {k: r.get(k) for k in (
        "pages_ok", "page_delay_median_ms", "page_delay_q1_ms", "page_delay_q3_ms",
        "utilisation_down", "drop_rate_down_pct", "goodput_kbit", "power_kbit_per_s2")}
        for r in rows}
    return res


def _f(v, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _plot(rows: list[dict], path: Path) -> Path:
    plt = pyplot()
    iws = sorted({r["initcwnd_label"] for r in rows}, key=_iw_order)
    lines = sorted({(r["http"], r["web_clients"], r["bulk_clients"]) for r in rows})
    panels = [("page_delay_median_ms", "median page delay, s", 1000.0),
              ("drop_rate_down_pct", "bottleneck drop rate (down), %", 1.0),
              ("utilisation_down", "bottleneck utilisation (down)", 1.0),
              ("power_kbit_per_s2", "power: goodput / median delay", 1.0)]
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.6))
    webs = sorted({w for _, w, _ in lines})
    bulks = sorted({b for _, _, b in lines})
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D"]
    for ax, (metric, ylabel, scale) in zip(axes, panels):
        for http, web, bulk in lines:
            pts = []
            for i, iw in enumerate(iws):
                m = [r for r in rows if (r["http"], r["web_clients"], r["bulk_clients"],
                                         r["initcwnd_label"]) == (http, web, bulk, iw)]
                if m and m[0].get(metric) is not None:
                    pts.append((i, m[0][metric] / scale))
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts],
                    color=COLORS[0 if http == "1.0" else 1],
                    linestyle=styles[webs.index(web) % len(styles)],
                    marker=markers[bulks.index(bulk) % len(markers)], markersize=5,
                    label=f"HTTP/{http}, {web} web, {bulk} bulk")
        ax.set_xticks(range(len(iws)), [f"IW {iw}" for iw in iws], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    legend(axes[0], fontsize=7, loc="best")
    fig.suptitle("E2: server initial window on a shared T1 bottleneck (web clients with think "
                 "time, optional bulk transfers)", fontsize=11)
    return save(fig, path)
