"""`measure --keep-pcaps` into an --out an earlier run used: the new run's files replace the
earlier one's (docs/labs.md), its captures too. The earlier run's extra pcaps (it had more loads)
stayed beside the new results, where they passed for this run's. `experiment run`'s side of it:
tests/labs/test_lab_experiment_runs.py (test_a_new_run_drops_an_earlier_runs_pcaps)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

P4NETEM = str(Path(sys.executable).parent / "p4netem")
EARLIER = b"an earlier run's"


def test_measure_into_a_reused_out_keeps_only_its_own_pcaps(tmp_path):
    out = tmp_path / "res"
    pcaps = out / "pcaps"
    pcaps.mkdir(parents=True)
    # What a `measure --keep-pcaps` of three loads left: a capture and its tcpdump log per load
    # (as measure names them); and a file of the user's, which is not the run's to remove.
    for i in range(3):
        (pcaps / f"{i:04d}.pcap").write_bytes(EARLIER)
        (pcaps / f"{i:04d}.log").write_bytes(EARLIER)
    (pcaps / "notes.txt").write_text("mine")
    proc = subprocess.run([P4NETEM, "measure", "--profile", "lan", "--protocol", "h1.1", "--reps", "1",
                           "--keep-pcaps", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "160"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(list(csv.DictReader(open(out / "runs.csv")))) == 1
    assert sorted(p.name for p in pcaps.iterdir()) == ["0000.log", "0000.pcap", "notes.txt"]
    assert (pcaps / "0000.pcap").read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")
