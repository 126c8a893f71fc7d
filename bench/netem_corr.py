"""netem's correlated random loss against netem's own arithmetic: `netem_corr_error_sigma` (bar:
<= 3).

Profile 1 uplink gets `loss 25% 50%` (netem's CORRELATION, which the switch runs as Linux's
sch_netem does: get_crandom; docs/profiles.md "Correlation") and nothing else. PACKETS numbered
datagrams go through it; a datagram is lost if its sequence number never arrives. From that
sequence (ge_theory.measure): the loss over all packets and the mean burst (run of consecutive
losses). The reference is the kernel's arithmetic itself (netem_corr_theory.py), simulated with
the 32-bit values the switch holds (u64 products, `last` seeded with a uniform draw, the switch's
`a < p`): BATCHES runs of PACKETS packets give the reference (their mean) and a run's standard
error (their standard deviation; correlated losses have no closed form for it). The figure is the
larger |measured - reference| / (standard error * sqrt(1 + 1/BATCHES)) of the two. Independent
draws at 25 % would be some 200 sigma off in the loss and, at the reference's own 7 %, some 36
sigma in the burst.
"""
from __future__ import annotations

import math

from common import loss_sequence
from ge_theory import measure
from loss import prob_u32
from netem_corr_theory import reference
from topo import Topo

from p4netem import pipeline as pl

LOSS, CORR = 0.25, 0.50
PACKETS = 200_000
BATCHES = 20
PPS = 25_000  # as bench/ge.py and bench/loss4.py
FRAME = 100
PORT = 5453


def _random_losses(ctl) -> int:
    return ctl.counters(1, pl.UPLINK).drops[pl.DropReason.LOSS_RANDOM]


def measure_netem_corr(t: Topo, ctl) -> dict:
    params = {"loss_prob": prob_u32(LOSS), "loss_corr": prob_u32(CORR)}
    before = _random_losses(ctl)
    lost = loss_sequence(t, ctl, params, PORT, PACKETS, PPS, FRAME)
    switch_lost = _random_losses(ctl) - before
    n, received = len(lost), len(lost) - sum(lost)
    m = measure(lost)
    ref = reference(params["loss_prob"], params["loss_corr"], n, BATCHES)
    per = {}
    for name, measured in (("loss", m.mean_loss), ("burst", m.mean_burst)):
        want, sd = ref[f"mean_{name}"]
        se = sd * math.sqrt(1 + 1 / BATCHES)
        per[name] = {"measured": measured, "reference": want, "se": se, "sigma": abs(measured - want) / se}
    return {
        "netem_corr_error_sigma": max(j["sigma"] for j in per.values()),
        "netem_corr_config": {
            "netem": f"loss {LOSS:.0%} {CORR:.0%}", **params, "packets_sent": n, "received": received,
            "pps": PPS, "frame_bytes": FRAME, "bursts": m.bursts, "reference_batches": BATCHES,
            "per_figure": per, "switch_losses": switch_lost,
            "lost_outside_switch": n - received - switch_lost,
        },
    }
