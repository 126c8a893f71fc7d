"""netem's correlated random loss against netem's own arithmetic: `netem_corr_error_sigma` (bar:
<= 3).

Profile 1 uplink gets `loss 25% 50%` (netem's CORRELATION, which the switch runs as Linux's
sch_netem does: get_crandom; docs/profiles.md "Correlation") and nothing else. PACKETS numbered
datagrams go through it; a datagram is lost if its sequence number never arrives. From that
sequence (ge_theory.measure): the loss over all packets and the mean burst (run of consecutive
losses). The reference is the kernel's arithmetic itself, simulated here with the 32-bit values the
switch holds (u64 products, `last` seeded with a uniform draw, the switch's `a < p`): BATCHES runs
of PACKETS packets give the reference (their mean) and a run's standard error (their standard
deviation; correlated losses have no closed form for it). The figure is the larger |measured -
reference| / (standard error * sqrt(1 + 1/BATCHES)) of the two. Independent draws at 25 % would be
some 200 sigma off in the loss and, at the reference's own 7 %, some 36 sigma in the burst.
"""
from __future__ import annotations

import math
import random

from common import send, sink
from ge_theory import measure
from loss import prob_u32
from topo import Topo

from p4netem import pipeline as pl

LOSS, CORR = 0.25, 0.50
PACKETS = 200_000
BATCHES = 20
PPS = 25_000  # as bench/ge.py and bench/loss4.py
FRAME = 100
PORT = 5453


def kernel_losses(p: int, corr: int, n: int, rng: random.Random) -> list[bool]:
    """n outcomes of netem's correlated random loss (get_crandom, then the switch's `a < p`)."""
    rho = corr + 1
    keep = (1 << 32) - rho
    last = rng.getrandbits(32)
    out = []
    for _ in range(n):
        last = (rng.getrandbits(32) * keep + last * rho) >> 32
        out.append(last < p)
    return out


def reference(p: int, corr: int, n: int, batches: int, seed: int = 20261128) -> dict:
    """Mean and per-run standard deviation of the loss and the mean burst over `batches` runs."""
    rng = random.Random(seed)
    runs = [measure(kernel_losses(p, corr, n, rng)) for _ in range(batches)]
    out = {}
    for name in ("mean_loss", "mean_burst"):
        xs = [getattr(r, name) for r in runs]
        mean = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
        out[name] = (mean, sd)
    return out


def _random_losses(ctl) -> int:
    return ctl.counters(1, pl.UPLINK).drops[pl.DropReason.LOSS_RANDOM]


def measure_netem_corr(t: Topo, ctl) -> dict:
    params = {"loss_prob": prob_u32(LOSS), "loss_corr": prob_u32(CORR)}
    ctl.set_impairment(1, pl.UPLINK, **params)
    before = _random_losses(ctl)
    try:
        with sink(t, t.h2, PORT, idle=1.0) as done:
            sent = send(t, t.h1, t.h2.ip, PORT, PPS * FRAME * 8, FRAME, count=PACKETS)
            rec = done()
        switch_lost = _random_losses(ctl) - before
    finally:
        ctl.set_impairment(1, pl.UPLINK)
    if sent["send_errors"]:
        raise RuntimeError(f"the sender's kernel refused {sent['send_errors']} datagrams: the loss "
                           "sequence would not be the switch's")
    n = sent["sent"]
    got = set(rec["seq"])
    m = measure([i not in got for i in range(n)])
    ref = reference(params["loss_prob"], params["loss_corr"], n, BATCHES)
    per = {}
    for name, measured in (("loss", m.mean_loss), ("burst", m.mean_burst)):
        want, sd = ref[f"mean_{name}"]
        se = sd * math.sqrt(1 + 1 / BATCHES)
        per[name] = {"measured": measured, "reference": want, "se": se, "sigma": abs(measured - want) / se}
    return {
        "netem_corr_error_sigma": max(j["sigma"] for j in per.values()),
        "netem_corr_config": {
            "netem": f"loss {LOSS:.0%} {CORR:.0%}", **params, "packets_sent": n, "received": len(got),
            "pps": PPS, "frame_bytes": FRAME, "bursts": m.bursts, "reference_batches": BATCHES,
            "per_figure": per, "switch_losses": switch_lost,
            "lost_outside_switch": n - len(got) - switch_lost,
        },
    }
