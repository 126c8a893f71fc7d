"""Small matplotlib helpers the studies' plots share (Agg backend: labs and CI have no display)."""

from __future__ import annotations

from pathlib import Path

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
          "#8C8C8C"]


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def label_value(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def grouped_bars(ax, groups: list[str], series: list[str], value, *, err=None,
                 annotate: bool = True, rotate: bool = False, log: bool = False) -> None:
    """Bars: x = groups, one bar per series. value(group, series) -> float | None;
    err(group, series) -> (low, high) distances for whiskers, or None."""
    width = 0.8 / max(1, len(series))
    for j, s in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for i, g in enumerate(groups):
            v = value(g, s)
            if v is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(v)
            e = err(g, s) if err else None
            lo.append(e[0] if e else 0)
            hi.append(e[1] if e else 0)
        if not xs:
            continue
        bars = ax.bar(xs, ys, width * 0.95, yerr=[lo, hi] if err else None, capsize=2,
                      color=COLORS[j % len(COLORS)], label=s)
        if annotate:
            for bar, y, up in zip(bars, ys, hi):
                ax.annotate(label_value(y), (bar.get_x() + bar.get_width() / 2, y + up),
                            xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=6.5, rotation=90 if rotate else 0)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    if log:
        ax.set_yscale("log")
    else:
        top = ax.get_ylim()[1]
        ax.set_ylim(0, top * (1.25 if annotate else 1.05))
    ax.grid(axis="y", alpha=0.3)


def legend(ax, **kwargs) -> None:
    """A legend when the axes have labelled artists (a filtered run may have drawn none)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path
