"""Metrics of a run compared with a stored baseline, with a tolerance per metric.

A baseline is one JSON file per test (or per measured run) in a directory, named after the test
(_file_names) and recording its node id: `{"test": "tests/test_app.py::test_page[lte]", "metrics":
{"page_ms": {"value": 812.0, "tolerance_pct": 20, "worse": "higher"}}}`. A metric
regressed when it is worse than the baseline by more than its tolerance (relative, plus an optional
absolute slack for values near zero); better is never a failure. Metrics with no baseline yet are
reported as new."""

from __future__ import annotations

import hashlib
import json
import math
import os
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

    def line(self, name_width: int = 24) -> str:
        """One line of the comparison table; `name_width`: the name column's (name_width() of the
        table's comparisons, so that the columns after it line up)."""
        name = f"{self.name:<{name_width}}"
        if self.baseline is None:
            return f"{name} {self.value:>12.4g}  (new: no baseline)"
        if self.baseline:
            change = f"{(self.value - self.baseline) / abs(self.baseline) * 100:+7.1f} %"
        else:  # no relative change from 0: the difference itself
            change = f"{self.value - self.baseline:+7.4g}  "
        verdict = "REGRESSED" if self.regressed else "ok"
        return (f"{name} {self.value:>12.4g}  baseline {self.baseline:<10.4g} limit {self.limit:<10.4g} "
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


def name_width(comparisons: list[Comparison]) -> int:
    """The name column's width: the longest name's (24 at least). A fixed 24 pushed the columns of
    a longer name (`lte | h1.1 iw10 | demo:plt_ms_median`) out of line with the others."""
    return max([24, *(len(c.name) for c in comparisons)])


def table(comparisons: list[Comparison]) -> str:
    width = name_width(comparisons)
    return "\n".join(c.line(width) for c in comparisons)


def _number(value: object, what: str) -> float:
    """A finite real number as float: a NaN would never compare worse than anything, so a metric
    (or a baseline) of NaN would pass every run."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ValueError(f"{what} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, not {number}")
    return number


# A segment of a node id that the file name keeps as it is: no character the name replaces, and
# no "_" at its ends (the name strips a leading or trailing one, and "a_" + "/" + "b" would read
# as "a" + "/" + "_b").
_SEGMENT = r"[A-Za-z0-9.-](?:[A-Za-z0-9_.-]*[A-Za-z0-9.-])?"
# A plain node id: path/to/test_file.py::Class::test_name[param-ids], of such segments.
_PLAIN_ID = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*(?:::{_SEGMENT})*(?:\[{_SEGMENT}\])?")


def _digest(key: str, length: int) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:length]


def _readable_name(key: str) -> str:
    """The node id with every run of characters outside [A-Za-z0-9_.-] as one "_": the name every
    baseline had before names could carry a digest (so the files saved then are still found)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_")


def _file_names(key: str) -> tuple[str, str | None, str | None]:
    """(preferred, spare, legacy) file names of a test's baseline.

    The readable name alone loses what it replaced: `test_x[a/b]`, `test_x[a b]` and `test_x[a_b]`
    all read `test_x_a_b`, as do `test_x[lte]` and a test named `test_x_lte`, or `a/b_c.py` and
    `a_b/c.py`. So:
    - a plain node id (only `/`, `::` and one `[...]` replaced) keeps its readable name, the one
      it always had; when another test already owns that file (each file records its test's node
      id), it goes to its spare, the readable name plus "@" and a digest of the whole node id;
    - any other node id (a parameter with `/`, a space, `=`, non-ASCII...) always has the name
      with the digest; its legacy readable name is only read (a baseline saved before digests,
      when it records this node id).
    "@" never occurs in a readable name, so a name with a digest is never another test's plain
    name. A readable name longer than 200 characters is cut and given a digest of the whole node
    id (a file name has at most 255 bytes), as it always was."""
    name = _readable_name(key)
    if len(name) > 200:
        return name[:190] + "-" + _digest(key, 12) + ".json", None, None
    readable, digested = name + ".json", f"{name}@{_digest(key, 12)}.json"
    if _PLAIN_ID.fullmatch(key):
        return readable, digested, None
    return digested, None, readable


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

    def _owner(self, path: Path) -> tuple[bool, str | None]:
        """(whether `path` exists, the node id it records: None for a hand-made file without one,
        and for one that cannot be read, which counts as its preferred test's)."""
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return False, None
        except (OSError, ValueError):
            return True, None
        test = doc.get("test") if isinstance(doc, dict) else None
        return True, test if isinstance(test, str) else None

    def _candidates(self) -> list[tuple[Path, str]]:
        assert self.directory is not None
        preferred, spare, legacy = _file_names(self.key)
        return [(self.directory / name, kind) for name, kind in
                ((preferred, "preferred"), (spare, "spare"), (legacy, "legacy")) if name]

    def found(self) -> Path | None:
        """The file that holds this test's baseline; None when it has none. The preferred file
        is this test's unless it records another node id; a spare or legacy one only when it
        records this one."""
        if self.directory is None:
            return None
        for path, kind in self._candidates():
            exists, owner = self._owner(path)
            if exists and (owner == self.key or (kind == "preferred" and owner is None)):
                return path
        return None

    @property
    def path(self) -> Path | None:
        """This test's baseline file: the one that holds it, or the one a save would write."""
        if self.directory is None:
            return None
        return self.found() or self._target()[0]

    def _target(self) -> tuple[Path, bool]:
        """Where a save writes, and whether that file exists (then it is this test's): the
        preferred file unless another test owns it, else the spare."""
        for path, kind in self._candidates():
            if kind == "legacy":
                continue
            exists, owner = self._owner(path)
            if not exists or owner == self.key or (kind == "preferred" and owner is None):
                return path, exists
        preferred = self._candidates()[0][0]
        raise BaselineError(f"cannot save the baseline of {self.key}: {preferred} records another test "
                            f"({self._owner(preferred)[1]}), and so does every other name it may take")

    def _save(self) -> Path:
        """Write this test's baseline whole (a reader, or a killed run, never sees half a file),
        and never over another test's: two pytest-xdist workers may save, at the same moment,
        tests whose preferred names are one."""
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"test": self.key, "metrics": {k: m.to_dict() for k, m in self.metrics.items()}},
                          indent=2) + "\n"
        tmp = self.directory / f".{_digest(self.key, 12)}.{os.getpid()}.tmp"
        tmp.write_text(text)
        try:
            for _ in range(3):
                target, exists = self._target()
                if exists:  # this test's own file: no other test takes it
                    os.replace(tmp, target)
                    break
                try:
                    os.link(tmp, target)  # fails if another test created it since the look: look again
                    break
                except FileExistsError:
                    continue
                except OSError:  # a file system without hard links: no guard against that moment
                    os.replace(tmp, target)
                    break
            else:
                raise BaselineError(f"cannot save the baseline of {self.key} to {target}: other tests keep "
                                    f"taking its names")
        finally:
            tmp.unlink(missing_ok=True)
        for path, _ in self._candidates():
            # This test's older file under another of its names (saved while its preferred name was
            # taken, or before names had digests) is superseded: one file per test.
            if path != target and self._owner(path) == (True, self.key):
                path.unlink(missing_ok=True)
        return target

    def stored(self) -> dict[str, Metric] | None:
        """This test's baseline; None when it has none. Raises BaselineError naming the file
        when it is not one (hand-edited, truncated, a merge conflict)."""
        path = self.found()
        if path is None:
            return None
        try:
            doc = json.loads(path.read_text())
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
            raise BaselineError(f"baseline {path} is not a p4netem baseline ({exc}): fix it, or delete it and "
                                f"save a new one with --p4netem-save-baseline") from None
        return out

    def finish(self) -> tuple[list[Comparison], bool]:
        """Save or compare. Returns (the comparisons, whether anything regressed)."""
        if self.directory is None or not self.metrics:
            return [], False
        if self.save:
            self._save()
            return [], False
        stored = self.stored()
        if stored is None:
            return [Comparison(k, m.value, None, None, False) for k, m in self.metrics.items()], False
        comparisons = compare(self.metrics, stored)
        return comparisons, any(c.regressed for c in comparisons)
