"""AQM on a trace's queue: Mahimahi's `mm-link UP DOWN --uplink-queue=codel` played by the data plane.

Profile 1 uplink plays the bursty random-walk trace of examples/traces/ (walk-cellular.trace, as
bench/trace_delivery.py: 10 s, 1..18 Mbit/s in 100 ms steps) with a QUEUE_PKTS-packet queue, once
drop-tail (mm-link's droptail) and once with CoDel (RFC 8289's target 5 ms and interval 100 ms, as
mm-link's `codel` with `target=5,interval=100`), under bench/aqm.py's traffic (one long CUBIC flow,
web-like short flows, 50 probes/s whose one-way delay is their sojourn; the ACK path delayed
aqm.BASE_RTT_MS). No bars (issue 11 names none for traces); the figures:

  trace_taildrop_sojourn_ms_p50, trace_codel_sojourn_ms_p50
                           the probes' median sojourn over the run's second half: the standing
                           queue of drop-tail against CoDel's on the same trace
  trace_codel_reference_drop_agreement
                           the CoDel round is captured at the switch's two ports (every frame
                           entering port 1; h1's IPv4 frames reaching h2). Its arrivals, replayed
                           through bench/codel_reference.py's replay_trace (Mahimahi's LinkQueue
                           serving the same trace from the first arrival, CoDel's dequeue with
                           Linux's arithmetic at each opportunity), give the frames that link
                           would drop: |same frames| / |either's drops| (1.0: the switch dropped
                           exactly those). The trace's per-pd state is cleared before the round, so
                           the switch's trace starts at the first frame as the replay's does.
                           CoDel does not drop while at most one MTU is queued; Linux and Mahimahi
                           count the bytes left behind the packet at its dequeue, the switch (which
                           decides at admission, before those arrive) the bytes queued ahead of it
                           (docs/pipeline-contract.md, stage 6). On a link whose rate falls to
                           1 Mbit/s (one 1514-byte frame in 12 ms, more than the 5 ms target) the
                           two rules part often, and each different drop shifts CoDel's later
                           schedule: this figure is low (docs/benchmarks.md) although the drop
                           counts agree within a few percent (in trace_aqm_config)
  trace_codel_reference_drop_agreement_ahead
                           the same replay with the switch's rule (the bytes of the packets ahead
                           whose departure comes after the packet's arrival): whether the switch
                           runs its own documented rule exactly on real traffic (1.0 but for
                           timing: the replay's clock is the capture's stamps, the switch's its
                           own, so a frame stamped within microseconds of an opportunity may fall
                           on the other side of it)
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import aqm
import codel_reference
import trace_delivery
from topo import Topo

from p4netem import pipeline as pl
from p4netem.control.trace import load_trace

QUEUE_PKTS = 1000


def _reference_check(t: Topo, ingress: Path, egress: Path, after_ns: int, trace, aqm_drops: int) -> dict:
    # Every frame entering port 1 since the trace was cleared: ARP takes the trace's bytes too.
    arrivals = aqm.captured_frames(ingress, None, after_ns)
    if not arrivals:
        return {"frames": 0, "agreement": None}
    switch_drops = aqm.missing_at_egress(arrivals, egress, t.h1.ip)
    times, sizes = [a[0] for a in arrivals], [a[2] for a in arrivals]
    out = {"frames": len(arrivals), "non_ip_frames": sum(1 for a in arrivals if a[1] is None),
           "switch_drops": len(switch_drops), "aqm_drops_counted": aqm_drops}
    for suffix, ahead in (("", False), ("_ahead", True)):
        ref = {i for _, i in codel_reference.replay_trace(times, sizes, list(trace.opportunities_ms), times[0],
                                                          ahead=ahead) if arrivals[i][1] is not None}
        out |= aqm.drop_agreement(switch_drops, ref, aqm_drops, suffix)
    return out


def measure(t: Topo, ctl) -> dict:
    trace = load_trace(trace_delivery.TRACE)
    link = {"queue_limit_pkts": QUEUE_PKTS, **trace_delivery.load(ctl, trace)}
    pd = pl.pd_index(1, pl.UPLINK)
    started: dict[str, int] = {}

    def fresh_trace() -> None:
        # The link is idle (set_impairment waited): the trace starts again at the next frame.
        for name in (*pl.TRACE_REGISTERS, pl.NEXT_FREE_NS):
            ctl.client.write_register(name, pd, 0)
        started["ns"] = time.time_ns()

    old_cc = aqm.sender_cc(t, aqm.CC_COMPARED)
    ctl.set_impairment(1, pl.DOWNLINK, delay_ns=aqm.BASE_RTT_MS * 1_000_000)
    aqm.cubic_routes(t, True)
    check: dict = {}
    try:
        tail = aqm.loaded_sojourn(t, ctl, link=link)
        with aqm.captured(t, check, ingress_filter="") as (ingress, egress):
            codel = aqm.loaded_sojourn(t, ctl, link=link, before_traffic=fresh_trace, **aqm.CODEL)
        check.update(_reference_check(t, ingress, egress, started["ns"], trace, codel["aqm_drops"]))
        if not os.environ.get("P4NETEM_BENCH_KEEP_CAPTURES"):
            shutil.rmtree(check["dir"], ignore_errors=True)
    finally:
        aqm.cubic_routes(t, False)
        aqm.sender_cc(t, old_cc)
        ctl.set_impairment(1, pl.UPLINK)
        ctl.set_impairment(1, pl.DOWNLINK)
    for name, r in (("drop-tail", tail), ("CoDel", codel)):
        if r["long_flow_cc"] not in (aqm.CC, None):
            raise RuntimeError(f"trace {name} run: the long flow ran {r['long_flow_cc']}, not {aqm.CC}")
        r.pop("late_sojourns_ms")
    return {
        "trace_taildrop_sojourn_ms_p50": tail["sojourn_ms_p50"],
        "trace_codel_sojourn_ms_p50": codel["sojourn_ms_p50"],
        "trace_codel_reference_drop_agreement": check.get("agreement"),
        "trace_codel_reference_drop_agreement_ahead": check.get("agreement_ahead"),
        "trace_aqm_config": {"trace": str(trace_delivery.TRACE.relative_to(trace_delivery.ROOT)),
                             "queue_pkts": QUEUE_PKTS, "congestion_control": aqm.CC,
                             "base_rtt_ms": aqm.BASE_RTT_MS, "seconds": aqm.SECONDS,
                             "tail_drop": tail, "codel": codel, "codel_reference_check": check},
    }


if __name__ == "__main__":
    sys.exit("run through bench/run.py --only trace_aqm")
