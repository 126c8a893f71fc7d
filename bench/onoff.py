"""The on/off link (Mahimahi's mm-onoff) against its theory: `onoff_error_sigma` (bar: <= 3).

Profile 1 uplink gets `onoff: {mean_on: 10ms, mean_off: 2.5ms}` (MODEL, encoded by the profile
schema as `p4netem apply` would) and nothing else. PACKETS numbered datagrams at PPS go through it;
a datagram is lost if its sequence number never arrives. The link is a two-state Markov chain in
continuous time; seen by packets dt apart it is exactly a Gilbert chain with
p = pi_off (1 - rho) (on -> off), r = pi_on (1 - rho) (off -> on), rho = e^(-dt / tau),
tau = mean_on mean_off / (mean_on + mean_off), every packet lost in the off state
(docs/pipeline-contract.md stage 3). So ge_theory gives the three figures a run of PACKETS packets
should show and their standard errors: the off share (pi_off), the mean off run (1 / r packets,
mean_off (dt / tau) / (1 - rho) in time: the sampling's own +dt/2) and the mean on run (1 / p). dt is
the sender's measured mean spacing (the first to the last datagram that arrived). The figure is the
largest |measured - theory| / standard error of the three; the JSON has each, in packets and ms,
the spread of the sender's spacing (the theory takes it constant) and the switch's link_off drop
counter, so that a datagram lost elsewhere shows as lost_outside_switch.
"""
from __future__ import annotations

import math

import numpy as np
from common import loss_run
from ge_theory import GEParams, expected, judge, measure
from topo import Topo

from p4netem import pipeline as pl
from p4netem.profiles.link import LinkParams

MODEL = {"mean_on": "10ms", "mean_off": "2.5ms"}
PACKETS = 300_000
PPS = 25_000  # as bench/ge.py; 12 s, about 960 off periods
FRAME = 100
PORT = 5453


def onoff_params(mean_on: str, mean_off: str) -> dict[str, int]:
    """The set_impairment params of an on/off link, as the profile schema encodes it."""
    enc = LinkParams.model_validate({"onoff": {"mean_on": mean_on, "mean_off": mean_off}}).to_table_params()
    return {k: v for k, v in enc.items() if k.startswith("onoff_")}


def _link_off(ctl) -> int:
    return ctl.counters(1, pl.UPLINK).drops[pl.DropReason.LINK_OFF]


def sampled_chain(params: dict[str, int], dt_ns: float) -> GEParams:
    """The Gilbert chain the packets see, dt_ns apart, from the switch's own numbers (pi in Q32,
    tau from 2^64 / (tau ln 2))."""
    pi_on = params["onoff_on_prob"] / 2**32
    tau_ns = 2**64 / (params["onoff_recip"] * math.log(2))
    rho = math.exp(-dt_ns / tau_ns)
    return GEParams(p=(1 - pi_on) * (1 - rho), r=pi_on * (1 - rho), loss_good=0.0, loss_bad=1.0)


def spacing_ns(seq: list[int], tx_ns: list[int]) -> tuple[float, np.ndarray]:
    """The sender's mean spacing (first to last datagram that arrived, by the send times they
    carry) and the gaps between consecutive datagrams that both arrived."""
    order = np.argsort(seq)
    s, tx = np.asarray(seq)[order], np.asarray(tx_ns, dtype=np.int64)[order]
    return float(tx[-1] - tx[0]) / float(s[-1] - s[0]), np.diff(tx)[np.diff(s) == 1]


def measure_onoff(t: Topo, ctl) -> dict:
    params = onoff_params(**MODEL)
    before = _link_off(ctl)
    lost, rec = loss_run(t, ctl, params, PORT, PACKETS, PPS, FRAME)
    link_off = _link_off(ctl) - before
    n, received = len(lost), len(lost) - sum(lost)
    dt_ns, gaps = spacing_ns(rec["seq"], rec["tx_ns"])
    chain = sampled_chain(params, dt_ns)
    theory = expected(chain, n)
    m = measure(lost)

    def in_ms(j: dict) -> dict:
        return j | {"measured_ms": j["measured"] * dt_ns / 1e6, "theory_ms": j["theory"] * dt_ns / 1e6}

    per = {"off_share": judge(m.mean_loss, theory.mean_loss, theory.rel_se_loss),
           "off_run_packets": in_ms(judge(m.mean_burst, theory.mean_burst, theory.rel_se_burst)),
           "on_run_packets": in_ms(judge(m.mean_gap, theory.mean_gap, theory.rel_se_gap))}
    return {
        "onoff_error_sigma": max(j["sigma"] for j in per.values()),
        "onoff_config": {
            "model": {**MODEL, **params}, "packets_sent": n, "received": received, "pps": PPS,
            "frame_bytes": FRAME, "dt_us_mean": dt_ns / 1e3,
            "dt_us_p1_p50_p99": [float(np.percentile(gaps, q)) / 1e3 for q in (1, 50, 99)] if len(gaps) else None,
            "sampled_chain": {"p": chain.p, "r": chain.r}, "off_periods": m.bursts, "on_periods": m.gaps,
            "per_figure": per, "switch_link_off_drops": link_off, "lost_outside_switch": n - received - link_off,
        },
    }
