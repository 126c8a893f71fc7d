"""Hold one CPU for a while at a real-time priority, as a hypervisor that stops a virtual CPU would
look to the host-stall watchers (p4netem.lab.hoststall): nothing below PRIORITY runs on it.

    python stallcpu.py CPU MILLISECONDS [PRIORITY]     (root; PRIORITY default 60, above the watchers' 50)
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    cpu, ms = int(sys.argv[1]), float(sys.argv[2])
    priority = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    end = time.monotonic() + ms / 1000
    while time.monotonic() < end:
        pass


if __name__ == "__main__":
    main()
