"""Counters conserve packets exactly: for every pd, profile_in + profile_dup == profile_out + the sum
of drops by reason, read over P4Runtime once traffic has stopped, with loss, duplication, rate
shaping with queue drops, delay and jitter active at once in both directions; and they agree with
what the hosts sent and received. (Corruption is left out: a corrupted packet whose header flip
makes the receiving kernel drop it would blur the wire-side count; test_corruption covers it.)
Frames the egress port's MTU does not allow are drops (tx_error), not sends."""

from __future__ import annotations

import threading

from wirestats import MS, Capture, ns_per_byte_q16, prob, send_raw, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import ProbeResult, run_probe
from p4netem.pipeline import DOWNLINK, UPLINK, DropReason


def test_conservation_with_every_stage(lab: TwoHostLab) -> None:
    lab.impair(
        UPLINK,
        delay_ns=5 * MS,
        jitter_ns=1 * MS,
        jitter_dist=1,
        loss_prob=prob(0.05),
        dup_prob=prob(0.05),
        ns_per_byte_q16=ns_per_byte_q16(20_000_000),
        queue_limit_pkts=10,
    )
    lab.impair(DOWNLINK, ge_p=prob(0.05), ge_r=prob(0.5), ge_loss_bad=prob(0.8), delay_ns=2 * MS)
    n_up, n_down = 6000, 3000
    results: dict[str, ProbeResult] = {}

    def downlink() -> None:
        results["down"] = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=n_down, rate=1500, size=200, port=9061)

    # Uplink offers 24 Mbit/s of 500-byte datagrams into a 20 Mbit/s link: queue drops too.
    other = threading.Thread(target=downlink)
    other.start()
    results["up"] = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n_up, rate=5500, size=500, port=9060)
    other.join()

    for direction, n, key in ((UPLINK, n_up, "up"), (DOWNLINK, n_down, "down")):
        c = settled_counters(lab, direction)
        assert c.profile_in + c.profile_dup == c.profile_out + c.dropped, (direction, c)
        assert c.profile_in == n, (direction, c.profile_in, n)
        # Every packet the switch sent reached the host (copies included), and nothing else did.
        assert results[key].received == c.profile_out, (direction, results[key].received, c)

    up = lab.counters(UPLINK)
    for reason in (DropReason.LOSS_RANDOM, DropReason.QUEUE_FULL):
        assert up.drops[reason] > 0, f"uplink has no {reason.name} drops: {up.drops}"
    assert up.profile_dup > 0
    down = lab.counters(DOWNLINK)
    assert down.drops[DropReason.LOSS_BURST] > 0 and down.drops[DropReason.LOSS_RANDOM] == 0


def test_frames_longer_than_the_egress_mtu_are_drops_not_sends(lab: TwoHostLab) -> None:
    """h1's link has MTU 9000, h2's 1500: frames Linux will not send on h2's port (longer than
    MTU + 14, or MTU + 18 with a VLAN tag) are counted as tx_error drops, and everything counted as
    sent arrives (issue 13, defect 4: they were counted as sent while the kernel dropped them).
    Also with a delay, where the frame is held first."""
    from p4netem.lab.netns import run

    run(["ip", "link", "set", lab.h1.switch_iface, "mtu", "9000"])
    lab.h1.ns.run(["ip", "link", "set", lab.h1.iface, "mtu", "9000"])
    h1 = bytes.fromhex(lab.h1.mac.replace(":", ""))
    h2 = bytes.fromhex(lab.h2.mac.replace(":", ""))

    def frame(length: int, marker: int, vlan: bool = False) -> bytes:
        head = h2 + h1 + (b"\x81\x00\x00\x07" if vlan else b"") + b"\x88\xb5"  # local experimental type
        body = b"p4netem-mtu" + bytes([marker])
        return head + body + bytes(length - len(head) - len(body))

    # (length, tagged, fits a 1500-byte MTU port)
    cases = [(1514, False, True), (1515, False, False), (1600, False, False), (1900, False, False),
             (1518, True, True), (1519, True, False)]
    for delay_ns in (0, 5 * MS):
        lab.impair(UPLINK, delay_ns=delay_ns)
        before = lab.counters(UPLINK)
        capture = Capture(lab.h2.ns, lab.h2.iface, seconds=3.0)
        # One sender for all cases: a Python started per case could outlast the capture at load 10+.
        send_raw(lab.h1.ns, lab.h1.iface, [frame(length, marker, vlan) for marker, (length, vlan, _) in enumerate(cases)], 3)
        arrived = [f for f in capture.frames() if f[6:12] == h1 and b"p4netem-mtu" in f]
        got = sorted({f[f.index(b"p4netem-mtu") + 11] for f in arrived})
        after = settled_counters(lab, UPLINK)
        assert got == [m for m, (_, _, fits) in enumerate(cases) if fits], (delay_ns, got)
        assert len(arrived) == 3 * sum(fits for _, _, fits in cases)
        assert after.profile_in - before.profile_in == 3 * len(cases)
        assert after.profile_out - before.profile_out == len(arrived), (delay_ns, after, before)
        assert after.drops.get(DropReason.TX_ERROR, 0) - before.drops.get(DropReason.TX_ERROR, 0) \
            == 3 * sum(not fits for _, _, fits in cases)
        assert after.conservation_gap() == 0
    switch_log = lab.switch.log_tail(200)
    assert "frames longer than the egress MTU allows" in switch_log and lab.h2.switch_iface in switch_log
