"""`make fuzz`: malformed frames and mutated P4Runtime requests at volume into a running
p4netem-switch, with a probe flow forwarded throughout (issue 13).

Frames (sent from h1 by tests/tools/fuzzframes.py, in h1's namespace): truncated and runt
frames, bad IHL and total lengths, bad checksums, VLAN stacks, IPv6 extension-header chains,
random bytes. Requests: valid Write/Read requests mutated as raw bytes (bit flips, truncation,
insertions, splices) and structurally (wrong ids, widths, types, indexes, atomicity), sent over
gRPC. A ping from h1 to h2 runs all along. After each part the switch must still run and answer
P4Runtime; at the end every probe echo must have come back.

Figures (bench/results/fuzz.json): fuzz_frames (accepted by the sending kernel),
fuzz_frames_at_switch (of those, what reached the switch: its RX ring, from its shutdown report,
plus what the kernel fast path forwarded, from its /metrics, also given alone as
fuzz_frames_fast_path: well-formed frames of a flow the pipeline forwarded unimpaired),
fuzz_frames_untaggable (sent, but VLAN frames too short for their tag, which the receiving kernel
frees before any packet socket sees them: fuzzframes.untaggable), fuzz_frames_unaccounted
(fuzz_frames - untaggable - at_switch: 0, every frame is accounted for), fuzz_requests,
fuzz_crashes (0: the switch never exited), fuzz_probe_loss (probe echoes lost),
fuzz_request_status (gRPC status -> count).

usage: .venv/bin/python bench/fuzz.py [--frames N] [--requests N] [--seed S] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import grpc

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.p4rt.proto import p4data_pb2, p4runtime_pb2
from p4netem.switch_health import SwitchHealth

ROOT = Path(__file__).resolve().parents[1]
FRAMES_TOOL = ROOT / "tests" / "tools" / "fuzzframes.py"


def _valid_requests(lab: TwoHostLab, rng: random.Random) -> list[bytes]:
    """Serialized valid requests of every kind the switch serves, to mutate."""
    c = lab.client
    assert c is not None
    updates = [
        p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=p4runtime_pb2.Entity(
            table_entry=c.table_entry(pl.L2_FWD, {"hdr.ethernet.dst_addr": 0x0C0000000000 + i},
                                      pl.SET_EGRESS_PORT, {"port": 2})))
        for i in range(3)
    ]
    updates.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=p4runtime_pb2.Entity(
        table_entry=c.table_entry(pl.PROFILE, {"meta.profile_id": 7, "meta.direction": 0}, pl.SET_IMPAIRMENT,
                                  pl.impairment_params(delay_ns=1000)))))
    reg = c.p4info.register(pl.NEXT_FREE_NS)
    updates.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=p4runtime_pb2.Entity(
        register_entry=p4runtime_pb2.RegisterEntry(register_id=reg.id, index=p4runtime_pb2.Index(index=14),
                                                   data=p4data_pb2.P4Data(bitstring=b"\x05")))))
    writes = []
    for n in (1, 2, len(updates)):
        req = p4runtime_pb2.WriteRequest(device_id=lab.switch.device_id, updates=rng.sample(updates, n))
        req.election_id.low = 1  # the lab client's: these requests are the primary's
        writes.append(("Write", req.SerializeToString()))
    reads = [p4runtime_pb2.ReadRequest(device_id=lab.switch.device_id, entities=[e]) for e in (
        p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()),
        p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=c.p4info.counter(pl.PROFILE_IN).id,
                                                                      index=p4runtime_pb2.Index(index=3))),
        p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry()),
    )]
    return writes + [("Read", r.SerializeToString()) for r in reads]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and b:        # flip bits
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:      # truncate
            del b[rng.randrange(len(b)):]
        elif op == 2:            # insert random bytes
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 3 and b:      # a byte to an edge value (varint lengths, tags)
            b[rng.randrange(len(b))] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        elif op == 4 and len(b) > 4:  # duplicate a slice (repeated fields, overlong messages)
            i = rng.randrange(len(b))
            j = rng.randrange(i, len(b))
            b[j:j] = b[i:j + 1]
        else:                    # random bytes
            b = bytearray(rng.randbytes(rng.randint(0, 64)))
    return bytes(b)


def _structured(lab: TwoHostLab, rng: random.Random) -> tuple[str, bytes]:
    """A well-formed protobuf with wrong contents: ids, widths, indexes, types, atomicity."""
    te = p4runtime_pb2.TableEntry(table_id=rng.choice((0, 1, 0x02000001, 0x02000002, rng.getrandbits(32))),
                                  priority=rng.choice((0, 1, -1, 2**31 - 1)))
    for _ in range(rng.randint(0, 3)):
        fm = te.match.add(field_id=rng.randint(0, 5))
        kind = rng.randrange(4)
        value = rng.randbytes(rng.choice((0, 1, 2, 6, 17)))
        if kind == 0:
            fm.exact.value = value
        elif kind == 1:
            fm.ternary.value, fm.ternary.mask = value, rng.randbytes(len(value))
        elif kind == 2:
            fm.lpm.value, fm.lpm.prefix_len = value, rng.randint(-1, 200)
        else:
            fm.range.low, fm.range.high = value, rng.randbytes(len(value))
    if rng.random() < 0.7:
        act = te.action.action
        act.action_id = rng.choice((0, 0x01000001, 0x01000002, rng.getrandbits(32)))
        for _ in range(rng.randint(0, 3)):
            act.params.add(param_id=rng.randint(0, 20), value=rng.randbytes(rng.choice((0, 1, 4, 40))))
    entity = rng.choice((
        p4runtime_pb2.Entity(table_entry=te),
        p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(
            register_id=rng.getrandbits(32), index=p4runtime_pb2.Index(index=rng.randint(-5, 2**40)),
            data=p4data_pb2.P4Data(bitstring=rng.randbytes(rng.randint(0, 20))))),
        p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
            counter_id=rng.getrandbits(32), index=p4runtime_pb2.Index(index=rng.randint(-5, 2**40)))),
        p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry(digest_id=rng.getrandbits(32))),
        p4runtime_pb2.Entity(),
    ))
    if rng.random() < 0.5:
        req = p4runtime_pb2.WriteRequest(device_id=rng.choice((lab.switch.device_id, 0, 99)),
                                         atomicity=rng.randint(0, 4))
        req.election_id.low = rng.choice((0, 1, 2))
        req.updates.add(type=rng.randint(0, 4), entity=entity)
        return "Write", req.SerializeToString()
    req = p4runtime_pb2.ReadRequest(device_id=rng.choice((lab.switch.device_id, 0)), entities=[entity])
    return "Read", req.SerializeToString()


def fuzz_requests(lab: TwoHostLab, count: int, rng: random.Random) -> Counter:
    """Send `count` mutated requests (half raw-byte, half structured); gRPC status -> count."""
    channel = grpc.insecure_channel(lab.switch.grpc_addr, options=[("grpc.max_metadata_size", 1 << 20),
                                                                   ("grpc.absolute_max_metadata_size", 1 << 20)])
    ident = lambda b: b  # noqa: E731 - raw bytes on the wire
    calls = {"Write": channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=ident,
                                          response_deserializer=ident),
             "Read": channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=ident,
                                          response_deserializer=ident)}
    seeds = _valid_requests(lab, rng)
    status: Counter = Counter()
    for i in range(count):
        method, data = (_structured(lab, rng) if i % 2 else
                        (lambda m, d: (m, _mutate(d, rng)))(*rng.choice(seeds)))
        try:
            if method == "Write":
                calls[method](data, timeout=10)
            else:
                for _ in calls[method](data, timeout=10):
                    pass
            status["OK"] += 1
        except grpc.RpcError as err:
            status[err.code().name] += 1
        if i % 2000 == 0:
            assert lab.switch.running(), f"the switch exited after {i} requests"
    channel.close()
    return status


def _frames_at_switch(log: str, port: int) -> int | None:
    """Frames the kernel handed to the switch's RX ring of `port` (its shutdown report)."""
    m = re.search(rf"port down port={port} iface=\S+ kernel_rx=(\d+)", log)
    return int(m.group(1)) if m else None


