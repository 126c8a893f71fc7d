"""The driver: hands a run's pending jobs to labs and stores each result the moment it arrives.

State of each lab (explicit):

    starting --up--> idle --submit--> busy --result--> idle ... --close--> closing --closed/died--> gone
        \\--error/died--> gone (its job, if any, goes back to the queue: a retry on another lab)

Rules:
- one job in flight per lab; a lab keeps to its shard (profile) while the shard has jobs, and a
  free lab takes a shard no other lab is on before sharing one (fewer profile switches);
- a result is committed before the next job is handed out; the store refuses a key twice, so a
  load a lost lab finished after all is never stored twice;
- a job whose lab died is retried on a new lab, up to `max_attempts` starts; after that it is
  stored as failed with the reasons, so the run ends;
- `max_lab_failures` labs dying in a row (no result in between) stop the run (RunFailed): the
  machine or the cluster is broken, and retrying forever would hide it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from p4netem.stop_signals import check_pending

from .store import Job, RunStore
from .worker import write_file


class RunFailed(Exception):
    pass


# How long the driver waits for its labs to close (or, stopped, to die) before it gives up on them.
CLOSE_DEADLINE_S = 60.0
# A stop that is still waiting after this long names the labs it waits for.
SAY_WAITING_AFTER_S = 10.0


@dataclass
class _Lab:
    handle: object
    lab_id: str
    state: str = "starting"      # starting | idle | busy | closing
    job: Job | None = None
    attempt: int | None = None
    shard: str | None = None
    node: str | None = None
    t_job: float = 0.0


@dataclass
class Driver:
    store: RunStore
    backend: object
    session: dict
    session_id: int
    labs: int
    shared: bool = False
    max_attempts: int = 3
    max_lab_failures: int = 3
    on_event: Callable[[str, dict], None] = lambda kind, data: None
    run_dir: object = None
    _queue: deque = field(default_factory=deque)
    _labs: dict = field(default_factory=dict)
    _starts: dict = field(default_factory=dict)
    _errors: dict = field(default_factory=dict)
    _next_lab: int = 0
    _failures_in_a_row: int = 0
    _orphans: list = field(default_factory=list)
    lab_metadata: dict = field(default_factory=dict)

    def run(self) -> None:
        done = self.store.done_keys()
        self._queue = deque(j for j in self.store.jobs() if j.key not in done)
        if not self._queue:
            return
        ended = False
        try:
            while self._queue or any(l.state == "busy" for l in self._labs.values()):
                # A SIGTERM Python dropped (p4netem.cli.signals): the loop turns every second.
                check_pending()
                self._fill_labs()
                self._dispatch()
                for handle, msg in self.backend.wait([l.handle for l in self._labs.values()], 1.0):
                    lab = self._by_handle(handle)
                    if lab is not None:      # None: a lab already gone (its exit after "closed")
                        self._handle(lab, msg)
            ended = True
        finally:
            self._close_all(stopping=not ended)

    # ---- labs --------------------------------------------------------------------------------
    def _fill_labs(self) -> None:
        active = [l for l in self._labs.values() if l.state != "closing"]
        want = min(self.labs, len(self._queue) + sum(l.state == "busy" for l in active))
        while len(active) < want:
            lab_id = f"s{self.session_id}-lab{self._next_lab}"
            index = self._next_lab % 64
            self._next_lab += 1
            handle = self.backend.start_lab(self.session, lab_id, index, self.shared)
            lab = _Lab(handle, lab_id)
            self._labs[lab_id] = lab
            active.append(lab)
            self.on_event("lab_starting", {"lab": lab_id})

    def _dispatch(self) -> None:
        for lab in list(self._labs.values()):
            if lab.state != "idle":
                continue
            job = self._pick(lab)
            if job is None:
                lab.state = "closing"
                lab.handle.close()
                continue
            lab.job, lab.state, lab.shard, lab.t_job = job, "busy", job.shard, time.time()
            self._starts[job.key] = self._starts.get(job.key, 0) + 1
            lab.attempt = self.store.start_attempt(job.key, lab.lab_id, self.session_id)
            lab.handle.submit({"key": job.key, "seeds": job.seeds, "spec": job.spec})
            self.on_event("load", {"job": job, "lab": lab.lab_id})

    def _pick(self, lab: _Lab) -> Job | None:
        if not self._queue:
            return None
        if lab.shard is not None:
            for job in self._queue:
                if job.shard == lab.shard:
                    self._queue.remove(job)
                    return job
        taken = {l.shard for l in self._labs.values() if l is not lab and l.state == "busy"}
        for job in self._queue:
            if job.shard not in taken:
                self._queue.remove(job)
                return job
        return self._queue.popleft()

    def _by_handle(self, handle) -> _Lab | None:
        return next((l for l in self._labs.values() if l.handle is handle), None)

    def _handle(self, lab: _Lab, msg: tuple) -> None:
        kind = msg[0]
        if kind == "up":
            lab.state = "idle"
            lab.node = msg[1].get("node")
            self.store.add_lab(lab.lab_id, self.session_id, lab.node)
            self.on_event("lab_up", {"lab": lab.lab_id, **msg[1]})
        elif kind == "result":
            self._result(lab, msg[1])
        elif kind == "closed":
            if msg[1] and msg[1].get("lab_metadata"):
                self._lab_meta(lab.lab_id, msg[1]["lab_metadata"])
            self._labs.pop(lab.lab_id, None)
        elif kind in ("error", "died"):
            self._lost(lab, str(msg[1]), closing_itself=kind == "error")

    def _result(self, lab: _Lab, res: dict) -> None:
        job = lab.job
        assert job is not None and res["key"] == job.key, (res.get("key"), job)
        files = {name: write_file(self.run_dir, spec) for name, spec in (res.get("files") or {}).items()}
        if res.get("lab_metadata"):
            self._lab_meta(lab.lab_id, res["lab_metadata"])
        stored = self.store.add_result(job.key, res["ok"], res["record"], lab.lab_id,
                                       self.session_id, self._starts[job.key], files)
        self.store.end_attempt(lab.attempt, "stored" if stored else "duplicate")
        lab.state, lab.job, lab.attempt = "idle", None, None
        self._failures_in_a_row = 0
        self.on_event("done", {"job": job, "result": res, "lab": lab.lab_id, "stored": stored})

    def _lab_meta(self, lab_id: str, meta: dict) -> None:
        self.lab_metadata[lab_id] = meta
        self.store.set_lab_metadata(lab_id, meta)

    def _lost(self, lab: _Lab, reason: str, closing_itself: bool = False) -> None:
        """A lab that failed or died: its job goes back to the queue (or is stored as failed
        after max_attempts starts); the lab is gone. A lab that reported an error tears itself
        down (it is told to close, never killed in the middle of it); a dead one is killed for
        good measure."""
        if lab.lab_id not in self._labs:
            return
        self._labs.pop(lab.lab_id)
        if lab.state == "closing":
            return            # it had finished its work; ending is what it was asked to do
        self._failures_in_a_row += 1
        self.on_event("lab_lost", {"lab": lab.lab_id, "reason": reason, "job": lab.job})
        try:
            lab.handle.close() if closing_itself else lab.handle.abort()
        except Exception:
            pass
        self._orphans.append(lab.handle)
        job = lab.job
        if job is not None:
            self.store.end_attempt(lab.attempt, "lab-lost", reason)
            self._errors.setdefault(job.key, []).append(f"{lab.lab_id}: {reason}")
            if self._starts[job.key] >= self.max_attempts:
                record = {"key": job.spec["condition"], "rep": job.spec["rep"], "ok": False, "errors": self._errors[job.key],
                          "gave_up_after": self._starts[job.key]}
                self.store.add_result(job.key, False, record, lab.lab_id, self.session_id,
                                      self._starts[job.key])
                self.on_event("gave_up", {"job": job, "errors": self._errors[job.key]})
            else:
                self._queue.appendleft(job)
        if self._failures_in_a_row >= self.max_lab_failures:
            raise RunFailed(f"{self._failures_in_a_row} labs failed in a row; last: {reason}")

    def _close_all(self, stopping: bool = False) -> None:
        """Close every lab: in order when the run ended, at once (abort) when it was stopped.
        `stopping` (Ctrl-C, a signal, an error): the user is told at once what the stop takes
        down. Either way a lab that has not ended after SAY_WAITING_AFTER_S is named (a local
        lab that stopped answering kept a finished run waiting 60 s without a word), and one that
        has not ended at the deadline is given up on: killed outright (its reaper removes its
        lab), not left for the interpreter's exit to wait on for ever."""
        labs = list(self._labs.values())
        for lab in labs:
            lab.handle.close() if lab.state in ("idle", "closing") else lab.handle.abort()
        if stopping and labs:
            self.on_event("stopping", {"labs": [l.lab_id for l in labs]})
        t0 = time.time()
        deadline, say_at = t0 + CLOSE_DEADLINE_S, t0 + SAY_WAITING_AFTER_S
        while self._labs and time.time() < deadline:
            if time.time() >= say_at:
                say_at = float("inf")
                self.on_event("stop_waiting", {"labs": [(l.lab_id, l.node) for l in self._labs.values()],
                                               "left_s": deadline - time.time(),
                                               "stopping": stopping})
            for handle, msg in self.backend.wait([l.handle for l in self._labs.values()], 1.0):
                lab = self._by_handle(handle)
                if lab is None:
                    continue
                if msg[0] in ("closed", "died", "error"):
                    if msg[0] == "closed" and msg[1] and msg[1].get("lab_metadata"):
                        self._lab_meta(lab.lab_id, msg[1]["lab_metadata"])
                    if lab.job is not None and lab.attempt is not None:
                        self.store.end_attempt(lab.attempt, "stopped")
                    self._labs.pop(lab.lab_id, None)
                    continue
                if msg[0] == "result":       # finished while we were stopping: keep it
                    try:
                        self._result(lab, msg[1])
                    except Exception:
                        pass
                elif msg[0] == "up":         # its start ended before its abort took
                    lab.node = msg[1].get("node")
                # The lab answered and has nothing in flight now: close it, or nothing would
                # answer for it again and the stop would wait out the deadline (a Ray lab whose
                # start ended as the run stopped did: ray.kill does not fail a finished call).
                lab.state = "closing"
                lab.handle.close()
        for lab in self._labs.values():
            _give_up(lab.handle)
        self._labs.clear()
        self._wait_for_orphans()

    def _wait_for_orphans(self) -> None:
        """Labs lost during the run that are still tearing themselves down (a lab that reported
        an error closes its own lab): give them the time to finish before the driver exits (its
        exit would send them PDEATHSIG, now ignored). One deadline for all, not 60 s each in
        turn; a dead one is done at once; those still going after SAY_WAITING_AFTER_S are named.
        Only local labs (`join`): a lost Ray actor was killed."""
        left = [h for h in self._orphans if getattr(h, "join", None) is not None]
        t0 = time.time()
        deadline, say_at = t0 + CLOSE_DEADLINE_S, t0 + SAY_WAITING_AFTER_S
        while left and time.time() < deadline:
            if time.time() >= say_at:
                say_at = float("inf")
                self.on_event("lost_waiting", {"labs": [h.lab_id for h in left],
                                               "left_s": deadline - time.time()})
            left = [h for h in left if not h.join(0.5)]
        for handle in left:
            _give_up(handle)


def _give_up(handle) -> None:
    """A lab that did not end by the deadline: killed outright where the backend can (a local
    lab process: SIGKILL, its reaper removes the lab), else aborted."""
    getattr(handle, "kill", handle.abort)()
