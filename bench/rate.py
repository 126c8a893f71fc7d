"""Rate-shaping accuracy.

For each configured rate R, profile 1 (uplink) gets ``ns_per_byte_q16 = round(8e9 / R * 65536)``,
``overhead_bytes = 0`` and a queue of QUEUE_SECONDS of R (at least QUEUE_MIN_FRAMES frames). A UDP
sender offers OVERLOAD * R, so the rate queue never empties and the shaper alone sets the pace.

What is counted: Ethernet frame bytes (14 header + 20 IPv4 + 8 UDP + payload; no FCS, preamble or
inter-frame gap), which is exactly the length the rate stage charges when overhead_bytes is 0. So R is a
rate of frame bytes and so is the goodput.

Goodput over the steady interval: datagrams whose kernel receive timestamp is at least WARMUP_S after the
first arrival, up to the last arrival (the queue drains at R after the sender stops, so the tail is still
steady). With k the first and N the last datagram of that window,

    goodput = 8 * sum(frame_bytes[k+1 .. N]) / (rx_ns[N] - rx_ns[k])

(each gap between departures is the serialisation time of the later frame). The figure is
|goodput / R - 1|; ``rate_error_pct_max`` is the worst over RATES.
"""
from __future__ import annotations

from p4netem import pipeline as pl

from common import send, sink
from topo import Topo

RATES = (64e3, 1e6, 10e6, 100e6)
OVERLOAD = 2.0
SEND_SECONDS = 4.0
WARMUP_S = 0.5
QUEUE_SECONDS = 0.5
QUEUE_MIN_FRAMES = 32
PORT = 5301


def frame_for(rate_bps: float) -> int:
    # Small frames at low rates so that the steady window still holds hundreds of frames.
    if rate_bps < 500e3:
        return 100
    if rate_bps < 5e6:
        return 500
    return 1500


def ns_per_byte_q16(rate_bps: float) -> int:
    return round(8e9 / rate_bps * 65536)


def one_rate(t: Topo, ctl, rate_bps: float) -> dict:
    frame = frame_for(rate_bps)
    queue_bytes = max(int(QUEUE_SECONDS * rate_bps / 8), QUEUE_MIN_FRAMES * frame)
    q16 = ns_per_byte_q16(rate_bps)
    ctl.set_impairment(1, 0, ns_per_byte_q16=q16, overhead_bytes=0, queue_limit_bytes=queue_bytes)
    before = ctl.counters(1, 0)
    # The queue drains for up to QUEUE_SECONDS after the sender stops; idle must outlast a frame gap.
    idle = max(1.0, 4 * frame * 8 / rate_bps)
    with sink(t, t.h2, PORT, idle=idle) as done:
        sent = send(t, t.h1, t.h2.ip, PORT, OVERLOAD * rate_bps, frame, duration=SEND_SECONDS)
        rec = done()
    rx, fb = rec["rx_ns"], rec["frame_bytes"]
    if len(rx) < 10:
        raise RuntimeError(f"rate {rate_bps}: only {len(rx)} frames arrived")
    k = next(i for i, r in enumerate(rx) if r - rx[0] >= WARMUP_S * 1e9)
    n = len(rx) - 1
    goodput = 8 * sum(fb[k + 1:n + 1]) / ((rx[n] - rx[k]) / 1e9)
    after = ctl.counters(1, 0)
    ctl.set_impairment(1, 0)
    frame_time_ns = frame * 8 / rate_bps * 1e9
    max_gap = max(b - a for a, b in zip(rx[k:n], rx[k + 1:n + 1]))
    return {
        "configured_bps": rate_bps,
        "goodput_bps": goodput,
        "error_pct": abs(goodput / rate_bps - 1) * 100,
        "frame_bytes": frame,
        "ns_per_byte_q16": q16,
        "queue_limit_bytes": queue_bytes,
        "offered_bps": sent["offered_bps"],
        "sent": sent["sent"],
        "received": len(rx),
        "window_frames": n - k,
        "window_s": (rx[n] - rx[k]) / 1e9,
        # Diagnostics: a gap much longer than one frame time means the link went idle (queue ran
        # dry: the sender was starved longer than the queue lasts) or the switch stalled.
        "max_gap_frame_times": max_gap / frame_time_ns,
        "sender_max_late_ms": sent["max_late_ms"],
        "switch_queue_full_drops": after.drops[pl.DropReason.QUEUE_FULL]
        - before.drops[pl.DropReason.QUEUE_FULL],
        "switch_out": after.profile_out - before.profile_out,
    }


def measure(t: Topo, ctl) -> dict:
    per = [one_rate(t, ctl, r) for r in RATES]
    return {
        "rate_error_pct_max": max(p["error_pct"] for p in per),
        "rate_error_pct": {f"{p['configured_bps']:g}": p["error_pct"] for p in per},
        "rate_config": {
            "counted": "Ethernet frame bytes (header+IPv4+UDP+payload, no FCS/preamble/IFG); "
                       "overhead_bytes=0",
            "sender": f"bench/traffic.py paced UDP at {OVERLOAD}x the rate for {SEND_SECONDS} s",
            "window": f"kernel rx timestamps, from {WARMUP_S} s after the first arrival to the last",
            "per_rate": per,
        },
    }
