"""Bootstrap intervals over a run's rows: the samples behind a median (the loads of a condition,
or E2's pages grouped by run) and the intervals of medians, ratios and differences the claims
and the report's tables show. `Estimator` carries the report's seed, resamples and confidence,
and seeds every interval from its own key, so the report is the same however it is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .bootstrap import CONFIDENCE, RESAMPLES, Interval, combined_ci, median_ci, seed_for


@dataclass(frozen=True)
class Sample:
    """The values of one condition's metric: flat (one per load), or in clusters (E2: the
    pages of each run)."""

    values: tuple[float, ...] = ()
    clusters: tuple[tuple[float, ...], ...] | None = None

    @property
    def n(self) -> int:
        return sum(len(c) for c in self.clusters) if self.clusters is not None else len(self.values)

    def arg(self) -> list | dict:
        """The sample as bootstrap.combined_ci takes it."""
        if self.clusters is not None:
            return {"clusters": [list(c) for c in self.clusters]}
        return list(self.values)


def sample(rows: Iterable[dict], metric: str, *, cluster_by: str | None = None,
           where: Callable[[dict], bool] | None = None) -> Sample:
    rows = [r for r in rows if r.get(metric) is not None and (where is None or where(r))]
    if cluster_by is None:
        return Sample(tuple(float(r[metric]) for r in rows))
    groups: dict = {}
    for r in rows:
        groups.setdefault(r.get(cluster_by), []).append(float(r[metric]))
    return Sample(clusters=tuple(tuple(v) for v in groups.values()))


def matching(rows: Iterable[dict], **match) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


@dataclass(frozen=True)
class Estimator:
    seed: int = 1
    resamples: int = RESAMPLES
    confidence: float = CONFIDENCE

    def _opts(self, key) -> dict:
        return {"seed": seed_for(self.seed, *key), "resamples": self.resamples,
                "confidence": self.confidence}

    def median(self, s: Sample, key: tuple) -> Interval:
        if s.clusters is not None:
            return median_ci(clusters=[list(c) for c in s.clusters], **self._opts(key))
        return median_ci(list(s.values), **self._opts(key))

    def combined(self, fn, samples: list[Sample], key: tuple) -> Interval:
        return combined_ci(fn, [s.arg() for s in samples], **self._opts(key))

    def ratio(self, a: Sample, b: Sample, key: tuple) -> Interval:
        """median(a) / median(b)."""
        return self.combined(np.divide, [a, b], key)

    def difference(self, a: Sample, b: Sample, key: tuple) -> Interval:
        """median(a) - median(b)."""
        return self.combined(np.subtract, [a, b], key)


# ---- the report's interval tables: medians per condition, the study's gains / ratios -----------

@dataclass
class IntervalTable:
    """A table of intervals: `keys` name the condition columns, each row is (condition values,
    {column: Interval}); `unit` per interval column: "s" (ms in, shown in s), "x" (a ratio),
    "" (as is)."""

    title: str
    keys: list[str]
    columns: dict[str, str]
    rows: list[tuple[tuple, dict[str, Interval | None]]]
    note: str = ""


def _grouped(rows: list[dict], by: list[str]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in by), []).append(r)
    return out


# Per study: the rows, the condition columns and the medians the study reports.
MEDIANS = {
    "e1": ("e1-runs", ["profile_label", "page", "client", "mode", "initcwnd"],
           {"plt_ms": "s", "packets": "", "ip_bytes": ""}),
    "e3": ("e3-runs", ["profile_label", "page", "client", "initcwnd"], {"plt_ms": "s"}),
    "e4": ("e4-runs", ["f_rtt_ms", "f_down_mbit", "f_loss_pct", "initcwnd", "f_embedded_objects",
                       "f_object_size", "client"], {"plt_ms": "s"}),
    "e5": ("e5-runs", ["network", "page", "client", "initcwnd", "tls_label"],
           {"plt_ms": "s", "first_syn_to_synack_ms": "ms", "onload_ms": "s"}),
}


def median_table(data, est: Estimator) -> IntervalTable | None:
    """Median of every condition's loads with its interval (E2: page delays, pages grouped by
    run)."""
    if data.analysis == "e2":
        runs = {r["key"]: r for r in data.rows("runs")}
        pages = [p for p in data.rows("pages") if p.get("in_window") and p.get("ok")]
        keys = ["http", "web_clients", "bulk_clients", "initcwnd_label"]
        rows = []
        for key in dict.fromkeys(r["key"] for r in data.rows("runs")):
            s = sample([p for p in pages if p["key"] == key], "delay_ms", cluster_by="rep")
            r = runs[key]
            rows.append((tuple(r.get(k) for k in keys),
                         {"page delay": est.median(s, ("median", "e2", key))}))
        return IntervalTable("Median page delay per condition (pages in the measured window, "
                             "grouped by run)", keys, {"page delay": "s"}, rows)
    spec = MEDIANS.get(data.analysis)
    if spec is None:
        return None
    name, by, metrics = spec
    rows = []
    for key, rs in _grouped(data.rows(name), by).items():
        cols = {}
        for m in metrics:
            s = sample(rs, m)
            cols[m] = est.median(s, ("median", data.analysis, key, m)) if s.n else None
        rows.append((key, cols))
    metrics = {m: u for m, u in metrics.items() if any(c[m] is not None for _, c in rows)}
    rows = [(k, {m: c[m] for m in metrics}) for k, c in rows]
    return IntervalTable(f"Medians per condition ({name}.csv)", by, metrics, rows)


def ratio_table(data, est: Estimator) -> IntervalTable | None:
    """The gains / ratios the study reports, with intervals: E3's gain of every variant over
    the baseline, E4's PLT(HTTP/1.1) / PLT(multiplexed) per cell."""
    opts = (data.experiment.get("definition") or {}).get("options") or {}
    if data.analysis == "e3":
        b = opts.get("baseline") or {}
        bc, biw = b.get("client", "https"), int(b.get("initcwnd", 3))
        rows = []
        for (prof, page), rs in _grouped(data.rows("e3-runs"), ["profile_label", "page"]).items():
            base = sample(matching(rs, client=bc, initcwnd=biw), "plt_ms")
            for (client, iw), vs in _grouped(rs, ["client", "initcwnd"]).items():
                if (client, iw) == (bc, biw) or not base.n:
                    continue
                rows.append(((prof, page, client, iw), {"gain": est.ratio(
                    base, sample(vs, "plt_ms"), ("e3", prof, page, client, iw))}))
        return IntervalTable(f"Gain = median PLT of {bc} IW {biw} / median PLT of the variant "
                             "(> 1: the variant is faster)",
                             ["profile_label", "page", "client", "initcwnd"], {"gain": "x"}, rows)
    if data.analysis == "e4":
        base, mux = opts.get("baseline", "http1.1"), opts.get("multiplexed", "h2")
        by = MEDIANS["e4"][1][:-1]
        rows = []
        for key, rs in _grouped(data.rows("e4-runs"), by).items():
            a, m = sample(matching(rs, client=base), "plt_ms"), sample(matching(rs, client=mux),
                                                                     "plt_ms")
            if a.n and m.n:
                rows.append((key, {"ratio": est.ratio(a, m, ("e4", key, "plt"))}))
        threshold = float(opts.get("threshold", 0.1))
        return IntervalTable(f"Ratio = median PLT {base} / median PLT {mux} per cell (> 1: "
                             f"{mux} faster; the analysis labels beyond +-{threshold:.0%})",
                             by, {"ratio": "x"}, rows)
    return None
