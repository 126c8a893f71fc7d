"""The regression kit (docs/regression.md) as a test engineer meets it on a bad day: a baseline
file that is not one, a metric that is not a number or is recorded twice, a run that fails while
saving its baseline, a baseline directory that holds nothing for these tests, a pytest killed by
SIGTERM in the middle of a test, a profile given as a YAML file or a Profile.

Each runs an inner pytest session of the real plugin (pytester); the lab ones in a subprocess,
with real namespaces and a real switch."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from p4netem.lab.owner import start_ticks
from p4netem.testing.baseline import Baseline, Comparison

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="p4netem_lab needs root (network namespaces)")


def _run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_app=textwrap.dedent(body))
    return pytester.runpytest("-p", "no:cacheprovider", *args)


RECORDS = """
    import os

    def test_app(p4netem_baseline):
        p4netem_baseline.record("load_ms", float(os.environ.get("LOAD_MS", "100")), tolerance_pct=10)
        assert os.environ.get("APP_BROKEN") != "1", "the app broke"
"""


def _baseline_file(directory: Path) -> Path:
    files = list(directory.glob("*.json"))
    assert len(files) == 1, files
    return files[0]


def test_a_baseline_file_that_is_not_one_fails_the_test_naming_the_file(pytester, tmp_path):
    base = tmp_path / "baseline"
    _run(pytester, RECORDS, f"--p4netem-baseline={base}", "--p4netem-save-baseline").assert_outcomes(passed=1)
    path = _baseline_file(base)
    for text in ("{\"metrics\": {\"load_ms\": {\"value\": 1", "<<<<<<< HEAD\n", "[]",
                 '{"metrics": {"load_ms": {"value": "fast"}}}', '{"metrics": {"load_ms": {"value": NaN}}}'):
        path.write_text(text)
        result = pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}")
        result.assert_outcomes(passed=1, errors=1)
        # One line that says which file and what to do, not a JSONDecodeError traceback.
        result.stdout.fnmatch_lines([f"*p4netem baseline: baseline {path} is not a p4netem baseline*"
                                     "--p4netem-save-baseline*"])
        result.stdout.no_fnmatch_line("*Traceback*")


@pytest.mark.parametrize("call, message", [
    ('record("m", "fast")', "metric 'm': value must be a number, not 'fast'"),
    ('record("m", float("nan"))', "metric 'm': value must be a finite number, not nan"),
    ('record("m", 1.0); p4netem_baseline.record("m", 2.0)', "metric 'm' recorded twice in one test*"),
    ('record("m", 1.0, slack=-5)', "metric 'm': slack must be 0 or more*"),
])
def test_a_metric_that_cannot_be_compared_is_refused_naming_it(pytester, tmp_path, call, message):
    # A NaN never compares worse than anything: recorded, and saved, it passed every later run.
    result = _run(pytester, f"""
        def test_app(p4netem_baseline):
            p4netem_baseline.{call}
    """, f"--p4netem-baseline={tmp_path / 'b'}", "--p4netem-save-baseline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*ValueError: {message}"])
    assert not (tmp_path / "b").exists()


def test_a_test_that_fails_does_not_save_its_metrics_as_the_baseline(pytester, tmp_path, monkeypatch):
    base = tmp_path / "baseline"
    _run(pytester, RECORDS, f"--p4netem-baseline={base}", "--p4netem-save-baseline").assert_outcomes(passed=1)
    saved = _baseline_file(base).read_text()
    # A broken, slow run while saving: its numbers must not become the reference.
    monkeypatch.setenv("LOAD_MS", "900")
    monkeypatch.setenv("APP_BROKEN", "1")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}", "--p4netem-save-baseline")
    result.assert_outcomes(failed=1)
    assert _baseline_file(base).read_text() == saved
    result.stdout.fnmatch_lines(["*p4netem baseline*", "1 test(s) not saved to *: the test did not pass*",
                                 "  test_app.py::test_app"])


@pytest.mark.parametrize("args, message", [
    (["--p4netem-save-baseline"], "--p4netem-save-baseline needs --p4netem-baseline DIR*"),
    (["--p4netem-baseline=test_app.py"], "--p4netem-baseline test_app.py: not a directory*"),
    (["--p4netem-switch=/nonexistent/p4netem-switch"], "--p4netem-switch /nonexistent/p4netem-switch: no such file*"),
])
def test_an_option_that_cannot_work_is_a_usage_error_before_any_test_runs(pytester, args, message):
    # Not an error in each test at its teardown, after a whole (long) session.
    result = _run(pytester, RECORDS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    result.stdout.no_fnmatch_line("*test_app*")


def test_tests_without_a_baseline_are_listed_at_the_end(pytester, tmp_path):
    # A typo in the directory, or a run from another rootdir (other node ids), passes every test as
    # new: the end of the output says so, test by test.
    result = _run(pytester, RECORDS, f"--p4netem-baseline={tmp_path / 'typo'}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*p4netem baseline*", f"1 test(s) with no baseline in {tmp_path / 'typo'} "
                                 "(passed as new):", "  test_app.py::test_app"])
    base = tmp_path / "baseline"
    pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}", "--p4netem-save-baseline")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*no baseline*")


def test_long_node_ids_that_differ_only_at_the_end_get_files_of_their_own(tmp_path):
    # Parametrized tests with long ids: cut to a file name's length, they shared one file and
    # overwrote each other's baseline.
    stem = "tests/network/test_download.py::test_page_load_time_" + "under_a_long_descriptive_name_" * 6
    files = {Baseline(f"{stem}[{p}]", tmp_path).path for p in ("lte", "hspa")}
    assert len(files) == 2 and all(len(f.name) <= 255 for f in files), files


COLLIDING = """
    import os, pytest

    VALUES = {"a/b": 100.0, "a_b": 200.0, "a b": 300.0, "x": 400.0}

    def value(what):  # a bump makes exactly this test regress against its own baseline
        return VALUES[what] * (1.5 if os.environ.get("BUMP") == what else 1.0)

    @pytest.mark.parametrize("p", ["a/b", "a_b", "a b"])
    def test_x(p, p4netem_baseline):
        p4netem_baseline.record("m", value(p))

    def test_x_a_b(p4netem_baseline):  # a plain id whose readable name is test_x[a_b]'s
        p4netem_baseline.record("m", value("x"))
