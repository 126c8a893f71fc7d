"""What a mid-run rate change does on the wire: a profile switch (spare id) vs an in-place change.

A saturating UDP flow (1514-byte frames offered at OFFERED_BPS) crosses a TwoHostLab switch whose
rule has a rate and a QUEUE-packet queue; after SETTLE_S the rate changes (FROM -> TO) either by
the controller's profile switch (`ctl.apply(profile)`: the rule flips to its spare profile id, an
empty queue at the new rate) or in place (`ctl.apply(profile, in_place=True)`: a MODIFY of the
entries the rule already points at; the queue, its virtual clock and release order carry on).
Reported per mode, from the receiver's kernel timestamps and the time the change was written:

- delivered rate in [0, 100) ms and [100, 200) ms after the change, and in the 200 ms;
- the highest rate over any 20 ms window in the 200 ms after the change;
- datagrams that arrived after one with a higher sequence number (reordering).

usage: .venv/bin/python bench/rate_change.py [--from 10Mbit] [--to 1Mbit] [--queue 50] [--json]
Needs root (namespaces, raw sockets); starts its own switch. Not part of `make bench` (no bar):
its figures are quoted in docs/control.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "control-plane"))

from p4netem.control import Controller, Profile  # noqa: E402
from p4netem.lab import TwoHostLab  # noqa: E402
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe  # noqa: E402
from p4netem.profiles.units import Rate  # noqa: E402

PAYLOAD = 1472  # UDP payload of a 1500-byte IP packet: 1514-byte frames
FRAME = PAYLOAD + UDP_IP_ETH_OVERHEAD
SETTLE_S = 1.5
AFTER_S = 1.5
MS = 1_000_000


def profile(rate: str, queue: int) -> Profile:
    return Profile.parse({"name": "rate-change", "both": {"rate": rate, "queue": queue}})


def measure(lab: TwoHostLab, ctl: Controller, mode: str, rate_from: str, rate_to: str, queue: int,
            offered_bps: float, port: int) -> dict:
    ctl.apply(profile(rate_from, queue))
    pps = offered_bps / (FRAME * 8)
    count = int(pps * (SETTLE_S + AFTER_S))
    box: dict = {}
    sender = threading.Thread(target=lambda: box.update(r=run_probe(
        lab.h1.ns, lab.h2.ns, lab.h2.ip, count=count, rate=pps, size=PAYLOAD, port=port)))
    sender.start()
    time.sleep(SETTLE_S + 0.3)  # the receiver's start, then the queue fills
    sent_wall = time.time_ns()
    result = ctl.apply(profile(rate_to, queue), in_place=(mode == "in-place"))
    done_wall = sent_wall + (result.flip_done_ns - result.flip_sent_ns)
    sender.join()
    probe = box["r"]
    rx = sorted(probe.rx_ns)

    def rate_in(a_ms: float, b_ms: float) -> float:
        a, b = done_wall + a_ms * MS, done_wall + b_ms * MS
        n = sum(1 for t in rx if a <= t < b)
        return n * FRAME * 8 / ((b - a) / 1e9)

    peak = max(rate_in(s, s + 20) for s in range(0, 181, 2))
    return {
        "mode": mode, "from": rate_from, "to": rate_to, "queue_packets": queue,
        "offered_mbit": round(offered_bps / 1e6, 2),
        "before_mbit": round(rate_in(-300, 0) / 1e6, 3),
        "first_100ms_mbit": round(rate_in(0, 100) / 1e6, 3),
        "next_100ms_mbit": round(rate_in(100, 200) / 1e6, 3),
        "first_200ms_mbit": round(rate_in(0, 200) / 1e6, 3),
        "peak_20ms_mbit": round(peak / 1e6, 3),
        "late_mbit": round(rate_in(AFTER_S * 1000 - 700, AFTER_S * 1000 - 200) / 1e6, 3),
        "reordered": probe.reordered,
        "write_ms": round((result.flip_done_ns - result.flip_sent_ns) / 1e6, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="rate_from", default="10Mbit")
    ap.add_argument("--to", dest="rate_to", default="1Mbit")
    ap.add_argument("--queue", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    top = max(Rate.parse(args.rate_from), Rate.parse(args.rate_to))
    offered = float(top) * 1.2
    rows = []
    with TwoHostLab().start() as lab:
        with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
            for i, mode in enumerate(("switch", "in-place")):
                ctl.reset()
                rows.append(measure(lab, ctl, mode, args.rate_from, args.rate_to, args.queue, offered, 9600 + i))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        keys = list(rows[0])
        print("  ".join(f"{k:>16}" for k in keys))
        for r in rows:
            print("  ".join(f"{str(r[k]):>16}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
