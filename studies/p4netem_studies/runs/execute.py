"""Run, resume and report on a run directory, with progress on the terminal.

    create(out, session, meta)  the store with the plan and the identity, before any lab is up
    execute(out, ...)           run what is not stored yet on N local labs or on Ray actors
    check_resume(out, force)    refuse (ResumeRefused, naming each difference) when the
                                definition, the code or the machine's TCP changed
    run_lock(out)               held by the one process that runs the directory's loads
                                (RunInProgress for a second one)
    status(out)                 done / total, failed loads and why, elapsed, estimate of what is left
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from p4netem.lab.owner import start_ticks
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from .capacity import LOADS_PER_LAB, local_labs
from .driver import Driver, RunFailed
from .identity import differences, identity
from .session import Session
from .store import RunStore


class ResumeRefused(Exception):
    def __init__(self, diffs: list[str]):
        self.diffs = diffs
        super().__init__("the run's setup changed since it started, results would mix:\n  "
                         + "\n  ".join(diffs) + "\n(--force resumes anyway)")


class RunInProgress(Exception):
    pass


LOCK_NAME = "run.lock"


@contextlib.contextmanager
def run_lock(out: Path):
    """Held (flock on DIR/run.lock) by the process that runs a directory's loads, from the store's
    plan to the last file written. A second `resume` of a run that is still going ran every load
    left a second time in labs of its own, beside the first's (the store kept the first result
    of each, the measurements of both were taken on a machine doing twice the work). The kernel
    releases the lock when its holder dies, also by SIGKILL, and the lab processes (spawned)
    do not inherit it, so a killed run can be resumed at once."""
    path = Path(out) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 400, 0).decode(errors="replace").strip() or "another process"
            raise RunInProgress(f"{out} is being run by {holder}: wait for it, or stop it "
                                f"(Ctrl-C, SIGTERM) and resume then; `p4netem experiment status "
                                f"{out}` shows how far it is") from None
        os.ftruncate(fd, 0)
        command = " ".join(shlex.quote(a) for a in sys.argv)[:300]
        os.pwrite(fd, f"pid {os.getpid()} ({command})\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def create(out: Path, session: Session, meta: dict) -> RunStore:
    store = RunStore.create(out)
    store.set_meta("format", "p4netem-run/1")
    store.set_meta("session", session.to_json())
    store.set_meta("identity", identity(session.definition))
    store.set_meta("experiment", meta)
    store.write_plan(session.jobs())
    return store


def check_resume(store: RunStore, force: bool, definition: dict | None = None) -> list[str]:
    """`definition`: the experiment's definition as its source reads today (None: unavailable,
    the stored one is compared with itself). With `force` the run still finishes its stored
    plan, the differences are recorded in the store."""
    old = store.meta("identity")
    session = Session.from_json(store.meta("session"))
    new = identity(definition if definition is not None else session.definition)
    diffs = differences(old, new)
    if diffs and not force:
        raise ResumeRefused(diffs)
    if diffs:
        store.set_meta(f"identity_forced_{int(time.time())}", {"new": new, "differences": diffs})
    return diffs


def _line(res: dict) -> str:
    rec = res["record"]
    if "metrics" in rec:          # a workload run (E2)
        m = rec.get("metrics") or {}
        med = m.get("page_delay_median_ms")
        status = "[green]ok[/]" if res["ok"] else f"[red]FAILED[/] {str(rec.get('errors'))[:120]}"
        return (f"{rec.get('key', ''):>32} #{int(rec.get('rep', 0)) + 1}: "
                f"{m.get('pages_ok', 0):>4} pages, median delay "
                f"{'-' if med is None else f'{med / 1000:.2f} s'}, util "
                f"{m.get('utilisation_down') or 0:.2f}, drops {m.get('drop_rate_down_pct') or 0:.2f}%  "
                f"{status}")
    plt = rec.get("plt_ms")
    plt_s = "-" if plt is None else f"{plt / 1000:.3f} s"
    status = "[green]ok[/]" if res["ok"] else f"[red]FAILED[/] {str(rec.get('errors'))[:120]}"
    return (f"{rec.get('profile_label', ''):>12} {rec.get('variant', ''):<24} "
            f"#{int(rec.get('rep', 0)) + 1}: {plt_s:>9}  {rec.get('connections_opened', '-'):>2} conns  "
            f"{status}  [dim]{res.get('lab', '')}[/]")


def execute(out: Path, *, kind: str, parallel: int | None = None, ray: str | None = None,
            console: Console | None = None, verbose: bool = True) -> dict:
    """Run every job not yet stored (the caller holds run_lock). Returns what happened:
    {"labs", "stored", "session"}."""
    console = console or Console()
    store = RunStore.open(out)
    # Sessions of drivers killed outright: ended where the store last heard of them, not open
    # for ever (their time counted up to now in every duration and status since).
    store.close_killed_sessions()
    session = Session.from_json(store.meta("session"))
    jobs = store.jobs()
    done = store.done_keys()
    pending = [j for j in jobs if j.key not in done]
    backend = None
    if ray:
        from .cluster import RayBackend
        backend = RayBackend(ray)
        labs = parallel or min(backend.capacity(), max(1, len(pending) // LOADS_PER_LAB))
        shared = True
        where = f"Ray ({ray}: {backend.nodes()} node(s))"
    else:
        from .local import LocalBackend
        backend = LocalBackend(out)
        labs = local_labs(pending, parallel)
        shared = labs > 1
        where = "this machine"
    labs = max(1, min(labs, len(pending))) if pending else 0
    command = " ".join(shlex.quote(a) for a in sys.argv)
    sid = store.begin_session(kind, command, labs)
    store.set_meta(f"session_{sid}_driver", _process_identity(os.getpid()))
    console.print(f"{len(done)} of {len(jobs)} loads stored; running {len(pending)} on "
                  f"{labs} lab(s) on {where}" + (" (switches without busy polling)" if shared else ""))
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                        console=console, transient=False)
    task = progress.add_task("starting labs", total=len(jobs), completed=len(done))
    stored = 0
    warned: set[str] = set()

    def on_event(kind_: str, data: dict) -> None:
        nonlocal stored
        if kind_ == "lab_up":
            progress.console.print(f"lab {data['lab']} up on {data.get('node')}")
            for text in data.get("warnings") or ():
                if text not in warned:          # the same for every lab of a node: say it once
                    warned.add(text)
                    progress.console.print(f"[yellow]warning: lab {data['lab']}: {text}[/]",
                                           highlight=False)
        elif kind_ == "load":
            progress.update(task, description=data["job"].key[:60])
        elif kind_ == "done":
            if data["stored"]:
                stored += 1
                progress.advance(task)
            if verbose:
                progress.console.print(_line({**data["result"], "lab": data["lab"]}))
        elif kind_ == "lab_lost":
            job = data.get("job")
            progress.console.print(f"[yellow]lab {data['lab']} lost ({data['reason'][:200]})"
                                   + (f"; {job.key} goes to another lab" if job else "") + "[/]")
        elif kind_ == "gave_up":
            progress.advance(task)
            progress.console.print(f"[red]gave up on {data['job'].key}[/]: {data['errors'][-1][:200]}")
        elif kind_ == "stopping":
            progress.console.print(f"[yellow]stopping: taking down {len(data['labs'])} lab(s) "
                                   f"({', '.join(data['labs'])})[/]", highlight=False)
        elif kind_ == "stop_waiting":
            labs = ", ".join(f"{lab} on {node or 'its node'}" for lab, node in data["labs"])
            doing = "stopping" if data.get("stopping", True) else "closing the labs"
            progress.console.print(f"[yellow]{doing}: still waiting for {labs} to end (at most "
                                   f"{data['left_s']:.0f} s more)[/]", highlight=False)
        elif kind_ == "lost_waiting":
            progress.console.print(f"[yellow]waiting for lost lab(s) {', '.join(data['labs'])} to "
                                   f"remove their labs (at most {data['left_s']:.0f} s more)[/]",
                                   highlight=False)

    outcome = "interrupted"
    driver = Driver(store, backend, session.to_json(), sid, labs, shared=shared,
                    on_event=on_event, run_dir=Path(out))
    try:
        with progress:
            driver.run()
        outcome = "completed"
    except RunFailed:
        outcome = "failed"
        raise
    finally:
        store.end_session(sid, outcome)
        store.close()
    return {"labs": labs, "stored": stored, "session": sid}


def _process_identity(pid: int) -> list | None:
    """(pid, start time in clock ticks since boot): a pid alone may be reused by another process."""
    start = start_ticks(pid)
    return None if start is None else [pid, start]


def driver_alive(store: RunStore, session: int) -> bool | None:
    """Whether the driver of `session` still runs (None: not recorded)."""
    ident = store.meta(f"session_{session}_driver")
    if not ident:
        return None
    return _process_identity(ident[0]) == ident


def session_spans(store: RunStore) -> list[dict]:
    """The sessions, a killed one (no t_end, its driver gone, or a later session started)
    ending at its last activity with outcome 'killed', so that it stops counting when it died;
    a session whose driver runs (or is not known to be dead) stays open."""
    sessions = store.sessions()
    out = []
    for i, ses in enumerate(sessions):
        if ses["t_end"] is None and (i < len(sessions) - 1
                                     or driver_alive(store, ses["id"]) is False):
            ses = {**ses, "t_end": store.last_activity(ses["id"]), "outcome": "killed"}
        out.append(ses)
    return out


# ---- status ---------------------------------------------------------------------------------------

@dataclass
class Status:
    total: int
    done: int
    ok: int
    failed: list[tuple[str, str]]
    elapsed_s: float
    left_s: float | None
    sessions: list[dict]
    labs_running: int | None
    experiment: dict
    driver_alive: bool | None = None
    # Whose lab count left_s assumes: "running" (the run's driver, still going) or "resume" (a
    # stopped or killed run: the count `resume` without --parallel would use).
    labs_of: str = "running"

    def to_json(self) -> dict:
        return {"total": self.total, "done": self.done, "ok": self.ok,
                "failed": [{"key": k, "errors": e} for k, e in self.failed],
                "elapsed_s": round(self.elapsed_s, 1),
                "left_s": None if self.left_s is None else round(self.left_s, 1),
                "sessions": self.sessions, "experiment": self.experiment,
                "driver_alive": self.driver_alive, "labs": self.labs_running,
                "labs_of": self.labs_of}


def status(out: Path) -> Status:
    store = RunStore.open(out)
    try:
        jobs = store.jobs()
        results = store.results()
        sessions = store.sessions()
        now = time.time()
        elapsed = sum((s["t_end"] or now) - s["t_start"] for s in session_spans(store))
        failed = [(r.key, " | ".join(r.record.get("errors") or []) if isinstance(
            r.record.get("errors"), list) else str(r.record.get("errors") or "")) for r in results
            if not r.ok]
        done = {r.key for r in results}
        left = len(jobs) - len(results)
        alive = driver_alive(store, sessions[-1]["id"]) if sessions else None
        running = bool(sessions) and sessions[-1]["t_end"] is None and alive is not False
        # A run that goes on has its driver's labs; a stopped or killed one, those `resume`
        # would start for what is left (local_labs, as execute() counts them).
        labs = sessions[-1]["labs"] if running else local_labs([j for j in jobs if j.key not in done])
        left_s = estimate_left(jobs, done, store.attempts(), labs)
        return Status(len(jobs), len(results), sum(r.ok for r in results), failed, elapsed,
                      left_s if left else 0.0, sessions, labs, store.meta("experiment") or {},
                      alive, "running" if running else "resume")
    finally:
        store.close()


def estimate_left(jobs, done: set[str], attempts: list[dict], labs: int | None) -> float | None:
    """Lab-seconds left / labs. Each load left is costed at the median time of the loads stored in
    its own shard (a profile: a GPRS load takes a minute where a LAN load takes a second, and a run
    stopped part-way usually has the slow shards left), or the median over all shards when its shard
    has none yet."""
    shard_of = {j.key: j.shard for j in jobs}
    by_shard: dict[str, list[float]] = {}
    for a in attempts:
        if a["outcome"] == "stored" and a["t_end"] and a["key"] in shard_of:
            by_shard.setdefault(shard_of[a["key"]], []).append(a["t_end"] - a["t_start"])
    every = [t for ts in by_shard.values() for t in ts]
    if not every:
        return None
    overall = statistics.median(every)
    median = {shard: statistics.median(ts) for shard, ts in by_shard.items()}
    lab_s = sum(median.get(j.shard, overall) for j in jobs if j.key not in done)
    return lab_s / max(labs or 1, 1)


def format_duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"
