"""CPU time the hypervisor took from this VM (steal) while a measurement ran.

On a virtual machine a vCPU can be descheduled by the host for milliseconds. A user-space switch is
exposed to that: packets wait in its ring while its vCPU is away, whereas a Linux bridge forwards in
the sender's own context, where a stall delays the send timestamp too and stays invisible. So every
measurement records the steal that happened during it; a latency tail that comes with steal is the
machine's, not the switch's logic.
"""
from __future__ import annotations

import os

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_times() -> dict[str, list[int]]:
    """Per-CPU /proc/stat jiffies: user nice system idle iowait irq softirq steal."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                out[name] = [int(v) for v in vals[:8]]
    return out


def steal_between(before: dict[str, list[int]], after: dict[str, list[int]], wall_s: float) -> dict:
    per_cpu = {c: (after[c][7] - before[c][7]) * TICK_S for c in after if c in before}
    busy = {c: sum(after[c][i] - before[c][i] for i in (0, 1, 2, 5, 6)) * TICK_S
            for c in after if c in before}
    return {
        "steal_s": round(sum(per_cpu.values()), 3),
        "steal_pct_of_wall": round(100 * sum(per_cpu.values()) / (wall_s * len(per_cpu)), 2)
        if wall_s > 0 and per_cpu else 0.0,
        "busy_pct_of_wall": round(100 * sum(busy.values()) / (wall_s * len(busy)), 1)
        if wall_s > 0 and busy else 0.0,
    }
