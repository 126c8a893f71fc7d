"""Host stalls, watched from outside the switch: did this machine stop running us for a while?

On a VM the hypervisor may deschedule a virtual CPU for tens of milliseconds (a CI run saw the
switch's releases 24-170 ms late on a machine with nothing else running). A wire test that checks
timing to the millisecond cannot pass through that, and the switch is not what failed. The switch's
own release lateness cannot tell the two apart, since a late switch is exactly what a broken switch
looks like. So this watches from outside: one small process per CPU, pinned to it at a SCHED_FIFO
priority above the switch's data-plane thread (10) and its P4Runtime threads (5), sleeps
PERIOD_NS at a time and writes down every wake-up at least REPORT_NS late. Nothing on the CPU can
hold it off but interrupts, a non-preemptible kernel section (well under a millisecond) or the CPU
itself not running: a wake-up tens of milliseconds late means the host stopped the CPU.

RT throttling would also stop it (for at most 50 ms of each second, sched_rt_runtime_us 950000),
and that one could be the switch's doing. The switch keeps itself under the throttle (its spin
budget, docs/dataplane.md) and tests/control/test_switch_health.py checks that the budget does
not engage under light load; the switch's log line "spin budget ran out" says when it did.

Run as a script (`hoststall.py CPU PARENT_PID`), it is the watcher itself: it prints "ready" once it
watches, "LATE_NS AT_NS" per late wake-up, and "end WAKES MAX_LATE_NS" when terminated (or when
PARENT_PID is no longer its parent).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

PERIOD_NS = 5_000_000  # 200 wake-ups a second per CPU, ~20 us each: well under 1 % of a CPU
REPORT_NS = 2_000_000  # late wake-ups written down (and shown with a failure)
PRIORITY = 50


@dataclass(frozen=True)
class Stall:
    cpu: int
    at_ns: int  # CLOCK_MONOTONIC when the late wake-up came
    late_ns: int


class HostStalls:
    """`with HostStalls() as w: ...` watches every CPU this process may run on; afterwards
    `w.stalls` lists the late wake-ups and `w.worst_ns` the longest (0 if none)."""

    def __init__(self) -> None:
        self._procs: list[tuple[int, subprocess.Popen[str]]] = []
        self.stalls: list[Stall] = []
        self.wakes = 0

    def __enter__(self) -> HostStalls:
        for cpu in sorted(os.sched_getaffinity(0)):
            proc = subprocess.Popen([sys.executable, __file__, str(cpu), str(os.getpid())], stdout=subprocess.PIPE,
                                    text=True)
            self._procs.append((cpu, proc))
        # Watched from here on: each says so once it sleeps on its CPU at its priority.
        for cpu, proc in self._procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the host-stall watcher of CPU {cpu} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        for _, proc in self._procs:
            proc.send_signal(signal.SIGTERM)
        for cpu, proc in self._procs:
            out, _ = proc.communicate(timeout=10)
            for line in out.splitlines():
                first, second, *_ = line.split()
                if first == "end":
                    self.wakes += int(second)
                else:
                    self.stalls.append(Stall(cpu, int(second), int(first)))
        self._procs.clear()

    @property
    def worst_ns(self) -> int:
        return max((s.late_ns for s in self.stalls), default=0)

    def summary(self, over_ns: int = REPORT_NS) -> str:
        big = [s for s in self.stalls if s.late_ns >= over_ns]
        if not big:
            return f"no wake-up of the host-stall watchers was {over_ns / 1e6:g} ms late ({self.wakes} wake-ups)"
        worst = max(big, key=lambda s: s.late_ns)
        return (f"{len(big)} wake-ups of the host-stall watchers were {over_ns / 1e6:g} ms or more late, the worst "
                f"{worst.late_ns / 1e6:.1f} ms on CPU {worst.cpu} ({self.wakes} wake-ups)")


def wait_until_quiet(under_ns: int, quiet_s: float = 5.0, limit_s: float = 60.0) -> bool:
    """Waits for quiet_s seconds in which no CPU stalled for under_ns, for at most limit_s; whether
    it came."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with HostStalls() as w:
            time.sleep(quiet_s)
        if w.worst_ns < under_ns:
            return True
    return False


def _watch(cpu: int, parent: int) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    except PermissionError:
        pass  # not root: still watches, at normal priority (only the wire tests, as root, rely on it)
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    wakes, worst = 0, 0
    period_s = PERIOD_NS / 1e9
    print("ready", flush=True)
    prev = time.monotonic_ns()
    # A parent that died without stopping it (a killed test run) leaves it to the init process: stop.
    while running and os.getppid() == parent:
        time.sleep(period_s)
        now = time.monotonic_ns()
        late = now - prev - PERIOD_NS
        wakes += 1
        worst = max(worst, late)
        if late >= REPORT_NS:
            print(late, now, flush=True)
        prev = now
    print("end", wakes, worst, flush=True)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), int(sys.argv[2]))
