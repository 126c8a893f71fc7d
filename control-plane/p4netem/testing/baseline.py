"""Metrics of a run compared with a stored baseline, with a tolerance per metric.

A baseline is one JSON file per test (or per measured run) in a directory:
`{"metrics": {"page_ms": {"value": 812.0, "tolerance_pct": 20, "worse": "higher"}}}`. A metric
regressed when it is worse than the baseline by more than its tolerance (relative, plus an optional
absolute slack for values near zero); better is never a failure. Metrics with no baseline yet are
reported as new."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Metric:
    value: float
    tolerance_pct: float = 10.0
    worse: str = "higher"  # "higher" (times, losses) or "lower" (throughput)
    slack: float = 0.0  # absolute tolerance added to the relative one

    def to_dict(self) -> dict:
        return {"value": self.value, "tolerance_pct": self.tolerance_pct, "worse": self.worse, "slack": self.slack}


@dataclass(frozen=True)
class Comparison:
    name: str
    value: float
    baseline: float | None
    limit: float | None
    regressed: bool

    def line(self) -> str:
        if self.baseline is None:
            return f"{self.name:<24} {self.value:>12.4g}  (new: no baseline)"
        change = (self.value - self.baseline) / self.baseline * 100 if self.baseline else float("inf")
        verdict = "REGRESSED" if self.regressed else "ok"
        return (f"{self.name:<24} {self.value:>12.4g}  baseline {self.baseline:<10.4g} limit {self.limit:<10.4g} "
                f"{change:+7.1f} %  {verdict}")


def compare(current: dict[str, Metric], baseline: dict[str, Metric]) -> list[Comparison]:
    out = []
    for name, m in current.items():
        base = baseline.get(name)
        if base is None:
            out.append(Comparison(name, m.value, None, None, False))
            continue
        # The tolerance is the baseline's (what the team agreed on when it was recorded).
        margin = abs(base.value) * base.tolerance_pct / 100 + base.slack
        if base.worse == "lower":
            limit = base.value - margin
            regressed = m.value < limit
        else:
            limit = base.value + margin
            regressed = m.value > limit
        out.append(Comparison(name, m.value, base.value, limit, regressed))
    return out


def table(comparisons: list[Comparison]) -> str:
    return "\n".join(c.line() for c in comparisons)


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_")[:200] + ".json"


@dataclass
class Baseline:
    """The metrics one test records, and what to do with them: compare with `directory` (when it
    holds this test's file), or save them there (`save=True`)."""

    key: str  # the test's node id
    directory: Path | None = None
    save: bool = False
    metrics: dict[str, Metric] = field(default_factory=dict)

    def record(self, name: str, value: float, *, tolerance_pct: float = 10.0, worse: str = "higher",
               slack: float = 0.0) -> None:
        """Record one metric of this run. `worse`: "higher" when a larger value is a regression
        (a time, a loss), "lower" when a smaller one is (a throughput)."""
        if worse not in ("higher", "lower"):
            raise ValueError(f"worse must be 'higher' or 'lower', not {worse!r}")
        if not 0 <= tolerance_pct <= 1000:
            raise ValueError(f"tolerance_pct must be in 0..1000, not {tolerance_pct}")
        self.metrics[name] = Metric(float(value), tolerance_pct, worse, slack)

    @property
    def path(self) -> Path | None:
        return self.directory / _file_name(self.key) if self.directory else None

    def stored(self) -> dict[str, Metric] | None:
        if self.path is None or not self.path.exists():
            return None
        doc = json.loads(self.path.read_text())
        return {k: Metric(**v) for k, v in doc.get("metrics", {}).items()}

    def finish(self) -> tuple[list[Comparison], bool]:
        """Save or compare. Returns (the comparisons, whether anything regressed)."""
        if self.directory is None or not self.metrics:
            return [], False
        if self.save:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"test": self.key, "metrics": {k: m.to_dict() for k, m in
                                                                           self.metrics.items()}}, indent=2) + "\n")
            return [], False
        stored = self.stored()
        if stored is None:
            return [Comparison(k, m.value, None, None, False) for k, m in self.metrics.items()], False
        comparisons = compare(self.metrics, stored)
        return comparisons, any(c.regressed for c in comparisons)
