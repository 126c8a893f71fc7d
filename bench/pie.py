"""PIE on the rate queue (RFC 8033 with Linux sch_pie's arithmetic, set_impairment aqm = 3): the queue
delay it holds against its 15 ms target, beside tail drop's on the same link.

Profile 1 uplink is bench/aqm.py's link: 10 Mbit/s with a 1000-packet queue; PIE with Linux's
`tc qdisc add ... pie` defaults (target 15 ms, tupdate 15 ms, alpha 0.125 Hz, beta 1.25 Hz, burst
150 ms, ECN off), written raw (alpha and beta as floor(Hz * 2^56 / 10^9)). PIE's per-pd registers
are cleared before each run, as the control plane does when it (re)applies a profile. The figures:

  pie_qdelay_ms_p50        a constant UDP overload: 1500-byte frames at OVERLOAD (2x) the link's rate
                           for UDP_SECONDS; the median one-way delay (kernel TX stamp to kernel RX
                           stamp) of the datagrams sent after WARMUP_S, i.e. the queue delay PIE
                           holds plus the frame's own 1.2 ms on the link. Bar: within the 15 ms
                           target +/- 5 ms (RFC 8033: under persistent congestion PIE's controller
                           settles where the queue delay equals the target; the contract's
                           arithmetic on a run's own send times gives ~16.0 ms, and the switch
                           has matched it to within 0.01 ms: docs/benchmarks.md "PIE"); _low is
                           the same value against 10 ms. Beside it: _p10, _p90, the loss
                           (pie_udp_loss, theory 0.5) and pie_udp_queue_full_drops (bar 0: the
                           queue peaks near 350 ms, 290 frames, before PIE catches up; every drop
                           is PIE's)
  pie_qdelay_ms_p50_model  the same figure from bench/pie_reference.py (the spec's pseudo-code) fed
                           with the run's own kernel TX stamps as arrivals: what the contract says
                           the switch should have given for that traffic (no bar; the random
                           draws are not the switch's, so only the statistics compare)
  pie_prob_p50             pie_prob read every 50 ms during the overload, median after the warm-up
                           (no bar). Not 0.5: Linux's de-randomisation (accu_prob) lets no packet
                           be dropped until the probabilities since the last drop add up to 0.85,
                           so with p < 0.85 at most every other packet is, and a 50 % drop rate
                           holds p near 0.84 (the model: 0.83..0.87)
  taildrop_qdelay_ms_p50   the same overload through tail drop for TAIL_SECONDS (no bar): the full
                           1000-packet queue, ~1.2 s
  pie_sojourn_ms_p50       bench/aqm.py's headline traffic (one long CUBIC flow, the web-like short
                           flows, 50 probes/s; the ACK path delayed aqm.BASE_RTT_MS) through PIE,
                           TCP_ROUNDS rounds, the median of the rounds' medians (no bar; target
                           15 ms; each round's in pie_config.tcp_rounds)
"""
from __future__ import annotations

import statistics
import threading
import time
from fractions import Fraction

import aqm
import pie_reference
from common import one_way_ns, send, sink
from topo import Topo

from p4netem import pipeline as pl

RATE_BPS = aqm.RATE_BPS
QUEUE_PKTS = aqm.QUEUE_PKTS
FRAME = 1500  # wire bytes (Ethernet header included)
LINK_PPS = RATE_BPS / (FRAME * 8)
OVERLOAD = 2.0
UDP_SECONDS = 15
TAIL_SECONDS = 8
WARMUP_S = 3.0
TCP_ROUNDS = 3
PORT = 5471
PROB_ONE = 2**56


def _gain(hz: Fraction) -> int:
    return int(hz * PROB_ONE // 10**9)


PIE = {"aqm": pl.Aqm.PIE, "pie_target_ns": 15_000_000, "pie_tupdate_ns": 15_000_000,
       "pie_alpha": _gain(Fraction(1, 8)), "pie_beta": _gain(Fraction(5, 4)), "pie_max_burst_ns": 150_000_000}


def _clear_pie_state(ctl) -> None:
    pd = pl.pd_index(1, pl.UPLINK)
    for name in pl.PIE_REGISTERS:
        ctl.client.write_register(name, pd, 0)


def _prob_sampler(ctl, samples: list[tuple[float, float]], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        pd, t0 = pl.pd_index(1, pl.UPLINK), time.monotonic()
        while not stop.wait(0.05):
            (v,) = ctl.client.read_register(pl.PIE_REGISTERS[0], pd).values()
            samples.append((time.monotonic() - t0, v / PROB_ONE))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def _ms(values: list[int], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))] / 1e6


