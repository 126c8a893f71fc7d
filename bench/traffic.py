"""UDP traffic tools for the benchmarks: a paced sender and a timestamping sink.

Run inside a host's network namespace (``ip netns exec NS python bench/traffic.py ...``), so this file
imports nothing from the project and only the standard library.

Every datagram starts with a 16-byte header ``!QQ`` = (sequence number, send time in ns of
CLOCK_REALTIME). The namespaces share one kernel and so one clock, which is what makes one-way delay
measurable: the sink takes the kernel's receive timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME, stamped when
the frame reaches the host's veth, before any scheduling of this process) and subtracts the send time.

With ``--tx-stamps`` the sender also asks the kernel for a software transmit timestamp of every
datagram (SO_TIMESTAMPING, taken when the veth driver hands the frame on, in the same clock) and
reports them by sequence number (``tx_kernel``). A one-way delay from the kernel's transmit stamp to
the kernel's receive stamp no longer includes the time this Python process may spend descheduled
between reading the clock and the ``send()`` system call, which on a loaded 2-core machine can be
milliseconds: the figure is then the path's (and the switch's), not the sender's.

Frame bytes: the sink reports each datagram's Ethernet frame length = UDP payload + 8 (UDP) + 20 (IPv4,
no options) + 14 (Ethernet, untagged). That is the length the switch's rate stage charges (FCS,
preamble and inter-frame gap are not part of it; the profile's overhead_bytes is where they would go).
"""
from __future__ import annotations

import argparse
import array
import json
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")
# Not exported by Python's socket module; values from <asm-generic/socket.h>.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@ll")
# SO_TIMESTAMPING (asm-generic/socket.h) and its flags (linux/net_tstamp.h): software TX stamps,
# reported through the error queue with a per-socket counter (OPT_ID) and no payload (OPT_TSONLY).
SO_TIMESTAMPING = 37
TS_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
# struct sock_extended_err: ee_errno, ee_origin, ee_type, ee_code, ee_pad, ee_info, ee_data.
EXTENDED_ERR = struct.Struct("=IBBBBII")
SO_EE_ORIGIN_TIMESTAMPING = 4
IP_RECVERR = 11
FRAME_OVERHEAD = 14 + 20 + 8


class TxStamps:
    """Kernel transmit timestamps of a socket's datagrams, matched to sequence numbers.

    The kernel numbers the datagrams it accepted (OPT_ID: 0, 1, ...); `accepted` maps that number
    back to our sequence number, since a datagram refused by send() gets none."""

    def __init__(self, sock: socket.socket):
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TS_FLAGS)
        self.sock = sock
        self.accepted: list[int] = []
        self.stamps: dict[int, int] = {}

    def sent(self, seq: int) -> None:
        self.accepted.append(seq)

    def drain(self) -> None:
        """Reads every stamp queued so far (never blocks)."""
        while True:
            try:
                _data, anc, _flags, _addr = self.sock.recvmsg(
                    0, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            stamp = ident = None
            for level, ctype, cdata in anc:
                if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPING:
                    sec, nsec = TIMESPEC.unpack_from(cdata, 0)  # [0] is the software stamp
                    stamp = sec * 1_000_000_000 + nsec
                elif level == socket.IPPROTO_IP and ctype == IP_RECVERR:
                    err = EXTENDED_ERR.unpack_from(cdata)
                    if err[1] == SO_EE_ORIGIN_TIMESTAMPING:
                        ident = err[6]
            if stamp and ident is not None and ident < len(self.accepted):
                self.stamps[self.accepted[ident]] = stamp

    def report(self) -> dict:
        seqs = sorted(self.stamps)
        return {"seq": seqs, "tx_ns": [self.stamps[q] for q in seqs]}


def send(args: argparse.Namespace) -> None:
    """Send datagrams of ``--size`` bytes of frame at ``--rate-bps`` (frame bits) until ``--count``
    datagrams or ``--duration`` seconds, whichever comes first.

    Pacing keeps an absolute schedule (packet i is due at t0 + i * interval) so that a late wake-up
    is caught up by sending back-to-back instead of lowering the average rate. It sleeps rather than
    spins until the next datagram is due: on a 2-core machine a spinning sender takes the CPU the
    switch under test needs, which shows up as millisecond tails in the switch's latency.
    """
    payload_len = args.size - FRAME_OVERHEAD
    if payload_len < HEADER.size:
        sys.exit(f"--size {args.size} too small: need at least {HEADER.size + FRAME_OVERHEAD}")
    interval = args.size * 8 / args.rate_bps
    pad = bytes(payload_len - HEADER.size)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if args.tos:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, args.tos)
    base = struct.unpack("!I", socket.inet_aton(args.dst))[0]
    targets = [(socket.inet_ntoa(struct.pack("!I", base + i)), args.port) for i in range(max(1, args.dst_count))]
    if len(targets) == 1:
        sock.connect(targets[0])
    stamps = TxStamps(sock) if args.tx_stamps else None
    count = args.count or (1 << 62)
    t0 = time.monotonic()
    end = t0 + args.duration if args.duration else float("inf")
    sent = errors = 0
    max_late = 0.0  # how far behind schedule a datagram went out: shows a starved sender
    pack, now_ns, mono = HEADER.pack, time.time_ns, time.monotonic
    if len(targets) == 1:
        sendmsg = sock.send
    else:
        # Datagram i goes to dst + i % dst_count (many UEs from one sender).
        def sendmsg(data: bytes, _sendto=sock.sendto, _n=len(targets)) -> None:
            _sendto(data, targets[sent % _n])
    while sent < count:
        now = mono()
        if now >= end:
            break
        due = t0 + sent * interval
        if due > now:
            time.sleep(due - now)
            continue
        if now - due > max_late:
            max_late = now - due
        try:
            sendmsg(pack(sent, now_ns()) + pad)
            if stamps:
                stamps.sent(sent)
        except (BlockingIOError, ConnectionRefusedError, OSError):
            # ENOBUFS/ECONNREFUSED (an ICMP error from an earlier datagram): the datagram is lost on
            # the sender; counted so the caller can tell sender loss from network loss.
            errors += 1
        if stamps:
            stamps.drain()
        sent += 1
    elapsed = mono() - t0
    summary = {"sent": sent, "send_errors": errors, "elapsed_s": elapsed,
               "max_late_ms": max_late * 1e3,
               "offered_bps": sent * args.size * 8 / elapsed if elapsed else 0.0}
    if stamps:
        time.sleep(0.05)  # the last datagrams' stamps
        stamps.drain()
        summary["tx_kernel"] = stamps.report()
    print(json.dumps(summary))


