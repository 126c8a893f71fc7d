"""One lab that runs a session's jobs one at a time: the same code in a local lab process
(local.py) and in a Ray actor (cluster.py), so a load is the same wherever it runs.

`start()` brings the lab up (pages, namespaces, switch, servers); `run(job)` loads the page once
and returns a plain dict (picklable, JSON-able) that the driver stores:

    {"key", "ok", "record": RunRecord.to_json(), "files": {name: relative path or bytes},
     "lab_metadata": the lab's metadata when it changed since the last result, else None}

Kept pcaps are moved into the run directory when the lab runs on the driver's machine
(`files_dir`), and sent back as bytes otherwise (a Ray node elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

from p4netem.lab import reaper

from .session import Session

# A lab that shares the machine with other labs keeps its switch from spinning: busy polling
# (30 us by default) is for one switch per machine, where it buys latency with an idle core;
# with several switches it would take the cores the hosts' TCP stacks and servers need. The
# switch's SCHED_FIFO priority stays: its thread sleeps in ppoll between packets and wakes on
# time, which keeps release times exact when the labs' endpoints fill the CPUs.
SHARED_SWITCH_ARGS = ("--busy-poll-us", "0")


class LabWorker:
    def __init__(self, session: Session | dict, *, lab_id: str, index: int = 0,
                 shared: bool = False, run_dir: str | None = None, files_dir: str | None = None):
        self.session = session if isinstance(session, Session) else Session.from_json(session)
        self.lab_id = lab_id
        self.index = index
        self.shared = shared
        self.run_dir = Path(run_dir) if run_dir else None
        self.files_dir = Path(files_dir) if files_dir else None
        self._lab = None
        self._meta_hash = None
        self._tmp = None

    @property
    def node(self) -> str:
        return socket.gethostname()

    def start(self) -> dict:
        # Before the lab makes anything: if this process is killed from now on (Ray kills a busy
        # actor's worker when its run stops or its driver dies), the reaper removes the lab.
        # Warnings go back with the "up" message for the driver to print: a Ray worker's stderr
        # is a log on its node that the user does not see.
        warnings = []
        try:
            reaper.watch_this_process()
        except OSError as exc:
            warnings.append(f"{exc}; {self.killed_lab_stays()}")
        plan = self.session.plan
        log_dir = (self.run_dir / "logs" / self.lab_id) if self.run_dir else None
        self._tmp = Path(tempfile.mkdtemp(prefix="p4n-lab-"))
        if self.session.kind == "workload":
            from ..harness.workload import WorkloadLab
            self._lab = WorkloadLab(plan, self._tmp, target=self.session.target,
                                    log_dir=log_dir or self._tmp / "logs", index=self.index,
                                    switch_args=SHARED_SWITCH_ARGS if self.shared else ())
        else:
            from ..harness.runner import PageloadLab
            self._lab = PageloadLab(plan, self._tmp, target=self.session.target,
                                    keep_pcaps=self.session.keep_pcaps,
                                    log_dir=log_dir or self._tmp / "logs", index=self.index,
                                    switch_args=SHARED_SWITCH_ARGS if self.shared else ())
        self._lab.start()
        return {"lab": self.lab_id, "node": self.node, "pid": os.getpid(),
                "namespaces": [self._lab.lab.ns(h.name) for h in self._lab.lab.topology.hosts],
                "warnings": warnings}

    def killed_lab_stays(self) -> str:
        return (f"if this lab's process is killed, its lab stays until the next lab starts on "
                f"{self.node} or `p4netem lab clean` runs there")

    def run(self, job: dict) -> dict:
        assert self._lab is not None, "start() first"
        cond = self.session.condition(job["spec"]["condition"])
        rep = int(job["spec"]["rep"])
        if self.session.kind == "workload":
            run = self._lab.run(cond, rep)
            doc = {**run.row(), "condition": cond.to_json(), "errors": run.errors,
                   "metrics": run.metrics, "pages": run.pages, "lab": self.lab_id}
            return {"key": job["key"], "ok": run.ok, "record": doc, "files": {},
                    "lab_metadata": self._metadata_if_changed()}
        rec = self._lab.run(cond, rep, seed=job["seeds"].get("switch"))
        doc = rec.to_json()
        doc["lab"] = self.lab_id
        files: dict = {}
        if self.session.keep_pcaps:
            files = self._collect_pcap(job["key"], cond, rep)
        return {"key": job["key"], "ok": rec.ok, "record": doc, "files": files,
                "lab_metadata": self._metadata_if_changed()}

    def _lab_metadata(self) -> dict:
        if hasattr(self._lab, "finish_metadata"):
            return self._lab.finish_metadata()
        meta = self._lab.metadata
        from ..harness.provenance import loadavg
        meta.setdefault("host", {})["loadavg_end"] = loadavg()
        return meta

    def _metadata_if_changed(self) -> dict | None:
        """The lab's metadata when it changed since the last result (profiles applied, TCP
        state per initial window), so the store holds each lab's latest without a copy per load."""
        text = json.dumps(self._lab_metadata(), sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()
        changed = digest != self._meta_hash
        self._meta_hash = digest
        return json.loads(text) if changed else None

    def _collect_pcap(self, key: str, cond, rep: int) -> dict:
        from ..harness.runner import _safe
        src = self._lab.pcap_dir / f"{_safe(cond.key)}-{rep}.pcap"
        if not src.exists():
            return {}
        name = f"pcaps/{_safe(key)}.pcap"
        if self.files_dir is not None:
            dst = self.files_dir / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(src, dst)       # a rename on one file system, else copy and remove
            return {"pcap": name}
        data = src.read_bytes()
        src.unlink()
        return {"pcap": {"name": name, "bytes": data}}

    def close(self) -> dict:
        meta = None
        if self._lab is not None:
            try:
                self._lab.close()
                meta = self._lab_metadata()
            finally:
                self._lab = None
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
        return {"lab": self.lab_id, "lab_metadata": meta}


def write_file(run_dir: Path, spec) -> str:
    """A file a remote lab sent back as bytes, written under the run directory; returns its
    relative path."""
    if isinstance(spec, str):
        return spec
    path = Path(run_dir) / spec["name"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(spec["bytes"])
    return spec["name"]