def udp_overload(t: Topo, ctl, seconds: float, **aqm_params) -> dict:
    """OVERLOAD x the link's rate of FRAME-byte datagrams for `seconds` through profile 1 uplink
    (RATE_BPS, QUEUE_PKTS, `aqm_params`): the late datagrams' one-way delays, the loss, the drops
    by reason, pie_prob's samples when PIE, and the model's figures for the same send times."""
    ctl.set_impairment(1, pl.UPLINK, ns_per_byte_q16=round(8e9 / RATE_BPS * 65536), queue_limit_pkts=QUEUE_PKTS,
                       **aqm_params)
    is_pie = aqm_params.get("aqm") == pl.Aqm.PIE
    if is_pie:
        _clear_pie_state(ctl)
    before = ctl.counters(1, pl.UPLINK)
    n = int(OVERLOAD * LINK_PPS * seconds)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = _prob_sampler(ctl, samples, stop) if is_pie else None
    try:
        with sink(t, t.h2, PORT, idle=2.0) as done:
            sent = send(t, t.h1, t.h2.ip, PORT, OVERLOAD * RATE_BPS, FRAME, count=n, tx_stamps=True)
            rec = done()
    finally:
        stop.set()
        if sampler is not None:
            sampler.join(timeout=5)
    ctl.wait_idle(1, pl.UPLINK)
    after = ctl.counters(1, pl.UPLINK)
    delays, fallback = one_way_ns(rec, sent)
    first_late = int(OVERLOAD * LINK_PPS * WARMUP_S)
    late = [d for seq, d in delays.items() if seq >= first_late]
    if not late:
        raise RuntimeError("no datagram sent after the warm-up arrived")
    n_sent = sent["sent"] - sent.get("send_errors", 0)
    drops = {r.name.lower(): after.drops[r] - before.drops[r] for r in pl.DropReason
             if after.drops[r] != before.drops[r]}
    out = {
        "qdelay_ms_p50": _ms(late, 0.5), "qdelay_ms_p10": _ms(late, 0.1), "qdelay_ms_p90": _ms(late, 0.9),
        "qdelay_ms_max": max(late) / 1e6, "qdelay_ms_max_all": max(delays.values()) / 1e6,
        "sent": n_sent, "received": len(delays), "loss": 1 - len(delays) / n_sent,
        "drops": drops, "ecn_marks": after.ecn_marked - before.ecn_marked, "tx_stamp_fallbacks": fallback,
        "late_datagrams": len(late),
    }
    if is_pie:
        late_prob = [v for s, v in samples if s >= WARMUP_S]
        out["prob_p50"] = statistics.median(late_prob) if late_prob else None
        out["prob_range"] = [min(late_prob), max(late_prob)] if late_prob else None
        out["prob_samples"] = len(samples)
        out["model"] = _model(sent, first_late)
    return out


def _model(sent: dict, first_late: int) -> dict:
    """bench/pie_reference.py on the run's kernel TX stamps (the datagrams' arrival at the switch but
    for the veth's tens of microseconds)."""
    stamps = sorted(zip(sent.get("tx_kernel", {}).get("tx_ns", []), sent.get("tx_kernel", {}).get("seq", [])))
    if not stamps:
        return {}
    t0 = stamps[0][0]
    fates = pie_reference.replay([ts - t0 for ts, _ in stamps], [FRAME] * len(stamps), 8e9 / RATE_BPS,
                                 limit_pkts=QUEUE_PKTS)
    late = [f.delay_ns for f, (_, seq) in zip(fates, stamps) if seq >= first_late and f.delay_ns is not None]
    late_prob = [f.prob for f, (_, seq) in zip(fates, stamps) if seq >= first_late]
    return {"datagrams": len(stamps), "qdelay_ms_p50": _ms(late, 0.5), "qdelay_ms_p10": _ms(late, 0.1),
            "qdelay_ms_p90": _ms(late, 0.9),
            "qdelay_ms_max_all": max(f.delay_ns for f in fates if f.delay_ns is not None) / 1e6,
            "loss": sum(f.delay_ns is None for f in fates) / len(fates),
            "queue_full": sum(f.reason == "queue_full" for f in fates),
            "prob_p50": statistics.median(late_prob) if late_prob else None}


def measure(t: Topo, ctl) -> dict:
    try:
        pie = udp_overload(t, ctl, UDP_SECONDS, **PIE)
        tail = udp_overload(t, ctl, TAIL_SECONDS)
        old_cc = aqm.sender_cc(t, aqm.CC_COMPARED)
        ctl.set_impairment(1, pl.DOWNLINK, delay_ns=aqm.BASE_RTT_MS * 1_000_000)
        aqm.cubic_routes(t, True)
        try:
            tcp = []
            for _ in range(TCP_ROUNDS):
                tcp.append(aqm.loaded_sojourn(t, ctl, before_traffic=lambda: _clear_pie_state(ctl), **PIE))
        finally:
            aqm.cubic_routes(t, False)
            aqm.sender_cc(t, old_cc)
    finally:
        ctl.set_impairment(1, pl.UPLINK)
        ctl.set_impairment(1, pl.DOWNLINK)
    for r in tcp:
        if r["long_flow_cc"] not in (aqm.CC, None):
            raise RuntimeError(f"PIE TCP round: the long flow ran {r['long_flow_cc']}, not {aqm.CC}")
    rounds = aqm.rounds_summary(tcp)
    for r in tcp:
        r.pop("late_sojourns_ms")
    return {
        "pie_qdelay_ms_p50": pie["qdelay_ms_p50"],
        "pie_qdelay_ms_p50_low": pie["qdelay_ms_p50"],  # the same value, checked against 10 ms
        "pie_qdelay_ms_p10": pie["qdelay_ms_p10"],
        "pie_qdelay_ms_p90": pie["qdelay_ms_p90"],
        "pie_qdelay_ms_p50_model": pie["model"].get("qdelay_ms_p50"),
        "pie_udp_loss": pie["loss"],
        "pie_udp_queue_full_drops": pie["drops"].get("queue_full", 0),
        "pie_prob_p50": pie["prob_p50"],
        "taildrop_qdelay_ms_p50": tail["qdelay_ms_p50"],
        "pie_sojourn_ms_p50": rounds["median_of_rounds_ms"],
        "pie_config": {"rate_bps": RATE_BPS, "queue_pkts": QUEUE_PKTS, "frame_bytes": FRAME, "overload": OVERLOAD,
                       "udp_seconds": UDP_SECONDS, "tail_seconds": TAIL_SECONDS, "warmup_s": WARMUP_S,
                       "params": {k: int(v) for k, v in PIE.items()}, "udp_pie": pie, "udp_tail_drop": tail,
                       "tcp_congestion_control": aqm.CC, "base_rtt_ms": aqm.BASE_RTT_MS,
                       "tcp_rounds": {**rounds, "runs": tcp}},
    }
