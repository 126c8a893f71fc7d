"""`p4netem host-check`: can this machine keep the switch's timing? Watches it for host stalls.

A user-space emulator releases packets to the microsecond only while the machine runs it. On a VM
the hypervisor may stop a virtual CPU for milliseconds, and then every delay, slot and rate in
flight is late by that much, whatever the emulator does (netem in a guest kernel is exposed the
same way). This command measures what the machine does, before an experiment or in a CI job,
with the watchers the tests and benchmarks use (p4netem.lab.hoststall): one SCHED_FIFO process
per CPU that sleeps 5 ms at a time and records how late each wake-up came, plus the steal time
the kernel counted and the RT throttling setting the switch's spin budget follows.

It watches the machine as the switch runs on it: holding the CPU wake-up latency request the switch
holds (`--cpu-latency-us`, default 0, as the switch's flag; p4netem.lab.cpulatency). Without it an
idle vCPU halts and every wake-up waits for the hypervisor, which the switch never sees: on the
development VM 42-187 wake-ups a millisecond late per CPU in 20 s without it, 2-35 with it
(docs/cli.md). It also says the kernel's preemption model: under "none" or "voluntary", kernel
work beside the switch (a sender's network stack) can hold its real-time thread off until it yields.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..lab.cpulatency import DEFAULT_US, CpuLatency, parse_us
from ..lab.hoststall import PRIORITY, HostStalls, cpu_times, preemption_model, steal_between
from .common import EXIT_PROBLEM, console, guarded, warning

MS = 1_000_000


def _read(path: str) -> Optional[int]:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def measure(seconds: float, cpu_latency_us: Optional[int] = DEFAULT_US) -> dict:
    """Watches every CPU for `seconds` with the wake-up latency request `cpu_latency_us` held (None:
    none); the figures host-check prints."""
    before, start = cpu_times(), time.monotonic()
    with CpuLatency(cpu_latency_us) as request, HostStalls(report_ns=MS) as w:
        time.sleep(seconds)
    steal = steal_between(before, cpu_times(), time.monotonic() - start)
    cpus = []
    for cpu, (wakes, worst) in sorted(w.per_cpu.items()):
        mine = [s.late_ns for s in w.stalls if s.cpu == cpu]
        cpus.append({"cpu": cpu, "wakeups": wakes, "late_1ms": len(mine),
                     "late_10ms": sum(1 for n in mine if n >= 10 * MS), "worst_ms": round(worst / MS, 3)})
    runtime, period = _read("/proc/sys/kernel/sched_rt_runtime_us"), _read("/proc/sys/kernel/sched_rt_period_us")
    return {"seconds": seconds, "cpus": cpus, "worst_ms": max((c["worst_ms"] for c in cpus), default=0.0),
            "late_10ms": sum(c["late_10ms"] for c in cpus), "steal_pct": steal["steal_pct_of_wall"],
            "rt_runtime_us": runtime, "rt_period_us": period, "realtime": os.geteuid() == 0,
            "cpu_latency": request.describe(), "preemption": preemption_model()}


def _cpu_latency_option(value: str | int) -> Optional[int]:
    """`--cpu-latency-us` parsed once, as the switch takes it; a bad value is a usage error naming
    the option (exit 2). Typer hands the default over as it is (an int)."""
    if isinstance(value, int):
        return value
    try:
        return parse_us(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


@guarded
def host_check(
    seconds: Annotated[float, typer.Option("--seconds", "-t", min=0.5, max=3600, help="How long to watch.")] = 10.0,
    max_stall_ms: Annotated[Optional[float], typer.Option(
        "--max-stall-ms", min=0.0,
        help="Exit 1 if any CPU stopped this long or longer (a gate for a CI job or an experiment).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    cpu_latency_us: Annotated[Optional[int], typer.Option(
        "--cpu-latency-us", metavar="US|off", parser=_cpu_latency_option,
        help="Hold this CPU wake-up latency request (PM QoS) while watching, as the switch holds its "
             "--cpu-latency-us (default 0); off watches the machine without one.")] = DEFAULT_US,
) -> None:
    """Watch this machine for host stalls (a CPU that does not run) and say what that means for
    the switch's timing. Needs root for the watchers' real-time priority."""
    if os.geteuid() != 0:
        warning("not root: the watchers run at normal priority, so other load on the machine also makes "
             "them late; run as root to see the host alone")
    m = measure(seconds, cpu_latency_us)
    if as_json:
        console.print_json(json.dumps(m))
    else:
        held = m["cpu_latency"]["request_us"]
        table = Table(title=f"Host stalls over {seconds:g} s (a wake-up every 5 ms per CPU, SCHED_FIFO "
                            f"{PRIORITY if m['realtime'] else 'off'}, "
                            + (f"wake-up latency request {held} us)" if held is not None else "no wake-up latency request)"))
        for col in ("CPU", "wake-ups", ">= 1 ms late", ">= 10 ms late", "worst wake-up (ms late)"):
            table.add_column(col, justify="right")
        for c in m["cpus"]:
            table.add_row(str(c["cpu"]), str(c["wakeups"]), str(c["late_1ms"]), str(c["late_10ms"]),
                          f"{c['worst_ms']:.3f}")
        console.print(table)
        throttle = (f"RT throttling: {m['rt_runtime_us']} us of every {m['rt_period_us']} us"
                    if m["rt_runtime_us"] not in (None, -1) else "RT throttling: off")
        console.print(f"steal (time the hypervisor took): {m['steal_pct']:.2f} % of the CPUs; {throttle}")
        idle = m["cpu_latency"]["cpuidle_driver"] or "none"
        if held is None and m["cpu_latency"]["error"]:
            console.print(f"The switch's CPU wake-up latency request could not be held ({m['cpu_latency']['error']}): "
                          f"idle CPUs enter their idle states (cpuidle driver {idle}), as they would for a switch "
                          "that cannot hold it either.")
        elif held is None:
            console.print(f"No CPU wake-up latency request held (--cpu-latency-us off): idle CPUs enter their idle "
                          f"states (cpuidle driver {idle}). The switch holds one by default, so it sees fewer late "
                          "wake-ups than these.")
        else:
            console.print(f"CPU wake-up latency request: {held} us held, as the switch holds it (cpuidle driver {idle})")
        pre = m["preemption"]
        console.print(f"kernel preemption: {pre['mode']} (from {pre['source']})")
        if pre["mode"] in ("none", "voluntary"):
            console.print("  Kernel work on a CPU (a system call of another process, a sender's network stack) "
                          "runs until it yields before the switch's real-time thread gets that CPU; a "
                          "PREEMPT_DYNAMIC kernel takes preempt=full on its command line.")
        if m["worst_ms"] >= 1.0:
            console.print(f"The machine stopped a CPU for up to {m['worst_ms']:.1f} ms: releases due then leave "
                          "that much late, whatever the switch does. Microsecond figures (delay error p99, "
                          "slots) need a host with dedicated CPUs; millisecond emulation is fine if it is rare.")
        else:
            console.print("No CPU stopped for 1 ms or more: the host keeps microsecond timing.")
    if max_stall_ms is not None and m["worst_ms"] >= max_stall_ms:
        raise typer.Exit(EXIT_PROBLEM)


def register(app: typer.Typer) -> None:
    app.command("host-check")(host_check)
