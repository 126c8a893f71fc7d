"""Fixtures of the control-plane tests.

`ctl`: a Controller (election id 2, so it takes over from the lab's own client) on a fresh
TwoHostLab, reset to a plain wire (the lab's classifier entries removed, port map kept).
`bare_switch` (tests/conftest.py): a p4netem-switch with no ports (P4Runtime only), for tests without traffic.
`snapshot(client)`: everything a write could change (every table entry with its cookie, the
default entries, the pd state registers and the per-pd counters), to compare before and after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.lab import TwoHostLab
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
