"""Forwarding throughput: iperf3 TCP h1 -> h2 through a Linux bridge and through p4netem-switch
(no impairment) on the same veths with the same offload settings; the figure is their ratio."""
from __future__ import annotations

import topo as topology
from common import iperf3_tcp

SECONDS = 10
STREAMS = 1


def through_bridge(t: topology.Topo) -> dict:
    """The bridge must be up (topo.bridge_up)."""
    offloads = topology.offload_state(t)
    r = iperf3_tcp(t, t.h1, t.h2, SECONDS, STREAMS)
    r["offloads"] = offloads
    return r


def through_switch(t: topology.Topo, seconds: int = SECONDS) -> dict:
    """The switch must be running with port 1 <-> 2 and no impairment on the profile in use."""
    offloads = topology.offload_state(t)
    r = iperf3_tcp(t, t.h1, t.h2, seconds, STREAMS)
    r["offloads"] = offloads
    return r


def summarise(bridge: dict, switch: dict) -> dict:
    return {
        "throughput_bridge_gbit_s": bridge["gbit_s"],
        "throughput_switch_gbit_s": switch["gbit_s"],
        "throughput_ratio_vs_bridge": switch["gbit_s"] / bridge["gbit_s"],
        "throughput_config": {
            "tool": f"iperf3 TCP, {SECONDS} s, {STREAMS} stream, h1 -> h2, receiver-side rate",
            "offloads_identical": bridge["offloads"] == switch["offloads"],
            "offloads": switch["offloads"],
            "retransmits_bridge": bridge["retransmits"],
            "retransmits_switch": switch["retransmits"],
        },
    }


def fast_path_off(t: topology.Topo, ctl, bridge: dict, capacity: int) -> dict:
    """The switch `ctl` controls runs with --fast-path off: its throughput against the same run's
    bridge, and with the full classifier against that (full_tables.py), keys suffixed _fast_path_off."""
    import full_tables

    r = through_switch(t)
    out = {
        "throughput_switch_gbit_s_fast_path_off": r["gbit_s"],
        "throughput_ratio_vs_bridge_fast_path_off": r["gbit_s"] / bridge["gbit_s"],
    }
    full = full_tables.measure(t, ctl, r["gbit_s"], capacity)
    out["throughput_ratio_full_tables_fast_path_off"] = full["throughput_ratio_full_tables"]
    out["fast_path_off_config"] = {"retransmits": r["retransmits"], "full_tables": full["full_tables_config"]}
    return out
