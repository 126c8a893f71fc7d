"""CPU time the hypervisor took from this VM (steal) while a measurement ran.

On a virtual machine a vCPU can be descheduled by the host for milliseconds. A user-space switch is
exposed to that: packets wait in its ring while its vCPU is away, whereas a Linux bridge forwards in
the sender's own context, where a stall delays the send timestamp too and stays invisible. So every
measurement records the steal that happened during it; a latency tail that comes with steal is the
machine's, not the switch's logic. Steal is a total, though: where a step must say *which* packets
a stopped CPU held, it runs host-stall watchers (`watch_stalls`, `HostStalls.may_have_held`).
"""
from __future__ import annotations

import argparse

from p4netem.lab import cpulatency
from p4netem.lab.hoststall import HostStalls, cpu_times, steal_between  # noqa: F401  (run.py)

# Host-stall watchers for a measurement (p4netem.lab.hoststall), below the switch's data-plane
# thread (SCHED_FIFO 10): they never delay a release, and at the light loads they watch (the slot
# step: 1600 datagrams a second) the switch spins for microseconds, so a wake-up a millisecond late
# is the CPU not running. A stall that covers a wake-up is seen: every one of a period or more.
WATCH_PRIORITY = 9
WATCH_PERIOD_NS = 5_000_000
WATCH_REPORT_NS = 1_000_000


def watch_stalls(priority: int = WATCH_PRIORITY) -> HostStalls:
    """Watchers for a step. Above the switch (priority 50, the default of p4netem.lab.hoststall)
    where the switch spins for long (a heavy load): below it they would wait for it and report it.
    Above it, each wake-up also holds the switch's CPU for its 55-90 us (p4netem.lab.hoststall)."""
    return HostStalls(priority=priority, period_ns=WATCH_PERIOD_NS, report_ns=WATCH_REPORT_NS)


def stalls_summary(w: HostStalls, t0_real_ns: int) -> dict:
    """The watched stalls for a step's JSON: how many, the worst, and the five longest (ms, CPU,
    seconds after t0)."""
    top = sorted(w.stalls, key=lambda s: -s.late_ns)[:5]
    return {"watcher_wakes": w.wakes, "over_1ms": len(w.stalls), "worst_ms": round(w.worst_ns / 1e6, 2),
            "longest": [[round(s.late_ns / 1e6, 2), s.cpu, round((s.at_real_ns - t0_real_ns) / 1e9, 3)]
                        for s in top]}


# The switch holds a PM QoS CPU wake-up latency request while it runs (--cpu-latency-us, default 0;
# dataplane/src/cpu_latency.rs). The bench holds the same request for its whole run, so that the
# baselines measured without a switch (the Linux bridge, the reference paths) get the same idle
# states as the switch they are compared with (p4netem.lab.cpulatency).
CPU_LATENCY_US = cpulatency.DEFAULT_US
CpuLatency = cpulatency.CpuLatency


def cpu_latency_arg(v: str) -> int | None:
    """`--cpu-latency-us`: off (None) or 0..10000 microseconds, as the switch's flag takes it."""
    try:
        return cpulatency.parse_us(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
