"""netem slots against their grid: `slot_error_us_p99` (bar: <= 50 us).

Profile 1 uplink gets `slot 5ms packets 4` (SLOT_NS, PER_SLOT) and nothing else. PPS numbered
datagrams a second, twice what the slots carry (PER_SLOT per SLOT_NS), keep a backlog, so by netem's
rule (docs/pipeline-contract.md, stage 7a) every slot is used up and the next opens exactly SLOT_NS
later: bursts of PER_SLOT on a grid SLOT_NS apart. Theory: the same rule run on the datagrams'
arrival times (the sender's kernel transmit stamps) gives each datagram its release time: a new grid
starts wherever the backlog ran dry (a sender that stalled at the start, say), which the figure then
follows instead of counting a whole shifted grid as error. The sink's kernel receive stamps (rx) give

    error_i = rx_i - predicted_i - median(rx - predicted)

(the median is the path's constant latency). `slot_error_us_p99` is the 99th percentile of |error|
(p50 signed and max in the JSON): the switch's release lateness plus the receive path's jitter
(datagrams of one slot are written back to back, so the last of a burst is a few microseconds behind
the first). The JSON also has the burst sizes found on the wire (gaps above half a slot split them),
the grids the theory started (1 if the backlog never ran dry), the bursts' mean spacing against
SLOT_NS, and `reference_jitter_us_p99`: the same datagrams sent at the same time over the bridge-only
reference path (topo.py), the 99th percentile of |one-way delay - its median| there, which is the
machine's own tail (a thread descheduled by other load), shared by the switch path.

It cannot show a stopped CPU, though: the bridge forwards in the sender's context, so a stall delays
the sender's stamp as much as the arrival. Host-stall watchers (hoststats.watch_stalls, below the
switch's priority) run through the step instead; `host_stalls` lists what they saw (wake-ups 1 ms
or more late), `held_by_host_stalls` counts the datagrams whose due time and arrival bracket a
watched stall, and `error_us_p99_not_held` is the figure over the others. No bar uses it: it says
whether a miss came with the host stopping the switch's CPU. (The full run of 2026-11-27 03:39,
before the watchers, had one burst of 36: nine slots released together after a 39 ms hold, which
alone put 0.9 % of the datagrams milliseconds late and the p99 at 318 us.)
"""
from __future__ import annotations

import statistics
import time

import hoststats
from common import finish, one_way_ns, percentile, send, sink
from topo import Topo

from p4netem import pipeline as pl

SLOT_NS = 5_000_000
PER_SLOT = 4
PPS = 2 * PER_SLOT * 1_000_000_000 // SLOT_NS  # twice what the slots carry
PACKETS = 4000  # 2 s of sending, 5 s until the last slot
FRAME = 100
PORT = 5462
REF_PORT = 5463


def predict(arrivals: list[int]) -> tuple[list[int], int]:
    """netem's slot rule (no slot yet, or one opened before the packet was due: a new one a slot
    delay later; PER_SLOT packets use a slot up) on arrival times; the release times and how many
    grids it started."""
    next_ns, used, grids, out = 0, 0, 0, []
    for t in arrivals:
        if next_ns < t:
            next_ns, used, grids = t + SLOT_NS, 0, grids + 1
        out.append(next_ns)
        used += 1
        if used >= PER_SLOT:
            next_ns, used = next_ns + SLOT_NS, 0
    return out, grids


