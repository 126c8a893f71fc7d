"""The controller API against a real p4netem-switch: profiles applied to rules and read back,
profile switches seen on the wire (delay, rate, atomicity in both directions), timelines on time,
bad input that changes nothing, arbitration and reconnection."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import snapshot

from p4netem import pipeline as pl
from p4netem.control import (Controller, P4RuntimeError, Profile, ProfileError, RuleError, Timeline,
                             TimelineError)
from p4netem.lab import SwitchProcess, TwoHostLab
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, ProbeResult, run_probe
from p4netem.profiles import Direction, builtin_profiles

MS = 1_000_000
# A probe through profiles that duplicate nothing ends once all its datagrams are in
# (stop_when_complete), not a second later; a lost one still makes it wait. Not the flips under
# traffic: their profile b duplicates every packet, and a copy may come after the last original.
DONE = {"stop_when_complete": True}


def ms(ns: float) -> str:
    return f"{ns / MS:.3f} ms"


# ---- read back ------------------------------------------------------------------------------------


def test_every_builtin_profile_applies_and_reads_back(ctl: Controller) -> None:
    rule_ids = set()
    for name, profile in builtin_profiles().items():
        result = ctl.apply(name)
        assert (result.added, result.switched) == ((1, 0) if not rule_ids else (0, 1)), name
        assert result.warnings == []
        (applied,) = ctl.applied()
        rule_ids.add(applied.number)
        assert applied.profile_name == name and applied.modified == ()
        assert applied.profile == profile  # link parameters and radio read back
        state = ctl.state()
        for d in Direction:
            assert state.profiles[(applied.profile_id, d)] == profile.to_table_params(d)
        # The radio entry sits under the same profile id (model 0 for a profile without radio),
        # so it flipped with the link parameters.
        assert state.radio == {applied.profile_id: profile.radio_table_params()}
        # Only the profile in force is in the tables; the other id of the pair is the spare.
        assert set(state.profiles) == {(applied.profile_id, 0), (applied.profile_id, 1)}
    assert rule_ids == {1}
    # A radio changed on the switch (here by another client's write) shows as a modification.
    (applied,) = ctl.apply("lte")
    ctl.client.modify(ctl.client.table_entry(
        pl.RADIO_PROFILE, {"meta.profile_id": applied.profile_id}, pl.SET_RADIO,
        builtin_profiles()["lte"].radio_table_params() | {"tail_ns": 5 * 10**9}))
    (changed,) = ctl.applied()
    assert changed.label == "lte (modified)" and changed.modified == ("radio.tail: 10s -> 5s",)
    assert changed.profile.radio.tail == 5 * 10**9


def test_rules_priorities_and_cumulative_counters(lab: TwoHostLab, ctl: Controller) -> None:
    ctl.apply("lan")  # rule 1: everything between ports 1 and 2
    ctl.apply("wan-90ms", ["client=10.0.0.1,ue=7"])  # rule 2, added later, wins for h1's traffic
    applied = {a.number: a for a in ctl.applied()}
    assert applied[2].rule.ue == 7 and applied[2].rule.priority > applied[1].rule.priority

    first = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=60, rate=200, port=9400, **DONE)
    assert first.lost == 0 and statistics.median(first.delays_ns) >= 45 * MS  # wan-90ms: 45 ms one way
    ctl.apply("lan", ["client=10.0.0.1,ue=7"])  # switch rule 2 (onto its other profile id)
    second = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=40, rate=200, port=9401, **DONE)
    assert statistics.median(second.delays_ns) < 10 * MS

    rows = {(r.label, r.direction): r for r in _settled_stats(ctl)}
    # Counters of a rule add up over its profile switches; rule 1 saw none of h1's probes.
    assert rows[("#2", "uplink")].counters.profile_in == 100
    assert rows[("#2", "uplink")].counters.profile_out == 100
    assert rows[("#2", "uplink")].counters.bytes_out == 100 * (64 + UDP_IP_ETH_OVERHEAD)
    assert rows[("#1", "uplink")].counters.profile_in == 0
    assert rows[("#2", "uplink")].profile == "lan"

    assert ctl.remove(["client=10.0.0.1"]) == 1
    assert [a.number for a in ctl.applied()] == [1]
    run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=10, rate=200, port=9402, **DONE)
    rows = {(r.label, r.direction): r for r in _settled_stats(ctl)}
    assert rows[("#1", "uplink")].counters.profile_in == 10
    with pytest.raises(RuleError, match="no such rule on the switch"):
        ctl.remove(["client=10.0.0.1"])


def _settled_stats(ctl: Controller, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        rows = ctl.stats().rows
        if all(r.counters.conservation_gap() == 0 for r in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


# ---- on the wire ----------------------------------------------------------------------------------


def _delay_and_rate(lab: TwoHostLab, port: int, rate_bps: float) -> tuple[float, float]:
    """(median one-way delay of small packets, shaped rate from 1000-byte packets offered at 1.5x).
    The small packets are 5 ms apart (they were 16.7), far more than one's 0.42 ms on the wire
    at the slowest rate here (2 Mbit/s): none waits for another, the same 60 medians in 0.3 s.
    The large ones are offered for 0.75 s (it was 1.5): at 1.5x the rate the queue never empties
    from the second packet on, so departures are one serialisation time apart from the start,
    and the median takes 100 gaps at 1 Mbit/s, 200 at 2 and 800 at 8, of which a stalled sender
    (a loaded machine) idles the link for a few."""
    small = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=60, rate=200, size=64, port=port, **DONE)
    size = 1000
    frame_bits = (size + UDP_IP_ETH_OVERHEAD) * 8
    pps = 1.5 * rate_bps / frame_bits
    big = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=int(pps * 0.75), rate=pps, size=size, port=port + 1,
                    **DONE)
    gaps = [b - a for a, b in zip(big.rx_ns, big.rx_ns[1:])]
    # Back-to-back departures of a busy queue are one serialisation time apart (see test_rate.py).
    return statistics.median(small.delays_ns), frame_bits / statistics.median(gaps) * 1e9


def test_delay_and_rate_follow_a_profile_switch(lab: TwoHostLab, ctl: Controller) -> None:
    slow = Profile.parse({"name": "slow", "both": {"delay": "20ms", "rate": "2Mbit", "queue": 20}})
    fast = Profile.parse({"name": "fast", "both": {"delay": "60ms", "rate": "8Mbit", "queue": 20}})
    for profile, rate in ((slow, 2e6), (fast, 8e6), (slow, 2e6)):
        ctl.apply(profile)
        delay, shaped = _delay_and_rate(lab, 9410 + 2 * int(rate / 1e6), rate)
        configured = int(profile.uplink.delay) + (64 + UDP_IP_ETH_OVERHEAD) * 8 / rate * 1e9
        assert configured <= delay + 0.2 * MS and delay <= configured + 3 * MS, \
            f"{profile.name}: median delay {ms(delay)}, configured {ms(configured)}"
        assert abs(shaped - rate) <= 0.03 * rate, f"{profile.name}: shaped {shaped / 1e6:.3f} Mbit/s"


def _labels(result: ProbeResult, short_ns: int, long_ns: int) -> dict[int, str]:
    """seq -> "a" or "b" for every datagram sent, checking that no packet saw a mix: profile a is
    a short delay and no duplicate, b a long delay and duplication 100%.

    Duplication is deterministic, so the number of copies says which profile a packet got; its
    delay must then be that profile's. Measurement noise (a sender descheduled between its
    timestamp and its send) can only add delay, so the checks are one-sided where noise could
    strike: a b packet never arrives before the long delay (a copy that did got a's delay), an a
    packet arrives before it (one that did not got b's delay, or 55 ms of noise).

    Delays are wall-clock differences (the receiver's kernel timestamp against the sender's): a
    step of the wall clock during the probe (an NTP client, a VM's host setting its guest's time)
    moves the delays that span it by the step, which the probe measures and the bounds allow."""
    copies: dict[int, list[int]] = defaultdict(list)
    step = result.wall_clock_step_ns
    slack = 0.2 * MS + step
    for seq, delay in zip(result.seq, result.delays_ns):
        copies[seq].append(delay)
    assert result.lost == 0, f"{result.lost} probes lost"
    labels = {}
    for seq, delays in copies.items():
        assert len(delays) in (1, 2), f"seq {seq}: {len(delays)} copies"
        kind = "b" if len(delays) == 2 else "a"
        if kind == "b":
            assert all(d >= long_ns - slack for d in delays), \
                f"seq {seq}: duplicated (profile b) but delays {[ms(d) for d in delays]} (wall clock step {ms(step)})"
        else:
            assert short_ns - slack <= delays[0] < long_ns - 0.2 * MS, \
                f"seq {seq}: not duplicated (profile a) but delay {ms(delays[0])} (wall clock step {ms(step)})"
        labels[seq] = kind
    return labels


def _boundaries(result: ProbeResult, labels: dict[int, str]) -> list[tuple[int, int, str]]:
    """(tx of the last packet before, tx of the first after, new label) of every change in seq order."""
    tx = dict(zip(result.seq, result.tx_ns))
    seqs = sorted(labels)
    return [(tx[a], tx[b], labels[b]) for a, b in zip(seqs, seqs[1:]) if labels[a] != labels[b]]


def flips_under_traffic(lab: TwoHostLab, ctl: Controller, a: Profile, b: Profile, flips: int, step_ms: int,
                        port: int, rule: str | None = None):
    """Probes at 500/s in both directions while a timeline flips the rule between profiles b and
    a (b first) every step_ms; returns (TimelineResult, {"uplink": probe, "downlink": probe})."""
    timeline = Timeline.parse({"profiles": [a.to_dict(), b.to_dict()], "steps": [
        {"at": f"{i * step_ms}ms", "apply": b.name if i % 2 == 0 else a.name} for i in range(flips)]})
    rules = [rule] if rule else None
    (applied,) = ctl.apply(a, rules)
    rate, seconds = 500, flips * step_ms / 1000 + 1.4
    pds = [pl.pd_index(applied.profile_id, d) for d in (pl.UPLINK, pl.DOWNLINK)]
    with ThreadPoolExecutor(2) as pool:
        up_f = pool.submit(run_probe, lab.h1.ns, lab.h2.ns, lab.h2.ip, count=int(rate * seconds), rate=rate,
                           port=port)
        down_f = pool.submit(run_probe, lab.h2.ns, lab.h1.ns, lab.h1.ip, count=int(rate * seconds), rate=rate,
                             port=port + 1)
        # Start the flips once both senders are sending (their start takes a few hundred ms, more
        # on a loaded machine): the first packets must see profile a.
        deadline = time.monotonic() + 20
        while min(ctl.client.read_counter(pl.PROFILE_IN, pd)[pd].packets for pd in pds) < 20:
            assert time.monotonic() < deadline, "the probe senders did not start"
            time.sleep(0.01)
        result = ctl.run_timeline(timeline, rules, lead_s=0.1)
        probes = {"uplink": up_f.result(), "downlink": down_f.result()}
    assert len(result.events) == flips
    return result, probes


def check_flips(name: str, probe: ProbeResult, result, short: int, long: int) -> tuple[dict, list]:
    """No packet saw a mix (_labels), the profile changed once per flip, a, b, a, ... in sequence
    order, and at the time of the flip's write (the same one write for both directions).
    Returns (labels, changes)."""
    labels = _labels(probe, short, long)
    changes = _boundaries(probe, labels)
    assert [kind for _, _, kind in changes] == ["b", "a"] * (len(result.events) // 2), f"{name}: {changes}"
    for (last_old, first_new, _), event in zip(changes, result.events):
        sent = event.wall_ns
        done = sent + (event.done_ns - event.sent_ns)
        assert sent - 20 * MS <= first_new and last_old <= done + 20 * MS, \
            f"{name}: change between tx {last_old} and {first_new}, write at {sent}..{done}"
    return labels, changes


def test_profile_switch_is_atomic_under_traffic(lab: TwoHostLab, ctl: Controller) -> None:
    short, long = 5 * MS, 60 * MS
    a = Profile.parse({"name": "atomic-a", "both": {"delay": "5ms"}})
    b = Profile.parse({"name": "atomic-b", "both": {"delay": "60ms", "duplicate": "100%"}})
    result, probes = flips_under_traffic(lab, ctl, a, b, flips=8, step_ms=200, port=9420)
    for name, probe in probes.items():
        labels, _ = check_flips(name, probe, result, short, long)
        # Each profile's packets saw its delay (typically: medians).
        for kind, want in (("a", short), ("b", long)):
            delays = [d for s, d in zip(probe.seq, probe.delays_ns) if labels[s] == kind]
            median = statistics.median(delays)
            assert want <= median <= want + 2 * MS, f"{name} {kind}: median {ms(median)}"


def test_timeline_runs_on_time(lab: TwoHostLab, ctl: Controller) -> None:
    timeline = Timeline.loads("""
profiles:
  - {name: near, both: {delay: 5ms}}
  - {name: far, both: {delay: 25ms}}
steps:
  - apply: near
  - {at: 300ms, apply: far}
  - {at: 600ms, apply: near}
  - {at: 900ms, set: {delay: 25ms}}
  - wait: 300ms
""")
    # The first step's profile is on the wire before the probe starts, and the timeline starts
    # once the switch counts the probe's packets (its start takes a few hundred ms, more on a
    # loaded machine; a fixed sleep left the first event with no packet before it).
    (applied,) = ctl.apply(timeline.profiles[0])
    pd = pl.pd_index(applied.profile_id, pl.UPLINK)
    with ThreadPoolExecutor(1) as pool:
        probe_f = pool.submit(run_probe, lab.h1.ns, lab.h2.ns, lab.h2.ip, count=1000, rate=500, port=9430, **DONE)
        deadline = time.monotonic() + 20
        while ctl.client.read_counter(pl.PROFILE_IN, pd)[pd].packets < 20:
            assert time.monotonic() < deadline, "the probe sender did not start"
            time.sleep(0.01)
        started = time.monotonic()
        result = ctl.run_timeline(timeline, lead_s=0.1)
        took = time.monotonic() - started
        probe = probe_f.result()
    assert len(result.events) == 4 and not result.interrupted
    # The player returns at the end of the trailing wait, not before.
    assert took >= 1.2
    errors = sorted(result.errors_ms)
    # Accuracy figures belong to the bench (bench/timeline.py); here: in force within a few ms,
    # generous for a busy 2-core machine.
    assert statistics.median(errors) < 10 and errors[-1] < 50, errors
    assert all(e.error_ns >= 0 for e in result.events)  # never before its time

    # On the wire: the delay changes at the scheduled times.
    tx_delay = sorted(zip(probe.tx_ns, probe.delays_ns))
    for event in result.events[1:]:
        scheduled = result.start_wall_ns + event.event.at_ns
        far = int(event.event.profile.uplink.delay) > 15 * MS
        before = [d for t, d in tx_delay if scheduled - 60 * MS <= t < scheduled - 5 * MS]
        after = [d for t, d in tx_delay if scheduled + 50 * MS <= t < scheduled + 110 * MS]
        assert before and after
        assert all((d < 15 * MS) == far for d in before), f"{event.event.action}: before {[ms(d) for d in before]}"
        assert all((d >= 15 * MS) == far for d in after), f"{event.event.action}: after {[ms(d) for d in after]}"


# ---- bad input changes nothing --------------------------------------------------------------------


def test_invalid_input_fails_naming_the_field_and_changes_nothing(ctl: Controller, tmp_path) -> None:
    ctl.apply("hspa")
    ctl.apply("lte", ["client=10.0.0.1,ue=1"])
    before = snapshot(ctl.client)

    bad_value = tmp_path / "bad-value.yaml"
    bad_value.write_text("name: bad-value\nuplink: {loss: 150%}\ndownlink: {rate: 3Mbit, queue: {packets: -1}}\n")
    with pytest.raises(ProfileError) as info:
        ctl.apply(bad_value)
    text = str(info.value)
    assert "uplink.loss: 150% out of range 0..100%" in text and "downlink.queue.packets" in text, text

    bad_yaml = tmp_path / "bad-yaml.yaml"
    bad_yaml.write_text("name: x\nuplink: {delay: 10ms\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        ctl.apply(bad_yaml)
    with pytest.raises(ProfileError, match="no built-in or known profile 'hspa-typo'"):
        ctl.apply("hspa-typo")
    with pytest.raises(RuleError, match=r"dscp: 99 out of range 0\.\.63"):
        ctl.apply("lte", ["client=10.0.0.1,dscp=99"])
    # One bad rule among good ones: none of them is written.
    with pytest.raises(RuleError, match=r"rules\[1\]\.ue: -3 out of range"):
        ctl.apply("lan", ["client=10.0.0.5", "client=10.0.0.6,ue=-3", "client=10.0.0.7"])
    with pytest.raises(TimelineError, match=r"steps\[1\]\.set\.downlink\.rate: \"fast\" is not a rate"):
        ctl.run_timeline(Timeline.loads("- apply: lan\n- at: 1s\n  set: {downlink.rate: fast}\n"))

    assert snapshot(ctl.client) == before
    assert [a.label for a in ctl.applied()] == ["hspa", "lte"]


@pytest.mark.parametrize("bare_switch", [["--rt-priority", "0", "--classifier-entries", "3"]], indirect=True)
def test_a_write_the_switch_refuses_is_undone(bare_switch: SwitchProcess) -> None:
    """Write B fails (classifier full): write A, already done, is undone; the switch is as it was."""
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.apply("lan")  # 2 of the 3 entries
        before = snapshot(ctl.client)
        with pytest.raises(P4RuntimeError) as info:
            ctl.apply("lte", ["client=10.0.0.9"])  # needs 2 more
        assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert info.value.message.startswith("cannot switch the classifier to the new profile: table "
                                             "P4netemIngress.classifier is full"), info.value.message
        assert snapshot(ctl.client) == before


def test_l2_forwarding_and_a_target_without_atomic_writes(bare_switch: SwitchProcess) -> None:
    """L2 entries are set (only what changes), read back and removed by reset(port_map=True); a
    controller told its target has only CONTINUE_ON_ERROR (bmv2) never asks for more, and two
    rules may get different profiles of one name in one apply."""
    with Controller.connect(bare_switch.grpc_addr, max_atomicity="CONTINUE_ON_ERROR") as ctl:
        modes = []
        write = ctl.client.write

        def recording_write(updates, atomicity="CONTINUE_ON_ERROR", **kw):
            updates = list(updates)
            modes.append((atomicity, len(updates)))
            return write(updates, atomicity=atomicity, **kw)

        ctl.client.write = recording_write
        ctl.set_l2_forwarding({"02:00:00:00:00:01": 1, "02:00:00:00:00:02": 2})
        ctl.set_l2_forwarding({"02:00:00:00:00:02": 3})
        assert ctl.state().l2 == {0x020000000001: 1, 0x020000000002: 3}
        assert modes == [("CONTINUE_ON_ERROR", 2), ("CONTINUE_ON_ERROR", 1)]
        with pytest.raises(RuleError, match=r"l2: MAC 02:00:zz: cannot read '02:00:zz'"):
            ctl.set_l2_forwarding({"02:00:zz": 1})
        slow = Profile.parse({"name": "same", "both": {"delay": "80ms"}})
        fast = Profile.parse({"name": "same", "both": {"delay": "10ms"}})
        result = ctl.apply_many([("client=10.0.0.1", slow), ("client=10.0.0.2", fast)])
        delays = [int(r.profile.uplink.delay) for r in ctl.applied()]
        assert len(result) == 2 and sorted(delays) == [10 * MS, 80 * MS]
        assert {m for m, _ in modes} == {"CONTINUE_ON_ERROR"}
        ctl.reset(port_map=True)
        assert ctl.state().l2 == {} and ctl.state().port_map == {}


# ---- arbitration and reconnection -----------------------------------------------------------------


def test_a_lower_election_id_cannot_write(bare_switch: SwitchProcess) -> None:
    primary = Controller.connect(bare_switch.grpc_addr, election_id=10)
    backup = Controller.connect(bare_switch.grpc_addr, election_id=5)
    try:
        assert primary.is_primary and not backup.is_primary
        assert backup.client.primary_election_id == 10
        with pytest.raises(P4RuntimeError) as info:
            backup.apply("lan")
        assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert "not the primary" in info.value.message and "highest election id is 10" in info.value.message
        assert backup.applied() == []  # nothing was written
        primary.apply("lan")
        with pytest.raises(P4RuntimeError) as info:
            backup.reset()
        assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert [a.label for a in backup.applied()] == ["lan"]  # reads need no election

        # The primary leaves: the backup is still not primary (its id is below the highest seen)
        # until it re-runs arbitration with an id at least that high.
        primary.close()
        with pytest.raises(P4RuntimeError):
            backup.apply("lte")
        backup.reconnect(election_id=11)
        assert backup.is_primary
        assert backup.apply("lte").switched == 1
    finally:
        primary.close()
        backup.close()


def test_reconnects_after_the_switch_restarts(switch_bin: str, tmp_path) -> None:
    first = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "a.log", extra_args=["--rt-priority", "0"]).start()
    second = None
    try:
        ctl = Controller.connect(first.grpc_addr)
        ctl.apply("lan")
        first.stop()
        time.sleep(0.2)
        second = SwitchProcess({}, binary=switch_bin, grpc_port=first.grpc_port, log_path=tmp_path / "b.log",
                               extra_args=["--rt-priority", "0"]).start()
        result = ctl.apply("lte")  # the stream died with the old switch: reconnect, re-arbitrate
        assert ctl.is_primary and result.added == 1  # a new switch starts empty
        assert [a.label for a in ctl.applied()] == ["lte"]
        ctl.close()
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_unreachable_switch_says_so() -> None:
    with pytest.raises(P4RuntimeError) as info:
        Controller.connect("127.0.0.1:1", timeout=1)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE and "127.0.0.1:1" in info.value.message


def test_pipeline_is_verified(bare_switch: SwitchProcess, p4info) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        ctl.verify_pipeline()
        wrong = type(p4info)(p4info.message.__class__.FromString(p4info.message.SerializeToString()))
        wrong.message.tables[0].match_fields[0].bitwidth = 10
        with pytest.raises(P4RuntimeError) as info:
            ctl.verify_pipeline(wrong)
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT and "bitwidth" in info.value.message
        ctl.push_pipeline()  # RECONCILE_AND_COMMIT keeps state
        ctl.apply("lan")
        ctl.push_pipeline(keep_state=False)
        assert ctl.applied() == []


# ---- in-place changes -----------------------------------------------------------------------------


def _change_under_backlog(lab: TwoHostLab, ctl: Controller, port: int, change):
    """A 0.25 Mbit/s uplink gets a burst of 60 full-size datagrams (2.8 s of backlog); once the
    switch has counted all of them, `change(ctl)` changes the rule, then 20 small datagrams
    follow. Returns (rule before, rule after, ApplyResult, virtual clock of the rule's uplink pd
    before and after the change, burst probe, later probe). The backlog must outlast the change
    and the start of the later probe: with 1.45 s of it, a profile switch on a machine at load
    20 took long enough for the backlog to drain first (CI, 2026-11-26)."""
    base = Profile.parse({"name": "backlogged", "uplink": {"rate": "250kbit", "queue": 80}})
    ctl.apply(base)
    (before,) = ctl.applied()
    pd = pl.pd_index(before.profile_id, pl.UPLINK)
    with ThreadPoolExecutor(1) as pool:
        burst_f = pool.submit(run_probe, lab.h1.ns, lab.h2.ns, lab.h2.ip, count=60, rate=5000, size=1472, port=port,
                              **DONE)
        deadline = time.monotonic() + 20
        while ctl.client.read_counter(pl.PROFILE_IN, pd)[pd].packets < 60:
            assert time.monotonic() < deadline, "the burst never reached the switch"
            time.sleep(0.005)
        clock_before = ctl.client.read_register(pl.NEXT_FREE_NS, pd)[pd]
        result = change(ctl)
        (after,) = ctl.applied()
        pd_after = pl.pd_index(after.profile_id, pl.UPLINK)
        clock_after = ctl.client.read_register(pl.NEXT_FREE_NS, pd_after)[pd_after]
        later = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=20, rate=200, size=200, port=port + 1, **DONE)
        burst = burst_f.result()
    return before, after, result, clock_before, clock_after, burst, later


def test_in_place_change_keeps_the_queue_a_switch_starts_a_new_one(lab: TwoHostLab, ctl: Controller) -> None:
    """`set` (in place) modifies the entries the rule points at: same profile id, the virtual
    clock untouched, and packets sent after the change queue behind the old backlog (FIFO), then
    leave at the new rate. A profile switch flips to the spare id, whose clock starts at zero:
    later packets overtake the old backlog, which still drains, losing nothing."""
    before, after, result, clock0, clock1, burst, later = _change_under_backlog(
        lab, ctl, 9460, lambda c: c.set({"uplink.rate": "1Mbit"}))
    assert (result.modified, result.switched, result.added) == (1, 0, 0)
    assert after.profile_id == before.profile_id and after.spare_id == before.spare_id
    assert after.label == "backlogged (modified)" and after.modified == ("uplink.rate: 250kbit -> 1Mbit",)
    assert clock1 == clock0 > 0  # no register reset: the backlog's virtual clock carries on
    assert burst.lost == 0 and later.lost == 0
    assert min(later.rx_ns) > max(burst.rx_ns), "a packet sent after the in-place change overtook the backlog"
    _, shaped = _delay_and_rate(lab, 9462, 1e6)
    assert abs(shaped - 1e6) <= 0.1 * 1e6, f"shaped {shaped / 1e6:.3f} Mbit/s after the in-place change"

    ctl.reset()
    faster = Profile.parse({"name": "backlogged", "uplink": {"rate": "1Mbit", "queue": 80}})
    before, after, result, clock0, clock1, burst, later = _change_under_backlog(
        lab, ctl, 9464, lambda c: c.apply(faster))
    assert (result.modified, result.switched) == (0, 1)
    assert (after.profile_id, after.spare_id) == (before.spare_id, before.profile_id)
    assert clock0 > 0 and clock1 == 0  # the spare id's clock was reset: a new, empty queue
    assert burst.lost == 0 and later.lost == 0  # the old queue drains next to the new one
    assert min(later.rx_ns) < max(burst.rx_ns), "after a switch, later packets waited for the old backlog"


def test_in_place_needs_a_rule_on_the_switch_and_valid_fields(ctl: Controller) -> None:
    with pytest.raises(RuleError, match=r"no profile on the switch to change for"):
        ctl.set({"downlink.rate": "1Mbit"})
    (lte,) = ctl.apply("lte")
    before = snapshot(ctl.client)
    with pytest.raises(ProfileError, match=r'downlink.rate: "fast" is not a rate'):
        ctl.set({"downlink.rate": "fast"})
    with pytest.raises(ProfileError, match=r"no field to change"):
        ctl.set({})
    assert snapshot(ctl.client) == before
    # In place with a profile of another name: the rule keeps its id and is named after it.
    result = ctl.apply("hspa", in_place=True)
    (now,) = ctl.applied()
    assert (result.modified, result.switched) == (1, 0)
    assert now.profile_name == "hspa" and now.modified == () and now.profile_id == lte.profile_id
    assert now.profile == builtin_profiles()["hspa"]


def test_a_trace_plays_its_rates_on_the_wire(lab: TwoHostLab, ctl: Controller) -> None:
    """A Mahimahi trace of 12 Mbit/s for 1.5 s then 3 Mbit/s (one opportunity per ms, then every
    4 ms) played on the downlink: a saturating flow leaves a busy queue one serialisation time
    apart (median gap: robust to sender stalls), at each phase's rate."""
    from p4netem.control.trace import parse_trace, trace_timeline

    lines = [str(i) for i in range(1, 1501)] + [str(1500 + 4 * i) for i in range(1, 376)]
    trace = parse_trace("\n".join(lines))
    base = Profile.parse({"name": "trace-base", "downlink": {"rate": "1Mbit", "queue": 20}})  # rate: replaced
    timeline = trace_timeline(None, trace, window_ns=20 * MS, duration_ns=3000 * MS, base=base)
    ctl.apply(timeline.profiles[0])
    frame = 1472 + UDP_IP_ETH_OVERHEAD
    pps = 15e6 / (frame * 8)
    with ThreadPoolExecutor(1) as pool:
        flow = pool.submit(run_probe, lab.h2.ns, lab.h1.ns, lab.h1.ip, count=int(pps * 4.2), rate=pps, size=1472,
                           port=9470)
        time.sleep(0.6)
        result = ctl.run_timeline(timeline, lead_s=0.2)
        probe = flow.result()
    assert [e.event.in_place for e in result.events] == [False] + [True] * (len(result.events) - 1)
    t0 = result.start_wall_ns
    rx = sorted(probe.rx_ns)

    def shaped(a_ms: int, b_ms: int) -> float:
        inside = [t for t in rx if t0 + a_ms * MS <= t < t0 + b_ms * MS]
        assert len(inside) > 50, f"{len(inside)} packets in {a_ms}..{b_ms} ms"
        return frame * 8 / statistics.median(b - a for a, b in zip(inside, inside[1:])) * 1e9

    fast, slow = shaped(300, 1400), shaped(1900, 2900)  # away from the change and its backlog
    assert abs(fast - 12.112e6) <= 0.1 * 12.112e6, f"{fast / 1e6:.3f} Mbit/s in the 12 Mbit/s phase"
    assert abs(slow - 3.028e6) <= 0.1 * 3.028e6, f"{slow / 1e6:.3f} Mbit/s in the 3 Mbit/s phase"
