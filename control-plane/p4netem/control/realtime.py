"""Real-time scheduling for the short, time-critical parts of the control plane (the timeline
player's timed Writes, the write benchmarks): the calling thread and grpcio's own I/O threads run
SCHED_FIFO while inside, so a Write does not queue behind other runnable processes."""

from __future__ import annotations

import os


class Realtime:
    """Run the calling thread SCHED_FIFO while inside (root only; otherwise a no-op): the wait for
    a step's time and its one Write then do not queue behind other runnable processes, which on a
    busy machine costs milliseconds. Only the short, time-critical part runs like this (a sleep
    followed by one RPC); preparing the next change runs at normal priority."""

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self._saved: tuple[int, os.sched_param] | None = None

    def __enter__(self) -> "Realtime":
        if self.priority <= 0:
            return self
        try:
            saved = (os.sched_getscheduler(0), os.sched_getparam(0))
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
            self._saved = saved
        except (PermissionError, OSError, AttributeError):
            self._saved = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            policy, param = self._saved
            os.sched_setscheduler(0, policy, param)
            self._saved = None


# grpcio (C-core) does a call's socket I/O on its own event-engine threads, not on the calling
# thread: under CPU contention they add up to ~10 ms to a Write unless they run real-time too
# (measured: flip Write p99 10 ms -> 0.9 ms with three CPU hogs on this 2-core machine).
GRPC_THREAD_NAMES = ("event_engine", "grpc_global_tim")


class GrpcThreadsRealtime:
    """SCHED_FIFO for this process's gRPC I/O threads while inside (root only; no-op otherwise).
    They sleep unless there is gRPC traffic, so this costs nothing between steps."""

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self._saved: list[tuple[int, int, os.sched_param]] = []

    def __enter__(self) -> "GrpcThreadsRealtime":
        if self.priority <= 0:
            return self
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:
            return self
        for task in tasks:
            try:
                with open(f"/proc/self/task/{task}/comm") as f:
                    if f.read().strip() not in GRPC_THREAD_NAMES:
                        continue
                tid = int(task)
                saved = (tid, os.sched_getscheduler(tid), os.sched_getparam(tid))
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(self.priority))
                self._saved.append(saved)
            except (OSError, ValueError):
                continue  # a thread that ended, or no permission: leave it
        return self

    def __exit__(self, *exc: object) -> None:
        for tid, policy, param in self._saved:
            try:
                os.sched_setscheduler(tid, policy, param)
            except OSError:
                pass
        self._saved = []
