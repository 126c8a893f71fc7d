"""A lab's owner record (p4netem.lab.owner) written by several threads of the lab at once."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

from p4netem.lab.owner import LabRecord


def test_threads_adding_processes_at_once_lose_nothing(tmp_path, monkeypatch):
    """Two probes start their receivers at the same moment (tests/control flips_under_traffic):
    each adds its process to the record. With one temporary file per process, the second
    rename failed (FileNotFoundError) and a probe never started."""
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    record = LabRecord.open("p4ntest", "twohost")
    pid = os.getpid()                   # any live process: the record notes its start time
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: record.add_process(pid), range(200)))
    saved = json.loads((tmp_path / "p4ntest.json").read_text())
    assert len(saved["processes"]) == 200
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
