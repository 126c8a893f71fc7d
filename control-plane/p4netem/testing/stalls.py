"""`@pytest.mark.p4netem_timing`: a test that asserts on packet timing through a real switch, run
once more when it failed while the host stalled (part of the p4netem pytest plugin).

On a VM the hypervisor may stop a virtual CPU for tens of milliseconds, and a test that checks
timing to the millisecond then fails although the switch did nothing wrong. Host-stall watchers
(p4netem.lab.hoststall: one SCHED_FIFO process per CPU, above the switch's threads) run beside
every marked test. When it fails and the watchers saw the host stop a CPU for the ini option
`p4netem_timing_stall_ms` (default 10 ms) or longer while it ran, the test runs once more, from
fresh fixtures, after the host has been quiet for `p4netem_timing_quiet_s` seconds (at most 60 s
of waiting), and that second run's result stands, whatever it is. A switch (or an application)
that is late by itself fails both runs. Every such rerun is listed at the end of the session with
its first failure and the stall, and a failure of a marked test says what the watchers saw.

Why 10 ms: p4netem's own wire tests tolerate a few milliseconds (a 10 ms gap between the slot
tests' bursts, 2 ms around a median delay); on the development VM the watchers see 2-5 ms stalls
every few seconds even when it is idle, and 10-17 ms ones about once a minute (2026-11-27).
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol

from p4netem.lab.hoststall import HostStalls, wait_until_quiet

MARKER = "p4netem_timing"
_RERUNS = pytest.StashKey[list[str]]()
REPORT_RERUN = "p4netem_timing_rerun"


def addoption(parser: pytest.Parser) -> None:
    parser.addini("p4netem_timing_stall_ms", "host stall (ms) that reruns a failed p4netem_timing test once",
                  default="10")
    parser.addini("p4netem_timing_quiet_s", "quiet seconds awaited (for at most 60 s) before that rerun",
                  default="5")


def configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: asserts on packet timing; run once more if it failed while the host stalled")
    config.stash[_RERUNS] = []


def _failed(reports: list[pytest.TestReport]) -> bool:
    return any(r.failed for r in reports)


def _run(item: pytest.Item, nextitem: pytest.Item | None) -> tuple[list[pytest.TestReport], HostStalls]:
    watch = HostStalls()
    try:
        watch.__enter__()
    except (OSError, RuntimeError) as e:
        # The test still runs, unwatched (so never rerun), and its failure says why.
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        for r in reports:
            r.sections.append(("host stalls", f"not watched: {e}"))
        return reports, watch
    try:
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    finally:
        watch.__exit__()
    return reports, watch


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker(MARKER) is None:
        return None
    stall_ns = int(float(item.config.getini("p4netem_timing_stall_ms")) * 1e6)
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports, watch = _run(item, nextitem)
    if _failed(reports) and watch.worst_ns >= stall_ns:
        first = next(r for r in reports if r.failed)
        why = watch.summary(stall_ns)
        quiet_s = float(item.config.getini("p4netem_timing_quiet_s"))
        quiet = wait_until_quiet(under_ns=stall_ns, quiet_s=quiet_s)
        item._initrequest()  # fresh fixtures for the second run (as pytest-rerunfailures does)
        reports, watch = _run(item, nextitem)
        crash = getattr(first.longrepr, "reprcrash", None)
        # On the last report, for the summary of the process that logs it (under pytest-xdist the
        # controller, not this worker: logreport below).
        line = (f"{item.nodeid}: {'FAILED' if _failed(reports) else 'passed'} on its second run; the first "
                f"failed ({crash.message.splitlines()[0] if crash else first.when}) while {why}"
                f"{'' if quiet else f'; the host was not quiet for {quiet_s:g} s within 60 s before the second run'}")
        setattr(reports[-1], REPORT_RERUN, line)
        for r in reports:
            r.sections.append(("first run, while the host stalled", f"{why}\n{first.longreprtext}"))
    for r in reports:
        if r.failed and watch.wakes:
            r.sections.append(("host stalls", watch.summary()))
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def logreport(config: pytest.Config, report: pytest.TestReport) -> None:
    """Called by the plugin's report collector for every report this process logs."""
    line = getattr(report, REPORT_RERUN, None)
    if line:
        config.stash[_RERUNS].append(line)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    reruns = config.stash.get(_RERUNS, [])
    if reruns:
        terminalreporter.section("p4netem_timing tests run again after a host stall")
        for line in reruns:
            terminalreporter.line(line)
