"""The controller API as a script uses it, against a real p4netem-switch: a script that outlives a
switch restart (and calls the switch while it is down), a `with` block and connections that fail
leave no channel or thread behind, and a closed controller stays closed."""

from __future__ import annotations

import os
import threading
import time

import grpc
import pytest

from p4netem.control import Controller, P4RuntimeError, Profile, ProfileError
from p4netem.lab import SwitchProcess
from p4netem.profiles import builtin_profiles


def _p4rt_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("p4rt")]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settled(fn, want, timeout: float = 5.0):
    """fn() once it equals `want` (gRPC winds its threads and sockets down asynchronously)."""
    deadline = time.monotonic() + timeout
    while (got := fn()) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def test_a_call_while_the_switch_is_down_then_back_reconnects_as_primary(switch_bin: str, tmp_path) -> None:
    """Before: the failed reconnection (switch still down) forgot that the controller arbitrates,
    the next one opened a read-only connection, and every write failed for good with
    PERMISSION_DENIED ("our election id 7; the switch's highest election id is 7")."""
    args = ["--rt-priority", "0"]
    first = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "a.log", extra_args=args).start()
    second = None
    try:
        ctl = Controller.connect(first.grpc_addr, election_id=7, timeout=2)
        ctl.apply("lan")
        first.stop()
        for _ in range(2):  # a monitoring loop that keeps asking while the switch is away
            with pytest.raises(P4RuntimeError) as info:
                ctl.applied()
            assert info.value.code == grpc.StatusCode.UNAVAILABLE, info.value
        second = SwitchProcess({}, binary=switch_bin, grpc_port=first.grpc_port, log_path=tmp_path / "b.log",
                               extra_args=args).start()
        result = ctl.apply("lte")
        assert ctl.is_primary and ctl.client.election_id == 7 and result.added == 1
        assert [a.label for a in ctl.applied()] == ["lte"]
        ctl.close()
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_connections_leave_nothing_open(bare_switch: SwitchProcess) -> None:
    """A `with` block, a read-only connection and connections refused for a bad argument leave
    no P4Runtime thread and no file descriptor behind; a closed controller does not reconnect
    by itself (before: its next call opened a new channel and stream, re-elected it primary,
    and nothing closed them)."""
    addr = bare_switch.grpc_addr
    with Controller.connect(addr, election_id=1) as ctl:  # the first one loads what later ones reuse
        ctl.applied()
    base_threads = _settled(_p4rt_threads, [])
    base_fds = _open_fds()
    for _ in range(3):
        with Controller.connect(addr, election_id=1) as ctl:
            ctl.applied()
        with Controller.connect(addr, primary=False) as ro:
            ro.applied()
    for bad in ({"max_atomicity": "ATOMIC"}, {"election_id": -1}, {"p4info": "/nonexistent.txtpb"}):
        with pytest.raises((ValueError, OSError)):
            Controller.connect(addr, **bad)
    with pytest.raises(P4RuntimeError) as info:
        Controller.connect(addr, device_id=99, timeout=3)  # refused by the switch
    assert info.value.code == grpc.StatusCode.NOT_FOUND, info.value

    with Controller.connect(addr, election_id=1) as ctl:
        ctl.apply("lan")
    with pytest.raises(P4RuntimeError, match="was closed") as info:
        ctl.applied()
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(P4RuntimeError, match="was closed"):
        ctl.apply("lte")
    assert _settled(_p4rt_threads, base_threads) == base_threads
    assert _settled(_open_fds, base_fds) <= base_fds

    ctl.reconnect()  # explicitly: open again
    assert ctl.is_primary and [a.label for a in ctl.applied()] == ["lan"]
    ctl.close()


