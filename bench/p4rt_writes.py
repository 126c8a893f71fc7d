"""Control-plane write rate: ENTRIES classifier entries inserted over P4Runtime in Write RPCs of BATCH
updates each, with the project's Python client; then a wildcard Read of the classifier must return them
all. The figure is ENTRIES / (time from building the first batch to the last Write's reply), i.e. the
rate a user of the client gets, protobuf building included; the time spent in the Write RPCs alone is
recorded too. The entries are deleted afterwards (also timed) so the switch is left as found.

Modify round trip: with the ENTRIES entries in the table, MODIFIES single-entry MODIFY Writes of one
of them (alternating its profile), one after the other, each timed from building the request to the
reply: `p4rt_modify_rtt_ms_p99` (and p50/max). The switch publishes the new snapshot before it
answers, so the reply means the change is in force.
"""
from __future__ import annotations

import time

import numpy as np

ENTRIES = 20_000
BATCH = 500
MODIFIES = 2000
FIRST_PRIORITY = 1000  # above the bench's own classifier entries


def entry(i: int) -> dict:
    """A distinct ternary classifier entry: IPv4 source 10.128.x.y/32 -> profile 2."""
    return {"ipv4_src": (0x0A800000 + i, 0xFFFFFFFF), "priority": FIRST_PRIORITY + i,
            "profile_id": 2, "direction": 0, "ue_id": i}


def measure(ctl) -> dict:
    before = ctl.classifier_count()
    rpc_s = 0.0
    t0 = time.perf_counter()
    for start in range(0, ENTRIES, BATCH):
        rpc_s += ctl.insert_classifier_batch([entry(i) for i in range(start, min(start + BATCH,
                                                                                 ENTRIES))])
    total_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    count = ctl.classifier_count()
    read_s = time.perf_counter() - t1
    if count - before != ENTRIES:
        raise RuntimeError(f"read back {count - before} classifier entries, wrote {ENTRIES}")
    rtts = []
    for k in range(MODIFIES):
        e = dict(entry(ENTRIES // 2), profile_id=3 if k % 2 == 0 else 2)
        t = time.perf_counter()
        ctl.modify_classifier(e)
        rtts.append((time.perf_counter() - t) * 1e3)
    t2 = time.perf_counter()
    for start in range(0, ENTRIES, BATCH):
        ctl.delete_classifier_batch([entry(i) for i in range(start, min(start + BATCH, ENTRIES))])
    delete_s = time.perf_counter() - t2
    after = ctl.classifier_count()
    if after != before:
        raise RuntimeError(f"{after - before} classifier entries left after deleting")
    return {
        "p4rt_writes_per_s": ENTRIES / total_s,
        "p4rt_modify_rtt_ms_p99": float(np.percentile(rtts, 99)),
        "p4rt_modify_rtt_ms_p50": float(np.percentile(rtts, 50)),
        "p4rt_modify_rtt_ms_max": max(rtts),
        "p4rt_config": {
            "modifies": MODIFIES, "modify_table_entries": count,
            "entries": ENTRIES, "batch": BATCH, "table": "P4netemIngress.classifier",
            "insert_s": total_s, "insert_rpc_s": rpc_s, "writes_per_s_rpc_only": ENTRIES / rpc_s,
            "read_back": count - before, "read_s": read_s,
            "delete_s": delete_s, "deletes_per_s": ENTRIES / delete_s,
            "client": ctl.client_name,
        },
    }
