"""Bearer queues of a shared cell: how a 10 Mbit/s cell shares its capacity between UEs.

Profile 1 uplink becomes a cell (`rate: 10Mbit, bearers: drr`, quantum one 1514-byte frame,
200 packets per bearer). Datagrams to PORT_A are UE 1, to PORT_B UE 2 (classifier entries above the
bench's port rule). Each UE is offered OFFERED_BPS, more than the whole cell, so both bearers stay
backlogged; UE 1 sends 1514-byte frames and UE 2 514-byte frames, so a scheduler that shared
packets instead of bytes would give UE 2 a quarter, not half.

  bearer_fairness_pct_err  max over the two UEs of |share of the bytes received - 50 %|, in
                           percentage points, over the window in which both were backlogged (from
                           1 s after both started to 0.5 s before the first stopped); theory: 50 %
                           each (deficit round robin by bytes). Bar: <= 2.
  bearer_alone_pct         UE 1 alone on the same cell: its received rate / 10 Mbit/s, in %;
                           theory: 100 % (a UE alone has the whole cell). Bar: >= 98.
  bearer_pf_fairness_pct_err  the first figure's traffic with `bearers: {scheduler: pf}` (half-life
                           2^27 ns): PF serves the bearer with the lowest average of served bytes,
                           so two backlogged UEs that start together get equal bytes too; theory
                           50 % each (no bar: shown beside DRR's).

The receive rate counts frame bytes (what the cell's rate is in) at the sink's kernel timestamps.
"""
from __future__ import annotations

from common import send, sink
from topo import Topo

from p4netem import pipeline as pl
from p4netem.p4rt import Ternary

RATE_BPS = 10_000_000
OFFERED_BPS = 12_000_000
SECONDS = 6.0
QUEUE_PKTS = 200
PORT_A, PORT_B = 5471, 5472
SIZE_A, SIZE_B = 1472, 472  # UDP payloads: 1514- and 514-byte frames
WINDOW_SKIP_S, WINDOW_END_S = 1.0, 0.5
PF_HALFLIFE_LOG2 = 27  # the profile default, 134.2 ms


def _q16(bps: float) -> int:
    return round(8e9 * 65536 / bps)


def _classify(ctl) -> None:
    """Uplink datagrams to PORT_A are UE 1, to PORT_B UE 2 (profile 1, like the rest of port 1)."""
    c = ctl.client
    c.insert(*(c.table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": Ternary(1, 0x1FF),
                                             "meta.l4_dst_port": (port, port)},
                             pl.SET_PROFILE, {"profile_id": 1, "direction": pl.UPLINK, "ue_id": ue}, priority=20)
               for port, ue in ((PORT_A, 1), (PORT_B, 2))))


def _unclassify(ctl) -> None:
    c = ctl.client
    for port in (PORT_A, PORT_B):
        c.delete(c.table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": Ternary(1, 0x1FF),
                                               "meta.l4_dst_port": (port, port)}, priority=20))


def _run(t: Topo, flows: list[tuple[int, int]]) -> list[dict]:
    """Senders h1 -> h2 of (port, payload) at OFFERED_BPS each, together; the sinks' records."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        done = [stack.enter_context(sink(t, t.h2, port, idle=1.5)) for port, _ in flows]
        procs = [send(t, t.h1, t.h2.ip, port, OFFERED_BPS, size, duration=SECONDS, background=True)
                 for port, size in flows]
        from common import finish
        sent = [finish(p) for p in procs]
        recs = [d() for d in done]
    for s in sent:
        if s.get("send_errors"):
            raise RuntimeError(f"the sender's kernel refused {s['send_errors']} datagrams")
    return recs


def _bytes_between(rec: dict, lo: int, hi: int) -> int:
    return sum(b for rx, b in zip(rec["rx_ns"], rec["frame_bytes"]) if lo <= rx < hi)


def _shares(a: dict, b: dict) -> tuple[float, float, float, float]:
    """The two UEs' shares (%) of the frame bytes received in the window in which both were
    backlogged, the cell's rate then (bit/s), and the window (s)."""
    lo = max(min(a["rx_ns"]), min(b["rx_ns"])) + int(WINDOW_SKIP_S * 1e9)
    hi = min(max(a["rx_ns"]), max(b["rx_ns"])) - int(WINDOW_END_S * 1e9)
    if hi <= lo:
        raise RuntimeError("the two UEs were never backlogged together long enough")
    ba, bb = _bytes_between(a, lo, hi), _bytes_between(b, lo, hi)
    return 100 * ba / (ba + bb), 100 * bb / (ba + bb), (ba + bb) * 8 / ((hi - lo) / 1e9), (hi - lo) / 1e9