"""


def test_node_ids_that_read_alike_get_baselines_of_their_own(pytester, tmp_path, monkeypatch):
    # "/", " " and "[...]" all became "_": the four tests shared one file, the last save won, and
    # the others were compared with its numbers (a regression of test_x[a/b] passed unseen).
    base = tmp_path / "baseline"
    _run(pytester, COLLIDING, f"--p4netem-baseline={base}", "--p4netem-save-baseline").assert_outcomes(passed=4)
    files = sorted(base.glob("*.json"))
    owners = {json.loads(f.read_text())["test"] for f in files}
    assert len(files) == 4 and len(owners) == 4, files
    # A plain id keeps the name it always had (users' saved baselines are still found).
    assert (base / "test_app.py_test_x_a_b.json").exists(), files
    for bumped in ("a/b", "a b", "x"):
        monkeypatch.setenv("BUMP", bumped)
        result = pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}")
        result.assert_outcomes(passed=4, errors=1)
        nodeid = "test_app.py::test_x_a_b" if bumped == "x" else f"test_app.py::test_x[{bumped}]"
        result.stdout.fnmatch_lines(["*p4netem baseline*", f"1 test(s) regressed against {base}*", f"  {nodeid}"])
    # Saved again, each test still has one file, its own.
    pytester.runpytest("-p", "no:cacheprovider", f"--p4netem-baseline={base}", "--p4netem-save-baseline")
    assert sorted(base.glob("*.json")) == files


def test_baseline_file_names_stay_readable_and_find_the_files_saved_before(tmp_path):
    # The names the doc shows, and those of users' baselines, for plain ids.
    assert Baseline("examples/regression/test_my_app.py::test_report_download[lan]", tmp_path).path.name == \
        "examples_regression_test_my_app.py_test_report_download_lan.json"
    assert Baseline("tests/test_a.py::TestX::test_y", tmp_path).path.name == "tests_test_a.py_TestX_test_y.json"
    # Another id carries a digest of itself after the readable part, the same on every machine.
    odd = Baseline("test_app.py::test_x[a/b]", tmp_path)
    assert odd.path.name == "test_app.py_test_x_a_b@" + hashlib.sha256(odd.key.encode()).hexdigest()[:12] + ".json"
    # Its baseline saved under the readable name before (the file records whose it is) still counts,
    # and a save moves it to its own name.
    legacy = tmp_path / "test_app.py_test_x_a_b.json"
    legacy.write_text(json.dumps({"test": odd.key, "metrics": {"m": {"value": 100.0}}}))
    odd.record("m", 200.0)
    comparisons, regressed = odd.finish()
    assert regressed and comparisons[0].baseline == 100.0 and odd.path == legacy
    Baseline(odd.key, tmp_path, save=True, metrics=dict(odd.metrics)).finish()
    assert not legacy.exists() and odd.found() == odd.path != legacy
    # A hand-made file without "test" is the baseline of the test whose name it has.
    (tmp_path / "t.py_test_z.json").write_text('{"metrics": {"m": {"value": 1}}}')
    assert Baseline("t.py::test_z", tmp_path).stored()["m"].value == 1


def test_a_change_from_a_baseline_of_zero_is_shown_as_a_difference():
    line = Comparison("losses", 3.0, 0.0, 1.0, True).line()
    assert "inf" not in line and "+3" in line and line.endswith("REGRESSED"), line
    assert "inf" not in Comparison("losses", 0.0, 0.0, 1.0, False).line()


# ---- with a lab -------------------------------------------------------------------------------


@needs_root
def test_a_pytest_stopped_by_sigterm_mid_test_leaves_no_lab(pytester, tmp_path):
    """A CI job's timeout sends SIGTERM: pytest dies without teardown; the lab (namespaces, the
    switch in its own session, the test's server) must still go, and the job's log say so."""
    run_dir = tmp_path / "run"  # the inner session's lab records, and only they, are cleaned below
    ready = tmp_path / "ready.json"
    pytester.makepyfile(test_app=textwrap.dedent(f"""
        import json, os, sys, time

        def test_app(p4netem_lab):
            server = p4netem_lab.start(p4netem_lab.server, [sys.executable, "-m", "http.server", "8000"])
            open({str(ready)!r} + ".tmp", "w").write(json.dumps({{
                "namespaces": [p4netem_lab.client.ns.name, p4netem_lab.server.ns.name],
                "pids": [server.pid, p4netem_lab._lab.switch.proc.pid]}}))
            os.rename({str(ready)!r} + ".tmp", {str(ready)!r})
            time.sleep(300)
    """))
    env = {**os.environ, "P4NETEM_RUN_DIR": str(run_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             f"--basetemp={tmp_path / 'inner'}", str(pytester.path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    made = None
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        made = json.loads(ready.read_text())
        made["ticks"] = {pid: start_ticks(pid) for pid in made["pids"]}  # a pid used again is not theirs
        proc.send_signal(signal.SIGTERM)
        # To its end: the reaper, which says what it removed on the session's stderr, holds it.
        output = proc.communicate(timeout=60)[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_namespaces(made) or _alive(made)):
            time.sleep(0.2)
        assert not _namespaces(made) and not _alive(made), (made, _namespaces(made), _alive(made))
        assert not list(run_dir.glob("*.json")), list(run_dir.iterdir())
        # The user sees what was removed: the reaper wrote it to pytest's capture file before, which
        # nobody read once pytest was dead.
        reaped = [line for line in output.splitlines() if line.startswith(f"p4netem lab reaper (owner pid {proc.pid} ")]
        assert len(reaped) == 1 and "removed 2 namespace(s)" in reaped[0], output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        from p4netem.lab.owner import clean_dead_labs

        clean_dead_labs(run_dir)  # what the reaper did not (without the fix: all of it)


def _namespaces(made: dict) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return [ns for ns in made["namespaces"] if ns in listed]


def _alive(made: dict) -> list[int]:
    return [pid for pid in made["pids"] if made["ticks"][pid] is not None and start_ticks(pid) == made["ticks"][pid]]


@needs_root
def test_the_profile_fixture_is_the_profile_name_for_a_file_and_a_profile(pytester, tmp_path):
    (tmp_path / "lossy.yaml").write_text("name: lossy-five\nboth: {delay: 5ms, loss: 5%}\n")
    result = _lab_session(pytester, tmp_path, f"""
        import pytest
        from p4netem.profiles import builtin_profile

        mine = builtin_profile("lte").model_copy(update={{"name": "my-lte"}})

        @pytest.mark.parametrize("p4netem_profile, name", [("lan", "lan"), ({str(tmp_path / 'lossy.yaml')!r},
                                 "lossy-five"), (mine, "my-lte")], indirect=["p4netem_profile"])
        def test_app(p4netem_lab, p4netem_profile, name):
            assert p4netem_profile == name
            assert [r.profile_name for r in p4netem_lab.controller.applied()] == [name]
    """, "-v")
    result.assert_outcomes(passed=3)
    # The ids (and so the baseline files) name the profile, not its place in the list or the
    # checkout's absolute path.
    result.stdout.fnmatch_lines(["*test_app[[]lan-lan] PASSED*", "*test_app[[]lossy.yaml-lossy-five] PASSED*",
                                 "*test_app[[]my-lte-my-lte] PASSED*"])


def _lab_session(pytester: pytest.Pytester, tmp_path: Path, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_app=textwrap.dedent(body))
    # Its own --basetemp: a pytest that starts chmods /tmp/pytest-of-root (see test_regression_kit).
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}", *args,
                                         timeout=300)


@needs_root
def test_a_failed_test_says_which_started_server_exited_and_what_it_printed(pytester, tmp_path):
    result = _lab_session(pytester, tmp_path, """
        import sys

        def test_app(p4netem_lab):
            bad = p4netem_lab.start(p4netem_lab.server, [sys.executable, "-c",
                                                         "import sys; sys.exit('app: no such option --prot')"])
            p4netem_lab.start(p4netem_lab.server, "sleep 60")
            bad.wait(timeout=60)  # gone before the client tries (as a test that polls for its server sees it)
            r = p4netem_lab.run(p4netem_lab.client, "curl -s -m 2 http://10.0.0.2:8000/", check=False)
            assert r.returncode == 0, "the app does not answer"
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*p4netem_lab: started commands*",
        f"{sys.executable} -c * (on server): EXITED with code 1; output in *p4netem-start-1-*.log",
        "    app: no such option --prot",
        "sleep 60 (on server): running; output in *",
    ])


