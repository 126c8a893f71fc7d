"""How many labs to run at once on this machine for these jobs (the default of --parallel).

A lab costs a start-up (pages, namespaces, switch, servers: 8-16 s, more on a busy machine),
which only pays off over several loads: no more labs than one per 4 loads. A lab costs memory (namespaces, a switch, nginx and the other servers: about 150 MB; a
Chromium client about 400 MB more) and CPU in proportion to what its loads do (session.cpu_weight:
a GPRS load waits, a LAN load keeps the switch and both TCP stacks busy). The labs together may
use three quarters of the cores, leaving the rest to the driver and to the timing of the switches'
release threads; never more than 2 x cores + 2 labs (process and context-switch overhead).
"""

from __future__ import annotations

import os

from .session import median_weight
from .store import Job

LAB_MB = 150
BROWSER_MB = 400
CPU_SHARE = 0.75
LOADS_PER_LAB = 4
# A load this heavy (session.cpu_weight) runs a browser: its lab costs BROWSER_MB more.
BROWSER_WEIGHT = 0.35


def available_mb() -> int:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 2048


def default_labs(jobs: list[Job], browser: bool = False) -> int:
    cores = os.cpu_count() or 1
    if not jobs:
        return 1
    by_cpu = int(cores * CPU_SHARE / max(median_weight(jobs), 0.05))
    by_mem = int(available_mb() * 0.5 // (LAB_MB + (BROWSER_MB if browser else 0)))
    by_jobs = max(1, len(jobs) // LOADS_PER_LAB)
    return max(1, min(by_cpu, by_mem, 2 * cores + 2, by_jobs))


def local_labs(pending: list[Job], parallel: int | None = None) -> int:
    """The labs a local run (`experiment run` or `resume` without --ray) uses for the loads
    `pending`: `parallel` (--parallel) or default_labs, never more than the loads; 0 for none.
    `experiment status` of a stopped run estimates with the same number `resume` then uses (it
    took the stopped session's count, which default_labs may lower for the fewer loads left)."""
    if not pending:
        return 0
    browser = any(j.spec.get("cpu_weight", 0) >= BROWSER_WEIGHT for j in pending)
    return max(1, min(parallel or default_labs(pending, browser), len(pending)))