def measure(t: Topo, ctl) -> dict:
    ctl.set_impairment(1, pl.UPLINK, slot_delay_ns=SLOT_NS, slot_packets=PER_SLOT)
    try:
        h1r, h2r = t.ref
        t0_real = time.time_ns()
        with (sink(t, t.h2, PORT, idle=1.0) as done, sink(t, h2r, REF_PORT, idle=1.0) as ref_done,
              hoststats.watch_stalls() as watch):
            # The same datagrams over the bridge-only path at the same time: its one-way delays'
            # spread is the machine's own (descheduled threads), which the switch path shares.
            ref = send(t, h1r, h2r.ip, REF_PORT, PPS * FRAME * 8, FRAME, count=PACKETS, background=True,
                       tx_stamps=True)
            sent = send(t, t.h1, t.h2.ip, PORT, PPS * FRAME * 8, FRAME, count=PACKETS, tx_stamps=True)
            ref_sent = finish(ref)
            rec, ref_rec = done(), ref_done()
    finally:
        ctl.set_impairment(1, pl.UPLINK)
    if sent["send_errors"] or len(rec["seq"]) < PACKETS:
        raise RuntimeError(f"{len(rec['seq'])} of {PACKETS} datagrams arrived ({sent['send_errors']} refused "
                           "by the sender's kernel): the slots would be judged on a different sequence")
    rx = dict(zip(rec["seq"], rec["rx_ns"]))
    # Arrival order and times from the kernel's transmit stamps (the time the datagram carries where
    # the kernel gave none).
    tx = dict(zip(rec["seq"], rec["tx_ns"]))
    kernel = dict(zip(sent["tx_kernel"]["seq"], sent["tx_kernel"]["tx_ns"]))
    unstamped = sum(1 for i in tx if i not in kernel)
    tx.update((i, k) for i, k in kernel.items() if i in tx)
    order = sorted(rx)
    predicted, grids = predict([tx[i] for i in order])
    offset = statistics.median(rx[i] - p for i, p in zip(order, predicted))
    errors = [rx[i] - p - offset for i, p in zip(order, predicted)]
    abs_us = [abs(e) / 1e3 for e in errors]
    ref_owd = list(one_way_ns(ref_rec, ref_sent)[0].values())
    ref_med = statistics.median(ref_owd) if ref_owd else 0
    ref_abs_us = [abs(d - ref_med) / 1e3 for d in ref_owd]
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
    # Which datagrams a watched host stall may have held: its CPU stopped between the datagram's
    # due time (predicted plus the path) and its arrival.
    held = watch.may_have_held([(p + offset, rx[i]) for i, p in zip(order, predicted)])
    clear_us = [a for a, h in zip(abs_us, held) if not h]
    return {
        "slot_error_us_p99": percentile(abs_us, 99),
        "slot_config": {
            "netem": f"slot {SLOT_NS // 1_000_000}ms packets {PER_SLOT}", "packets": PACKETS, "pps": PPS,
            "frame_bytes": FRAME,
            "error_us_p50_signed": statistics.median(errors) / 1e3, "error_us_max": max(abs_us),
            "error_us_p90": percentile(abs_us, 90), "error_us_p95": percentile(abs_us, 95),
            # Where in its burst a datagram was (0 = first written): the slot's datagrams leave back to back.
            "error_us_p50_by_position": {str(k): statistics.median(e / 1e3 for i, e in zip(order, errors)
                                                                   if i % PER_SLOT == k) for k in range(PER_SLOT)},
            "error_us_p99_by_position": {str(k): percentile([abs(e) / 1e3 for i, e in zip(order, errors)
                                                             if i % PER_SLOT == k], 99) for k in range(PER_SLOT)},
            "reference_jitter_us_p99": percentile(ref_abs_us, 99) if ref_abs_us else None,
            "reference_received": len(ref_owd),
            "judged": len(errors), "without_kernel_tx_stamp": unstamped, "grids_started": grids,
            "bursts": len(bursts), "bursts_theory": -(-PACKETS // PER_SLOT),
            "burst_sizes": {str(k): bursts.count(k) for k in sorted(set(bursts))},
            "burst_size_theory": PER_SLOT,
            "slot_spacing_us_mean": spacing / 1e3, "slot_spacing_us_theory": SLOT_NS / 1e3,
            "host_stalls": hoststats.stalls_summary(watch, t0_real),
            "held_by_host_stalls": sum(held),
            "error_us_p99_not_held": percentile(clear_us, 99) if clear_us else None,
        },
    }