def sink(args: argparse.Namespace) -> None:
    """Receive on ``--port``; stop ``--idle`` s after the last datagram (once one arrived) or after
    ``--timeout`` s. Writes per-datagram records (seq, tx_ns, rx_ns, frame bytes, the IP TOS byte
    as received: ECN marks are its low 2 bits) to ``--out``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", args.port))
    seqs, txs, rxs, lens, toss = (array.array("q") for _ in range(5))
    deadline = time.monotonic() + args.timeout
    started = False
    print("ready", flush=True)
    recvmsg = sock.recvmsg
    cmsg_space = socket.CMSG_SPACE(TIMESPEC.size) + socket.CMSG_SPACE(4)
    while True:
        now = time.monotonic()
        wait = min(deadline - now, args.idle if started else deadline - now)
        if wait <= 0:
            break
        sock.settimeout(wait)
        try:
            data, anc, _flags, _addr = recvmsg(65536, cmsg_space)
        except socket.timeout:
            if started:
                break
            continue
        started = True
        rx_ns, tos = 0, -1
        for level, ctype, cdata in anc:
            if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack(cdata[: TIMESPEC.size])
                rx_ns = sec * 1_000_000_000 + nsec
            elif level == socket.IPPROTO_IP and ctype == socket.IP_TOS and cdata:
                tos = cdata[0]
        if len(data) < HEADER.size:
            continue
        seq, tx_ns = HEADER.unpack_from(data)
        seqs.append(seq)
        txs.append(tx_ns)
        rxs.append(rx_ns or time.time_ns())
        lens.append(len(data) + FRAME_OVERHEAD)
        toss.append(tos)
    with open(args.out, "w") as f:
        json.dump({"seq": seqs.tolist(), "tx_ns": txs.tolist(), "rx_ns": rxs.tolist(),
                   "frame_bytes": lens.tolist(), "tos": toss.tolist()}, f)
    print(json.dumps({"received": len(seqs)}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate-bps", type=float, required=True, help="frame bits per second")
    s.add_argument("--size", type=int, default=1000, help="Ethernet frame bytes per datagram")
    s.add_argument("--count", type=int, default=0)
    s.add_argument("--duration", type=float, default=0.0)
    s.add_argument("--tos", type=int, default=0)
    s.add_argument("--dst-count", type=int, default=1, help="datagram i goes to --dst + i %% N")
    s.add_argument("--tx-stamps", action="store_true",
                   help="report the kernel's software transmit timestamp of every datagram")
    s.set_defaults(func=send)
    k = sub.add_parser("sink")
    k.add_argument("--port", type=int, required=True)
    k.add_argument("--out", required=True)
    k.add_argument("--idle", type=float, default=1.0)
    k.add_argument("--timeout", type=float, default=60.0)
    k.set_defaults(func=sink)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
