"""How faithfully `p4netem trace run` plays a Mahimahi trace: delivered bytes per window vs the trace.

A TwoHostLab switch plays a trace on the downlink (examples/traces/, `trace_timeline` with the
TimelinePlayer, as `p4netem trace run` does) while h2 sends 1514-byte frames to h1 at 1.2x the
trace's highest window rate, so the link always has packets to send; the rule's queue holds
QUEUE packets (drop-tail). From the receiver's kernel timestamps, per WINDOW of the run (from
the timeline's t=0):

- the trace's opportunities in the window vs the packets delivered in it (one opportunity is one
  full-size packet), in total and per window: mean absolute error in packets, and the median and
  90th percentile of |delivered - trace| / trace over windows with at least 5 opportunities;
- the same with the delivered series shifted by the lag (0..300 ms, in 1 ms steps) that fits best:
  a rate change reaches the packets queued after it, so the delivered rate follows the trace late
  by about the queue's drain time;
- the same aggregated over 100 ms windows; and the timeline's change errors (in force after time).

usage: .venv/bin/python bench/trace_fidelity.py [--trace FILE] [--window 20ms] [--queue 10] [--seconds S]
                                                [--set-mode in-place|switch]
Needs root; starts its own switch. Not part of `make bench`: its figures are quoted in docs/control.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "control-plane"))

from p4netem.control import Controller, Profile  # noqa: E402
from p4netem.control.trace import FRAME_BYTES, load_trace, trace_timeline, window_rates  # noqa: E402
from p4netem.lab import TwoHostLab  # noqa: E402
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe  # noqa: E402
from p4netem.profiles.units import Duration  # noqa: E402

# One opportunity is one full-size packet's frame, as trace_timeline counts it: send exactly those.
FRAME = FRAME_BYTES  # 1514
PAYLOAD = FRAME - UDP_IP_ETH_OVERHEAD  # 1472
MS = 1_000_000


def compare(trace_counts: list[int], rx_ns: list[int], t0: int, width_ns: int, lag_ns: int) -> dict:
    n = len(trace_counts)
    got = [0] * n
    for t in rx_ns:
        k = (t - t0 - lag_ns) // width_ns
        if 0 <= k < n:
            got[k] += 1
    errs = [abs(g - c) for g, c in zip(got, trace_counts)]
    rel = [abs(g - c) / c for g, c in zip(got, trace_counts) if c >= 5]
    rel.sort()
    return {"windows": n, "trace_packets": sum(trace_counts), "delivered": sum(got),
            "mean_abs_error_packets": round(sum(errs) / n, 3),
            "rel_error_p50": round(statistics.median(rel), 4) if rel else None,
            "rel_error_p90": round(rel[int(0.9 * (len(rel) - 1))], 4) if rel else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=ROOT / "examples/traces/walk-cellular.trace")
    ap.add_argument("--window", default="20ms")
    ap.add_argument("--queue", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=None, help="default: one period of the trace")
    ap.add_argument("--set-mode", choices=("in-place", "switch"), default="in-place",
                    help="switch: each window's rate on a new, empty queue (the old one drains next to it)")
    args = ap.parse_args()
    trace = load_trace(args.trace)
    window_ns = int(Duration.parse(args.window))
    duration_ns = int(args.seconds * 1e9) if args.seconds else trace.period_ms * MS
    duration_ns -= duration_ns % window_ns
    base = Profile.parse({"name": "trace-base", "downlink": {"rate": "1Mbit", "queue": args.queue}})
    timeline = trace_timeline(None, trace, window_ns=window_ns, duration_ns=duration_ns, base=base,
                              set_mode=args.set_mode)
    top = max(r for _, r in window_rates(trace, window_ns, duration_ns))
    pps = 1.2 * top / (FRAME * 8)
    lead_s = 1.0
    with TwoHostLab().start() as lab, Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
        ctl.reset()
        box: dict = {}
        # The sender starts before t=0 (its receiver needs a moment) and ends after the run.
        count = int(pps * (duration_ns / 1e9 + lead_s + 1.5))
        sender = threading.Thread(target=lambda: box.update(r=run_probe(
            lab.h2.ns, lab.h1.ns, lab.h1.ip, count=count, rate=pps, size=PAYLOAD, port=9700)))
        ctl.apply(timeline.profiles[0])  # the queue exists before the flow starts
        sender.start()
        time.sleep(0.5)
        result = ctl.run_timeline(timeline, lead_s=lead_s - 0.5)
        sender.join()
    probe = box["r"]
    t0 = result.start_wall_ns
    rows = {}
    for label, width in (("window", window_ns), ("100ms", 100 * MS)):
        n = duration_ns // width
        counts = [trace.count(k * width, (k + 1) * width) for k in range(n)]
        zero = compare(counts, probe.rx_ns, t0, width, 0)
        best = min(range(0, 301), key=lambda lag: compare(counts, probe.rx_ns, t0, width, lag * MS)
                   ["mean_abs_error_packets"])
        rows[label] = {"width_ms": width / MS, "no_lag": zero, "best_lag_ms": best,
                       "at_best_lag": compare(counts, probe.rx_ns, t0, width, best * MS)}
    errors = result.errors_ms
    out = {"trace": str(args.trace), "set_mode": args.set_mode, "window_ms": window_ns / MS, "queue_packets": args.queue,
           "seconds": duration_ns / 1e9, "offered_mbit": round(pps * FRAME * 8 / 1e6, 2),
           "changes": len(errors), "change_error_ms_p50": round(statistics.median(errors), 3),
           "change_error_ms_max": round(max(errors), 3), "sent": probe.sent, "lost": probe.lost, **rows}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
