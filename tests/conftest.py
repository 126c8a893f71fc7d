"""Fixtures shared by every test suite.

`lab`: a fresh TwoHostLab per test: namespaces h1 (10.0.0.1) and h2 (10.0.0.2) wired through a
p4netem-switch (h1 on port 1, h2 on port 2), a primary P4Runtime client (`lab.client`) that pushed
the P4Info, port_map 1->2 and 2->1, and classifier entries putting port-1 traffic in profile
LAB_PROFILE uplink and port-2 traffic in LAB_PROFILE downlink. Set impairments with
`lab.impair(direction, delay_ns=..., ...)`, read counters with `lab.counters(direction)`.

`p4info`: the checked-in P4Info (p4src/p4netem.p4info.txtpb), parsed.

When a test that used the lab fails, the end of the switch's log is printed with the failure.

`@pytest.mark.p4netem_timing` (the p4netem plugin's, p4netem/testing/stalls.py; `pytestmark` in a
module): the test asserts on packet timing through a real switch; when it fails while the host
stalled, it runs once more.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from p4netem.lab import Resources, SwitchProcess, TwoHostLab
from p4netem.p4rt import P4Info
from p4netem.paths import p4info_path, switch_binary


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def p4info() -> P4Info:
    return P4Info.load(p4info_path())


@pytest.fixture(scope="session")
def switch_bin() -> str:
    path = switch_binary()
    if not path.exists():
        pytest.fail(f"{path} is missing: build it with `make build`", pytrace=False)
    return str(path)


@pytest.fixture
def start_lab(request: pytest.FixtureRequest, switch_bin: str, tmp_path) -> Iterator[Callable[..., TwoHostLab]]:
    """start_lab(*switch_args, lab_class=TwoHostLab): a started lab (a test may start several, one
    after the other, and close them itself; `lab_class` a TwoHostLab subclass that wires its hosts
    otherwise). Every lab is closed at teardown, and when the test failed the end of each switch's
    log is printed."""
    if os.geteuid() != 0:
        pytest.fail("wire tests need root (network namespaces, raw sockets)", pytrace=False)
    labs: list[TwoHostLab] = []

    def start(*switch_args: str, lab_class: type[TwoHostLab] = TwoHostLab) -> TwoHostLab:
        log = tmp_path / ("switch.log" if not labs else f"switch-{len(labs) + 1}.log")
        labs.append(lab_class(binary=switch_bin, log_path=log, switch_args=switch_args))
        return labs[-1].start()

    try:
        yield start
    finally:
        call = getattr(request.node, "rep_call", None)
        for the_lab in labs:
            if call is not None and call.failed and the_lab.switch is not None:
                print(f"\n---- end of switch log ({the_lab.switch.log_path}) ----\n{the_lab.switch.log_tail(60)}")
            the_lab.close()


@pytest.fixture
def lab(start_lab) -> TwoHostLab:
    return start_lab()


@pytest.fixture
def bare_switch(switch_bin: str, tmp_path, request: pytest.FixtureRequest) -> Iterator[SwitchProcess]:
    if os.geteuid() != 0:
        pytest.fail("switch tests need root", pytrace=False)
    resources = Resources()
    switch = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log",
                           extra_args=getattr(request, "param", ["--rt-priority", "0"]), resources=resources)
    switch.start()
    try:
        yield switch
    finally:
        switch.stop()
        resources.close()
