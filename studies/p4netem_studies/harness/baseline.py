"""A measured run (`p4netem measure`, `p4netem experiment run`) against a stored baseline.

The run's summary.csv has one row per condition (its `key`) with medians (`*_median` columns);
each numeric median is a metric `KEY:COLUMN`. `--save-baseline` stores them in DIR/baseline.json
(p4netem.testing's format: value, tolerance, which way is worse); `--baseline DIR` compares, and
a metric worse than its baseline by more than its tolerance is a regression (non-zero exit, a table
of what regressed). Times, counts and losses are worse when higher; rates and throughputs
(`*mbps*`, `*goodput*`, `*throughput*`, `*_per_s*`) when lower."""

from __future__ import annotations

import csv
import fnmatch
from pathlib import Path

# One error class with the pytest plugin's: a baseline.json it cannot read (not JSON, not its
# format) is reported as this run's own problems are, one `error:` line, not a traceback.
from p4netem.testing.baseline import Baseline, BaselineError, Comparison, name_width

DEFAULT_TOLERANCE_PCT = 10.0
_LOWER_IS_WORSE = ("mbps", "goodput", "throughput", "_per_s")


def parse_tolerances(items: list[str]) -> list[tuple[str, float]]:
    """`plt_ms_median=15` or `*=20` (fnmatch patterns on the column name, later items win)."""
    out = []
    for item in items:
        pattern, sep, value = item.partition("=")
        try:
            pct = float(value)
        except ValueError:
            pct = -1.0
        if not sep or not pattern or not 0 <= pct <= 1000:
            raise BaselineError(f"--tolerance {item!r}: not COLUMN=PCT with PCT in 0..1000 (e.g. plt_ms_median=15)")
        out.append((pattern, pct))
    return out


def summary_metrics(summary_csv: Path, tolerances: list[tuple[str, float]]) -> Baseline:
    if not summary_csv.exists():
        raise BaselineError(f"{summary_csv}: no summary to compare (the run wrote none)")
    b = Baseline("run")
    with open(summary_csv, newline="") as fh:
        for row in csv.DictReader(fh):
            key = row.get("key") or "run"
            for col, raw in row.items():
                if not col or not col.endswith("_median") or raw in (None, ""):
                    continue
                try:
                    value = float(raw)
                except ValueError:
                    continue
                tol = DEFAULT_TOLERANCE_PCT
                for pattern, pct in tolerances:
                    if fnmatch.fnmatchcase(col, pattern):
                        tol = pct
                worse = "lower" if any(w in col for w in _LOWER_IS_WORSE) else "higher"
                b.record(f"{key}:{col}", value, tolerance_pct=tol, worse=worse)
    return b


def check_run(out_dir: Path, baseline_dir: Path, *, save: bool,
              tolerances: list[tuple[str, float]]) -> tuple[list[Comparison], bool]:
    """Save the run's metrics as the baseline, or compare them with it: (comparisons, regressed)."""
    b = summary_metrics(Path(out_dir) / "summary.csv", tolerances)
    b.key, b.directory, b.save = "baseline", Path(baseline_dir), save
    if not save and not (Path(baseline_dir) / "baseline.json").exists():
        raise BaselineError(f"{baseline_dir}/baseline.json: no baseline; make one with --save-baseline")
    return b.finish()


def check_options(baseline_dir: Path | None, save: bool, tolerance: list[str]) -> None:
    """What the comparison after the run will need, checked before it (BaselineError naming the
    option): a malformed --tolerance, a --baseline DIR without a baseline, or one that is not a
    baseline were found only once every load had run, hours into an experiment."""
    if baseline_dir is None:
        if save:
            raise BaselineError("--save-baseline needs --baseline DIR")
        if tolerance:
            raise BaselineError("--tolerance needs --baseline DIR (it is the comparison's)")
        return
    parse_tolerances(tolerance)
    if save:
        from ..cli.run_options import check_out_dir
        check_out_dir(baseline_dir, "--baseline")
        return
    if not (Path(baseline_dir) / "baseline.json").exists():
        raise BaselineError(f"--baseline {baseline_dir}: no baseline.json there; make one with "
                            "--save-baseline")
    Baseline("baseline", directory=Path(baseline_dir)).stored()   # one that is not a baseline


def report(out_dir: Path, baseline_dir: Path | None, save: bool, tolerance: list[str], console, err) -> bool:
    """The CLI's part: check, print, and say whether the run regressed (the caller exits 1)."""
    if baseline_dir is None:
        return False
    try:
        comparisons, regressed = check_run(out_dir, baseline_dir, save=save, tolerances=parse_tolerances(tolerance))
    except BaselineError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return True
    if save:
        console.print(f"baseline saved: {Path(baseline_dir) / 'baseline.json'}", highlight=False)
        return False
    # One line per metric however wide (soft_wrap): a console that is not a terminal is 80 columns,
    # and a REGRESSED line of a long condition name was split in two on stderr (CI logs, grep).
    # The name column as wide as the longest name, on stdout and stderr alike: the lines of both
    # line up in a terminal that shows them together.
    width = name_width(comparisons)
    for c in comparisons:
        (err if c.regressed else console).print(c.line(width), markup=False, highlight=False, soft_wrap=True)
    bad = [c for c in comparisons if c.regressed]
    if bad:
        err.print(f"error: {len(bad)} of {len(comparisons)} metrics regressed against {baseline_dir}",
                  markup=False, highlight=False, soft_wrap=True)
    return bool(bad)
