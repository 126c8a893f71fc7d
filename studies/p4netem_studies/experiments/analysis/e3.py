"""E3: median page-load time per channel, page (and its number of servers), client and server
initial window, and the gain of every variant over the baseline (HTTPS at IW 3, as the 2012
report compared): gain = median PLT(baseline) / median PLT(variant), > 1 means faster.

Files: e3-table.csv (medians, quartiles and gains per condition), e3-runs.csv (every load),
e3.png (gains per page, one panel per channel, a bar per variant, the 1.0 line marked).
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ...harness.results import write_csv
from .common import Analysis, fmt_q, group_stats, run_rows
from .plots import grouped_bars, legend, pyplot, save

METRICS = ["plt_ms", "loader_elapsed_ms", "connections_opened", "packets_down", "packets_up",
           "retransmissions_down", "first_syn_to_synack_ms"]


def gains(stats: list[dict], baseline: dict, where: list[str]) -> list[dict]:
    """Adds `gain` (baseline median / own median) to each row, the baseline being the row with
    the same `where` values and the baseline's client and IW."""
    index = {tuple(s[k] for k in where): s for s in stats
             if s["client"] == baseline["client"] and s["initcwnd"] == baseline["initcwnd"]}
    for s in stats:
        base = index.get(tuple(s[k] for k in where))
        own = s.get("plt_ms_median")
        s["baseline_plt_ms"] = base.get("plt_ms_median") if base else None
        s["gain"] = (round(base["plt_ms_median"] / own, 3)
                     if base and base.get("plt_ms_median") and own else None)
    return stats


def analyze(exp, built, records, metadata: dict, out: Path) -> Analysis:
    res = Analysis()
    rows = run_rows(records, built.cells)
    res.files["e3_runs"] = write_csv(out / "e3-runs.csv", rows, metadata)
    baseline = dict(exp.options.get("baseline") or {"client": "https", "initcwnd": 3})
    stats = group_stats(rows, ["profile_label", "page", "client", "initcwnd"], METRICS)
    gains(stats, baseline, ["profile_label", "page"])
    res.files["e3_table"] = write_csv(out / "e3-table.csv", stats, metadata)
    if not stats:
        return res
    variants = list(dict.fromkeys((s["client"], s["initcwnd"]) for s in stats))
    t = Table(title=escape(f"E3: page-load time of the baseline ({baseline['client']} IW "
                           f"{baseline['initcwnd']}, median [q1-q3] s) and each variant's gain "
                           "= baseline / variant (> 1: faster)"), title_justify="left")
    t.add_column("channel")
    t.add_column("page")
    t.add_column("baseline s", justify="right")
    others = [v for v in variants if v != (baseline["client"], baseline["initcwnd"])]
    for c, iw in others:
        t.add_column(f"{c} IW{iw}", justify="right")
    cells = list(dict.fromkeys((s["profile_label"], s["page"]) for s in stats))
    last = None
    for prof, page in cells:
        if last is not None and prof != last:
            t.add_section()
        last = prof
        row = {(s["client"], s["initcwnd"]): s for s in stats
               if s["profile_label"] == prof and s["page"] == page}
        base = row.get((baseline["client"], baseline["initcwnd"]))
        t.add_row(prof, page, fmt_q(base, "plt_ms") if base else "-",
                  *[("-" if v not in row or row[v]["gain"] is None else f"{row[v]['gain']:.2f}")
                    for v in others])
    res.tables.append(t)
    res.files["e3_plot"] = _plot(stats, baseline, others, out / "e3.png")
    res.findings = {f"{s['profile_label']}|{s['page']}|{s['client']}|iw{s['initcwnd']}":
                    {"plt_s": (s["plt_ms_median"] or 0) / 1000, "gain": s["gain"]}
                    for s in stats}
    return res


def _plot(stats: list[dict], baseline: dict, variants: list[tuple], path: Path) -> Path:
    plt = pyplot()
    chans = list(dict.fromkeys(s["profile_label"] for s in stats))
    ncols = min(4, len(chans))
    nrows = (len(chans) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 0.5, 3.9 * nrows + 0.6),
                             squeeze=False)
    names = [f"{c} IW{iw}" for c, iw in variants]
    for k, chan in enumerate(chans):
        ax = axes[k // ncols][k % ncols]
        pages = list(dict.fromkeys(s["page"] for s in stats if s["profile_label"] == chan))

        def value(page, name, chan=chan):
            for s in stats:
                if (s["profile_label"], s["page"]) == (chan, page) and \
                        f"{s['client']} IW{s['initcwnd']}" == name:
                    return s["gain"]
            return None

        grouped_bars(ax, [p.removeprefix("e3-") for p in pages], names,
                     lambda g, n: value(f"e3-{g}", n), rotate=True)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(chan.removeprefix("e3-"), fontsize=9)
        if k % ncols == 0:
            ax.set_ylabel(f"gain vs {baseline['client']} IW{baseline['initcwnd']}")
    for k in range(len(chans), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    legend(axes[0][0], fontsize=7, loc="upper left")
    fig.suptitle("E3: gain = median PLT(HTTPS, IW 3) / median PLT(variant); pages a/b/c on "
                 "1, 2, 4 servers", fontsize=11)
    return save(fig, path)
