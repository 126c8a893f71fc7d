"""Host stalls, watched from outside the switch: did this machine stop running us for a while?

On a VM the hypervisor may deschedule a virtual CPU for tens of milliseconds (a CI run saw the
switch's releases 24-170 ms late on a machine with nothing else running). A measurement of timing
to the millisecond cannot pass through that, and the switch is not what failed. The switch's own
release lateness cannot tell the two apart, since a late switch is exactly what a broken switch
looks like. So this watches from outside: one small process per CPU, pinned to it at a SCHED_FIFO
priority, sleeps `period_ns` at a time and writes down every wake-up at least `report_ns` late.

At the default priority (50, above the switch's data-plane thread at 10 and its P4Runtime threads
at 5) nothing on the CPU can hold a watcher off but interrupts, kernel work that does not yield, or
the CPU itself not running: a wake-up tens of milliseconds late means the host stopped the CPU.
The pytest marker p4netem_timing uses that (p4netem/testing/stalls.py). A benchmark that must not
be disturbed at all runs them below the switch (priority 9): a release is never delayed by a
watcher, and a watcher then also waits while the switch spins, which at light load is
microseconds.

Kernel work can hold a CPU for a millisecond where the kernel's preemption model is "none" or
"voluntary" (`preemption_model()`; the development VM's is "none"): there, with the switch's
wake-up latency request held, a TCP flow over a veth pair beside the watchers made 12-39
wake-ups per CPU in 20 s a millisecond or more late at 0.17-0.35 % steal, where two user-mode
busy loops made 2-5 (2026-11-27; docs/cli.md, "host-check"). Where they measure for the switch,
the watchers run with the switch's wake-up latency request held (p4netem.lab.cpulatency):
without it an idle vCPU halts, and waking it costs milliseconds on a VM.

A watcher sees a stall that covers one of its wake-ups: every stall of a period or more, a shorter
one with a chance of its length over the period. RT throttling would also stop it (for at most
50 ms of each second, sched_rt_runtime_us 950000), and that one could be the switch's doing; the
switch keeps itself under the throttle (its spin budget, docs/dataplane.md), logs "spin budget ran
out" when it did, and tests/control/test_switch_health.py checks that it does not under light load.

Run as a script (`python hoststall.py CPU PARENT_PID PRIORITY PERIOD_NS REPORT_NS`), it is the
watcher itself: it prints "ready" once it watches, "LATE_NS MONOTONIC_NS REALTIME_NS" per
late wake-up and "end WAKES MAX_LATE_NS" when terminated or when PARENT_PID is no longer its parent.
"""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PRIORITY = 50
# 200 wake-ups a second per CPU. Each costs 55-90 us of CPU on the development VM (a bare Python
# sleep loop 55 us: most of it is the timer's way through the hypervisor), 1.1-1.7 % of a CPU.
PERIOD_NS = 5_000_000
REPORT_NS = 2_000_000  # late wake-ups written down


@dataclass(frozen=True)
class Stall:
    cpu: int
    late_ns: int
    at_ns: int  # CLOCK_MONOTONIC when the late wake-up came
    at_real_ns: int  # the same instant in CLOCK_REALTIME (kernel packet stamps use it)


