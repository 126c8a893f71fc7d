"""Fixtures of the control-plane tests.

`ctl`: a Controller (election id 2, so it takes over from the lab's own client) on a fresh
TwoHostLab, reset to a plain wire (the lab's classifier entries removed, port map kept).
`bare_switch`: a p4netem-switch with no ports (P4Runtime only), for tests without traffic.
`snapshot(client)`: everything a write could change (every table entry with its cookie, the
default entries, the pd state registers and the per-pd counters), to compare before and after.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.lab import Resources, SwitchProcess, TwoHostLab
from p4netem.p4rt import P4RuntimeClient
from p4netem.p4rt.proto import p4runtime_pb2


@pytest.fixture
def ctl(lab: TwoHostLab) -> Iterator[Controller]:
    controller = Controller.connect(lab.switch.grpc_addr, election_id=2)
    controller.reset()
    try:
        yield controller
    finally:
        controller.close()


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


def snapshot(client: P4RuntimeClient) -> tuple:
    """Table entries (all tables, with cookies), default entries, pd registers and counters."""
    entries = sorted(e.SerializeToString(deterministic=True)
                     for e in client.read(p4runtime_pb2.TableEntry(table_id=0)))
    defaults = []
    for table in (pl.CLASSIFIER, pl.PROFILE, pl.PORT_MAP):
        defaults.append(client.read_default_entry(table))
    registers = {r: client.read_register(r) for r in (pl.NEXT_FREE_NS, pl.LAST_RELEASE_NS, pl.GE_STATE)}
    counters = {c: client.read_counter(c) for c in (pl.PROFILE_IN, pl.PROFILE_OUT)}
    return entries, defaults, registers, counters
