"""The p4netem pytest plugin (registered as the `pytest11` entry point `p4netem`).

Fixtures (all names start with p4netem_ so they never shadow a project's own):
- `p4netem_lab`: a two-host lab: `client` (h1, 10.0.0.1, switch port 1) and `server` (h2, 10.0.0.2,
  port 2) network namespaces wired through a real p4netem-switch; `.run(host, cmd)`,
  `.start(host, cmd)` (a background server, stopped with the lab), `.controller` (the primary
  Controller), `.apply(profile)`. Needs root.
- `p4netem_profile`: the profile of `@pytest.mark.p4netem_profile("lte")` or of an indirect
  parametrization (`@pytest.mark.parametrize("p4netem_profile", ["lte", "gprs"], indirect=True)`),
  applied to the lab for the test's duration; the fixture's value is the profile's name.
- `p4netem_baseline`: `.record(name, value, tolerance_pct=10, worse="higher")`. With
  `--p4netem-baseline DIR` the test fails when a metric is worse than DIR's baseline by more than
  its tolerance (a table says what regressed); `--p4netem-save-baseline` writes DIR instead.

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
from .stalls import pytest_runtest_protocol, pytest_terminal_summary  # noqa: F401  (hooks, by name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("p4netem", "p4netem regression testing")
    group.addoption("--p4netem-baseline", metavar="DIR", default=None,
                    help="compare each test's recorded metrics with the baseline in DIR (fail on a regression)")
    group.addoption("--p4netem-save-baseline", action="store_true", default=False,
                    help="write the recorded metrics to --p4netem-baseline DIR instead of comparing")
    group.addoption("--p4netem-switch", metavar="PATH", default=None,
                    help="p4netem-switch binary for p4netem_lab (default: the build's)")
    stalls.addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "p4netem_profile(name): apply this p4netem profile for the test's duration")
    stalls.configure(config)


class UserLab:
    """What p4netem_lab yields: the two hosts and the switch's controller."""

    def __init__(self, lab, controller):
        self._lab = lab
        self.controller = controller
        self.client = lab.h1
        self.server = lab.h2
        self._procs: list[subprocess.Popen] = []

    def run(self, host, cmd: str | Sequence[str], *, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a command in `host`'s namespace and wait for it (stdout/stderr captured)."""
        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        return host.ns.run(argv, check=check, timeout=timeout)

    def start(self, host, cmd: str | Sequence[str], **popen_kwargs) -> subprocess.Popen:
        """Start a command (a server) in `host`'s namespace; stopped when the lab closes."""
        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        popen_kwargs.setdefault("stdout", subprocess.DEVNULL)
        popen_kwargs.setdefault("stderr", subprocess.DEVNULL)
        proc = host.ns.popen(argv, **popen_kwargs)
        self._procs.append(proc)
        return proc

    def apply(self, profile):
        """Apply a profile (a name, a YAML path or a Profile) to all traffic between the hosts."""
        return self.controller.apply(profile)

    def stop_all(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def p4netem_lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UserLab]:
    import os

    from p4netem.control import Controller
    from p4netem.lab import TwoHostLab

    if os.geteuid() != 0:
        pytest.skip("p4netem_lab needs root (network namespaces, raw sockets)")
    binary = request.config.getoption("--p4netem-switch")
    lab = TwoHostLab(binary=binary, log_path=tmp_path / "p4netem-switch.log").start()
    try:
        with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
            ctl.reset()  # a plain wire: the lab's own entries go, the port map stays
            user = UserLab(lab, ctl)
            try:
                yield user
            finally:
                user.stop_all()
    finally:
        lab.close()


@pytest.fixture
def p4netem_profile(request: pytest.FixtureRequest, p4netem_lab: UserLab) -> str:
    name = getattr(request, "param", None)
    if name is None:
        marker = request.node.get_closest_marker("p4netem_profile")
        if marker is None or not marker.args:
            raise pytest.UsageError("p4netem_profile needs @pytest.mark.p4netem_profile(NAME) or an indirect "
                                    "parametrization")
        name = marker.args[0]
    p4netem_lab.apply(name)
    return name if isinstance(name, str) else getattr(name, "name", str(name))


@pytest.fixture
def p4netem_baseline(request: pytest.FixtureRequest):
    from .baseline import Baseline, table

    directory = request.config.getoption("--p4netem-baseline")
    save = request.config.getoption("--p4netem-save-baseline")
    if save and not directory:
        raise pytest.UsageError("--p4netem-save-baseline needs --p4netem-baseline DIR")
    baseline = Baseline(request.node.nodeid, Path(directory) if directory else None, save=save)
    yield baseline
    comparisons, regressed = baseline.finish()
    if regressed:
        pytest.fail("p4netem baseline: regression against " + str(baseline.path) + "\n" + table(comparisons),
                    pytrace=False)
    if comparisons:  # shown with -rP
        request.node.add_report_section("teardown", "p4netem baseline", table(comparisons))
