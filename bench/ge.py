"""Gilbert-Elliott burst statistics against theory (design target: within 5 %).

Profile 1 uplink gets the Gilbert-Elliott loss model MODEL (p good->bad, r bad->good per packet,
loss LOSS_GOOD in good, LOSS_BAD in bad: netem's `loss gemodel 5% 30% 90% 0.1%`) and nothing else.
PACKETS numbered datagrams go through it; a datagram is lost if its sequence number never arrives.
From that sequence of outcomes (ge_theory.measure): the loss over all packets, the mean burst (run of
consecutive losses) and the mean gap (run of consecutive deliveries), the runs cut by the ends left
out. Theory (ge_theory.expected) is computed for the probabilities the switch really uses (the
32-bit values written, / 2^32), with the standard error a run of PACKETS packets has: a figure
"within 5 %" means something only if 5 % is several of those. Each figure is |measured / theory - 1|
in %, and the JSON has the signed error, the standard error and their ratio (z).

A datagram lost anywhere else (the sink's socket buffer) would be counted as a GE loss: the switch's
`loss_burst` drop counter is read before and after, and `lost_outside_switch` = sent - received -
switch drops must be 0 for the figures to describe the switch alone (recorded, and said in the table).
A datagram the sender's kernel refused would shift the sequence: the measurement fails instead.
"""
from __future__ import annotations

from common import send, sink
from ge_theory import GEParams, expected, measure
from loss import prob_u32
from topo import Topo

from p4netem import pipeline as pl

MODEL = GEParams(p=0.05, r=0.30, loss_good=0.001, loss_bad=0.90)
PACKETS = 300_000
PPS = 25_000  # as bench/loss.py: the Python sender and sink keep up without loss on this VM
FRAME = 100
PORT = 5451
DESIGN_TARGET_PCT = 5.0


def _u32(model: GEParams) -> dict[str, int]:
    return {"ge_p": prob_u32(model.p), "ge_r": prob_u32(model.r),
            "ge_loss_good": prob_u32(model.loss_good), "ge_loss_bad": prob_u32(model.loss_bad)}


def _effective(params: dict[str, int]) -> GEParams:
    # The data plane's chance(x) is next_u32() < x: probability exactly x / 2^32.
    return GEParams(p=params["ge_p"] / 2**32, r=params["ge_r"] / 2**32,
                    loss_good=params["ge_loss_good"] / 2**32, loss_bad=params["ge_loss_bad"] / 2**32)


def _burst_drops(ctl) -> int:
    return ctl.counters(1, 0).drops[pl.DropReason.LOSS_BURST]


def measure_ge(t: Topo, ctl) -> dict:
    params = _u32(MODEL)
    ctl.set_impairment(1, 0, **params)
    before = _burst_drops(ctl)
    with sink(t, t.h2, PORT, idle=1.0) as done:
        sent = send(t, t.h1, t.h2.ip, PORT, PPS * FRAME * 8, FRAME, count=PACKETS)
        rec = done()
    after = _burst_drops(ctl)
    ctl.set_impairment(1, 0)
    if sent["send_errors"]:
        raise RuntimeError(f"the sender's kernel refused {sent['send_errors']} datagrams: the loss "
                           "sequence would not be the switch's")
    n = sent["sent"]
    got = set(rec["seq"])
    lost = [i not in got for i in range(n)]
    m = measure(lost)
    theory = expected(_effective(params), n)
    switch_drops = after - before
    received = len(got)

    def judge(measured: float, want: float, rel_se: float) -> dict:
        err = measured / want - 1
        return {"measured": measured, "theory": want, "error_pct": 100 * err,
                "se_pct": 100 * rel_se, "z": err / rel_se}

    per = {"loss": judge(m.mean_loss, theory.mean_loss, theory.rel_se_loss),
           "burst": judge(m.mean_burst, theory.mean_burst, theory.rel_se_burst),
           "gap": judge(m.mean_gap, theory.mean_gap, theory.rel_se_gap)}
    figures = {}
    for name, j in per.items():
        figures[f"ge_{name}_error_pct"] = abs(j["error_pct"])
        figures[f"ge_{name}_se_pct"] = j["se_pct"]
    return {
        **figures,
        "ge_config": {
            "model": {"p": MODEL.p, "r": MODEL.r, "loss_good": MODEL.loss_good, "loss_bad": MODEL.loss_bad,
                      "netem": MODEL.netem(), **params},
            "packets_sent": n, "received": received, "pps": PPS, "frame_bytes": FRAME,
            "bursts": m.bursts, "gaps": m.gaps, "bursts_expected": theory.bursts,
            "per_figure": per,
            "switch_loss_burst_drops": switch_drops,
            "lost_outside_switch": n - received - switch_drops,
            "duplicates_received": len(rec["seq"]) - received,
            "design_target_pct": DESIGN_TARGET_PCT,
            "method": "loss = lost / sent; burst and gap = mean length of the runs of losses and of "
                      "deliveries (the runs cut by the sequence's ends left out); theory and its "
                      "standard error for n packets from bench/ge_theory.py (stationary pair chain, "
                      "CLT with the fundamental matrix, delta method for the ratios)",
        },
    }
