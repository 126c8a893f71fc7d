"""Control-plane write rate: ENTRIES classifier entries inserted over P4Runtime in Write RPCs of BATCH
updates each, with the project's Python client; then a wildcard Read of the classifier must return them
all. The figure is ENTRIES / (time from building the first batch to the last Write's reply), i.e. the
rate a user of the client gets, protobuf building included; the time spent in the Write RPCs alone is
recorded too. The entries are deleted afterwards (also timed) so the switch is left as found.
"""
from __future__ import annotations

import time

ENTRIES = 20_000
BATCH = 500
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
    t2 = time.perf_counter()
    for start in range(0, ENTRIES, BATCH):
        ctl.delete_classifier_batch([entry(i) for i in range(start, min(start + BATCH, ENTRIES))])
    delete_s = time.perf_counter() - t2
    after = ctl.classifier_count()
    if after != before:
        raise RuntimeError(f"{after - before} classifier entries left after deleting")
    return {
        "p4rt_writes_per_s": ENTRIES / total_s,
        "p4rt_config": {
            "entries": ENTRIES, "batch": BATCH, "table": "P4netemIngress.classifier",
            "insert_s": total_s, "insert_rpc_s": rpc_s, "writes_per_s_rpc_only": ENTRIES / rpc_s,
            "read_back": count - before, "read_s": read_s,
            "delete_s": delete_s, "deletes_per_s": ENTRIES / delete_s,
            "client": ctl.client_name,
        },
    }
