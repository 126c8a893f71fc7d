"""Bearer queues of a shared cell on the wire (contract stage 6a): two UEs behind one cell profile.

UE 0 (h1's UDP port 9311) gets a bulk download that keeps its queue full; UE 1 (port 9312) gets a
light probe, a "ping", whose one-way delays come from kernel timestamps. With one rate queue for
the profile (bearers fifo) the probe waits behind the whole download queue (hundreds of ms: the
control that shows the test can fail); with a bearer per UE (drr) it waits at most for the one
download packet on the link, a 1514-byte frame's service time at the cell's rate. The cell is
slow (2 Mbit/s: 6 ms per frame) so that the bound stands far above a busy machine's noise.

Proportional fair (`bearers: {scheduler: pf}`): UE 1 starts a download while UE 0's has run alone
for a second; PF gives UE 1 the cell alone until their decaying averages of served bytes meet
(a number of frames computed from the half-life and the rate), then they alternate; DRR, the
control, alternates at once. Judged by the order of the two flows' frames at the receiving host.
"""

from __future__ import annotations

import math
import threading

import pytest
from wirestats import MS, median, ms, percentile

from p4netem import pipeline as pl
from p4netem.lab import LAB_PROFILE, TwoHostLab
from p4netem.lab.probe import ProbeResult, run_probe
from p4netem.profiles import Profile

# Asserts on packet timing: run once more if it failed while the host stalled (the p4netem plugin).
pytestmark = pytest.mark.p4netem_timing

RATE = 2_000_000
FRAME = 1514  # the download's frames: 1472 bytes of UDP payload
SERVICE = FRAME * 8 * 1_000_000_000 // RATE  # 6.056 ms
BULK_PORT, PING_PORT = 9311, 9312


def cell_profile(bearers: str) -> Profile:
    return Profile.parse({"name": f"cell-{bearers}", "downlink": {"rate": "2Mbit", "queue": 100, "bearers": bearers}})


def classify_ping_as_ue_1(lab: TwoHostLab) -> None:
    """Downlink datagrams to the ping's port are UE 1; the rest of the downlink stays UE 0."""
    client = lab.client
    assert client is not None
    client.insert(client.table_entry(
        pl.CLASSIFIER,
        {"standard_metadata.ingress_port": 2, "meta.l4_dst_port": (PING_PORT, PING_PORT)},
        pl.SET_PROFILE,
        {"profile_id": LAB_PROFILE, "direction": pl.DOWNLINK, "ue_id": 1},
        priority=20,
    ))


def ping_under_download(lab: TwoHostLab) -> tuple[ProbeResult, ProbeResult]:
    """A 3 Mbit/s download to UE 0 for 4 s (1.5 times the cell: its queue fills) and, from 1.5 s on,
    20 probes a second to UE 1."""
    bulk: list[ProbeResult] = []
    download = threading.Thread(target=lambda: bulk.append(run_probe(
        lab.h2.ns, lab.h1.ns, lab.h1.ip, count=1000, rate=250, size=1472, port=BULK_PORT, idle=2.0)))
    download.start()
    try:
        ping = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, port=PING_PORT, idle=2.0,
                         at=[1.5 + i / 20 for i in range(50)])
    finally:
        download.join()
    return bulk[0], ping


