"""The regression kit for users' own apps (issue 12 item 6): the example of docs/regression.md runs
as written (the file the doc shows), a baseline saved from it passes, and the same app with a
deliberately slowed server fails the comparison with a table of what regressed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from p4netem.testing import Baseline, compare
from p4netem.testing.baseline import Metric

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "regression" / "test_my_app.py"


def test_the_doc_shows_the_example_as_it_is():
    doc = (ROOT / "docs" / "regression.md").read_text()
    assert EXAMPLE.read_text().strip() in doc


def _pytest(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    # The inner session gets its own --basetemp: without one, pytest chmods /tmp/pytest-of-root
    # back to 0700 when it starts, and a lab fixture of this session that serves content from
    # there as www-data (Apache) answers 403 from then on.
    basetemp = Path(tempfile.mkdtemp(prefix="p4netem-inner-pytest-"))
    try:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                               f"--basetemp={basetemp}", str(EXAMPLE.parent), *args],
                              capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env={**os.environ, **(env or {})})
    finally:
        shutil.rmtree(basetemp, ignore_errors=True)


def test_example_passes_against_its_baseline_and_a_slowed_server_fails(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("needs root (the example builds labs)", pytrace=False)
    base = tmp_path / "baseline"
    r = _pytest("--p4netem-baseline", str(base), "--p4netem-save-baseline")
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout + r.stderr
    assert len(list(base.glob("*.json"))) == 3
    r = _pytest("--p4netem-baseline", str(base))
    assert r.returncode == 0, r.stdout + r.stderr
    # 400 ms of server work is far beyond every profile's tolerance (25 % + 30 ms).
    r = _pytest("--p4netem-baseline", str(base), env={"APP_DELAY_MS": "400"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("REGRESSED") >= 3 and "report_ms" in r.stdout, r.stdout


def test_an_app_server_that_does_not_start_fails_with_what_it_printed():
    """The page's APP_DELAY_MS=abc run: the example's fixture fails at once, and the failure shows
    the server's exit and its output (p4netem_lab's started commands)."""
    if os.geteuid() != 0:
        pytest.fail("needs root (the example builds labs)", pytrace=False)
    r = _pytest("-k", "lan", env={"APP_DELAY_MS": "abc"})
    assert r.returncode == 1, r.stdout + r.stderr
    # The short test summary's "ERROR ..." line is left out: pytest cuts it to the terminal's width,
    # so whether it still holds the message depends on where the test runs (COLUMNS, a tty).
    lines = [line for line in r.stdout.splitlines() if not line.startswith(("ERROR ", "FAILED "))
             and ("exited with code 2" in line or "EXITED with code 2" in line
                  or "invalid float value: 'abc'" in line)]
    assert len(lines) == 3, r.stdout
    doc = (ROOT / "docs" / "regression.md").read_text()
    assert lines[0].startswith("E ") and lines[0] in doc, lines
    assert "(on server): EXITED with code 2; output in " in lines[1] and lines[2] in doc, lines


def test_comparison_rules():
    base = {"t": Metric(100.0, 10.0, "higher", 5.0), "rate": Metric(50.0, 10.0, "lower")}
    ok = compare({"t": Metric(114.0), "rate": Metric(46.0)}, base)
    assert [c.regressed for c in ok] == [False, False]
    bad = compare({"t": Metric(115.1), "rate": Metric(44.9), "new": Metric(1.0)}, base)
    assert [c.regressed for c in bad] == [True, True, False] and bad[2].baseline is None
    with pytest.raises(ValueError, match="worse must be"):
        Baseline("x").record("t", 1, worse="up")
