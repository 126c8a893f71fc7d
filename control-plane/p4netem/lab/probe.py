"""UDP probe traffic: numbered, timestamped datagrams, and a receiver that records kernel rx times.

Run inside a namespace:
    python -m p4netem.lab.probe recv --port 9000 [--idle 1.0] [--max-time 60] [--expect N]  (JSON on stdout)
    python -m p4netem.lab.probe send --dst 10.0.0.2 --port 9000 --count 1000 --rate 1000 --size 200
    python -m p4netem.lab.probe send --dst 10.1.0.0 --dst-count 1000 --at 0,0.5,0.5,1.7 ...

Datagram payload: magic "P4NP" | seq u64 | tx time u64 (CLOCK_REALTIME ns) | crc32 of the previous
20 bytes | filler with a fixed byte pattern up to --size bytes. The receiver takes the kernel's
SO_TIMESTAMPNS receive time (also CLOCK_REALTIME; namespaces share the clock), so rx - tx is the
one-way delay through the switch. It also checks every byte: a header that fails its CRC, filler
that differs from the pattern (counted in flipped bits), a datagram shorter than sent (a flipped UDP
length the kernel trims to) or from another source port (a flipped UDP source port) mark the
datagram as corrupted, which is how corruption tests see the switch's bit flips. The sender disables
the UDP checksum (SO_NO_CHECK) so that the kernel delivers corrupted payloads instead of dropping them.
`send --tos N` sets the IP TOS byte, ECN bits included (UDP may set them: ECT(0) is --tos 2), and the
receiver records each datagram's TOS byte as it arrived (IP_RECVTOS), which is how ECN tests see CE marks.

`run_probe()` runs both ends in two namespaces and returns a ProbeResult.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import statistics
import struct
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .netns import Namespace

MAGIC = b"P4NP"
HEADER = struct.Struct("!4sQQ")
HEADER_LEN = HEADER.size + 4  # + crc32
MIN_SIZE = HEADER_LEN
UDP_IP_ETH_OVERHEAD = 8 + 20 + 14  # bytes around the UDP payload in an Ethernet frame
SO_NO_CHECK = 11  # linux/asm-generic/socket.h
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_RCVBUFFORCE = 33


def filler(length: int) -> bytes:
    return bytes((i * 31 + 7) & 0xFF for i in range(length))


def wall_offset_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of three bracketed reads. Sender and
    receiver record it when they start and stop: a difference says the wall clock (which both
    timestamps use) was stepped during the probe, so its delays are off by that much."""
    best = (1 << 62, 0)
    for _ in range(3):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        wall = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        best = min(best, (after - before, wall - (before + after) // 2))
    return best[1]


def make_datagram(seq: int, tx_ns: int, pad: bytes) -> bytes:
    head = HEADER.pack(MAGIC, seq, tx_ns)
    return head + struct.pack("!I", zlib.crc32(head)) + pad


# ---- sender ---------------------------------------------------------------------------------------


def send(dst: str, port: int, count: int, rate: float, size: int, at: list[float] | None = None,
         dst_count: int = 1, tos: int = 0) -> dict:
    """Send `count` datagrams of `size` payload bytes at `rate` per second (0 = as fast as possible),
    or one at each offset (seconds from the start) of `at`. With `dst_count` N > 1, datagram `seq`
    goes to address dst + seq % N (many receivers, or many UEs, with one sender)."""
    if size < MIN_SIZE:
        raise SystemExit(f"--size must be at least {MIN_SIZE}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    if tos:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    base = int(ipaddress.IPv4Address(dst))
    targets = [(str(ipaddress.IPv4Address(base + i)), port) for i in range(max(1, dst_count))]
    if len(targets) == 1:
        sock.connect(targets[0])
    pad = filler(size - HEADER_LEN)
    if at is not None:
        count = len(at)
    interval = 1.0 / rate if rate > 0 else 0.0
    errors = 0
    offsets = [wall_offset_ns()]
    start = time.perf_counter()
    start_ns = time.time_ns()
    for seq in range(count):
        target = start + at[seq] if at is not None else (start + seq * interval if interval else None)
        if target is not None:
            # Pace against the schedule (not the previous send) so the mean rate is exact;
            # sleep when well ahead, spin for the last stretch.
            ahead = target - time.perf_counter()
            if ahead > 0.0003:
                time.sleep(ahead - 0.0002)
            while time.perf_counter() < target:
                pass
        datagram = make_datagram(seq, time.time_ns(), pad)
        while True:
            try:
                if len(targets) == 1:
                    sock.send(datagram)
                else:
                    sock.sendto(datagram, targets[seq % len(targets)])
                break
            except (BlockingIOError, OSError) as err:
                if getattr(err, "errno", None) not in (105, 11):  # ENOBUFS, EAGAIN: back off, retry
                    raise
                errors += 1
                time.sleep(0.0002)
    end_ns = time.time_ns()
    offsets.append(wall_offset_ns())
    return {"sent": count, "size": size, "start_ns": start_ns, "end_ns": end_ns, "send_retries": errors,
            "wall_offsets_ns": offsets}


# ---- receiver -------------------------------------------------------------------------------------


def receive(port: int, idle: float, max_time: float, bind: str = "0.0.0.0", expect: int | None = None) -> dict:
    """Record datagrams until `idle` seconds pass without one (after the first) or `max_time`; with
    `expect` N, also as soon as each of the datagrams 0..N-1 has arrived (a copy of one arriving
    after that is not recorded)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind((bind, port))
    offsets = [wall_offset_ns()]
    print("ready", file=sys.stderr, flush=True)
    seqs: list[int] = []
    tx: list[int] = []
    rx: list[int] = []
    flips: list[int] = []  # per recorded datagram: filler bits that differ from the pattern
    sizes: list[int] = []
    sports: list[int] = []
    tos: list[int] = []  # the IP TOS byte each recorded datagram arrived with (ECN: its low 2 bits)
    bad_header = 0
    missing = set(range(expect)) if expect else None  # the sequence numbers still to come
    pads: dict[int, bytes] = {}
    deadline = time.monotonic() + max_time
    sock.settimeout(min(idle, max_time) if idle > 0 else max_time)
    got_any = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not got_any:
            sock.settimeout(remaining)
        try:
            data, ancdata, _, source = sock.recvmsg(65535, 256)
        except TimeoutError:
            break
        except socket.timeout:
            break
        if not got_any:
            got_any = True
            sock.settimeout(idle)
        rx_ns = time.time_ns()
        tos_byte = -1
        for level, kind, cdata in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                rx_ns = sec * 1_000_000_000 + nsec
            elif level == socket.IPPROTO_IP and kind == socket.IP_TOS and cdata:
                tos_byte = cdata[0]
        if len(data) < HEADER_LEN:
            bad_header += 1
            continue
        head = data[: HEADER.size]
        magic, seq, tx_ns = HEADER.unpack(head)
        (crc,) = struct.unpack("!I", data[HEADER.size : HEADER_LEN])
        if magic != MAGIC or crc != zlib.crc32(head):
            bad_header += 1
            continue
        body = data[HEADER_LEN:]
        pad = pads.get(len(body))
        if pad is None:
            pad = pads[len(body)] = filler(len(body))
        nflips = 0
        if body != pad:
            nflips = bin(int.from_bytes(body, "big") ^ int.from_bytes(pad, "big")).count("1")
        seqs.append(seq)
        tx.append(tx_ns)
        rx.append(rx_ns)
        flips.append(nflips)
        sizes.append(len(data))
        sports.append(source[1])
        tos.append(tos_byte)
        if missing is not None:
            missing.discard(seq)
            if not missing:
                break
    offsets.append(wall_offset_ns())
    return {"seq": seqs, "tx_ns": tx, "rx_ns": rx, "flips": flips, "size": sizes, "sport": sports,
            "tos": tos, "bad_header": bad_header, "wall_offsets_ns": offsets}


# ---- results --------------------------------------------------------------------------------------


@dataclass
class ProbeResult:
    """What one probe run saw. Lists are in arrival order."""

    sent: int
    size: int
    seq: list[int]
    tx_ns: list[int]
    rx_ns: list[int]
    flips: list[int]
    sizes: list[int]
    sports: list[int]
    bad_header: int
    sender: dict = field(default_factory=dict)
    #: CLOCK_REALTIME - CLOCK_MONOTONIC as sender and receiver saw it at their start and end.
    wall_offsets_ns: list[int] = field(default_factory=list)
    #: The IP TOS byte of each received datagram (-1: the kernel gave none).
    tos: list[int] = field(default_factory=list)

    @property
    def ce_marked(self) -> list[int]:
        """Sequence numbers that arrived marked CE (ECN 11), in arrival order."""
        return [s for s, t in zip(self.seq, self.tos) if t >= 0 and t & 3 == 3]

    @property
    def wall_clock_step_ns(self) -> int:
        """How far the wall clock moved against the monotonic one during the probe (a step set by
        an NTP client or a VM's host): every delay that spans the step is off by this much. Noise
        of a few microseconds from the bracketed reads."""
        offsets = self.wall_offsets_ns + self.sender.get("wall_offsets_ns", [])
        return max(offsets) - min(offsets) if offsets else 0

    @property
    def received(self) -> int:
        """Datagrams received (duplicates included, corrupted headers excluded)."""
        return len(self.seq)

    @property
    def unique(self) -> int:
        return len(set(self.seq))

    @property
    def duplicates(self) -> int:
        return self.received - self.unique

    @property
    def lost(self) -> int:
        return self.sent - self.unique

    @property
    def delays_ns(self) -> list[int]:
        return [r - t for r, t in zip(self.rx_ns, self.tx_ns)]

    @property
    def reordered(self) -> int:
        """Datagrams that arrived after one with a higher sequence number."""
        count, highest = 0, -1
        for s in self.seq:
            if s < highest:
                count += 1
            else:
                highest = s
        return count

    @property
    def corrupted(self) -> int:
        """Datagrams seen with any changed bit: probe header, filler, UDP length or source port."""
        if not self.seq:
            return self.bad_header
        sport = statistics.mode(self.sports)  # the sender's port; a flipped one is rare
        return self.bad_header + sum(
            1 for f, n, p in zip(self.flips, self.sizes, self.sports) if f or n != self.size or p != sport
        )

    def loss_bursts(self) -> list[int]:
        """Lengths of the runs of consecutive missing sequence numbers."""
        present = set(self.seq)
        bursts, run = [], 0
        for s in range(self.sent):
            if s in present:
                if run:
                    bursts.append(run)
                run = 0
            else:
                run += 1
        if run:
            bursts.append(run)
        return bursts

    def backlogged_bits_per_second(self, margin_ns: int = 200_000) -> float:
        """Receive rate while the bottleneck had the next packet waiting: the frame bits of each
        packet that could have arrived (its send stamp plus the smallest delay seen) at least
        `margin_ns` before the previous one did, over the gaps before those packets. A shaper's
        long-run rate when it is never short of work, unmoved by the sender pausing (a Python
        sender on a loaded machine, stalled longer than a short queue lasts, leaves the link
        idle with nothing to send: no fault of the shaper) and still moved by a shaper that
        idles or drifts with packets queued. 0.0 when no packet ever waited."""
        if self.received < 2:
            return 0.0
        base = min(self.delays_ns)
        frame_bits = (self.size + UDP_IP_ETH_OVERHEAD) * 8
        waited = busy_ns = 0
        for j in range(1, self.received):
            if self.tx_ns[j] + base + margin_ns <= self.rx_ns[j - 1]:
                waited += 1
                busy_ns += self.rx_ns[j] - self.rx_ns[j - 1]
        return waited * frame_bits * 1e9 / busy_ns if busy_ns > 0 else 0.0


def run_probe(
    src: Namespace,
    dst: Namespace,
    dst_ip: str,
    count: int,
    rate: float,
    size: int = 64,
    port: int = 9000,
    idle: float = 1.0,
    max_time: float | None = None,
    at: list[float] | None = None,
    dst_count: int = 1,
    tos: int = 0,
    stop_when_complete: bool = False,
) -> ProbeResult:
    """Start a receiver in `dst`, send from `src`, and collect what arrived. `at`, `dst_count`
    and `tos` as for `send()` (the receiver listens on every address of `dst`).

    The receiver stops `idle` seconds after the last datagram, so that a late one (delayed, queued,
    a copy) is still counted. With `stop_when_complete`, it stops as soon as every datagram sent
    has arrived once, for a probe through a profile that duplicates nothing: only a copy can come
    after that, and it would not be recorded. A probe that lost one still ends `idle` s after the
    last arrival."""
    import subprocess

    if at is not None:
        count = len(at)
        duration = max(at, default=0.0)
    else:
        duration = count / rate if rate > 0 else count / 50_000
    max_time = max_time if max_time is not None else duration + 30.0
    receiver = dst.popen(
        [sys.executable, "-m", "p4netem.lab.probe", "recv", "--port", str(port), "--idle", str(idle),
         "--max-time", str(max_time), *(["--expect", str(count)] if stop_when_complete and count > 0 else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait for "ready" so that no datagram reaches a port nobody listens on yet.
    assert receiver.stderr is not None
    line = receiver.stderr.readline()
    if "ready" not in line:
        receiver.kill()
        raise RuntimeError(f"probe receiver did not start: {line}{receiver.stderr.read()}")
    extra = ["--dst-count", str(dst_count), "--tos", str(tos)]
    if at is not None:
        extra += ["--at", ",".join(f"{t:.6f}" for t in at)]
    sender = src.run(
        [sys.executable, "-m", "p4netem.lab.probe", "send", "--dst", dst_ip, "--port", str(port), "--count",
         str(count), "--rate", str(rate), "--size", str(size), *extra],
        timeout=duration + 60,
    )
    out, err = receiver.communicate(timeout=max_time + 30)
    if receiver.returncode != 0:
        raise RuntimeError(f"probe receiver failed ({receiver.returncode}): {err}")
    data = json.loads(out)
    sent = json.loads(sender.stdout)
    return ProbeResult(
        sent=sent["sent"], size=size, seq=data["seq"], tx_ns=data["tx_ns"], rx_ns=data["rx_ns"],
        flips=data["flips"], sizes=data["size"], sports=data["sport"], bad_header=data["bad_header"], sender=sent,
        wall_offsets_ns=data.get("wall_offsets_ns", []), tos=data.get("tos", []),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="p4netem.lab.probe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send", help="send numbered, timestamped datagrams")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=9000)
    s.add_argument("--count", type=int, default=1000)
    s.add_argument("--rate", type=float, default=1000.0, help="datagrams per second (0: as fast as possible)")
    s.add_argument("--size", type=int, default=64, help=f"UDP payload bytes (>= {MIN_SIZE})")
    s.add_argument("--at", type=lambda t: [float(x) for x in t.split(",") if x],
                   help="send one datagram at each of these offsets (s, comma-separated) instead of --count/--rate")
    s.add_argument("--dst-count", type=int, default=1, help="datagram seq goes to --dst + seq %% N")
    s.add_argument("--tos", type=lambda t: int(t, 0), default=0,
                   help="IP TOS byte, ECN bits included (2: ECT(0), 1: ECT(1), 3: CE)")
    r = sub.add_parser("recv", help="record datagrams, print JSON")
    r.add_argument("--port", type=int, default=9000)
    r.add_argument("--bind", default="0.0.0.0")
    r.add_argument("--idle", type=float, default=1.0, help="stop after this many seconds without a datagram")
    r.add_argument("--max-time", type=float, default=60.0)
    r.add_argument("--expect", type=int, default=None, metavar="N",
                   help="also stop once datagrams 0..N-1 have all arrived (a later copy is not recorded)")
    args = parser.parse_args(argv)
    if args.mode == "send":
        if not 0 <= args.tos <= 255:
            parser.error(f"--tos {args.tos}: must be 0..255 (one byte)")
        result = send(args.dst, args.port, args.count, args.rate, args.size, args.at, args.dst_count, args.tos)
    else:
        if args.expect is not None and args.expect < 1:
            parser.error(f"--expect {args.expect}: must be at least 1")
        result = receive(args.port, args.idle, args.max_time, args.bind, args.expect)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
