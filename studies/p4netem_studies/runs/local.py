"""Labs as local processes (`--parallel N`): each lab is a process of its own (spawned, so it
starts clean of the driver's threads and Mininet state) that owns its namespaces, switch and
servers, and talks to the driver over a pipe:

    driver -> lab   ("run", job) | ("close",)
    lab -> driver   ("up", info) | ("result", result) | ("error", text) | ("closed", info)

A lab process dies with its driver (PR_SET_PDEATHSIG: SIGTERM, which tears its lab down), so a
driver killed with SIGKILL leaves no lab running; Ctrl-C goes to the driver only (the lab ignores
SIGINT), which then closes every lab in order.

The SIGTERM cuts into whatever the lab is doing (a page load can run for minutes), so the orderly
close that follows may find a part in a state it cannot leave: after one such cut, grpc's
Channel.close waited forever and the lab outlived its killed driver with its namespaces, switch
and servers. So the close runs against a deadline (TEARDOWN_DEADLINE_S); past it the lab process
removes what its lab record lists, as `p4netem lab clean` would for a dead owner, and exits.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import wait as mp_wait
from pathlib import Path

from p4netem.lab.owner import tear_down_own_labs
from p4netem.stop_signals import StopSignals, handling

from .worker import LabWorker

PR_SET_PDEATHSIG = 1
# An orderly close takes a few seconds (Mininet stops its hosts, the switch drains); the driver
# waits 60 s for its labs to close before it gives up on them, so a lab must be gone before that.
TEARDOWN_DEADLINE_S = 30.0
# Exit status of a lab that had to be removed the hard way (128 + SIGTERM, as a killed process).
FORCED_EXIT = 143


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _lab_main(conn, session: dict, lab_id: str, index: int, shared: bool, run_dir: str) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (the driver's abort, its death's PDEATHSIG) raises SystemExit, which unwinds into the
    # teardown below. Once: both can come, and a second SystemExit would cut into the close the
    # first one started. Remembered: a SIGTERM that came during a fork (the lab's start and loads
    # fork all the time) raised in logging's at-fork callback, where Python drops exceptions, and
    # the lab went on waiting for its driver's next message while the driver waited for it to
    # close; the loop raises it again (p4netem.stop_signals).
    stops = StopSignals(lambda signum: SystemExit(128 + signum), once=True)
    # Registered (stop_signals.handling) so that the waits inside a load (the page loader's)
    # raise a dropped stop within a second too, not only the loop below after the load (the
    # teardown below sets SIGTERM aside itself).
    with handling(stops, (signal.SIGTERM,)):
        # Mininet and the servers print: into the lab's own log, never over the driver's progress.
        log_dir = Path(run_dir) / "logs" / lab_id
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / "lab.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        worker = LabWorker(session, lab_id=lab_id, index=index, shared=shared, run_dir=run_dir,
                           files_dir=run_dir)
        try:
            try:
                conn.send(("up", worker.start()))
            except Exception as exc:
                traceback.print_exc()
                conn.send(("error", f"lab did not start: {_one_line(exc)}"))
                return
            while True:
                stops.check()       # a stop Python dropped during the start or the last load
                msg = conn.recv()
                if msg[0] == "close":
                    break
                try:
                    conn.send(("result", worker.run(msg[1])))
                except Exception as exc:
                    # The lab's state is unknown after a load that raised: give the job back and go.
                    traceback.print_exc()
                    conn.send(("error", f"load failed in the lab: {_one_line(exc)}"))
                    return
        except (EOFError, BrokenPipeError):
            pass      # the driver is gone
        finally:
            # The teardown must finish whatever arrives now (the driver's abort, its death's
            # PDEATHSIG): a lab stopped halfway through closing leaves namespaces and servers behind.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            _arm_teardown_deadline(TEARDOWN_DEADLINE_S)
            info = worker.close()
            try:
                conn.send(("closed", info))
            except (OSError, BrokenPipeError):
                pass


def _arm_teardown_deadline(seconds: float) -> None:
    """Past `seconds`, remove this process's labs by their records and exit at once: a close
    stuck for good must not keep a lab running. A daemon timer, so a close that finishes in
    time exits normally."""
    def force() -> None:
        print(f"lab close did not finish in {seconds:.0f} s: removing the lab by its record",
              file=sys.stderr, flush=True)
        try:
            for line in tear_down_own_labs().lines():
                print(line, file=sys.stderr, flush=True)
        finally:
            os._exit(FORCED_EXIT)     # no interpreter teardown: its atexit hooks would close again
    timer = threading.Timer(seconds, force)
    timer.daemon = True
    timer.start()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}"


class LocalLab:
    """The driver's handle on one lab process."""

    def __init__(self, ctx, session: dict, lab_id: str, index: int, shared: bool, run_dir: Path):
        self.lab_id = lab_id
        self.node = os.uname().nodename
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_lab_main, name=f"p4netem-lab-{lab_id}",
                                   args=(child, session, lab_id, index, shared, str(run_dir)),
                                   daemon=False)
        self.process.start()
        child.close()
        self.closing = False

    def submit(self, job: dict) -> None:
        self.conn.send(("run", job))

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            try:
                self.conn.send(("close",))
            except (OSError, BrokenPipeError):
                pass

    def abort(self) -> None:
        """Stop now (SIGTERM: the lab tears itself down)."""
        if self.process.is_alive():
            self.process.terminate()

    def kill(self) -> None:
        """Given up on (no answer by the driver's deadline: a lab stopped or stuck where its own
        teardown deadline cannot act): SIGKILL, as the OOM killer would; its reaper removes the
        lab. Reaped here: a child left running kept the interpreter's exit waiting on it
        (multiprocessing joins its children at exit, without a timeout)."""
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)

    def join(self, timeout: float) -> bool:
        self.process.join(timeout)
        return not self.process.is_alive()


class LocalBackend:
    name = "local"

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.ctx = mp.get_context("spawn")

    def start_lab(self, session: dict, lab_id: str, index: int, shared: bool) -> LocalLab:
        return LocalLab(self.ctx, session, lab_id, index, shared, self.run_dir)

    def wait(self, labs: list[LocalLab], timeout: float) -> list[tuple[LocalLab, tuple]]:
        """Messages from labs (or ("died", exit code) for a lab whose process ended)."""
        if not labs:
            return []
        by_conn = {lab.conn: lab for lab in labs}
        by_sentinel = {lab.process.sentinel: lab for lab in labs}
        ready = mp_wait(list(by_conn) + list(by_sentinel), timeout)
        out = []
        seen = set()
        for r in ready:
            if r in by_conn:
                lab = by_conn[r]
                try:
                    while lab.conn.poll():
                        out.append((lab, lab.conn.recv()))
                except (EOFError, OSError):
                    pass
                seen.add(lab.lab_id)
        for r in ready:
            if r in by_sentinel:
                lab = by_sentinel[r]
                if lab.lab_id not in seen:
                    try:
                        while lab.conn.poll():
                            out.append((lab, lab.conn.recv()))
                    except (EOFError, OSError):
                        pass
                lab.process.join(0.1)
                out.append((lab, ("died", f"lab process exited with code {lab.process.exitcode}")))
        return out

    def shutdown(self) -> None:
        pass
