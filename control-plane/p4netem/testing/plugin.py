"""The p4netem pytest plugin (registered as the `pytest11` entry point `p4netem`).

Fixtures (all names start with p4netem_ so they never shadow a project's own):
- `p4netem_lab`: a two-host lab: `client` (h1, 10.0.0.1, switch port 1) and `server` (h2, 10.0.0.2,
  port 2) network namespaces wired through a real p4netem-switch; `.run(host, cmd)`,
  `.start(host, cmd)` (a background server, stopped with the lab; a failed test lists what became
  of them), `.controller` (the primary Controller), `.apply(profile)`. Needs root. This process's
  lab reaper (p4netem.lab.reaper) removes the lab when pytest is killed without a teardown, and
  says so on pytest's stderr.
- `p4netem_profile`: the profile of `@pytest.mark.p4netem_profile("lte")` or of an indirect
  parametrization (`@pytest.mark.parametrize("p4netem_profile", ["lte", "gprs"], indirect=True)`),
  applied to the lab for the test's duration; the fixture's value is the profile's name.
- `p4netem_baseline`: `.record(name, value, tolerance_pct=10, worse="higher", slack=0)`. With
  `--p4netem-baseline DIR` the test fails when a metric is worse than DIR's baseline by more than
  its tolerance (a table says what regressed); `--p4netem-save-baseline` writes DIR instead, for
  the tests that passed. The session's end lists the tests that regressed, those without a
  baseline and those not saved (under pytest-xdist once, in the controller's output, for every
  worker's tests).

Marker `@pytest.mark.p4netem_timing`: the test asserts on packet timing; when it fails while the
host stopped a CPU for 10 ms or more, it runs once more (stalls.py).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from . import stalls
from .stalls import pytest_runtest_protocol  # noqa: F401  (a hook, by name)

# The reports of a test's phases so far ("setup", "call"): a baseline is saved only from a test
# that passed, and a failure gets the story of the servers it started.
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
# What the end-of-session summary says about baselines: node id -> "regressed", "new" or "unsaved".
# A test's word rides on its teardown report (the attribute REPORT_NOTE), and the session's
# collector (_Notes) takes it from the reports it logs: under pytest-xdist a worker's stash never
# reaches the controller, which shows the summary, but every report does. Only the reports of a
# test's last run are logged, so a p4netem_timing rerun that passed and saved has the last word.
_BASELINE_NOTES = pytest.StashKey[dict[str, str]]()
_NOTE = pytest.StashKey[str]()  # the word of this run of the test, for its teardown report
REPORT_NOTE = "p4netem_baseline"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("p4netem", "p4netem regression testing")
    group.addoption("--p4netem-baseline", metavar="DIR", default=None,
                    help="compare each test's recorded metrics with the baseline in DIR (fail on a regression)")
    group.addoption("--p4netem-save-baseline", action="store_true", default=False,
                    help="write the recorded metrics of the tests that pass to --p4netem-baseline DIR "
                         "instead of comparing")
    group.addoption("--p4netem-switch", metavar="PATH", default=None,
                    help="p4netem-switch binary for p4netem_lab (default: the build's)")
    stalls.addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "p4netem_profile(name): apply this p4netem profile for the test's duration")
    # Before any test runs: otherwise a whole (long) session would run and then error in every
    # test that records a metric.
    if config.getoption("--p4netem-save-baseline") and not config.getoption("--p4netem-baseline"):
        raise pytest.UsageError("--p4netem-save-baseline needs --p4netem-baseline DIR (where to write)")
    directory = config.getoption("--p4netem-baseline")
    if directory and Path(directory).exists() and not Path(directory).is_dir():
        raise pytest.UsageError(f"--p4netem-baseline {directory}: not a directory (one JSON file per test goes there)")
    switch = config.getoption("--p4netem-switch")
    if switch and not Path(switch).is_file():
        raise pytest.UsageError(f"--p4netem-switch {switch}: no such file (a built p4netem-switch binary, "
                                f"e.g. dataplane/target/release/p4netem-switch after `make build`)")
    config.stash[_BASELINE_NOTES] = {}
    stalls.configure(config)
    config.pluginmanager.register(_Notes(config), "p4netem-notes")


class _Notes:
    """Collects the baseline words and the p4netem_timing reruns from the reports this process
    logs (all of them: a plain session's, or the reports of every xdist worker in the controller)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        note = getattr(report, REPORT_NOTE, None)
        if note:
            self.config.stash[_BASELINE_NOTES][report.nodeid] = note
        stalls.logreport(self.config, report)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A p4netem_profile parameter's test id is the profile's name (a Profile) or the file's name (a
    YAML path), not pytest's positional `p4netem_profile2` or a whole absolute path: the id names
    the test's baseline file, which must not change when the list is reordered or the checkout
    moves."""
    if argname != "p4netem_profile":
        return None
    from p4netem.profiles import Profile

    if isinstance(val, Profile):
        return val.name
    if isinstance(val, (str, Path)) and Path(val).suffix in (".yaml", ".yml"):
        return Path(val).name
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if not any(name.startswith("p4netem_") for name in getattr(item, "fixturenames", ())):
        return report
    if report.when == "setup":  # a run's first report (a p4netem_timing rerun starts afresh)
        item.stash[_REPORTS] = {}
        if _NOTE in item.stash:
            del item.stash[_NOTE]
    if report.when == "teardown":  # the fixtures are done with them: not kept for the whole session
        item.stash.setdefault(_REPORTS, {}).clear()
        if _NOTE in item.stash:
            setattr(report, REPORT_NOTE, item.stash[_NOTE])
            del item.stash[_NOTE]
    else:
        item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    stalls.pytest_terminal_summary(terminalreporter, exitstatus, config)
    notes = config.stash.get(_BASELINE_NOTES, {})
    if not notes:
        return
    # A baseline directory that is not the one saved to (a typo, another rootdir, so other node
    # ids) would otherwise pass every test as new without a word.
    directory = config.getoption("--p4netem-baseline")
    terminalreporter.section("p4netem baseline")
    headers = {"regressed": f"regressed against {directory} (each fails with its table above):",
               "new": f"with no baseline in {directory} (passed as new):",
               "unsaved": f"not saved to {directory}: the test did not pass (its old baseline, if any, stays):"}
    for what, header in headers.items():
        # Sorted: the same list whichever xdist worker finished first.
        ids = sorted(nodeid for nodeid, kind in notes.items() if kind == what)
        if ids:
            terminalreporter.line(f"{len(ids)} test(s) {header}")
            for nodeid in ids:
                terminalreporter.line(f"  {nodeid}")


class UserLab:
    """What p4netem_lab yields: the two hosts and the switch's controller."""

    def __init__(self, lab, controller, log_dir: Path):
        self._lab = lab
        self.controller = controller
        self.client = lab.h1
        self.server = lab.h2
        self._log_dir = log_dir
        self._procs: list[tuple[subprocess.Popen, str, Path | None]] = []  # (process, what, its log)

    def _name(self, host) -> str:
        return "client" if host is self.client else "server"

    def run(self, host, cmd: str | Sequence[str], *, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a command in `host`'s namespace and wait for it (stdout/stderr captured). With
        `check`, a non-zero exit raises LabError with the command, its stderr and its stdout."""
        from p4netem.lab import LabError

        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        done = host.ns.run(argv, check=False, timeout=timeout)
        if check and done.returncode != 0:
            # Its stdout too: many clients say what went wrong there, not on stderr.
            out = [f"command failed ({done.returncode}) on {self._name(host)}: {shlex.join(argv)}"]
            for name, text in (("stderr", done.stderr), ("stdout", done.stdout)):
                lines = text.strip().splitlines()
                if lines:
                    out += [f"{name}{' (its end)' if len(lines) > 20 else ''}:"] + [f"  {x}" for x in lines[-20:]]
            raise LabError("\n".join(out))
        return done

    def start(self, host, cmd: str | Sequence[str], **popen_kwargs) -> subprocess.Popen:
        """Start a command (a server) in `host`'s namespace; stopped when the lab closes. Its
        output goes to a log in the test's tmp_path (unless stdout/stderr are given), and a test
        that fails is told which of its servers had exited and how."""
        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        what = f"{shlex.join(argv)} (on {self._name(host)})"
        log = None
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
        if "stdout" not in popen_kwargs and "stderr" not in popen_kwargs:
            log = self._log_dir / f"p4netem-start-{len(self._procs) + 1}-{Path(argv[0]).name}.log"
            with open(log, "wb") as out:  # the child holds its own copy of the descriptor
                proc = host.ns.popen(argv, stdout=out, stderr=subprocess.STDOUT, **popen_kwargs)
        else:
            popen_kwargs.setdefault("stdout", subprocess.DEVNULL)
            popen_kwargs.setdefault("stderr", subprocess.DEVNULL)
            proc = host.ns.popen(argv, **popen_kwargs)
        self._procs.append((proc, what, log))
        return proc

    def story(self) -> str:
        """What became of the started commands, for a failed test: a server that exited at once
        (a wrong option, a port in use) otherwise shows only as a client that cannot connect."""
        lines = []
        for proc, what, log in self._procs:
            code = proc.poll()
            lines.append(f"{what}: " + ("running" if code is None else f"EXITED with code {code}")
                         + (f"; output in {log}" if log else ""))
            if code is not None and log is not None:
                tail = log.read_text(errors="replace").splitlines()[-15:]
                lines += [f"    {line}" for line in tail] or ["    (no output)"]
        return "\n".join(lines)

    def apply(self, profile):
        """Apply a profile (a name, a YAML path or a Profile) to all traffic between the hosts."""
        return self.controller.apply(profile)

    def stop_all(self) -> None:
        # What else runs in the hosts (a server that daemonized) goes with the lab (Resources.close).
        for proc, _, _ in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def p4netem_lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UserLab]:
    import contextlib
    import os

    from p4netem.control import Controller
    from p4netem.lab import TwoHostLab, reaper

    if os.geteuid() != 0:
        pytest.skip("p4netem_lab needs root (network namespaces, raw sockets)")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    try:
        # A session stopped by SIGTERM (a CI job's timeout) or SIGKILL runs no teardown: this
        # process's reaper removes its labs (namespaces, switch, servers) the moment it exits, and
        # says what it removed on the stderr it inherits. Started under pytest's capture, that was
        # the capture's temporary file, which nobody reads once pytest is dead: it gets the
        # session's own stderr instead (the terminal, the CI job's log; under pytest-xdist a
        # worker's, which is the controller's).
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reaper.watch_this_process()
    except OSError as exc:
        import warnings

        warnings.warn(f"{exc}: a lab of a pytest killed mid-test stays until `p4netem lab clean`", stacklevel=1)
    binary = request.config.getoption("--p4netem-switch")
    lab = TwoHostLab(binary=binary, log_path=tmp_path / "p4netem-switch.log").start()
    try:
        with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
            ctl.reset()  # a plain wire: the lab's own entries go, the port map stays
            user = UserLab(lab, ctl, tmp_path)
            try:
                yield user
            finally:
                failed = [r for r in request.node.stash.get(_REPORTS, {}).values() if r.failed]
                if failed and user._procs:
                    # Onto the report that is shown as the failure (its sections are printed with it).
                    failed[0].sections.append(("p4netem_lab: started commands", user.story()))
                user.stop_all()
    finally:
        lab.close()


@pytest.fixture
def p4netem_profile(request: pytest.FixtureRequest) -> str:
    profile = getattr(request, "param", None)
    if profile is None:
        marker = request.node.get_closest_marker("p4netem_profile")
        if marker is None or not marker.args:
            pytest.fail("p4netem_profile needs @pytest.mark.p4netem_profile(NAME) or "
                        "@pytest.mark.parametrize(\"p4netem_profile\", [...], indirect=True)", pytrace=False)
        profile = marker.args[0]
    p4netem_lab: UserLab = request.getfixturevalue("p4netem_lab")  # after the check: a lab takes a second
    p4netem_lab.apply(profile)
    # The profile's own name, whether it came as a name, a YAML file or a Profile.
    return p4netem_lab.controller.resolve_profile(profile).name


@pytest.fixture
def p4netem_baseline(request: pytest.FixtureRequest):
    from .baseline import Baseline, BaselineError, table

    directory = request.config.getoption("--p4netem-baseline")
    save = request.config.getoption("--p4netem-save-baseline")
    baseline = Baseline(request.node.nodeid, Path(directory) if directory else None, save=save)
    yield baseline
    if save and baseline.metrics:
        call = request.node.stash.get(_REPORTS, {}).get("call")
        if call is None or not call.passed:
            # A failed (or skipped) run's numbers must not become the reference for the next ones.
            request.node.stash[_NOTE] = "unsaved"
            return
    try:
        comparisons, regressed = baseline.finish()
        unusable = ""
    except BaselineError as exc:
        comparisons, regressed, unusable = [], False, str(exc)
    if unusable:  # failed outside the except: its traceback would say nothing more
        pytest.fail(f"p4netem baseline: {unusable}", pytrace=False)
    if comparisons and not save and baseline.found() is None:
        request.node.stash[_NOTE] = "new"
    if regressed:
        request.node.stash[_NOTE] = "regressed"
        pytest.fail("p4netem baseline: regression against " + str(baseline.path) + "\n" + table(comparisons),
                    pytrace=False)
    if comparisons:  # shown with -rP
        request.node.add_report_section("teardown", "p4netem baseline", table(comparisons))
