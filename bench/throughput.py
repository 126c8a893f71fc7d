"""Forwarding throughput: iperf3 TCP h1 -> h2 through a Linux bridge and through p4netem-switch
(no impairment) on the same veths with the same offload settings; the figure is their ratio.

Paired, because one run of each says little on this VM: iperf3 through the same bridge moved 2.2-3.4
Gbit/s between runs minutes apart, so one bridge run against one switch run gave 0.95, 1.05 and 1.25 in
three runs within two hours (2026-11-26). ROUNDS pairs, each a bridge run and a switch run back to back in alternating order (ABBA: bridge
first in even pairs, switch first in odd ones, so a drift within the step favours neither), SECONDS
each. The switch is started afresh for each of its runs (the bridge and the switch cannot own the veths
at once: the switch's XDP program and packet sockets see every frame the bridge forwards).

    throughput_ratio_vs_bridge = median over pairs of (switch Gbit/s / bridge Gbit/s)

``throughput_bridge_gbit_s`` and ``throughput_switch_gbit_s`` are the medians of each side's runs; the
ratio of those is kept as ``throughput_ratio_vs_bridge_of_medians``.
"""
from __future__ import annotations

import statistics
from contextlib import AbstractContextManager
from typing import Callable

import topo as topology
from common import iperf3_tcp

SECONDS = 5
STREAMS = 1
# Twelve pairs, not six (2026-11-27): one pair's ratio has a standard deviation of about 0.19 here
# (the bridge alone moved 1.9-3.6 Gbit/s between runs), so the median of six has one of about 0.09.
# Resampling the 42 pairs of seven runs that day (median ratio 1.18; 1.13 in the four runs of the
# afternoon) put a median of six under 1.0 in 5 % of runs (14 % on the afternoon's pairs), of
# twelve in 1.3 % (7 %); two of the afternoon's four runs were under it (0.975 and 0.995) with
# the switch at its usual 2.75-2.98 Gbit/s (median per run). The same estimator with more pairs
# (docs/benchmarks.md).
ROUNDS = 12


def through_bridge(t: topology.Topo, seconds: int = SECONDS) -> dict:
    """Brings the bridge up, runs iperf3 through it, and takes it down again."""
    topology.bridge_up(t)
    try:
        offloads = topology.offload_state(t)
        r = iperf3_tcp(t, t.h1, t.h2, seconds, STREAMS)
    finally:
        topology.bridge_down(t)
    r["offloads"] = offloads
    return r


def through_switch(t: topology.Topo, seconds: int = SECONDS) -> dict:
    """The switch must be running with port 1 <-> 2 and no impairment on the profile in use."""
    offloads = topology.offload_state(t)
    r = iperf3_tcp(t, t.h1, t.h2, seconds, STREAMS)
    r["offloads"] = offloads
    return r


def paired(t: topology.Topo, switch: Callable[[], AbstractContextManager], rounds: int = ROUNDS) -> dict:
    """`switch()`: a context in which a fresh switch forwards port 1 <-> 2 with no impairment (and
    which stops it on exit). Returns the figures and their config."""
    bridge_runs: list[dict] = []
    switch_runs: list[dict] = []

    def on_bridge() -> None:
        bridge_runs.append(through_bridge(t))

    def on_switch() -> None:
        with switch():
            switch_runs.append(through_switch(t))

    for i in range(rounds):
        for run in (on_bridge, on_switch) if i % 2 == 0 else (on_switch, on_bridge):
            run()
    b = [r["gbit_s"] for r in bridge_runs]
    s = [r["gbit_s"] for r in switch_runs]
    ratios = [x / y for x, y in zip(s, b)]
    return {
        "throughput_bridge_gbit_s": statistics.median(b),
        "throughput_switch_gbit_s": statistics.median(s),
        "throughput_ratio_vs_bridge": statistics.median(ratios),
        "throughput_ratio_vs_bridge_of_medians": statistics.median(s) / statistics.median(b),
        "throughput_config": {
            "tool": f"iperf3 TCP, {SECONDS} s per run, {STREAMS} stream, h1 -> h2, receiver-side rate",
            "design": f"{rounds} pairs (bridge run, switch run), alternating order (ABBA); figure = "
                      "median of the per-pair ratios; a fresh switch for each switch run",
            "bridge_gbit_s_runs": [round(x, 3) for x in b],
            "switch_gbit_s_runs": [round(x, 3) for x in s],
            "pair_ratios": [round(x, 3) for x in ratios],
            "offloads_identical": all(r["offloads"] == switch_runs[0]["offloads"]
                                      for r in bridge_runs + switch_runs),
            "offloads": switch_runs[0]["offloads"],
            "retransmits_bridge": [r["retransmits"] for r in bridge_runs],
            "retransmits_switch": [r["retransmits"] for r in switch_runs],
        },
    }


def fast_path_off(t: topology.Topo, ctl, bridge_gbit_s: float, capacity: int) -> dict:
    """The switch `ctl` controls runs with --fast-path off: its throughput against the same run's
    bridge median, and with the full classifier against that (full_tables.py), keys suffixed
    _fast_path_off."""
    import full_tables

    r = through_switch(t)
    out = {
        "throughput_switch_gbit_s_fast_path_off": r["gbit_s"],
        "throughput_ratio_vs_bridge_fast_path_off": r["gbit_s"] / bridge_gbit_s,
    }
    full = full_tables.measure(t, ctl, r["gbit_s"], capacity)
    out["throughput_ratio_full_tables_fast_path_off"] = full["throughput_ratio_full_tables"]
    out["fast_path_off_config"] = {"retransmits": r["retransmits"], "full_tables": full["full_tables_config"]}
    return out