def run(frames: int, requests: int, seed: int, log_path: Path | None = None) -> dict:
    port = free_tcp_port("127.0.0.1")
    # A log of our own: the switch's shutdown report is read from it after the lab closed, and a
    # switch's default /tmp log is removed at a normal stop.
    log_path = log_path or ROOT / "build" / "fuzz-switch.log"
    lab = TwoHostLab(log_path=log_path, switch_args=("--metrics-addr", f"127.0.0.1:{port}"))
    result = _run(lab, frames, requests, seed, SwitchHealth(f"http://127.0.0.1:{port}/metrics", timeout_s=30))
    # After the lab closed: the switch reported what reached its port-1 ring (fuzz frames and
    # probe echo requests; nothing else crosses: static ARP, no IPv6). The fast path's frames
    # (only fuzz frames: it forwards TCP and UDP, the probe is ICMP) never reach the ring.
    log = Path(lab.switch.log_path).read_text(errors="replace") if lab.switch and lab.switch.log_path else ""
    at_ring = _frames_at_switch(log, 1)
    result["fuzz_frames_at_switch"] = (None if at_ring is None
                                       else at_ring + result["fuzz_frames_fast_path"] - result["fuzz_probes"])
    result["fuzz_frames_unaccounted"] = (None if at_ring is None else result["fuzz_frames"]
                                         - result["fuzz_frames_untaggable"] - result["fuzz_frames_at_switch"])
    return result


