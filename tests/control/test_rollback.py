"""A target whose Write has only CONTINUE_ON_ERROR (bmv2's P4Runtime server): a failed apply must
leave the switch as it was, with no half-written entries (issue 13, defect 7). p4netem-switch runs
here as such a target (the controller is told CONTINUE_ON_ERROR is all it has, as the bmv2 labs
do), and the failures are real refusals by the switch: a full classifier, and a register write
made invalid on its way out (the injected failure)."""

from __future__ import annotations

import grpc
import pytest
from conftest import snapshot

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.lab import SwitchProcess
from p4netem.p4rt import P4RuntimeError


@pytest.mark.parametrize("bare_switch", [["--rt-priority", "0", "--classifier-entries", "3"]], indirect=True)
def test_a_batch_that_fails_halfway_is_reverted_without_atomicity(bare_switch: SwitchProcess) -> None:
    """Write B inserts two classifier entries; the classifier has room for one. The switch applies
    the first and refuses the second; the controller reverts the first, then undoes write A."""
    with Controller.connect(bare_switch.grpc_addr, max_atomicity="CONTINUE_ON_ERROR") as ctl:
        ctl.apply("lan")  # 2 of the 3 entries
        before = snapshot(ctl.client)
        with pytest.raises(P4RuntimeError) as info:
            ctl.apply("lte", ["client=10.0.0.9"])
        assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value
        assert snapshot(ctl.client) == before
        assert len(ctl.client.read_table_entries(pl.CLASSIFIER)) == 2


def test_a_failing_register_write_leaves_the_profile_entries_unwritten(bare_switch: SwitchProcess) -> None:
    """Write A (profile entries of the spare id, then its pd state registers reset) with one
    register update made invalid on the wire: the profile entries and registers it did write are
    put back as they were; the rule keeps its profile; the next apply works."""
    with Controller.connect(bare_switch.grpc_addr, max_atomicity="CONTINUE_ON_ERROR") as ctl:
        ctl.apply("lan")
        spare = ctl.applied()[0].spare_id
        # State the reset would destroy, on the spare id the next apply writes to.
        ctl.client.write_register(pl.NEXT_FREE_NS, pl.pd_index(spare, pl.UPLINK), 123456789)
        ctl.client.write_register(pl.GE_STATE, pl.pd_index(spare, pl.DOWNLINK), 1)
        before = snapshot(ctl.client)
        write = ctl.client.write
        injected = []

        def failing_write(updates, atomicity="CONTINUE_ON_ERROR", timeout=None):
            updates = list(updates)
            regs = [u for u in updates if u.entity.WhichOneof("entity") == "register_entry"]
            if regs and not injected:
                regs[-1].entity.register_entry.index.index = 1 << 40  # out of range: refused
                injected.append(len(updates))
            return write(updates, atomicity=atomicity, timeout=timeout)

        ctl.client.write = failing_write
        try:
            with pytest.raises(P4RuntimeError) as info:
                ctl.apply("wan-90ms")
        finally:
            ctl.client.write = write
        assert injected and injected[0] > 5, injected  # a real batch: entries and registers
        assert "cannot write the new profile parameters" in info.value.message, info.value.message
        assert snapshot(ctl.client) == before
        assert ctl.applied()[0].profile_name == "lan"
        ctl.apply("wan-90ms")
        assert ctl.applied()[0].profile_name == "wan-90ms"
