"""netem slots against their grid: `slot_error_us_p99` (bar: <= 50 us).

Profile 1 uplink gets `slot 5ms packets 4` (SLOT_NS, PER_SLOT) and nothing else. PPS numbered
datagrams a second, twice what the slots carry (PER_SLOT per SLOT_NS), keep a backlog from the
first packet on, so by netem's rule (docs/pipeline-contract.md, stage 7a) the first packet opens a
slot one slot delay after it arrives, every slot is used up, and the next opens exactly SLOT_NS
later: datagram i leaves at s0 + (i // PER_SLOT) * SLOT_NS. Theory: PER_SLOT datagrams per slot,
slots SLOT_NS apart, no error. The sink's kernel receive stamps (rx) give, per datagram, its slot's
grid time: s0 (with the path's constant latency) is the median of rx_i - (i // PER_SLOT) * SLOT_NS,
and

    error_i = rx_i - s0 - (i // PER_SLOT) * SLOT_NS

`slot_error_us_p99` is the 99th percentile of |error| (p50 signed and max in the JSON), which is the
switch's release lateness plus the host's receive-path jitter (datagrams of one slot are written
back to back, so the last of a burst is a few microseconds behind the first). The JSON also has the
burst sizes found on the wire (gaps above half a slot split them) against PER_SLOT, and the mean
spacing of the bursts against SLOT_NS; a backlog that ran dry (the sender stalled for longer than
the backlog lasted) would restart the grid and show as large errors, not be hidden.
"""
from __future__ import annotations

import statistics

from common import percentile, send, sink
from topo import Topo

from p4netem import pipeline as pl

SLOT_NS = 5_000_000
PER_SLOT = 4
PPS = 2 * PER_SLOT * 1_000_000_000 // SLOT_NS  # twice what the slots carry
PACKETS = 4000  # 2 s of sending, 5 s until the last slot
FRAME = 100
PORT = 5462


def measure(t: Topo, ctl) -> dict:
    ctl.set_impairment(1, pl.UPLINK, slot_delay_ns=SLOT_NS, slot_packets=PER_SLOT)
    try:
        with sink(t, t.h2, PORT, idle=1.0) as done:
            sent = send(t, t.h1, t.h2.ip, PORT, PPS * FRAME * 8, FRAME, count=PACKETS)
            rec = done()
    finally:
        ctl.set_impairment(1, pl.UPLINK)
    if sent["send_errors"] or len(rec["seq"]) < PACKETS:
        raise RuntimeError(f"{len(rec['seq'])} of {PACKETS} datagrams arrived ({sent['send_errors']} refused "
                           "by the sender's kernel): the slots would be judged on a different sequence")
    rx = dict(zip(rec["seq"], rec["rx_ns"]))
    grid = {i: (i // PER_SLOT) * SLOT_NS for i in rx}
    s0 = statistics.median(rx[i] - grid[i] for i in rx)
    errors = [rx[i] - s0 - grid[i] for i in sorted(rx)]
    abs_us = [abs(e) / 1e3 for e in errors]
    # Bursts on the wire, in arrival order: a gap above half a slot starts a new one.
    times = sorted(rx.values())
    bursts, starts = [1], [times[0]]
    for a, b in zip(times, times[1:]):
        if b - a > SLOT_NS // 2:
            bursts.append(1)
            starts.append(b)
        else:
            bursts[-1] += 1
    spacing = (starts[-1] - starts[0]) / (len(starts) - 1) if len(starts) > 1 else 0.0
    return {
        "slot_error_us_p99": percentile(abs_us, 99),
        "slot_config": {
            "netem": f"slot {SLOT_NS // 1_000_000}ms packets {PER_SLOT}", "packets": PACKETS, "pps": PPS,
            "frame_bytes": FRAME,
            "error_us_p50_signed": statistics.median(errors) / 1e3, "error_us_max": max(abs_us),
            "bursts": len(bursts), "bursts_theory": -(-PACKETS // PER_SLOT),
            "burst_sizes": {str(k): bursts.count(k) for k in sorted(set(bursts))},
            "burst_size_theory": PER_SLOT,
            "slot_spacing_us_mean": spacing / 1e3, "slot_spacing_us_theory": SLOT_NS / 1e3,
        },
    }
