"""Control-plane write figures (issue 14), measured twice on the same switch in the same run:

1. With `p4netem-p4rt-bench` (dataplane/src/bin, tonic/prost: a client that costs next to nothing),
   which gives the switch's own figures. Its thread runs SCHED_FIFO at RT_PRIORITY, as the project's
   timeline player runs its time-critical Writes (below the switch's gRPC threads): on a busy
   machine a normal-priority client otherwise waits for a CPU between its Writes, and the figures
   would be that wait.
   - `p4rt_writes_per_s`: the classifier filled to its size (64k entries with the switch's
     defaults) with distinct ternary entries (IPv4 source 10.128.x.y/32, distinct priorities) in
     Write RPCs of BATCH updates, entries / (time from building the first request to the last
     reply);
   - `p4rt_modify_rtt_ms_p99`: with the table full, MODIFIES one-entry MODIFY Writes of one entry
     (alternating its profile), one after the other, each from building the request to the reply
     (the switch publishes the new snapshot before it answers, so a reply means the change is in
     force). The same loop with the client at normal priority is `..._normal`.
   Its Writes carry the bench controller's election id (it writes on behalf of the primary).
2. With the project's Python client (`p4netem.p4rt`, grpcio + upb protobuf), as a script of a user
   gets them: `p4rt_writes_per_s_python` (the same kind of entries, ENTRIES_PYTHON of them,
   protobuf building included; the time inside the Write RPCs alone is in the config) and
   `p4rt_modify_rtt_ms_p99_python` (the same MODIFY loop with the full table, the calling thread
   and grpcio's I/O threads SCHED_FIFO at RT_PRIORITY, as the timeline player does).
   The Python client spends most of an insert building the protobuf (docs/dataplane.md, "Profile:
   P4Runtime writes"): its figure is the client's, not the switch's.

Every run reads the table back (the count must match) and deletes what it inserted (also timed), so
the switch is left as found.
"""
from __future__ import annotations

import json
import subprocess
import time

import numpy as np
from p4netem.control.realtime import GrpcThreadsRealtime, Realtime
from p4netem.paths import switch_binary

BATCH = 500
MODIFIES = 2000
RT_PRIORITY = 4  # the timeline player's (p4netem.control.timeline): below the switch's gRPC threads
FIRST_PRIORITY = 1000  # above the bench's own classifier entries
ENTRIES_PYTHON = 20_000


def bench_client():
    return switch_binary().parent / "p4netem-p4rt-bench"


def entry(i: int) -> dict:
    """A distinct ternary classifier entry: IPv4 source 10.128.x.y/32 -> profile 2."""
    return {"ipv4_src": (0x0A800000 + i, 0xFFFFFFFF), "priority": FIRST_PRIORITY + i,
            "profile_id": 2, "direction": 0, "ue_id": i}


def measure_switch(ctl) -> dict:
    """The switch's figures, with the Rust client (fills the table to its size)."""
    cmd = [str(bench_client()), "--grpc-addr", ctl.client.address, "--device-id", str(ctl.client.device_id),
           "--election-id", str(ctl.client.election_id), "--batch", str(BATCH), "--modifies", str(MODIFIES),
           "--first-priority", str(FIRST_PRIORITY), "--rt-priority", str(RT_PRIORITY)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def _modify_rtts(ctl, i: int) -> list[float]:
    rtts = []
    for k in range(MODIFIES):
        e = dict(entry(i), profile_id=3 if k % 2 == 0 else 2)
        t = time.perf_counter()
        ctl.modify_classifier(e)
        rtts.append((time.perf_counter() - t) * 1e3)
    return rtts


def measure_python(ctl, capacity: int) -> dict:
    """The project's Python client: ENTRIES_PYTHON timed inserts; then the table is filled up to
    `capacity` (not timed) so that the MODIFY loop runs with it full, as the switch's does."""
    before = ctl.classifier_count()
    rpc_s = 0.0
    t0 = time.perf_counter()
    for start in range(0, ENTRIES_PYTHON, BATCH):
        rpc_s += ctl.insert_classifier_batch([entry(i) for i in range(start, min(start + BATCH, ENTRIES_PYTHON))])
    total_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    count = ctl.classifier_count()
    read_s = time.perf_counter() - t1
    if count - before != ENTRIES_PYTHON:
        raise RuntimeError(f"read back {count - before} classifier entries, wrote {ENTRIES_PYTHON}")
    fill = capacity - count  # entries ENTRIES_PYTHON.. up to the table's size (not timed)
    for start in range(ENTRIES_PYTHON, ENTRIES_PYTHON + fill, BATCH):
        ctl.insert_classifier_batch([entry(i) for i in range(start, min(start + BATCH, ENTRIES_PYTHON + fill))])
    inserted = ENTRIES_PYTHON + fill
    try:
        with GrpcThreadsRealtime(RT_PRIORITY), Realtime(RT_PRIORITY):
            rtts = _modify_rtts(ctl, ENTRIES_PYTHON // 2)
    finally:
        t2 = time.perf_counter()
        for start in range(0, inserted, BATCH):
            ctl.delete_classifier_batch([entry(i) for i in range(start, min(start + BATCH, inserted))])
        delete_s = time.perf_counter() - t2
    after = ctl.classifier_count()
    if after != before:
        raise RuntimeError(f"{after - before} classifier entries left after deleting")
    return {
        "p4rt_writes_per_s_python": ENTRIES_PYTHON / total_s,
        "p4rt_modify_rtt_ms_p99_python": float(np.percentile(rtts, 99)),
        "python": {
            "client": ctl.client_name, "entries": ENTRIES_PYTHON, "insert_s": total_s, "insert_rpc_s": rpc_s,
            "writes_per_s_rpc_only": ENTRIES_PYTHON / rpc_s, "read_s": read_s,
            "modify_table_entries": count + fill, "modifies": MODIFIES, "rt_priority": RT_PRIORITY,
            "modify_rtt_ms_p50": float(np.percentile(rtts, 50)), "modify_rtt_ms_max": max(rtts),
            "deleted": inserted, "deletes_per_s": inserted / delete_s,
        },
    }


def measure(ctl, capacity: int) -> dict:
    sw = measure_switch(ctl)
    py = measure_python(ctl, capacity)
    return {
        "p4rt_writes_per_s": sw["writes_per_s"],
        "p4rt_modify_rtt_ms_p99": sw["modify_rtt_ms_p99_rt"],
        "p4rt_modify_rtt_ms_p99_normal": sw["modify_rtt_ms_p99"],
        "p4rt_writes_per_s_python": py["p4rt_writes_per_s_python"],
        "p4rt_modify_rtt_ms_p99_python": py["p4rt_modify_rtt_ms_p99_python"],
        "p4rt_config": {
            "table": "P4netemIngress.classifier", "batch": BATCH, "switch_client": sw, "python_client": py["python"],
        },
    }
