"""Stopping one thread of a running process, and only that one (shared by the tests of the switch's
health check; tests/ is on sys.path through its conftest).

SIGSTOP stops every thread of a process. ptrace stops one: PTRACE_SEIZE attaches to a thread id
without stopping it, PTRACE_INTERRUPT then stops that thread alone (the others, the switch's gRPC
server among them, run on), and PTRACE_DETACH lets it run again. A real stall of a data-plane thread
(as a deadlock or a bug spinning inside one loop turn would be), with nothing mocked. Needs root (or
CAP_SYS_PTRACE); every ptrace call is made from the thread that attached, as the kernel requires,
and the kernel detaches by itself if this process dies first.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PTRACE_DETACH = 17
_PTRACE_SEIZE = 0x4206
_PTRACE_INTERRUPT = 0x4207
_WALL = 0x40000000  # waitpid: any child kind, threads of other processes included (ptrace)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long


def thread_ids(pid: int, name: str) -> list[int]:
    """The ids of the threads of `pid` whose name (/proc/PID/task/TID/comm, which Linux cuts at 15
    characters) starts with `name`."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if task.joinpath("comm").read_text().strip().startswith(name):
                found.append(int(task.name))
        except OSError:
            pass  # the thread ended meanwhile
    return sorted(found)


def _ptrace(request: int, tid: int) -> None:
    if _libc.ptrace(request, tid, None, None) == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, f"ptrace({request:#x}, {tid}): {os.strerror(errno)}")


def thread_state(pid: int, tid: int) -> str:
    """The thread's state letter (/proc/PID/task/TID/stat): t while ptrace holds it stopped."""
    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@contextmanager
def stopped_thread(pid: int, tid: int) -> Iterator[None]:
    """Thread `tid` of process `pid` stopped (in a ptrace stop) for the body, the rest of the
    process running; runs again after it, however the body ends."""
    _ptrace(_PTRACE_SEIZE, tid)
    try:
        _ptrace(_PTRACE_INTERRUPT, tid)
        _, status = os.waitpid(tid, _WALL)  # until it is stopped
        assert os.WIFSTOPPED(status), f"thread {tid}: wait status {status:#x}"
        assert thread_state(pid, tid) == "t", thread_state(pid, tid)
        yield
    finally:
        try:
            _ptrace(_PTRACE_DETACH, tid)
        except ProcessLookupError:  # ESRCH: not in a stop (the body began before it stopped), or dying
            _let_go(tid)


def _let_go(tid: int) -> None:
    """Detaches from a thread that was not in its ptrace stop: one whose stop came after the body
    began (stopped now, then let run), or one that died stopped, its process killed (e.g. by
    systemd's watchdog): its exit is reported to us, its tracer, and collected here, or its process
    could never be reaped."""
    try:
        _ptrace(_PTRACE_INTERRUPT, tid)
    except OSError:
        pass  # dead already (ESRCH, or EIO for a zombie): its exit is waiting for us, or was collected
    try:
        _, status = os.waitpid(tid, _WALL)
    except ChildProcessError:
        return  # collected already
    if os.WIFSTOPPED(status):
        _ptrace(_PTRACE_DETACH, tid)
