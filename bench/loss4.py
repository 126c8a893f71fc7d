"""netem's 4-state loss model against its theory: `loss4_error_sigma` (bar: <= 3).

Profile 1 uplink gets `loss state 2% 40% 20% 50% 1%` (MODEL; bursts with receptions inside and
isolated losses, so neither a Bernoulli nor a Gilbert model) and nothing else. PACKETS numbered
datagrams go through it; a datagram is lost if its sequence number never arrives. From that
sequence (ge_theory.measure): the loss over all packets and the mean burst (run of consecutive
losses), the runs cut by the ends left out. Theory and the standard error a run of PACKETS packets
has come from loss4_theory (the stationary pair chain), for the 32-bit probabilities the switch
really holds. The figure is the larger |measured - theory| / standard error of the two; the JSON
has both, and the switch's own drop counters (loss_random = isolated losses, loss_burst = losses in
a burst) so that a datagram lost elsewhere shows as lost_outside_switch.
"""
from __future__ import annotations

from common import loss_sequence
from ge_theory import judge, measure
from loss import prob_u32
from loss4_theory import State4, expected
from topo import Topo

from p4netem import pipeline as pl

MODEL = State4(p13=0.02, p31=0.40, p32=0.20, p23=0.50, p14=0.01)
PACKETS = 200_000
PPS = 25_000  # as bench/ge.py
FRAME = 100
PORT = 5452


def _u32(m: State4) -> dict[str, int]:
    return {f"loss4_{n}": prob_u32(getattr(m, n)) for n in ("p13", "p31", "p32", "p23", "p14")}


def _effective(params: dict[str, int]) -> State4:
    return State4(**{n: params[f"loss4_{n}"] / 2**32 for n in ("p13", "p31", "p32", "p23", "p14")})


def _drops(ctl) -> tuple[int, int]:
    d = ctl.counters(1, pl.UPLINK).drops
    return d[pl.DropReason.LOSS_RANDOM], d[pl.DropReason.LOSS_BURST]


def measure_loss4(t: Topo, ctl) -> dict:
    params = _u32(MODEL)
    before = _drops(ctl)
    lost = loss_sequence(t, ctl, params, PORT, PACKETS, PPS, FRAME)
    after = _drops(ctl)
    n, received = len(lost), len(lost) - sum(lost)
    m = measure(lost)
    theory = expected(_effective(params), n)
    isolated, burst = after[0] - before[0], after[1] - before[1]

    per = {"loss": judge(m.mean_loss, theory.mean_loss, theory.rel_se_loss),
           "burst": judge(m.mean_burst, theory.mean_burst, theory.rel_se_burst)}
    return {
        "loss4_error_sigma": max(j["sigma"] for j in per.values()),
        "loss4_config": {
            "model": {"netem": MODEL.netem(), **params}, "packets_sent": n, "received": received,
            "pps": PPS, "frame_bytes": FRAME, "bursts": m.bursts, "per_figure": per,
            "switch_isolated_losses": isolated, "switch_burst_losses": burst,
            "lost_outside_switch": n - received - isolated - burst,
        },
    }