STALL_CPU = Path(__file__).resolve().parents[1] / "tools" / "stallcpu.py"


@needs_root
def test_a_timing_test_rerun_after_a_stall_saves_its_second_run_and_lists_nothing(pytester, tmp_path):
    """p4netem_timing: the first run fails while a CPU is held (a real SCHED_FIFO stall above the
    watchers), the rerun passes; the baseline holds the second run's value, and the end of the
    output does not call the test unsaved."""
    from p4netem.lab.hoststall import PRIORITY

    pytester.makeini("[pytest]\np4netem_timing_quiet_s = 0.3\n")
    result = _lab_session(pytester, tmp_path, f"""
        import pathlib, subprocess, sys
        import pytest

        @pytest.mark.p4netem_timing
        @pytest.mark.p4netem_profile("lan")
        def test_rtt(p4netem_lab, p4netem_profile, p4netem_baseline):
            p4netem_lab.run(p4netem_lab.client, "ping -c 1 10.0.0.2")
            ran = pathlib.Path(__file__).with_name("ran-once")
            p4netem_baseline.record("rtt_ms", 1.0 if ran.exists() else 999.0)
            if not ran.exists():
                ran.write_text("")
                subprocess.run([sys.executable, {str(STALL_CPU)!r}, "{min(os.sched_getaffinity(0))}", "40",
                                "{PRIORITY + 10}"], check=True)
                assert False, "late on the first run"
    """, f"--p4netem-baseline={tmp_path / 'b'}", "--p4netem-save-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_rtt: passed on its second run*"])
    result.stdout.no_fnmatch_line("*not saved*")
    assert json.loads(_baseline_file(tmp_path / "b").read_text())["metrics"]["rtt_ms"]["value"] == 1.0


