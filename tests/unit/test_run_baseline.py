"""`measure`/`experiment run --baseline DIR` (issue 12 item 6): a run's summary.csv medians against a
stored baseline, with a tolerance per column and the right direction for times and rates."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from p4netem_studies.harness.baseline import BaselineError, check_run, parse_tolerances


def _summary(d: Path, rows: list[dict]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return d


def test_save_then_compare(tmp_path):
    base = tmp_path / "baseline"
    run1 = _summary(tmp_path / "r1", [{"key": "lte/h2/iw10", "plt_ms_median": "1000", "goodput_mbps_median": "8",
                                       "profile": "lte", "plt_ms_q1": "900"}])
    assert check_run(run1, base, save=True, tolerances=[]) == ([], False)
    assert (base / "baseline.json").exists()
    # Within 10 % (times higher, rates lower): no regression.
    ok = _summary(tmp_path / "r2", [{"key": "lte/h2/iw10", "plt_ms_median": "1090", "goodput_mbps_median": "7.3"}])
    comparisons, regressed = check_run(ok, base, save=False, tolerances=[])
    assert not regressed and {c.name for c in comparisons} == {"lte/h2/iw10:plt_ms_median",
                                                                  "lte/h2/iw10:goodput_mbps_median"}
    slow = _summary(tmp_path / "r3", [{"key": "lte/h2/iw10", "plt_ms_median": "1200", "goodput_mbps_median": "9"}])
    comparisons, regressed = check_run(slow, base, save=False, tolerances=[])
    assert regressed and [c.name for c in comparisons if c.regressed] == ["lte/h2/iw10:plt_ms_median"]
    # The tolerance is the one stored with the baseline: save with 25 % and 1200 passes.
    check_run(run1, base, save=True, tolerances=parse_tolerances(["plt_*=25"]))
    assert not check_run(slow, base, save=False, tolerances=[])[1]


def test_errors_are_named(tmp_path):
    with pytest.raises(BaselineError, match="--tolerance 'plt_ms_median': not COLUMN=PCT"):
        parse_tolerances(["plt_ms_median"])
    with pytest.raises(BaselineError, match="0..1000"):
        parse_tolerances(["x=-1"])
    run = _summary(tmp_path / "r", [{"key": "a", "plt_ms_median": "1"}])
    with pytest.raises(BaselineError, match="no baseline; make one with --save-baseline"):
        check_run(run, tmp_path / "none", save=False, tolerances=[])
    with pytest.raises(BaselineError, match="no summary"):
        check_run(tmp_path / "empty", tmp_path / "none", save=True, tolerances=[])


def test_a_damaged_baseline_is_one_error_line(tmp_path):
    from rich.console import Console

    from p4netem_studies.harness.baseline import report

    run = _summary(tmp_path / "r", [{"key": "lte/h2/iw10", "plt_ms_median": "1000"}])
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "baseline.json").write_text("{ not json")
    console, err = Console(record=True, width=200), Console(record=True, width=200)
    assert report(run, tmp_path / "b", False, [], console, err) is True  # the caller exits 1
    text = err.export_text()
    assert text.startswith("error: ") and "baseline.json" in text and "Traceback" not in text, text


def test_each_comparison_is_one_line_on_an_80_column_console(tmp_path):
    """stderr is not a terminal in CI: rich's 80 columns split a REGRESSED line of a long condition
    name in two (`... limit` / `291.9  +17.4 %  REGRESSED`), so a grep for the metric missed its verdict."""
    from rich.console import Console

    from p4netem_studies.harness.baseline import report

    key = "lte | h1.1 iw10 | demo"
    base = tmp_path / "b"
    check_run(_summary(tmp_path / "r1", [{"key": key, "plt_ms_median": "265.4", "loader_elapsed_ms_median": "266.6"}]),
              base, save=True, tolerances=[])
    slow = _summary(tmp_path / "r2", [{"key": key, "plt_ms_median": "311.5", "loader_elapsed_ms_median": "270"}])
    console, err = Console(record=True, width=80), Console(record=True, width=80)
    assert report(slow, base, False, [], console, err) is True
    out, errors = console.export_text().splitlines(), err.export_text().splitlines()
    assert [line for line in errors if "plt_ms_median" in line] == [
        next(line for line in errors if "REGRESSED" in line)], errors
    assert len(errors) == 2 and errors[1].startswith("error: 1 of 2 metrics regressed"), errors
    assert len(out) == 1 and out[0].startswith(f"{key}:loader_elapsed_ms_median") and out[0].endswith("ok"), out


def test_the_columns_line_up_for_long_condition_names(tmp_path):
    """The name column was 24 wide whatever the names: a longer one (most `KEY:COLUMN` names of a
    real run are) pushed its value, baseline, limit and verdict to the right of the other lines'.
    Now it is as wide as the longest name, on stdout and stderr alike, and each line stays one
    line on an 80-column console (soft_wrap)."""
    from rich.console import Console

    from p4netem.testing.baseline import table
    from p4netem_studies.harness.baseline import report

    keys = ["lte", "lte | h1.1 iw10 | demo", "5g-mmwave-blockage | h2 iw32 | a-very-long-page-name"]
    base = tmp_path / "b"
    check_run(_summary(tmp_path / "r1", [{"key": k, "plt_ms_median": "265.4", "goodput_mbps_median": "8"}
                                         for k in keys]), base, save=True, tolerances=[])
    run = _summary(tmp_path / "r2", [{"key": k, "plt_ms_median": "311.5" if i == 1 else "266",
                                      "goodput_mbps_median": "8.1"} for i, k in enumerate(keys)]
                   + [{"key": "new-condition", "plt_ms_median": "12345.6", "goodput_mbps_median": "0.5"}])
    console, err = Console(record=True, width=80), Console(record=True, width=80)
    assert report(run, base, False, [], console, err) is True
    lines = console.export_text().splitlines() + [line for line in err.export_text().splitlines()
                                                  if not line.startswith("error: ")]
    names = [f"{k}:{col}" for k in [*keys, "new-condition"] for col in ("plt_ms_median", "goodput_mbps_median")]
    assert len(lines) == len(names), lines  # one line per metric, none split
    assert sum(line.endswith("REGRESSED") for line in lines) == 1
    width = max(map(len, names))
    for line in lines:
        # The name, padded to the longest; then the value right-aligned in 12 columns, two spaces.
        assert line[:width].rstrip() in names and line[width] == " ", line
        assert line[width + 12] != " " and line[width + 13:width + 15] == "  ", line
    for word in (" baseline ", " limit "):
        assert len({line.index(word) for line in lines if word in line}) == 1, lines
    # The pytest plugin's table (p4netem.testing.baseline) lines up the same way.
    comparisons, _ = check_run(run, base, save=False, tolerances=[])
    assert len({line.index(" baseline ") for line in table(comparisons).splitlines() if " baseline " in line}) == 1
