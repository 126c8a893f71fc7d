"""Labs as local processes (`--parallel N`): each lab is a process of its own (spawned, so it
starts clean of the driver's threads and Mininet state) that owns its namespaces, switch and
servers, and talks to the driver over a pipe:

    driver -> lab   ("run", job) | ("close",)
    lab -> driver   ("up", info) | ("result", result) | ("error", text) | ("closed", info)

A lab process dies with its driver (PR_SET_PDEATHSIG: SIGTERM, which tears its lab down), so a
driver killed with SIGKILL leaves no lab running; Ctrl-C goes to the driver only (the lab ignores
SIGINT), which then closes every lab in order.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import traceback
from multiprocessing.connection import wait as mp_wait
from pathlib import Path

from .worker import LabWorker

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _lab_main(conn, session: dict, lab_id: str, index: int, shared: bool, run_dir: str) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def on_term(signum, frame):
        raise SystemExit(143)
    signal.signal(signal.SIGTERM, on_term)
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
        info = worker.close()
        try:
            conn.send(("closed", info))
        except (OSError, BrokenPipeError):
            pass


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