def measure(t: Topo, ctl) -> dict:
    _classify(ctl)
    try:
        ctl.set_impairment(1, pl.UPLINK, ns_per_byte_q16=_q16(RATE_BPS), queue_limit_pkts=QUEUE_PKTS,
                           bearer_sched=pl.BearerSched.DRR, bearer_quantum_bytes=pl.BEARER_DEFAULT_QUANTUM)
        a, b = _run(t, [(PORT_A, SIZE_A), (PORT_B, SIZE_B)])
        (alone,) = _run(t, [(PORT_A, SIZE_A)])
        ctl.set_impairment(1, pl.UPLINK, ns_per_byte_q16=_q16(RATE_BPS), queue_limit_pkts=QUEUE_PKTS,
                           bearer_sched=pl.BearerSched.PF, bearer_pf_halflife_log2=PF_HALFLIFE_LOG2)
        pf_a, pf_b = _run(t, [(PORT_A, SIZE_A), (PORT_B, SIZE_B)])
    finally:
        ctl.set_impairment(1, pl.UPLINK)
        _unclassify(ctl)
    share_a, share_b, cell_bps, window_s = _shares(a, b)
    pf_share_a, pf_share_b, pf_cell_bps, pf_window_s = _shares(pf_a, pf_b)
    lo1, hi1 = min(alone["rx_ns"]) + int(WINDOW_SKIP_S * 1e9), max(alone["rx_ns"]) - int(WINDOW_END_S * 1e9)
    alone_bps = _bytes_between(alone, lo1, hi1) * 8 / ((hi1 - lo1) / 1e9)
    return {
        "bearer_fairness_pct_err": max(abs(share_a - 50), abs(share_b - 50)),
        "bearer_alone_pct": 100 * alone_bps / RATE_BPS,
        "bearer_pf_fairness_pct_err": max(abs(pf_share_a - 50), abs(pf_share_b - 50)),
        "bearer_config": {
            "cell_rate_bps": RATE_BPS, "offered_bps_per_ue": OFFERED_BPS, "seconds": SECONDS,
            "queue_pkts_per_bearer": QUEUE_PKTS, "scheduler": "drr", "quantum_bytes": pl.BEARER_DEFAULT_QUANTUM,
            "frames": {"ue1": SIZE_A + 42, "ue2": SIZE_B + 42},
            "theory": {"share_pct_each": 50.0, "alone_pct": 100.0},
            "share_pct": {"ue1": share_a, "ue2": share_b}, "window_s": window_s,
            "cell_bps_both": cell_bps, "alone_bps": alone_bps,
            "received": {"ue1": len(a["seq"]), "ue2": len(b["seq"]), "alone": len(alone["seq"])},
            "pf": {"halflife_ns": 1 << PF_HALFLIFE_LOG2, "share_pct": {"ue1": pf_share_a, "ue2": pf_share_b},
                   "window_s": pf_window_s, "cell_bps_both": pf_cell_bps,
                   "received": {"ue1": len(pf_a["seq"]), "ue2": len(pf_b["seq"])}},
        },
    }