def test_a_download_to_one_ue_does_not_hold_back_another_ues_ping(lab: TwoHostLab) -> None:
    classify_ping_as_ue_1(lab)
    lab.apply_profile(cell_profile("drr"))
    # The base: 30 pings on the idle cell, 10 ms apart (they were 50: the same 30 in 0.3 s instead
    # of 1.5; each is 0.42 ms on the wire at 2 Mbit/s, so none waits for another either way).
    # (Ended once all 30 are in: nothing duplicates here, stop_when_complete.)
    alone = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=30, rate=100, port=PING_PORT, idle=1.0,
                      stop_when_complete=True)
    assert alone.lost == 0
    base = median(alone.delays_ns)

    # Control: one queue for both UEs. The probe queues behind the download.
    lab.apply_profile(cell_profile("fifo"))
    _, fifo = ping_under_download(lab)
    fifo_added = median(fifo.delays_ns) - base
    assert fifo_added > 20 * SERVICE, f"fifo: the ping waited only {ms(fifo_added)} behind the download"

    lab.apply_profile(cell_profile("drr"))
    bulk, ping = ping_under_download(lab)
    assert ping.lost == 0, f"{ping.lost} pings lost"
    added = [d - base for d in ping.delays_ns]
    # At most the download frame on the link: its service time. Each probe is checked, with 0.5 ms
    # for the host; a busy 2-core machine may stall a few of 50 senders, never most.
    within = sum(a <= SERVICE + MS // 2 for a in added)
    summary = (f"drr: ping delay added median {ms(median(added))}, p90 {ms(percentile(added, 90))}, "
               f"max {ms(max(added))}; one frame is {ms(SERVICE)}; fifo added {ms(fifo_added)}")
    assert within >= 45, f"{50 - within} of 50 pings waited more than one frame: {summary}"
    assert median(added) <= SERVICE, summary
    # The download had the rest of the cell: queue full (drops) and the link busy throughout.
    assert bulk.lost > 0, "the download never filled its bearer"
    span = (max(bulk.rx_ns) - min(bulk.rx_ns)) / 1e9
    rate = (bulk.received - 1) * FRAME * 8 / span
    assert rate >= 0.93 * RATE, f"download got {rate / 1e6:.2f} Mbit/s of the 2 Mbit/s cell"


def test_a_ue_waiting_for_its_radio_holds_back_only_its_own_packets(lab: TwoHostLab) -> None:
    """UE 1's first packet waits 500 ms for its radio's promotion; UE 0's packets sent meanwhile
    (its radio awake) pass it: with bearers they wait for nothing."""
    classify_ping_as_ue_1(lab)
    promotion = 500 * MS
    lab.apply_profile(Profile.parse({"name": "cell-radio", "downlink": {"rate": "10Mbit", "bearers": "drr"},
                                     "radio": {"model": "lte", "promotion": "500ms", "tail": "10s",
                                               "drx_inactivity": 0}}))
    # UE 0's radio is woken first and stays awake (tail 10 s).
    woken = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=1, rate=1, port=BULK_PORT, idle=1.0,
                      stop_when_complete=True)  # done once it is in (nothing duplicates here)
    assert woken.received == 1
    # Then, together: UE 0 gets 30 packets over 1.5 s, UE 1 (asleep) one packet 0.3 s into them.
    awake: list[ProbeResult] = []
    ue0 = threading.Thread(target=lambda: awake.append(run_probe(
        lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, port=BULK_PORT, idle=2.0,
        at=[0.5 + i / 20 for i in range(30)], stop_when_complete=True)))
    ue0.start()
    try:
        asleep = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, port=PING_PORT, idle=2.0, at=[0.8],
                           stop_when_complete=True)
    finally:
        ue0.join()
    a = awake[0]
    assert asleep.received == 1 and a.lost == 0
    assert promotion <= asleep.delays_ns[0] <= promotion + 100 * MS, ms(asleep.delays_ns[0])
    t0, t1 = asleep.tx_ns[0], asleep.rx_ns[0]
    # UE 0's packets sent while UE 1's packet waited for its radio.
    during = [d for s, tx, d in zip(a.seq, a.tx_ns, a.delays_ns) if t0 < tx < t1 - 10 * MS]
    assert len(during) >= 3, f"only {len(during)} of UE 0's packets were sent during UE 1's promotion"
    assert median(during) < 5 * MS and sum(d < 10 * MS for d in during) >= len(during) - 1, [ms(d) for d in during]


# ---- proportional fair ----------------------------------------------------------------------------

HALFLIFE_NS = 1 << 27  # `halflife: 100ms`, which the switch takes as 2^27 ns (134.2 ms)
UE1_BURST = 60  # frames UE 1 sends at once when it starts: more than PF gives it alone (~22)


def pf_alone_frames_theory(halflife_ns: int, ue0_alone_ns: int) -> float:
    """Frames UE 1 should get alone after it starts, from the contract's PF average (served bytes,
    decaying by 2^(-t / H), H = halflife, however the time is split into steps; docs/pipeline-contract.md
    stage 6a).

    UE 0 has been served one frame per SERVICE for ue0_alone_ns = T0; its average approaches
    a_ss = H / (SERVICE ln 2) frames: a0 = f a_ss with f = 1 - 2^(-T0 / H). From UE 1's start (x = t / H)
    UE 1 is served alone: a1(x) = a_ss (1 - 2^-x), while UE 0's average, no longer updated, decays:
    a0 2^-x. UE 1 has the cell until a1 reaches UE 0's average: 2^x = 1 + f, x = log2(1 + f), about
    one half-life when f is near 1 (the linear decay between halvings before issue 11's fix gave
    about 1.2)."""
    f = 1 - 2.0 ** (-ue0_alone_ns / halflife_ns)
    return math.log2(1 + f) * halflife_ns / SERVICE


