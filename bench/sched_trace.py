"""What the data-plane thread's CPU did while a late packet waited (`bench/run.py --trace-sched`).

`perf record` takes the scheduler, interrupt and softirq tracepoints of every CPU beside a
measurement (EVENTS). For a packet due at `due` that arrived at `arrived`, `silent_ns` is the
longest stretch inside [due, arrived] in which the CPU the data-plane thread was last switched
on logged no event at all. On that CPU a timer tick, a context switch, a wake-up or the NET_RX
of the switch's own transmits (every background frame it sends runs the receiver's softirq there)
would each log one. A stretch of milliseconds with none, while a timer is due and frames arrive
on the other CPUs, is a CPU that was not running: on a VM, the hypervisor's (docs/benchmarks.md,
"Where the late probes were"). Shorter stretches are ambiguous: a loop spinning towards its next
release logs nothing either. So the step counts a late packet as held by a silent CPU only when a
silent stretch covers most of its lateness (COVER) and is long (SILENT_MIN_NS).

Opt-in, not part of `make bench`: perf's own work adds load to the figures it explains (the
traced delay runs of 2026-11-27 had p99 24.1, 193.1 and 20.0 us).
"""
from __future__ import annotations

import bisect
import contextlib
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task",
          "irq:irq_handler_entry", "irq:softirq_entry", "irq:softirq_exit")
DP_THREAD = "p4netem-dp"
TRACEFS = Path("/sys/kernel/tracing")
COVER = 0.8  # the share of a packet's lateness a silent stretch must cover
SILENT_MIN_NS = 200_000  # below this a spinning loop looks the same (docstring)

# `perf script -F cpu,time,event,trace --ns`: "[001] 62625.794378170: sched:sched_switch: prev_comm=..."
LINE = re.compile(r"\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\S+):\s?(.*)")


@dataclass
class Trace:
    """Per CPU, the times (CLOCK_MONOTONIC ns) of every event; and the data-plane thread's switches
    (time, cpu, True when switched in). `offset_ns` is CLOCK_REALTIME - CLOCK_MONOTONIC, to take
    the kernel's packet stamps (realtime) to the trace's clock."""
    events: dict[int, list[int]] = field(default_factory=dict)
    dp_switches: list[tuple[int, int, bool]] = field(default_factory=list)
    offset_ns: int = 0
    lost: int = 0

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.events.values())

    def dp_cpu(self, t_ns: int) -> int | None:
        """The CPU the data-plane thread was last switched on or off before `t_ns` (monotonic)."""
        i = bisect.bisect_right(self.dp_switches, (t_ns, 1 << 30, True)) - 1
        return self.dp_switches[i][1] if i >= 0 else None

    def silent_ns(self, due_real_ns: int, arrived_real_ns: int) -> int:
        """The longest stretch within [due, arrived] (realtime ns) in which the data-plane thread's
        CPU logged nothing."""
        due, arrived = due_real_ns - self.offset_ns, arrived_real_ns - self.offset_ns
        cpu = self.dp_cpu(due)
        if cpu is None or arrived <= due:
            return 0
        times = self.events.get(cpu, [])
        # The events strictly inside (due, arrived), bounded by the two ends.
        inside = times[bisect.bisect_right(times, due):bisect.bisect_left(times, arrived)]
        marks = [due, *inside, arrived]
        return max(b - a for a, b in zip(marks, marks[1:]))

    def held(self, due_real_ns: int, arrived_real_ns: int) -> bool:
        """Whether a silent stretch of the data-plane thread's CPU accounts for the packet's lateness."""
        return _accounts(self.silent_ns(due_real_ns, arrived_real_ns), arrived_real_ns - due_real_ns)


def _accounts(silent_ns: int, late_ns: int) -> bool:
    return silent_ns >= SILENT_MIN_NS and silent_ns >= COVER * late_ns


def parse(lines, offset_ns: int = 0, lost: int = 0) -> Trace:
    """A Trace from `perf script -F cpu,time,event,trace --ns` lines."""
    tr = Trace(offset_ns=offset_ns, lost=lost)
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        cpu, t = int(m[1]), int(m[2]) * 1_000_000_000 + int(m[3])
        tr.events.setdefault(cpu, []).append(t)
        if m[4] == "sched:sched_switch" and DP_THREAD in m[5]:
            tr.dp_switches.append((t, cpu, f"next_comm={DP_THREAD}" in m[5]))
    for v in tr.events.values():
        v.sort()
    tr.dp_switches.sort()
    return tr


def _clock_offset_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)


@contextlib.contextmanager
def record():
    """Records EVENTS on every CPU for the block; the yielded dict gets "trace" (a Trace) after it.
    Mounts tracefs for the block where it is not mounted (and unmounts it after)."""
    if not shutil.which("perf"):
        raise RuntimeError("--trace-sched needs perf (apt linux-perf, which scripts/setup-system.sh installs)")
    mounted = False
    if not (TRACEFS / "events").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True)
        mounted = True
    tmp = Path(tempfile.mkdtemp(prefix="p4netem-sched-"))
    data = tmp / "perf.data"
    cmd = ["perf", "record", "-q", "-a", "-k", "mono", "-o", str(data)]
    for e in EVENTS:
        cmd += ["-e", e]
    out: dict = {}
    try:
        with open(tmp / "perf.log", "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(1.0)  # perf opens its buffers on every CPU
        if proc.poll() is not None:
            raise RuntimeError(f"perf record exited: {(tmp / 'perf.log').read_text()[-500:]}")
        offset = _clock_offset_ns()
        try:
            yield out
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        stats = subprocess.run(["perf", "report", "-i", str(data), "--stats"], capture_output=True, text=True).stdout
        m = re.search(r"LOST events:\s+(\d+)", stats)
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "cpu,time,event,trace", "--ns"],
                                capture_output=True, text=True, check=True).stdout
        out["trace"] = parse(script.splitlines(), offset, int(m[1]) if m else 0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if mounted:
            subprocess.run(["umount", str(TRACEFS)], check=False)


def summary(trace: Trace, late: list[tuple[int, int]]) -> dict:
    """For late packets (due, arrived) in realtime ns: how many a silent CPU held. Only those at
    least SILENT_MIN_NS late can be (docstring); the others are counted, not attributed."""
    big = [(d, a) for d, a in late if a - d >= SILENT_MIN_NS]
    silent = []  # the stretches of the packets held
    for d, a in big:
        if _accounts(s := trace.silent_ns(d, a), a - d):
            silent.append(s)
    return {"events": trace.count, "lost_events": trace.lost, "cover": COVER,
            "late_at_least_silent_min": len(big), "held_by_a_silent_cpu": len(silent),
            "silent_stretch_ms": [round(min(silent) / 1e6, 3), round(max(silent) / 1e6, 3)] if silent else None,
            "late_below_silent_min": len(late) - len(big), "silent_min_us": SILENT_MIN_NS / 1e3}
