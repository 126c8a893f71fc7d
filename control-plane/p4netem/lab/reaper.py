"""A lab owner's reaper: removes the labs of a process the moment it dies without closing them.

Why: a lab cleans up after itself when it closes, and a dead owner's lab is removed by the next
lab that starts on the machine (`clean_dead_labs` at its start) or by `p4netem lab clean`. Some
owners die by other hands, with no chance to close, and no next lab may come: a user's `kill -9`
of `p4netem measure` or `lab up`, Ray killing a lab actor's worker outright when the driver stops
a run (`ray.kill` of a busy lab) or dies (its actors share its fate), the kernel's OOM killer.
Their namespaces, switch and servers then stayed until someone ran `lab clean`. So every lab
owner starts one before its first lab record (owner.open_record: MininetLab, TwoHostLab, a
LabHost or SwitchProcess of a user's own script).

How: the owner opens a pidfd on itself and hands it to a detached process (`setsid -f`: a new
session, and not the owner's child, so that whatever kills the owner's children spares it; Ray
kills an exiting worker's direct children). The reaper sleeps in poll() on the pidfd, which the
kernel makes readable once the owner has exited (and looks each second whether its main
thread has ended, as the other cleaners judge an owner dead), then removes that owner's labs
(`clean_dead_labs(owner=...)`: the records whose owner is this pid *and* start time; other
owners' labs are theirs, their reapers' or the next lab's). The pidfd names the process itself,
so a reused pid cannot fool it. An owner that closed its labs leaves nothing to clean, and its
reaper just exits; one that was killed has its labs removed within seconds. The reaper writes
what it removed to the owner's stderr (a lab process's log, a Ray worker's log).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading

__all__ = ["watch_this_process", "watch_this_process_once"]

_started_for: int | None = None     # the pid whose reaper runs (a forked child needs its own)
_tried_for: int | None = None       # the pid that tried to start one, whether it could or not
_lock = threading.Lock()


def watch_this_process_once() -> None:
    """watch_this_process(), unless this process has tried already: a lab calls it before each
    record, and a failure is raised once per process (its caller warns once: a parallel run's lab
    process has told its driver already)."""
    if _tried_for == os.getpid():
        return
    watch_this_process()


def watch_this_process() -> None:
    """Start this process's reaper, once per process. Raises OSError when it cannot start (no
    pidfd on kernels before 5.3, no setsid): the caller decides whether a lab may run without."""
    global _started_for, _tried_for
    with _lock:
        if _started_for == os.getpid():
            return
        _tried_for = os.getpid()
        from .owner import start_ticks
        fd = os.pidfd_open(os.getpid())
        try:
            # setsid -f forks, and its child (the reaper) leaves this process's session; the
            # parent returns at once, so this costs a fork and an exec, not the reaper's imports.
            # Run as a script (-P, Python 3.11: without this file's folder on sys.path), not
            # with -m: the package's imports (P4Runtime, protobuf: 40 MB) wait until there is
            # work to do, so a reaper holds 14 MB while its lab runs. Only stderr is inherited, for
            # its report: the owner's stdout may be a pipe that a parent reads to its end.
            subprocess.run(["setsid", "-f", sys.executable, "-P", os.path.abspath(__file__),
                            "--pidfd", str(fd), "--start", str(start_ticks(os.getpid()) or 0),
                            "--owner", str(os.getpid())],
                           pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           check=True, timeout=10)
        except subprocess.CalledProcessError as exc:
            raise OSError(f"cannot start the lab reaper: setsid exited with status "
                          f"{exc.returncode}") from None
        except (subprocess.SubprocessError, OSError) as exc:
            raise OSError(f"cannot start the lab reaper: {exc}") from None
        finally:
            os.close(fd)
        _started_for = os.getpid()


OWNER_CHECK_MS = 1000


def _ended(pid: int, start: int) -> bool:
    """Whether process `pid` started at `start` (clock ticks since boot) has ended as
    p4netem.lab.owner judges it (no such process, only its zombie, or another process with its
    pid). Read here, not imported: the reaper imports the package only once there is work."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return True
    rest = stat[stat.rindex(")") + 2:].split()  # the fields after comm (which may hold ')')
    return rest[0] == "Z" or int(rest[19]) != start


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="p4netem/lab/reaper.py")
    parser.add_argument("--pidfd", type=int, required=True, help="a pidfd of the owner")
    parser.add_argument("--owner", type=int, required=True, help="the owner's pid")
    parser.add_argument("--start", type=int, default=None,
                        help="the owner's start time (clock ticks since boot): only its labs go")
    args = parser.parse_args(argv)
    # Not the owner's niceness: a Ray worker runs at 15 and its reaper inherited it, so on a busy
    # node the reaper could wait past a minute for the CPU its imports and `ip` calls need while
    # the killed lab stayed (CI95: a lab still there 90 s after Ray killed its worker). Root may
    # lower it; an unprivileged owner's reaper keeps what it has.
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    poller = select.poll()
    poller.register(args.pidfd, select.POLLIN)
    # The pidfd turns readable once every thread of the owner has exited; every other cleaner
    # (clean_dead_labs: the next lab's start, `lab clean`) takes the owner for dead as soon as its
    # main thread is a zombie. A thread slow to exit kept the reaper waiting while those already
    # counted the lab as dead: it looks at the owner's main thread each second too.
    while not poller.poll(OWNER_CHECK_MS):
        if args.start and _ended(args.owner, args.start):
            break
    os.close(args.pidfd)
    from p4netem.lab.owner import Owner, clean_dead_labs
    owner = None if args.start is None else Owner(args.owner, args.start, Owner.current().boot)
    report = clean_dead_labs(owner=owner)
    for line in report.lines():
        print(f"p4netem lab reaper (owner pid {args.owner} ended): {line}", file=sys.stderr,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
