"""p4netem-p4rt-bench (the tonic client behind bench/p4rt_writes.py's switch figures) against a
running switch: it fills the classifier, reads it back, times MODIFYs of one entry with the table
full, deletes everything again and reports what it did; a Write under an election id that is not
the primary's fails it with the switch's PERMISSION_DENIED and leaves the table as it was. The
switch keeps forwarding throughout."""

from __future__ import annotations

import json
import subprocess

from p4netem import pipeline as pl
from p4netem.paths import switch_binary

BENCH = switch_binary().parent / "p4netem-p4rt-bench"


def ping(lab) -> None:
    r = lab.h1.ns.run(["ping", "-c", "3", "-i", "0.2", "-W", "2", lab.h2.ip], check=False, timeout=30)
    assert r.returncode == 0, f"ping h1 -> h2 through the switch failed:\n{r.stdout}\n{r.stderr}"


def run_bench(lab, *args: str) -> subprocess.CompletedProcess:
    assert BENCH.exists(), f"{BENCH} is missing: build it with `make build`"
    cmd = [str(BENCH), "--grpc-addr", lab.switch.grpc_addr, "--device-id", str(lab.switch.device_id), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def classifier_count(lab) -> int:
    return len(lab.client.read_table_entries(pl.CLASSIFIER))


def test_fills_the_table_times_modifies_and_leaves_it_as_found(lab):
    before = classifier_count(lab)
    assert before > 0  # the lab's own entries: the tool must count them and leave them alone
    r = run_bench(lab, "--election-id", str(lab.client.election_id), "--modifies", "40", "--rt-priority", "4")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    capacity = out["capacity"]
    assert capacity == 65536  # the switch's default --classifier-entries, from its P4Info
    assert out["table_entries_before"] == before
    assert out["entries"] == capacity - before  # entries 0: fill the table
    assert out["modify_table_entries"] == capacity
    assert out["modifies"] == 40
    for sfx in ("", "_rt"):
        assert 0 < out[f"modify_rtt_ms_p50{sfx}"] <= out[f"modify_rtt_ms_p99{sfx}"] <= out[f"modify_rtt_ms_max{sfx}"]
    assert out["writes_per_s"] > 0 and out["deletes_per_s"] > 0
    assert classifier_count(lab) == before
    ping(lab)


def test_a_count_given_and_a_write_refused(lab):
    before = classifier_count(lab)
    r = run_bench(lab, "--election-id", str(lab.client.election_id), "--entries", "1200", "--batch", "500",
                  "--modifies", "5")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["entries"], out["modify_table_entries"]) == (1200, before + 1200)
    assert "modify_rtt_ms_p99_rt" not in out  # --rt-priority 0: normal priority only
    # Not the primary's election id: the first Write is refused and nothing changes.
    r = run_bench(lab, "--election-id", str(lab.client.election_id + 6), "--entries", "10")
    assert r.returncode != 0
    assert "PermissionDenied" in r.stderr and "not the primary" in r.stderr, r.stderr
    assert classifier_count(lab) == before
    ping(lab)