def test_a_profile_built_in_code_is_checked_before_anything_is_written(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        base = Profile.parse({"name": "base", "both": {"delay": "10ms"}})
        ctl.apply(base)
        before = ctl.state()
        with pytest.raises(ProfileError, match=r"downlink\.loss: 150% out of range 0\.\.100%"):
            ctl.apply(base.model_copy(update={"downlink": base.downlink.model_copy(update={"loss": "150%"})}))
        after = ctl.state()
        assert (after.profiles, after.radio) == (before.profiles, before.radio)
        # A valid one applies (one rule given alone, not in a list).
        slower = base.model_copy(update={"name": "slower", "downlink": {"delay": "40ms"}})
        result = ctl.apply(slower, "client.switch_port=1,server.switch_port=2")
        assert result.switched == 1
        (applied,) = ctl.applied()
        assert applied.label == "slower" and int(applied.profile.downlink.delay) == 40_000_000
        assert int(applied.profile.uplink.delay) == 10_000_000  # the uplink is base's


def test_applies_from_several_threads_and_a_pending_prepare_do_not_collide(bare_switch: SwitchProcess) -> None:
    """Before: a rule added while another was prepared (write A done, not yet flipped) got the
    same rule number and the prepared rule's spare id as its own profile id; after both flips
    the two rules' four entries carried one rule number and read back as broken (applied()
    showed neither). Threads applying at once did the same."""
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        pending = ctl.prepare([("client=10.1.0.1", "lan")])
        ctl.apply("lte", ["client=10.2.0.1"])
        pending.commit()
        pending.cleanup()
        state = ctl.state()
        assert state.broken == [] and len(state.managed) == 2
        ids = [i for m in state.managed.values() for i in (m.profile_id, m.spare_id)]
        assert len(set(ids)) == 4, ids
        assert sorted(str(a.rule.client.ip) for a in ctl.applied()) == ["10.1.0.1/32", "10.2.0.1/32"]

        ctl.reset()
        errors: list[BaseException] = []
        start = threading.Barrier(6)

        def add(i: int) -> None:
            try:
                start.wait()
                for j in range(3):
                    ctl.apply("lan" if j % 2 else "lte", [f"client=10.3.{i}.{j + 1}"])
            except BaseException as exc:  # noqa: BLE001  reported below
                errors.append(exc)

        workers = [threading.Thread(target=add, args=(i,)) for i in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert errors == []
        state = ctl.state()
        assert state.broken == [] and len(state.managed) == 18
        assert ctl.session.reserved_ids == set() and ctl.session.reserved_numbers == set()


@pytest.mark.parametrize("bare_switch", [["--rt-priority", "0", "--profiles", "3"]], indirect=True)
def test_running_out_of_profile_ids_says_how_many_there_are(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.apply("lan", "client=10.0.0.1")  # profile ids 1 and 2: all there are
        with pytest.raises(P4RuntimeError) as info:
            ctl.apply("lan", "client=10.0.0.2")
        assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "profile ids 1..2 (p4netem-switch --profiles)" in info.value.message, info.value.message
        assert "1 rules and 2 profile ids are in use" in info.value.message, info.value.message


def test_set_of_a_radio_field_on_a_profile_without_radio_is_refused(bare_switch: SwitchProcess) -> None:
    """Before: modify_profile dropped every radio.* field of a profile without radio, so
    ctl.set({"radio.promotion": "2s"}) (or a misspelt radio field) did nothing and said nothing."""
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.apply("lan")
        with pytest.raises(ProfileError, match=r"radio\.promotion: .* has no radio \(radio model none\)"):
            ctl.set({"radio.promotion": "2s"})
        with pytest.raises(ProfileError, match=r"radio\.bogus: .* has no radio"):
            ctl.set({"radio.bogus": "2s"})
        assert [a.label for a in ctl.applied()] == ["lan"]
        result = ctl.set({"radio.model": "lte"})  # giving it a radio is a change
        assert result.rules[0].profile.has_radio


def test_a_sweep_that_applies_new_profiles_of_one_name_reads_back_the_last(bare_switch: SwitchProcess) -> None:
    """Before: the controller knew a name by the first profile applied under it, so after
    applying "sweep" with 20 ms, applied() said "sweep (modified)", "uplink.delay: 5ms -> 20ms"
    (while the ApplyResult said "sweep", unmodified)."""
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        for delay in ("5ms", "20ms", "50ms"):
            result = ctl.apply(Profile.parse({"name": "sweep", "both": {"delay": delay}}))
            (applied,) = ctl.applied()
            assert (applied.label, applied.modified) == (result.rules[0].label, result.rules[0].modified) \
                == ("sweep", ()), (delay, applied.modified)
        # A built-in name keeps its meaning: a profile called "lan" that is not it shows as modified.
        ctl.apply(Profile.parse({"name": "lan", "both": {"delay": "7ms"}}))
        assert ctl.applied()[0].label == "lan (modified)"
        assert ctl.known_profiles["lan"] == builtin_profiles()["lan"]
        # A timeline-style set still shows what changed against the applied profile.
        ctl.apply(Profile.parse({"name": "sweep", "both": {"delay": "5ms"}}))
        ctl.set({"delay": "9ms"})
        assert ctl.applied()[0].modified == ("uplink.delay: 5ms -> 9ms", "downlink.delay: 5ms -> 9ms")


def test_a_write_on_a_read_only_connection_says_so(bare_switch: SwitchProcess) -> None:
    """Before: "not the primary ... (our election id 1); use a higher election id to take over",
    which no election id can do for a connection that never arbitrates."""
    with Controller.connect(bare_switch.grpc_addr, primary=False) as ro:
        with pytest.raises(P4RuntimeError) as info:
            ro.apply("lan")
        assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert "read-only connection" in info.value.message and "primary=True" in info.value.message
        assert "higher election id" not in info.value.message
        assert ro.applied() == []


def test_a_prepared_switch_can_be_abandoned(bare_switch: SwitchProcess) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.apply("lan")
        before = ctl.state()
        pending = ctl.prepare([("client=10.1.0.1", "lte"), ("client.switch_port=1,server.switch_port=2", "hspa")])
        assert ctl.session.reserved_numbers and ctl.session.reserved_ids
        pending.abandon()
        after = ctl.state()
        assert (after.profiles, after.radio, len(after.managed)) == (before.profiles, before.radio, 1)
        assert ctl.session.reserved_ids == set() and ctl.session.reserved_numbers == set()
        with pytest.raises(RuntimeError, match="already committed"):
            pending.commit()


def test_a_read_on_a_channel_closed_under_it_reconnects(bare_switch: SwitchProcess) -> None:
    """What a thread sees when another one's reconnection closes the channel under its call:
    before, grpc's raw ValueError ("Cannot invoke RPC: Channel closed!") escaped from read();
    now it is UNAVAILABLE, and Session.read reconnects and retries."""
    with Controller.connect(bare_switch.grpc_addr, primary=False) as ro:
        assert ro.applied() == []
        ro.client._channel.close()  # as a reconnection in another thread does
        assert ro.applied() == [] and ro.client.generation == 2
        ro.client._channel.close()
        with pytest.raises(P4RuntimeError) as info:
            list(ro.client.read(ro.client.table_entry("P4netemIngress.port_map")))
        assert info.value.code == grpc.StatusCode.UNAVAILABLE and "closed" in info.value.message


def test_removing_an_empty_list_of_rules_removes_nothing(bare_switch: SwitchProcess) -> None:
    """Before: remove([]) (a script's list of stale rules that came out empty) removed the
    whole-link DEFAULT_RULE, as apply() takes an empty list to mean."""
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.apply("lan")
        ctl.apply("lte", ["client=10.0.0.5"])
        assert ctl.remove([]) == 0
        assert sorted(a.label for a in ctl.applied()) == ["lan", "lte"]
        assert ctl.remove("client=10.0.0.5") == 1  # one rule alone
        assert [a.label for a in ctl.applied()] == ["lan"]
