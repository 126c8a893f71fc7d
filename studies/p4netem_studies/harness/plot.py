"""The comparison plot: one panel per network profile (each with its own time scale, since a LAN
load and a GPRS load differ a hundredfold), a group of bars per protocol, one bar per server
initial window. Bar = median page-load time, whisker = interquartile range, the median written
on the bar: the same numbers as the table. With the radio on, the hatched foot of a bar is the
radio's wake-up (the median promotion the switch reported for those loads): the part of the page
load spent waiting for the radio.
"""

from __future__ import annotations

from pathlib import Path

from .results import ConditionSummary

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]


def plot(summary: list[ConditionSummary], path: str | Path, title: str = "") -> Path:
    import matplotlib
    matplotlib.use("Agg")   # no display in labs and CI
    import matplotlib.pyplot as plt

    profiles = list(dict.fromkeys(s.row["profile_label"] for s in summary))
    iws = sorted({s.row["initcwnd"] for s in summary})
    fig, axes = plt.subplots(1, len(profiles), figsize=(3.6 * len(profiles) + 1, 4.6),
                             squeeze=False)
    for ax, prof in zip(axes[0], profiles):
        cells = [s for s in summary if s.row["profile_label"] == prof]
        protos = list(dict.fromkeys(s.row["variant"].split(" iw")[0] for s in cells))
        width = 0.8 / len(iws)
        for j, iw in enumerate(iws):
            xs, meds, lo, hi, wakes = [], [], [], [], []
            for i, proto in enumerate(protos):
                match = [s for s in cells if s.row["initcwnd"] == iw
                         and s.row["variant"].split(" iw")[0] == proto]
                if not match or match[0].plt is None:
                    continue
                q1, med, q3 = (v / 1000.0 for v in match[0].plt)
                xs.append(i - 0.4 + width * (j + 0.5))
                meds.append(med)
                lo.append(med - q1)
                hi.append(q3 - med)
                row = match[0].row
                wake = row.get("radio_wake_ms_median") if row.get("radio_promotions_median") else None
                wakes.append(min(med, wake / 1000.0) if wake else 0.0)
            bars = ax.bar(xs, meds, width * 0.95, yerr=[lo, hi], capsize=3,
                          color=COLORS[j % len(COLORS)], label=f"server IW {iw}")
            if any(wakes):
                ax.bar(xs, wakes, width * 0.95, fill=False, hatch="///", edgecolor="#333333",
                       linewidth=0, label="radio wake-up")
            for bar, med, up in zip(bars, meds, hi):
                # Above the whisker, so the label never hides the quartile.
                ax.annotate(_fmt(med), (bar.get_x() + bar.get_width() / 2, med + up),
                            xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7, rotation=90 if len(iws) > 2 else 0)
        ax.set_xticks(range(len(protos)), protos, fontsize=9)
        first = cells[0].row
        name = prof
        if first.get("radio") and not first.get("radio_applied"):
            name += f"\n({first.get('radio_note')})"
        elif first.get("radio_applied"):
            name += ("\n(radio woken just before each load)" if prof.endswith("+prewoken")
                     else "\n(radio idled before each load)")
        ax.set_title(name, fontsize=10)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("page-load time, s (median, IQR)")
    legend: dict = {}   # one legend for the figure: the initial windows, and the wake-up if shown
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.suptitle(title or "page-load time (first SYN to last server packet)", fontsize=11,
                 wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(legend.values(), legend.keys(), loc="lower center", ncol=len(legend), fontsize=8,
               frameon=False)
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _fmt(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 1 else f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"
