"""Controller.primary_role(): primary only for a block, on a connection opened without arbitration
(what `p4netem web` does for each write). Real switch, real arbitration: when the block returns,
the switch has forgotten the controller, so another one with the same election id is primary
at once; while it holds the role, the block is refused with NotPrimaryError naming its id."""

from __future__ import annotations

import pytest

from p4netem.control import Controller, parse_rule_option
from p4netem.control.session import NotPrimaryError

RULE = [parse_rule_option("client=10.0.0.1")]


def test_two_controllers_with_the_same_election_id_take_turns(bare_switch):
    a = Controller.connect(bare_switch.grpc_addr, election_id=1, primary=False, timeout=10)
    b = Controller.connect(bare_switch.grpc_addr, election_id=1, primary=False, timeout=10)
    try:
        for ctl, profile in [(a, "lan"), (b, "lte"), (a, "hspa"), (b, "lan")]:
            with ctl.primary_role():
                assert ctl.is_primary
                ctl.apply(profile, RULE)
            assert not ctl.is_primary and not ctl.client.arbitrating
        assert [r.profile.name for r in a.applied()] == ["lan"]  # reads go on without the role

        with a.primary_role():
            with pytest.raises(NotPrimaryError) as refused:
                with b.primary_role():
                    pass
            assert refused.value.holder == 1 and "already used by another controller" in refused.value.message
            a.apply("lte", RULE)  # the refusal did not disturb the holder
        with b.primary_role():  # and b's connection is usable again
            b.apply("hspa", RULE)

        # A higher election id holds the role: named; gone, the switch still remembers it (P4Runtime).
        with Controller.connect(bare_switch.grpc_addr, election_id=7, timeout=10):
            with pytest.raises(NotPrimaryError) as refused:
                with a.primary_role():
                    pass
            assert refused.value.holder == 7 and "election id 7 is the primary (ours is 1)" in refused.value.message
        with pytest.raises(NotPrimaryError) as refused:
            with a.primary_role():
                pass
        assert refused.value.holder is None and "below the highest the switch has seen, 7" in refused.value.message
    finally:
        a.close()
        b.close()