class HostStalls:
    """`with HostStalls() as w: ...` watches every CPU this process may run on; afterwards
    `w.stalls` lists the late wake-ups and `w.worst_ns` the longest (0 if none)."""

    def __init__(self, priority: int = PRIORITY, period_ns: int = PERIOD_NS, report_ns: int = REPORT_NS) -> None:
        self.priority, self.period_ns, self.report_ns = priority, period_ns, report_ns
        self._procs: list[tuple[int, subprocess.Popen[str]]] = []
        self.stalls: list[Stall] = []  # the wake-ups at least report_ns late
        self.per_cpu: dict[int, tuple[int, int]] = {}  # cpu: (wake-ups, the largest lateness of one, ns)

    def __enter__(self) -> HostStalls:
        for cpu in sorted(os.sched_getaffinity(0)):
            args = [cpu, os.getpid(), self.priority, self.period_ns, self.report_ns]
            # Run by its path, not with -m: the p4netem package's imports would take half a second.
            proc = subprocess.Popen([sys.executable, __file__, *map(str, args)], stdout=subprocess.PIPE, text=True)
            self._procs.append((cpu, proc))
        # Watched from here on: each says so once it sleeps on its CPU at its priority.
        for cpu, proc in self._procs:
            if proc.stdout.readline().strip() != "ready":
                self.__exit__()
                raise RuntimeError(f"the host-stall watcher of CPU {cpu} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        for _, proc in self._procs:
            proc.send_signal(signal.SIGTERM)
        for cpu, proc in self._procs:
            out, _ = proc.communicate(timeout=10)
            for line in out.splitlines():
                fields = line.split()
                if fields[0] == "end":
                    self.per_cpu[cpu] = (int(fields[1]), int(fields[2]))
                elif len(fields) == 3:
                    self.stalls.append(Stall(cpu, *map(int, fields)))
        self._procs.clear()

    @property
    def wakes(self) -> int:
        return sum(n for n, _ in self.per_cpu.values())

    @property
    def worst_ns(self) -> int:
        return max((s.late_ns for s in self.stalls), default=0)

    def may_have_held(self, due_and_arrival: list[tuple[int, int]]) -> list[bool]:
        """For each packet (due, arrival; CLOCK_REALTIME ns), whether a watched stall may have held
        it: the packet was due before it arrived and that interval meets the span in which a late
        wake-up's CPU stopped (its last period plus its lateness, up to the wake-up)."""
        spans = [(s.at_real_ns - s.late_ns - self.period_ns, s.at_real_ns) for s in self.stalls]
        return [any(a <= arrival and min(due, arrival) <= b for a, b in spans) for due, arrival in due_and_arrival]

    def summary(self, over_ns: int | None = None) -> str:
        over_ns = self.report_ns if over_ns is None else over_ns
        big = [s for s in self.stalls if s.late_ns >= over_ns]
        if not big:
            return f"no wake-up of the host-stall watchers was {over_ns / 1e6:g} ms late ({self.wakes} wake-ups)"
        worst = max(big, key=lambda s: s.late_ns)
        return (f"{len(big)} wake-ups of the host-stall watchers were {over_ns / 1e6:g} ms or more late, the worst "
                f"{worst.late_ns / 1e6:.1f} ms on CPU {worst.cpu} ({self.wakes} wake-ups)")


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
    """CPU time the hypervisor took (steal) and the CPUs' busy share between two cpu_times()."""
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    per_cpu = {c: (after[c][7] - before[c][7]) * tick_s for c in after if c in before}
    busy = {c: sum(after[c][i] - before[c][i] for i in (0, 1, 2, 5, 6)) * tick_s
            for c in after if c in before}
    return {
        "steal_s": round(sum(per_cpu.values()), 3),
        "steal_pct_of_wall": round(100 * sum(per_cpu.values()) / (wall_s * len(per_cpu)), 2)
        if wall_s > 0 and per_cpu else 0.0,
        "busy_pct_of_wall": round(100 * sum(busy.values()) / (wall_s * len(busy)), 1)
        if wall_s > 0 and busy else 0.0,
    }


# The kernel's preemption models (Documentation/admin-guide/kernel-parameters.txt, "preempt=") and
# the config option that builds each as the default.
PREEMPT_CONFIGS = {"CONFIG_PREEMPT_RT": "rt", "CONFIG_PREEMPT_LAZY": "lazy", "CONFIG_PREEMPT": "full",
                   "CONFIG_PREEMPT_VOLUNTARY": "voluntary", "CONFIG_PREEMPT_NONE": "none"}


def preemption_model(debugfs: str | None = None, version: str | None = None, cmdline: str | None = None,
                     config: str | None = None) -> dict:
    """The kernel's preemption model, "none", "voluntary", "full", "lazy" or "rt" ("unknown" if
    nothing says), and where that came from. It decides how long kernel work on a CPU (another
    process's system call, a sender's network stack) can hold off the switch's real-time thread:
    under "none" and "voluntary" until that work yields, which can be a millisecond.

    In order: the scheduler's debugfs file (the mode in force, marked "(full)"); a PREEMPT_RT
    kernel; on a PREEMPT_DYNAMIC kernel a `preempt=` on its command line; the built default from
    the kernel config. Arguments replace the files (the unit test's real kernels)."""
    def read(path: str) -> str:
        try:
            if path.endswith(".gz"):
                with gzip.open(path, "rt") as f:
                    return f.read()
            return Path(path).read_text()
        except OSError:
            return ""

    if debugfs is None:
        debugfs = read("/sys/kernel/debug/sched/preempt")
    if (m := re.search(r"\((\w+)\)", debugfs)) is not None:
        return {"mode": m.group(1), "source": "/sys/kernel/debug/sched/preempt"}
    version = os.uname().version if version is None else version
    tokens = version.split()
    if "PREEMPT_RT" in tokens:
        return {"mode": "rt", "source": "uname -v"}
    if "PREEMPT_DYNAMIC" in tokens:
        cmdline = read("/proc/cmdline") if cmdline is None else cmdline
        if (m := re.search(r"(?:^|\s)preempt=(\w+)", cmdline)) is not None:
            return {"mode": m.group(1), "source": "preempt= on the kernel command line"}
    if config is None:
        config = read("/proc/config.gz") or read(f"/boot/config-{os.uname().release}")
    built = {line.split("=")[0] for line in config.splitlines() if line.endswith("=y")}
    for option, mode in PREEMPT_CONFIGS.items():
        if option in built:
            how = "the default of a PREEMPT_DYNAMIC kernel" if "PREEMPT_DYNAMIC" in tokens else "built in"
            return {"mode": mode, "source": f"{option}=y in the kernel config, {how}"}
    if "PREEMPT" in tokens:
        return {"mode": "full", "source": "uname -v"}
    return {"mode": "unknown", "source": "no debugfs, kernel config or uname -v says"}


def wait_until_quiet(under_ns: int, quiet_s: float = 5.0, limit_s: float = 60.0) -> bool:
    """Waits for quiet_s seconds in which no CPU stalled for under_ns, for at most limit_s; whether
    it came. Watched with the wake-up latency request the switch holds (p4netem.lab.cpulatency):
    without it idle CPUs halt, and on a VM that alone makes wake-ups milliseconds late."""
    # Here, not at the top: this file also runs as the watcher script, outside the package.
    from .cpulatency import CpuLatency

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with CpuLatency(), HostStalls() as w:
            time.sleep(quiet_s)
        if w.worst_ns < under_ns:
            return True
    return False


def _watch(cpu: int, parent: int, priority: int, period_ns: int, report_ns: int) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        pass  # not root: still watches, at normal priority (the wire tests and benches run as root)
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    wakes, worst = 0, 0
    period_s = period_ns / 1e9
    print("ready", flush=True)
    prev = time.monotonic_ns()
    # A parent that died without stopping it (a killed test run) leaves it to the init process: stop.
    while running and os.getppid() == parent:
        time.sleep(period_s)
        now = time.monotonic_ns()
        late = now - prev - period_ns
        wakes += 1
        worst = max(worst, late)
        if late >= report_ns:
            print(late, now, time.time_ns(), flush=True)
        prev = now
    print("end", wakes, worst, flush=True)


if __name__ == "__main__":
    _watch(*map(int, sys.argv[1:6]))
