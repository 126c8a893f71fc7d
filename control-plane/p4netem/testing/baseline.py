"""Metrics of a run compared with a stored baseline, with a tolerance per metric.

A baseline is one JSON file per test (or per measured run) in a directory:
`{"metrics": {"page_ms": {"value": 812.0, "tolerance_pct": 20, "worse": "higher"}}}`. A metric
regressed when it is worse than the baseline by more than its tolerance (relative, plus an optional
absolute slack for values near zero); better is never a failure. Metrics with no baseline yet are
reported as new."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path


class BaselineError(ValueError):
    """A baseline file that cannot be used (not JSON, not this format); the message names it."""


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
        if self.baseline:
            change = f"{(self.value - self.baseline) / abs(self.baseline) * 100:+7.1f} %"
        else:  # no relative change from 0: the difference itself
            change = f"{self.value - self.baseline:+7.4g}  "
        verdict = "REGRESSED" if self.regressed else "ok"
        return (f"{self.name:<24} {self.value:>12.4g}  baseline {self.baseline:<10.4g} limit {self.limit:<10.4g} "
                f"{change}  {verdict}")


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


def _number(value: object, what: str) -> float:
    """A finite real number as float: a NaN would never compare worse than anything, so a metric
    (or a baseline) of NaN would pass every run."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ValueError(f"{what} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, not {number}")
    return number


def _file_name(key: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_")
    if len(name) > 200:
        # Cut to fit a file name (255 bytes); two long node ids that share the first 200
        # characters (parametrized tests) must not share a file: a hash of the whole key tells them apart.
        name = name[:190] + "-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    return name + ".json"


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
        """Record one metric of this run, once. `worse`: "higher" when a larger value is a
        regression (a time, a loss), "lower" when a smaller one is (a throughput)."""
        where = f"metric {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"a metric's name must be a non-empty string, not {name!r}")
        if name in self.metrics:
            # The first value would be dropped without a word (a copy-pasted name, a loop).
            raise ValueError(f"{where} recorded twice in one test ({self.metrics[name].value:g}, then {value!r}): "
                             f"record each metric once (e.g. the median of several tries), or name them apart")
        value = _number(value, f"{where}: value")
        if worse not in ("higher", "lower"):
            raise ValueError(f"{where}: worse must be 'higher' or 'lower', not {worse!r}")
        tolerance_pct = _number(tolerance_pct, f"{where}: tolerance_pct")
        if not 0 <= tolerance_pct <= 1000:
            raise ValueError(f"{where}: tolerance_pct must be in 0..1000, not {tolerance_pct:g}")
        slack = _number(slack, f"{where}: slack")
        if slack < 0:
            # A negative slack makes the limit tighter than the baseline itself: the same value fails.
            raise ValueError(f"{where}: slack must be 0 or more (in the metric's unit), not {slack:g}")
        self.metrics[name] = Metric(value, tolerance_pct, worse, slack)

    @property
    def path(self) -> Path | None:
        return self.directory / _file_name(self.key) if self.directory else None

    def stored(self) -> dict[str, Metric] | None:
        """This test's baseline; None when it has none. Raises BaselineError naming the file
        when it is not one (hand-edited, truncated, a merge conflict)."""
        if self.path is None or not self.path.exists():
            return None
        try:
            doc = json.loads(self.path.read_text())
            metrics = doc.get("metrics") if isinstance(doc, dict) else None
            if not isinstance(metrics, dict):
                raise ValueError("no 'metrics' mapping")
            out = {}
            for name, m in metrics.items():
                where = f"metric {name!r}"
                if not isinstance(m, dict) or "value" not in m:
                    raise ValueError(f"{where} has no 'value'")
                out[name] = Metric(_number(m["value"], f"{where}: value"),
                                   _number(m.get("tolerance_pct", 10.0), f"{where}: tolerance_pct"),
                                   m.get("worse", "higher"), _number(m.get("slack", 0.0), f"{where}: slack"))
                if out[name].worse not in ("higher", "lower"):
                    raise ValueError(f"{where}: worse must be 'higher' or 'lower', not {out[name].worse!r}")
        except (OSError, ValueError) as exc:  # json's and UnicodeDecodeError are ValueErrors
            raise BaselineError(f"baseline {self.path} is not a p4netem baseline ({exc}): fix it, or delete it and "
                                f"save a new one with --p4netem-save-baseline") from None
        return out

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
