"""Forwarding throughput with a full classifier (issue 14): the classifier is filled to its capacity
(65 536 by default) with ternary entries in four mask tuples (IPv4 source /32, IPv4 destination /32,
IPv4 source /24 with the IP protocol, IPv4 destination /32 with the DSCP), none of which matches the
benchmark's traffic (10.77.0.1 -> 10.77.0.2). Every packet's lookup therefore probes all four tuples
and misses (the lookup's most expensive case: no early exit), then takes the default, as with the empty
table. iperf3 TCP as in throughput.py; the figure is

    throughput_ratio_full_tables = Gbit/s with the full table / Gbit/s with the empty table

both through the same switch in the same run, interleaved: PAIRS times an empty-table run, the
fill, a full-table run and the deletes, PAIR_SECONDS each run; the figure is the median over pairs of
the full run over the pair's empty one (one 10 s run against the throughput step's earlier one measured
0.79 to 1.04: iperf3 through veths drifts by 10 % between runs a minute apart, which pairing cancels;
three pairs with the ratio of the medians gave 0.89 to 1.03 in three runs within two hours, so there are now five,
and a pair's drift stays within its pair). The ratio of the medians is kept as
``throughput_ratio_full_tables_of_medians``. It runs right after throughput.py, when the classifier
is empty: every insert must succeed (the Write raises on any refused update, so a table that was not
empty fails the measurement with RESOURCE_EXHAUSTED), and every delete afterwards too, which leaves the
table empty again. (No wildcard Read of 64k entries: on a loaded machine it can outlast the client's
deadline, and the Writes' statuses already say what the table holds.)
"""
from __future__ import annotations

import statistics
import time

from p4netem import pipeline as pl
from p4netem.p4rt import Ternary, update

import throughput
import topo as topology

BATCH = 500
PAIRS = 5
PAIR_SECONDS = 5
FULL32 = 0xFFFFFFFF


def _match(i: int) -> dict:
    shape, n = i % 4, i // 4
    if shape == 0:
        return {"meta.ipv4_src": Ternary(0x0A800000 + n, FULL32)}
    if shape == 1:
        return {"meta.ipv4_dst": Ternary(0x0A810000 + n, FULL32)}
    if shape == 2:
        return {"meta.ipv4_src": Ternary(0x0A820000 + (n << 8) & FULL32, 0xFFFFFF00), "meta.ip_proto": Ternary(17, 0xFF)}
    return {"meta.ipv4_dst": Ternary(0x0A830000 + n, FULL32), "meta.dscp": Ternary(46, 0x3F)}


def _entries(ctl, count: int, with_action: bool) -> list:
    c = ctl.client
    return [c.table_entry(pl.CLASSIFIER, _match(i), pl.SET_PROFILE if with_action else None,
                          {"profile_id": 2, "direction": 0, "ue_id": 0} if with_action else None,
                          priority=1 + i)
            for i in range(count)]


def _fill(ctl, count: int) -> float:
    t0 = time.perf_counter()
    entries = _entries(ctl, count, True)
    for start in range(0, count, BATCH):
        ctl.client.write(update("INSERT", e) for e in entries[start:start + BATCH])
    return time.perf_counter() - t0


def _empty_out(ctl, count: int) -> None:
    keys = _entries(ctl, count, False)
    for start in range(0, count, BATCH):
        ctl.client.write(update("DELETE", e) for e in keys[start:start + BATCH])


def measure(t: topology.Topo, ctl, empty_gbit_s: float, capacity: int) -> dict:
    """`empty_gbit_s`: the throughput step's own figure, kept in the config for reference."""
    count = capacity
    empty, full, fills, retransmits = [], [], [], []
    for _ in range(PAIRS):
        e = throughput.through_switch(t, PAIR_SECONDS)
        fills.append(round(_fill(ctl, count), 3))
        try:
            f = throughput.through_switch(t, PAIR_SECONDS)
        finally:
            _empty_out(ctl, count)
        empty.append(e["gbit_s"])
        full.append(f["gbit_s"])
        retransmits.append(f["retransmits"])
    ratio = statistics.median(f / e for f, e in zip(full, empty))
    return {
        "throughput_full_tables_gbit_s": statistics.median(full),
        "throughput_ratio_full_tables": ratio,
        "throughput_ratio_full_tables_of_medians": statistics.median(full) / statistics.median(empty),
        "full_tables_config": {
            "entries": count, "capacity": capacity, "mask_tuples": 4, "fill_s": fills,
            "pairs": PAIRS, "seconds_per_run": PAIR_SECONDS, "empty_gbit_s_runs": empty,
            "full_gbit_s_runs": full, "throughput_step_gbit_s": empty_gbit_s, "retransmits": retransmits,
            "offloads": f["offloads"],
        },
    }
