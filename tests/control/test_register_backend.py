"""Registers through a side channel, as on bmv2 (PI's P4Runtime server implements no register
access; the controller reaches them through bmv2's Thrift runtime, p4rt/bmv2_registers.py). Here
the side channel is a second P4Runtime connection to the same p4netem-switch, so what is tested
is the client's split of every batch and read (registers one way, the rest the other, errors at
their batch positions) under real controller operations; the bmv2 CLI itself is checked only
where bmv2 is installed (tests/labs/test_lab_bmv2.py)."""

from __future__ import annotations

import grpc
import pytest
from conftest import snapshot

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.lab import SwitchProcess
from p4netem.p4rt import P4RuntimeClient, P4RuntimeError
from p4netem.p4rt.bmv2_registers import registers_over_p4runtime
from p4netem.p4rt.errors import UpdateError, WriteError


class SideChannel:
    """The backend interface of Bmv2RuntimeCli, over a second client; counts what it carried."""

    def __init__(self, addr: str):
        self.client = P4RuntimeClient(addr).connect(arbitrate=False)
        self.writes = self.reads = 0

    def write(self, info, updates):
        self.writes += len(updates)
        try:
            self.client.write([u for _, u in updates])
        except WriteError as err:
            return [UpdateError(updates[e.index][0], e.code, e.message) for e in err.errors]
        return []

    def read_many(self, info, entries):
        self.reads += len(entries)
        return list(P4RuntimeClient.read(self.client, *entries))


def test_controller_operations_with_registers_on_a_side_channel(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr, max_atomicity="CONTINUE_ON_ERROR") as ctl:
        assert registers_over_p4runtime(ctl.client)  # p4netem-switch: over P4Runtime
        side = SideChannel(bare_switch.grpc_addr)
        side.client.p4info = ctl.client.info
        ctl.client.register_backend = side
        ctl.apply("lan")
        ctl.apply("lte")  # switches ids: the spare's pd state registers are reset
        assert side.writes > 0
        applied = ctl.applied()[0]
        assert applied.profile_name == "lte"
        cell = pl.pd_index(applied.profile_id, pl.UPLINK)
        ctl.client.write_register(pl.NEXT_FREE_NS, cell, 42)
        assert ctl.client.read_register(pl.NEXT_FREE_NS, cell) == {cell: 42}
        assert side.client.read_register(pl.NEXT_FREE_NS, cell) == {cell: 42}
        ctl.radio([1, 2])  # radio views read registers
        assert side.reads > 0
        # A batch whose register update fails: reverted like any other (test_rollback.py).
        before = snapshot(side.client)
        bad = ctl.client.write
        injected = []

        def failing(updates, atomicity="CONTINUE_ON_ERROR", timeout=None):
            updates = list(updates)
            regs = [u for u in updates if u.entity.WhichOneof("entity") == "register_entry"]
            if regs and not injected:  # the first batch with registers only, not the revert
                regs[0].entity.register_entry.index.index = 1 << 40
                injected.append(True)
            return bad(updates, atomicity=atomicity, timeout=timeout)

        ctl.client.write = failing
        try:
            with pytest.raises(P4RuntimeError) as info:
                ctl.apply("wan-90ms")
        finally:
            ctl.client.write = bad
        assert info.value.code in (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.INVALID_ARGUMENT), info.value
        assert snapshot(side.client) == before
        ctl.reset()  # wildcard register and counter zeroing
        assert ctl.client.read_register(pl.NEXT_FREE_NS, cell) == {cell: 0}
        side.client.close()
