"""Exact trace delivery: `trace_delivery_ratio` (bar: >= 0.995).

The data plane plays the bursty random-walk trace of examples/traces/ (walk-cellular.trace: 10 s,
1..18 Mbit/s in 100 ms steps, opportunities placed at random within each millisecond's budget) on
profile 1 uplink: the bench writes its timestamps and per-ms index into the trace registers (as
p4netem's TraceTables does) and names them in set_impairment, with a drop-tail queue of QUEUE
packets. A saturating flow of 1514-byte frames (1.2x the trace's highest 20 ms window rate) keeps
the queue from running dry, so by Mahimahi's link model (docs/pipeline-contract.md, stage 6b) every
opportunity carries one frame (a 1500-byte IP packet is one 1504-byte opportunity). The figure is the
frames the receiver got in one trace period, starting WARMUP_S after the first (the queue full by
then), over the opportunities of one period (the same in any window of that length): 1.0 in theory.
The control-plane player (`p4netem trace run`) reached about 0.945 on this trace (docs/control.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

from common import send, sink
from topo import Topo

from p4netem import pipeline as pl
from p4netem.control.trace import load_trace, window_rates
from p4netem.control.trace_tables import first_at_index
from p4netem.p4rt import update
from p4netem.p4rt.entries import build_register_entry

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "traces" / "walk-cellular.trace"
FRAME = 1514
QUEUE = 100
WARMUP_S = 1.0
PORT = 5472
MS = 1_000_000


def load(ctl, trace, base: int = 0, ms_base: int = 0) -> dict[str, int]:
    """Write the trace's cells and return the set_impairment params that name them."""
    c = ctl.client
    index = first_at_index(trace)
    c.write([update("MODIFY", build_register_entry(c.info, pl.TRACE_OPPORTUNITY_MS, base + i, v))
             for i, v in enumerate(trace.opportunities_ms)]
            + [update("MODIFY", build_register_entry(c.info, pl.TRACE_FIRST_AT, ms_base + m, i))
               for m, i in enumerate(index)])
    period_ns = trace.period_ms * MS
    return {"trace_base": base, "trace_len": len(trace.opportunities_ms), "trace_ms_base": ms_base,
            "trace_period_ms": trace.period_ms, "trace_period_recip": min(2**64 // period_ns, 2**64 - 1)}


def measure(t: Topo, ctl) -> dict:
    trace = load_trace(TRACE)
    period_ns = trace.period_ms * MS
    top = max(r for _, r in window_rates(trace, 20 * MS, period_ns))
    rate_bps = 1.2 * top
    params = load(ctl, trace)
    ctl.set_impairment(1, pl.UPLINK, queue_limit_pkts=QUEUE, **params)
    before = ctl.counters(1, pl.UPLINK).drops[pl.DropReason.QUEUE_FULL]
    try:
        with sink(t, t.h2, PORT, idle=1.0) as done:
            sent = send(t, t.h1, t.h2.ip, PORT, rate_bps, FRAME, duration=WARMUP_S + period_ns / 1e9 + 0.5)
            rec = done()
        drops = ctl.counters(1, pl.UPLINK).drops[pl.DropReason.QUEUE_FULL] - before
    finally:
        ctl.set_impairment(1, pl.UPLINK)
    rx = sorted(rec["rx_ns"])
    if not rx:
        raise RuntimeError("no frame arrived")
    start = rx[0] + int(WARMUP_S * 1e9)
    delivered = sum(1 for x in rx if start <= x < start + period_ns)
    opportunities = len(trace.opportunities_ms)
    return {
        "trace_delivery_ratio": delivered / opportunities,
        "trace_delivery_config": {
            "trace": str(TRACE.relative_to(ROOT)), "period_ms": trace.period_ms,
            "opportunities_per_period": opportunities, "delivered_in_one_period": delivered,
            "offered_bps": rate_bps, "frame_bytes": FRAME, "queue_packets": QUEUE,
            "sent": sent["sent"], "received": len(rx), "queue_full_drops": drops,
            "theory_ratio": 1.0,
        },
    }


if __name__ == "__main__":
    sys.exit("run through bench/run.py --only trace")
