"""E4: where one multiplexed connection beats six, and why.

Per cell (RTT, bandwidth, loss, IW, object size, object count) the ratio of median page-load
times PLT(HTTP/1.1 x6) / PLT(multiplexed): > 1 means multiplexing helps. Each cell is labelled
"helps" (ratio > 1 + threshold), "hurts" (ratio < 1 - threshold) or "same", as the 2014 study
did, and a decision tree (scikit-learn) learns the label from the factors; its feature
importances rank the factors, its rules say where the borders lie. Retransmissions per
connection (server data segments sent again, from the client-side capture, over the connections
the load opened) per client show what one connection loses against six under loss.

Files: e4-runs.csv (raw per-run page-load times with every factor: the input of any other
model), e4-cells.csv (per cell: both medians, ratio, label, retransmissions per connection),
e4-tree.txt (the tree's rules and the factor ranking), e4-factors.csv (importances),
e4.png (ratio per cell by label; factor importances; retransmissions per connection by loss).
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ...harness.results import write_csv
from .common import Analysis, median_of, run_rows
from .plots import COLORS, legend, pyplot, save

FACTORS = [("f_rtt_ms", "RTT (ms)"), ("f_down_mbit", "bandwidth (Mbit/s)"),
           ("f_loss_pct", "loss (%)"), ("initcwnd", "initial window"),
           ("f_object_size", "object size (B)"), ("f_embedded_objects", "objects")]


def cell_table(rows: list[dict], base: str, mux: str, threshold: float) -> list[dict]:
    cells: dict[tuple, dict] = {}
    for r in rows:
        key = (r["profile_label"], r["page"], r["initcwnd"])
        c = cells.setdefault(key, {"profile": key[0], "page": key[1], "initcwnd": key[2],
                                   **{f: r.get(f) for f, _ in FACTORS if f != "initcwnd"}})
        c.setdefault("runs", {}).setdefault(r["client"], []).append(r)
    out = []
    for c in cells.values():
        runs = c.pop("runs")
        b, m = runs.get(base, []), runs.get(mux, [])
        c["tls_versions"] = " ".join(sorted({v for r in b + m
                                             for v in str(r.get("tls_versions") or "").split()}))
        c[f"plt_ms_{base}"] = median_of(b, "plt_ms")
        c[f"plt_ms_{mux}"] = median_of(m, "plt_ms")
        c[f"n_{base}"], c[f"n_{mux}"] = len(b), len(m)
        c[f"retx_per_conn_{base}"] = median_of(b, "retransmissions_per_connection")
        c[f"retx_per_conn_{mux}"] = median_of(m, "retransmissions_per_connection")
        if c[f"plt_ms_{base}"] and c[f"plt_ms_{mux}"]:
            ratio = c[f"plt_ms_{base}"] / c[f"plt_ms_{mux}"]
            c["ratio"] = round(ratio, 3)
            c["label"] = ("helps" if ratio > 1 + threshold else
                          "hurts" if ratio < 1 - threshold else "same")
        else:
            c["ratio"], c["label"] = None, None
        out.append(c)
    return out


def decision_tree(cells: list[dict], seed: int = 1) -> dict | None:
    """A decision tree on the labelled cells: its rules and the factors' importances."""
    data = [c for c in cells if c.get("label")]
    if len(data) < 4 or len({c["label"] for c in data}) < 2:
        return None
    from sklearn.tree import DecisionTreeClassifier, export_text
    names = [f for f, _ in FACTORS]
    X = [[float(c.get(f) or 0) for f in names] for c in data]
    y = [c["label"] for c in data]
    tree = DecisionTreeClassifier(max_depth=4, min_samples_leaf=max(1, len(data) // 20),
                                  random_state=seed).fit(X, y)
    labels = dict(FACTORS)
    ranking = sorted(((labels[n], round(float(v), 4)) for n, v in
                      zip(names, tree.feature_importances_)), key=lambda x: -x[1])
    return {"rules": export_text(tree, feature_names=[labels[n] for n in names]),
            "ranking": ranking, "cells": len(data), "accuracy": round(tree.score(X, y), 3),
            "classes": {k: y.count(k) for k in sorted(set(y))}}


def analyze(exp, built, records, metadata: dict, out: Path) -> Analysis:
    res = Analysis()
    opts = exp.options
    base, mux = opts.get("baseline", "http1.1"), opts.get("multiplexed", "h2")
    threshold = float(opts.get("threshold", 0.1))
    rows = run_rows(records, built.cells)
    for r in rows:
        if r.get("f_embedded_objects") is None and r.get("f_objects"):
            r["f_embedded_objects"] = r["f_objects"] - 1     # files of an older run
        r["object_size"] = r.get("f_object_size")
        r["objects"] = r.get("f_embedded_objects")
    res.files["e4_runs"] = write_csv(out / "e4-runs.csv", rows, metadata)
    cells = cell_table(rows, base, mux, threshold)
    res.files["e4_cells"] = write_csv(out / "e4-cells.csv", cells, metadata)
    if not cells:
        return res
    tree = decision_tree(cells, exp.seed)
    text = [f"E4 decision tree: label = {mux} helps / hurts / same against {base} "
            f"(ratio of median PLTs beyond +-{threshold:.0%})"]
    if tree:
        text += [f"cells: {tree['cells']}  classes: {tree['classes']}  training accuracy: "
                 f"{tree['accuracy']}", "", "factor importance:"]
        text += [f"  {name:20} {imp:.3f}" for name, imp in tree["ranking"]]
        text += ["", tree["rules"]]
        res.files["e4_factors"] = write_csv(out / "e4-factors.csv",
                                            [{"factor": n, "importance": v}
                                             for n, v in tree["ranking"]])
    else:
        text.append("too few labelled cells, or only one label: no tree")
    (out / "e4-tree.txt").write_text("\n".join(text) + "\n")
    res.files["e4_tree"] = out / "e4-tree.txt"

    t = Table(title=escape(f"E4: per cell, median PLT {base} vs {mux} (s), ratio > 1: {mux} "
                           "faster; retransmissions per connection (median)"),
              title_justify="left")
    for col in ("RTT ms", "Mbit/s", "loss %", "IW", "objects", "size B", f"{base} s",
                f"{mux} s", "ratio", "label", f"retx/conn {base}", f"retx/conn {mux}"):
        t.add_column(col, justify="right")
    for c in sorted(cells, key=lambda c: (c["f_rtt_ms"], c["f_down_mbit"], c["f_loss_pct"],
                                          c["initcwnd"], c["f_embedded_objects"],
                                          c["f_object_size"])):
        t.add_row(f"{c['f_rtt_ms']:g}", f"{c['f_down_mbit']:g}", f"{c['f_loss_pct']:g}",
                  str(c["initcwnd"]), str(c["f_embedded_objects"]), str(c["f_object_size"]),
                  _s(c[f"plt_ms_{base}"]), _s(c[f"plt_ms_{mux}"]),
                  "-" if c["ratio"] is None else f"{c['ratio']:.2f}", c["label"] or "-",
                  _f(c[f"retx_per_conn_{base}"]), _f(c[f"retx_per_conn_{mux}"]))
    res.tables.append(t)
    if tree:
        rt = Table(title="E4: factors ranked by the decision tree (importance)",
                   title_justify="left")
        rt.add_column("factor")
        rt.add_column("importance", justify="right")
        for n, v in tree["ranking"]:
            rt.add_row(n, f"{v:.3f}")
        res.tables.append(rt)
    res.files["e4_plot"] = _plot(cells, rows, tree, base, mux, out / "e4.png")
    res.findings = {"cells": len(cells),
                    "labels": {k: sum(1 for c in cells if c["label"] == k)
                               for k in ("helps", "same", "hurts")},
                    "ranking": tree["ranking"] if tree else None,
                    "median_ratio": median_of(cells, "ratio"),
                    "retx_per_conn": {k: median_of(rows, "retransmissions_per_connection",
                                                   client=k) for k in (base, mux)}}
    return res


def _s(ms):
    return "-" if ms is None else f"{ms / 1000:.3f}" if ms < 1000 else f"{ms / 1000:.2f}"


def _f(v):
    return "-" if v is None else f"{v:.2f}"


def _plot(cells, rows, tree, base, mux, path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8),
                             gridspec_kw={"width_ratios": [2.2, 1, 1.2]})
    ax = axes[0]
    ordered = sorted((c for c in cells if c["ratio"] is not None), key=lambda c: c["ratio"])
    colors = {"helps": COLORS[2], "same": COLORS[7], "hurts": COLORS[3]}
    ax.bar(range(len(ordered)), [c["ratio"] for c in ordered],
           color=[colors[c["label"]] for c in ordered])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("cells, sorted by ratio")
    ax.set_ylabel(f"PLT {base} / PLT {mux} (log)")
    if len(ordered) <= 24:
        ax.set_xticks(range(len(ordered)),
                      [f"{c['f_rtt_ms']:g}ms {c['f_down_mbit']:g}M {c['f_loss_pct']:g}% "
                       f"iw{c['initcwnd']} {c['f_embedded_objects']}x{c['f_object_size']}"
                       for c in ordered], rotation=70, fontsize=6.5, ha="right")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=col, label=f"{mux} {lab}") for lab, col in colors.items()],
              fontsize=8)
    ax.set_title("where multiplexing helps / hurts", fontsize=10)
    ax = axes[1]
    if tree:
        names = [n for n, _ in tree["ranking"]][::-1]
        ax.barh(names, [v for _, v in tree["ranking"]][::-1], color=COLORS[0])
        ax.set_xlabel("decision-tree importance")
        ax.tick_params(axis="y", labelsize=8)
    else:
        ax.text(0.5, 0.5, "no tree\n(too few cells\nor one label)", ha="center", va="center")
    ax.set_title("factors ranked", fontsize=10)
    ax = axes[2]
    losses = sorted({r["f_loss_pct"] for r in rows if r.get("f_loss_pct") is not None})
    width = 0.38
    for j, client in enumerate((base, mux)):
        vals = [median_of(rows, "retransmissions_per_connection", client=client, f_loss_pct=lo)
                or 0 for lo in losses]
        ax.bar([i - 0.2 + j * width for i in range(len(losses))], vals, width * 0.95,
               color=COLORS[j], label=client)
    ax.set_xticks(range(len(losses)), [f"{lo:g}%" for lo in losses])
    ax.set_xlabel("loss")
    ax.set_ylabel("retransmissions per connection (median)")
    legend(ax, fontsize=8)
    ax.set_title("retransmissions per connection", fontsize=10)
    fig.suptitle(f"E4: HTTP/1.1 with 6 connections vs one {mux} connection, all objects "
                 "requested at once", fontsize=11)
    return save(fig, path)
