"""Counters conserve packets exactly: for every pd, profile_in + profile_dup == profile_out + the sum
of drops by reason, read over P4Runtime once traffic has stopped, with loss, duplication, rate
shaping with queue drops, delay and jitter active at once in both directions; and they agree with
what the hosts sent and received. (Corruption is left out: a corrupted packet whose header flip
makes the receiving kernel drop it would blur the wire-side count; test_corruption covers it.)"""

from __future__ import annotations

import threading

from wirestats import MS, ns_per_byte_q16, prob, settled_counters

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