@needs_root
def test_a_server_that_daemonized_does_not_outlive_its_lab(pytester, tmp_path):
    """nginx, `iperf3 -s -D`, `cmd &`: the process start() knows exits at once and the server
    runs on in the host's namespace; it must end with the lab, not run on in a deleted namespace."""
    pids = tmp_path / "pids"
    result = _lab_session(pytester, tmp_path, f"""
        def test_app(p4netem_lab):
            p4netem_lab.start(p4netem_lab.server, ["sh", "-c", "sleep 300 & echo $! >> {pids}"]).wait(timeout=60)
            p4netem_lab.run(p4netem_lab.client, ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $! >> {pids}"])
    """)
    result.assert_outcomes(passed=1)
    daemons = [int(p) for p in pids.read_text().split()]

    def ours(pid: int) -> bool:  # still that sleep (not a pid used again since)
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00300\x00"
        except OSError:
            return False

    try:
        assert len(daemons) == 2 and not [p for p in daemons if ours(p)], daemons
    finally:
        for pid in daemons:  # without the fix: still running
            if ours(pid):
                os.kill(pid, signal.SIGKILL)


@needs_root
def test_a_command_that_fails_under_check_shows_its_stdout_too(pytester, tmp_path):
    # Many clients say what went wrong on stdout: the error showed only an empty stderr.
    result = _lab_session(pytester, tmp_path, """
        import sys

        def test_app(p4netem_lab):
            p4netem_lab.run(p4netem_lab.client, [sys.executable, "-c",
                                                 "print('download failed: HTTP 503'); raise SystemExit(3)"])
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E *LabError: command failed (3) on client: * -c *", "E *stdout:",
                                 "E *   download failed: HTTP 503"])
