"""Bootstrap confidence intervals for what the studies report: the median of a condition's loads,
the ratio of two conditions' medians (E3's gain, E4's ratio, E1's "x times faster") and their
difference (header overhead in percentage points, retransmissions per connection).

Percentile bootstrap: the statistic is recomputed on `resamples` resamples drawn with
replacement (each group of a ratio or difference resampled on its own, since the loads of two
conditions are independent), and the interval is the (1-c)/2 and (1+c)/2 quantiles of those
values. It makes no assumption about the shape of page-load times (skewed, often bimodal under
loss), which is why it is used instead of a normal interval.

Deterministic: the generator is seeded from the report's seed and a stable hash of the
interval's key (`seed_for`), so an interval does not depend on the order in which a report
computes them, and the same files give the same report.

Clustered samples (E2's pages, which share the bottleneck within a run): with two or more
clusters the resampling is two-stage (clusters with replacement, then values within each);
with one cluster the values are resampled as if independent, which understates the run-to-run
spread; `Interval.note` says so.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_VALUES = 2          # below this a sample has no interval (one load says nothing of spread)


@dataclass(frozen=True)
class Interval:
    """A statistic on the data (`estimate`) and its bootstrap interval [low, high]; low/high
    are None when a sample is too small for one. `n`: the sizes of the samples used."""

    estimate: float | None
    low: float | None
    high: float | None
    n: tuple[int, ...]
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    note: str = ""

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def side_of(self, threshold: float) -> int:
        """+1 when the whole interval is above the threshold, -1 when below, 0 when it spans
        it (or there is no interval)."""
        if not self.has_interval:
            return 0
        if self.low > threshold:
            return 1
        if self.high < threshold:
            return -1
        return 0


def seed_for(seed: int, *key) -> int:
    """A generator seed from the report's seed and the interval's key (stable across runs and
    Python processes, unlike hash())."""
    return (zlib.crc32(repr(key).encode()) ^ (seed * 0x9E3779B1)) & 0xFFFFFFFF


def _clean(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([float(v) for v in values
                       if v is not None and not (isinstance(v, float) and math.isnan(v))],
                      dtype=float)


def _resampled_medians(rng: np.random.Generator, values: np.ndarray, resamples: int
                       ) -> np.ndarray:
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[idx], axis=1)


def _clustered_medians(rng: np.random.Generator, clusters: list[np.ndarray], resamples: int
                       ) -> np.ndarray:
    """Two-stage: pick clusters with replacement, then values within each picked cluster."""
    out = np.empty(resamples)
    k = len(clusters)
    for i in range(resamples):
        picked = rng.integers(0, k, size=k)
        parts = [c[rng.integers(0, len(c), size=len(c))] for c in (clusters[j] for j in picked)]
        out[i] = np.median(np.concatenate(parts))
    return out


def _sample(rng, values, clusters, resamples) -> tuple[np.ndarray | None, float | None, int, str]:
    """(resampled medians or None, median of the data, n, note)."""
    if clusters is not None:
        cl = [c for c in (_clean(c) for c in clusters) if len(c)]
        flat = np.concatenate(cl) if cl else np.asarray([], dtype=float)
        if len(flat) < MIN_VALUES:
            return None, (float(np.median(flat)) if len(flat) else None), len(flat), ""
        if len(cl) >= 2:
            return _clustered_medians(rng, cl, resamples), float(np.median(flat)), len(flat), ""
        note = ("one run: its values resampled as if independent (the run-to-run spread is "
                "not in the interval)")
        return _resampled_medians(rng, flat, resamples), float(np.median(flat)), len(flat), note
    v = _clean(values)
    if len(v) < MIN_VALUES:
        return None, (float(np.median(v)) if len(v) else None), len(v), ""
    return _resampled_medians(rng, v, resamples), float(np.median(v)), len(v), ""


def _bounds(stats: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    stats = stats[np.isfinite(stats)]
    if not len(stats):
        return None, None
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return float(lo), float(hi)


def median_ci(values: Sequence[float | None] = (), *, clusters: list[Sequence[float]] | None = None,
              seed: int = 0, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
              ) -> Interval:
    """The median and its percentile-bootstrap interval. `clusters` instead of `values`:
    values grouped by run (two-stage resampling)."""
    rng = np.random.default_rng(seed)
    boot, est, n, note = _sample(rng, values, clusters, resamples)
    if boot is None:
        return Interval(est, None, None, (n,), confidence, resamples)
    lo, hi = _bounds(boot, confidence)
    return Interval(est, lo, hi, (n,), confidence, resamples, note)


def combined_ci(fn, samples: Sequence[Sequence[float | None] | dict], *, seed: int = 0,
                resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Interval:
    """fn(median of sample 1, median of sample 2, ...) and its interval, each sample resampled
    on its own. A sample is a sequence of values or {"clusters": [...]}. fn takes numpy arrays
    (one resampled median per resample) and must be elementwise (ratio, difference, ratio of
    ratios); non-finite results (a zero denominator) are left out of the interval."""
    rng = np.random.default_rng(seed)
    drawn = []
    for s in samples:
        if isinstance(s, dict):
            drawn.append(_sample(rng, (), s.get("clusters"), resamples))
        else:
            drawn.append(_sample(rng, s, None, resamples))
    ns = tuple(d[2] for d in drawn)
    note = next((d[3] for d in drawn if d[3]), "")
    with np.errstate(divide="ignore", invalid="ignore"):
        est = None
        if all(d[1] is not None for d in drawn):
            est = float(fn(*(np.float64(d[1]) for d in drawn)))
            if not math.isfinite(est):
                est = None
        if any(d[0] is None for d in drawn):
            return Interval(est, None, None, ns, confidence, resamples, note)
        lo, hi = _bounds(np.asarray(fn(*(d[0] for d in drawn)), dtype=float), confidence)
    return Interval(est, lo, hi, ns, confidence, resamples, note)


def _pair(a, b, a_clusters, b_clusters) -> list:
    return [{"clusters": a_clusters} if a_clusters is not None else a,
            {"clusters": b_clusters} if b_clusters is not None else b]


def ratio_ci(numerator: Sequence[float | None] = (), denominator: Sequence[float | None] = (), *,
             numerator_clusters=None, denominator_clusters=None, seed: int = 0,
             resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Interval:
    """median(numerator) / median(denominator) (E3's gain = baseline / variant), each sample
    resampled on its own. Resamples whose denominator median is 0 are left out."""
    return combined_ci(np.divide, _pair(numerator, denominator, numerator_clusters,
                                        denominator_clusters),
                       seed=seed, resamples=resamples, confidence=confidence)


def difference_ci(a: Sequence[float | None] = (), b: Sequence[float | None] = (), *,
                  a_clusters=None, b_clusters=None, seed: int = 0, resamples: int = RESAMPLES,
                  confidence: float = CONFIDENCE) -> Interval:
    """median(a) - median(b), each sample resampled on its own."""
    return combined_ci(np.subtract, _pair(a, b, a_clusters, b_clusters), seed=seed,
                       resamples=resamples, confidence=confidence)


def statistic_ci(fn, items: Sequence, *, seed: int = 0, resamples: int = RESAMPLES,
                 confidence: float = CONFIDENCE, min_valid: float = 0.5) -> Interval:
    """fn(items) and its interval over resamples of the items (fn returns a float, or None
    where the resample cannot give one, such as a decision tree of cells with a single label).
    No interval when fewer than `min_valid` of the resamples gave a value."""
    est = fn(list(items))
    n = (len(items),)
    if len(items) < MIN_VALUES:
        return Interval(est, None, None, n, confidence, resamples)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        v = fn([items[i] for i in rng.integers(0, len(items), size=len(items))])
        if v is not None and math.isfinite(v):
            values.append(v)
    if len(values) < min_valid * resamples:
        return Interval(est, None, None, n, confidence, resamples,
                        f"only {len(values)} of {resamples} resamples gave a value")
    lo, hi = _bounds(np.asarray(values), confidence)
    return Interval(est, lo, hi, n, confidence, resamples)
