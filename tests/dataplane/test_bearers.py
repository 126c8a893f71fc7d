"""Bearer queues of a shared cell on the wire (contract stage 6a): two UEs behind one cell profile.

UE 0 (h1's UDP port 9311) gets a bulk download that keeps its queue full; UE 1 (port 9312) gets a
light probe, a "ping", whose one-way delays come from kernel timestamps. With one rate queue for
the profile (bearers fifo) the probe waits behind the whole download queue (hundreds of ms: the
control that shows the test can fail); with a bearer per UE (drr) it waits at most for the one
download packet on the link, a 1514-byte frame's service time at the cell's rate. The cell is
slow (2 Mbit/s: 6 ms per frame) so that the bound stands far above a busy machine's noise.
"""

from __future__ import annotations

import threading

from wirestats import MS, median, ms, percentile

from p4netem import pipeline as pl
from p4netem.lab import LAB_PROFILE, TwoHostLab
from p4netem.lab.probe import ProbeResult, run_probe
from p4netem.profiles import Profile

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
    alone = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=30, rate=20, port=PING_PORT, idle=1.0)
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
    woken = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=1, rate=1, port=BULK_PORT, idle=1.0)
    assert woken.received == 1
    # Then, together: UE 0 gets 30 packets over 1.5 s, UE 1 (asleep) one packet 0.3 s into them.
    awake: list[ProbeResult] = []
    ue0 = threading.Thread(target=lambda: awake.append(run_probe(
        lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, port=BULK_PORT, idle=2.0,
        at=[0.5 + i / 20 for i in range(30)])))
    ue0.start()
    try:
        asleep = run_probe(lab.h2.ns, lab.h1.ns, lab.h1.ip, count=0, rate=0, port=PING_PORT, idle=2.0, at=[0.8])
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