def _run(lab: TwoHostLab, frames: int, requests: int, seed: int, health: SwitchHealth) -> dict:
    rng = random.Random(seed)
    with lab:
        # The probe: echo every 20 ms from h1 to h2, for as long as the fuzzing takes.
        probe = lab.h1.ns.popen(["ping", "-n", "-i", "0.02", "-W", "1", lab.h2.ip],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        t0 = time.monotonic()
        crashes = 0
        sent = subprocess.run(["ip", "netns", "exec", lab.h1.ns.name, sys.executable, str(FRAMES_TOOL),
                               lab.h1.iface, lab.h1.mac, lab.h2.mac, str(frames), str(seed)],
                              capture_output=True, text=True, timeout=3600)
        assert sent.returncode == 0, sent.stderr
        crashes += not lab.switch.running()
        status = fuzz_requests(lab, requests, rng) if lab.switch.running() else Counter()
        crashes += not lab.switch.running()
        time.sleep(1.0)  # the last echoes return
        probe.send_signal(2)
        out, _ = probe.communicate(timeout=30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        sent_probes, got = int(m.group(1)), int(m.group(2))
        # The switch still forwards and answers P4Runtime after all of it.
        alive = lab.switch.running() and lab.client is not None and lab.counters(pl.UPLINK) is not None
        fast_path = health.summary()["fast_path"]["packets"] if lab.switch.running() else 0
        return {
            "fuzz_frames_generated": frames,
            "fuzz_frames": int(sent.stdout.split()[0]),  # those the sending kernel accepted
            "fuzz_frames_untaggable": int(sent.stdout.split()[1]),
            "fuzz_requests": sum(status.values()),
            "fuzz_crashes": crashes + (not alive),
            "fuzz_probe_loss": sent_probes - got,
            "fuzz_probes": sent_probes,
            "fuzz_frames_fast_path": fast_path,
            "fuzz_request_status": dict(sorted(status.items())),
            "fuzz_seconds": round(time.monotonic() - t0, 1),
            "fuzz_seed": seed,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fuzz.json")
    args = ap.parse_args()
    result = run(args.frames, args.requests, args.seed)
    load = Path("/proc/loadavg").read_text().split()[:3]
    result["loadavg"] = [float(x) for x in load]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if result["fuzz_crashes"] or result["fuzz_probe_loss"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