def downloads_to_both(lab: TwoHostLab) -> tuple[list[int], list[int], int]:
    """UE 0 downloads at 3 Mbit/s (1.5 times the cell) for 1.8 s; from 1.0 s UE 1 downloads too:
    UE1_BURST frames at once (its bearer stays backlogged through the PF phase whatever the
    sender's scheduling) and then 3 Mbit/s to 1.8 s. Returns the UE of each frame h1 received,
    in the order of the kernel's receive stamps (frames are 6 ms apart on the cell), the stamps, and
    how long the sender took to send UE 1's burst (its frames' send stamps, first to last)."""
    ue0: list[ProbeResult] = []
    download = threading.Thread(target=lambda: ue0.append(run_probe(
        lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, size=1472, port=BULK_PORT, idle=2.0,
        at=[i / 250 for i in range(450)])))
    download.start()
    try:
        ue1 = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, size=1472, port=PING_PORT, idle=2.0,
                        at=[1.0] * UE1_BURST + [1.0 + i / 250 for i in range(1, 200)])
    finally:
        download.join()
    arrivals = sorted([(rx, 0) for rx in ue0[0].rx_ns] + [(rx, 1) for rx in ue1.rx_ns])
    burst = [tx for seq, tx in zip(ue1.seq, ue1.tx_ns) if seq < UE1_BURST]
    spread = max(burst) - min(burst) if len(burst) == UE1_BURST else -1
    return [ue for _, ue in arrivals], [rx for rx, _ in arrivals], spread


def longest_run(order: list[int]) -> int:
    best = run = 0
    for i, ue in enumerate(order):
        run = run + 1 if i and ue == order[i - 1] else 1
        best = max(best, run)
    return best


def test_proportional_fair_gives_a_starting_ue_the_cell_until_the_averages_meet(lab: TwoHostLab) -> None:
    """PF: UE 1, starting while UE 0 has been downloading for a second, gets the cell alone until
    its decaying served-bytes average reaches UE 0's (about one half-life: ~22 frames), then the
    two alternate. The same traffic with DRR (the control) alternates from UE 1's first frame: the
    PF check fails on a DRR scheduler and the DRR check fails if PF's preference leaked into DRR.
    Judged on the order of arrivals at h1, not on timing."""
    classify_ping_as_ue_1(lab)
    window = 60
    results = {}
    for scheduler in ("pf", "drr"):
        bearers = {"scheduler": scheduler, **({"halflife": "100ms"} if scheduler == "pf" else {})}
        lab.apply_profile(Profile.parse({"name": f"cell-{scheduler}",
                                         "downlink": {"rate": "2Mbit", "queue": 100, "bearers": bearers}}))
        # The measurement needs UE 1's bearer backlogged from its first frame: a sender preempted
        # for longer than one frame's service in the middle of the burst (a loaded machine) lets
        # UE 0's frame in while UE 1 has nothing queued, which says nothing about the scheduler.
        # Such a run is repeated (at most twice), not judged.
        for _ in range(3):
            order, rx, spread = downloads_to_both(lab)
            if 0 <= spread < SERVICE:
                break
            print(f"{scheduler}: UE 1's burst took {ms(spread)} to send (lost frames if < 0): again")
        assert 0 <= spread < SERVICE, f"{scheduler}: UE 1's burst took {ms(spread)} to send in 3 tries"
        first = order.index(1)
        assert first >= 40, f"{scheduler}: UE 0 had only {first} frames before UE 1 started"
        alone = next((i for i in range(first, len(order)) if order[i] == 0), len(order)) - first
        after = order[first + alone:first + alone + window]
        assert len(after) == window, f"{scheduler}: only {len(after)} frames after UE 1's first run"
        results[scheduler] = (first, alone, after, rx[first] - rx[0])
    _, pf_alone, pf_after, ue0_alone_ns = results["pf"]
    theory = pf_alone_frames_theory(HALFLIFE_NS, ue0_alone_ns)
    _, drr_alone, drr_after, _ = results["drr"]
    summary = (f"PF: UE 1 alone for {pf_alone} frames (theory {theory:.1f}), then UE 1 had "
               f"{sum(pf_after)} of {window} (longest run {longest_run(pf_after)}); DRR: UE 1's first run "
               f"{drr_alone} frames, then {sum(drr_after)} of {window} (longest run {longest_run(drr_after)})")
    print(summary)
    assert 0.7 * theory <= pf_alone <= 1.3 * theory, summary
    # Then they alternate: about half each, no long runs of one UE.
    assert 0.4 * window <= sum(pf_after) <= 0.6 * window and longest_run(pf_after) <= 3, summary
    # DRR alternates from UE 1's first frame (one quantum, one frame, per round).
    assert drr_alone <= 2, summary
    drr_from_start = [1] * drr_alone + drr_after
    assert 0.4 * window <= sum(drr_from_start[:window]) <= 0.6 * window, summary
    assert longest_run(drr_from_start[:window]) <= 2, summary
