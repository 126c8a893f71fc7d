"""Added one-way delay accuracy under moderate load.

Profile 1 (uplink, h1 -> h2) gets ``delay_ns = DELAY_NS`` and nothing else. While a background UDP flow
of BACKGROUND_BPS runs through the same profile, PROBES probe datagrams are sent at PROBE_PPS; each
carries its send time and the sink takes the kernel receive timestamp, so one-way delay = rx - tx on one
clock. The same run, through the same switch and background load, is first made with ``delay_ns = 0``:
its median is what the path (sender stack, two veths, switch, receiver stack) costs without the delay
stage. Per probe:

    error = one_way_delay - DELAY_NS - median(baseline one-way delay)

``delay_error_us_p50`` is the median of the signed error, ``delay_error_us_p99`` the 99th percentile of
|error|.
"""
from __future__ import annotations

import statistics

from common import finish, percentile, send, sink
from topo import Topo

DELAY_NS = 50_000_000
BACKGROUND_BPS = 50e6
BACKGROUND_FRAME = 1500
PROBE_PPS = 500
PROBES = 2000
PROBE_FRAME = 100
PROBE_PORT = 5101
BG_PORT = 5102


def one_run(t: Topo, ctl, delay_ns: int) -> list[int]:
    ctl.set_impairment(1, 0, delay_ns=delay_ns)
    duration = PROBES / PROBE_PPS
    with sink(t, t.h2, BG_PORT, idle=1.0) as bg_done, sink(t, t.h2, PROBE_PORT, idle=1.0) as done:
        # Background starts first and outlasts the probes so that every probe sees the load.
        bg = send(t, t.h1, t.h2.ip, BG_PORT, BACKGROUND_BPS, BACKGROUND_FRAME,
                  duration=duration + 1.0, background=True)
        send(t, t.h1, t.h2.ip, PROBE_PORT, PROBE_PPS * PROBE_FRAME * 8, PROBE_FRAME, count=PROBES)
        bg_sent = finish(bg)
        rec = done()
        bg_rec = bg_done()
    if len(rec["seq"]) < 0.99 * PROBES:
        raise RuntimeError(f"only {len(rec['seq'])} of {PROBES} probes arrived (delay {delay_ns} ns)")
    bg_bytes = sum(bg_rec["frame_bytes"])
    bg_span = (bg_rec["rx_ns"][-1] - bg_rec["rx_ns"][0]) / 1e9 if bg_rec["rx_ns"] else 0
    ctl.last_background = {"sent": bg_sent["sent"], "received": len(bg_rec["seq"]),
                           "received_mbit_s": bg_bytes * 8 / bg_span / 1e6 if bg_span else 0.0}
    return [rx - tx for rx, tx in zip(rec["rx_ns"], rec["tx_ns"])]


def measure(t: Topo, ctl) -> dict:
    base = one_run(t, ctl, 0)
    base_bg = ctl.last_background
    delayed = one_run(t, ctl, DELAY_NS)
    load_bg = ctl.last_background
    ctl.set_impairment(1, 0)
    base_med = statistics.median(base)
    err = [d - DELAY_NS - base_med for d in delayed]
    abs_err = [abs(e) for e in err]
    us = 1e-3
    def dist(v: list[float]) -> dict:
        return {f"p{q:g}": percentile(v, q) * us for q in (1, 10, 50, 90, 99, 99.9)} | {
            "max": max(v) * us}

    return {
        "delay_error_us_p50": statistics.median(err) * us,
        "delay_error_us_p99": percentile(abs_err, 99) * us,
        "delay_error_us_max": max(abs_err) * us,
        "delay_error_us_p1_signed": percentile(err, 1) * us,
        "delay_error_us_p99_signed": percentile(err, 99) * us,
        "delay_baseline_us_p50": base_med * us,
        "delay_baseline_us_p99": percentile(base, 99) * us,
        "delay_config": {
            "delay_ns": DELAY_NS,
            "probes": {"count": PROBES, "pps": PROBE_PPS, "frame_bytes": PROBE_FRAME,
                       "received_baseline": len(base), "received_delayed": len(delayed)},
            "background": {"offered_bps": BACKGROUND_BPS, "frame_bytes": BACKGROUND_FRAME,
                           "baseline_run": base_bg, "delayed_run": load_bg},
            "baseline_one_way_us": dist(base),
            "delayed_error_us": dist(err),
            "clock": "tx: CLOCK_REALTIME in the sender before send(); rx: SO_TIMESTAMPNS",
        },
    }
