"""Packet capture in a namespace (tcpdump) and a small reader for the pcap it writes.

The harness counts packets, bytes, connections and first flights from captures, so the reader
returns plain TCP segment records (time, addresses, ports, flags, seq/ack, payload). Only what
the labs produce is decoded: Ethernet (optionally one VLAN tag) or Linux cooked captures, IPv4 or
IPv6, TCP.
"""

from __future__ import annotations

import ipaddress
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from .netns import NsProcess

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


@dataclass(frozen=True)
class Segment:
    ts: float
    src: str
    sport: int
    dst: str
    dport: int
    flags: int
    seq: int
    ack: int
    window: int
    payload: bytes
    wire_len: int   # bytes on the wire (as captured, link header included)
    mss: int | None = None      # SYN options: what the window field means (RTT audit)
    wscale: int | None = None
    # The timestamps option (RFC 7323): the sender's clock, and the newest timestamp it had
    # received and echoes: proof of which packet of the other side had reached it (RTT audit).
    tsval: int | None = None
    tsecr: int | None = None

    @property
    def pure_ack(self) -> bool:
        return not self.payload and self.flags & (SYN | FIN | RST) == 0


class Capture:
    """tcpdump writing a pcap in `ns` until stop(); `segments()` reads it back."""

    def __init__(self, ns: str | None, interface: str, path: str | Path, bpf: str = "tcp",
                 snaplen: int = 0):
        self.path = Path(path)
        # --immediate-mode: no kernel ring-block batching (TPACKET_V3 hands packets over only when a
        # block fills or ~1 s passes, and packets still there at stop are lost); -U: no stdio
        # buffering of the file.
        argv = ["tcpdump", "-i", interface, "--immediate-mode", "-U", "-n", "-s", str(snaplen),
                "-w", str(self.path), *bpf.split()]
        self.proc = NsProcess(ns, argv, self.path.with_suffix(".log"))
        self._wait_started()

    def _wait_started(self, timeout: float = 5.0) -> None:
        # tcpdump says "listening on ..." once the socket is bound; packets before that are lost.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "listening on" in self.proc.log_text():
                return
            if not self.proc.alive():
                raise RuntimeError(f"tcpdump exited: {self.proc.log_text()}")
            time.sleep(0.02)
        raise TimeoutError(f"tcpdump did not start: {self.proc.log_text()}")

    def stop(self, settle: float = 0.2, timeout: float = 5.0) -> None:
        """Stop once the file has stopped growing for `settle` seconds (the last packets are in)."""
        deadline = time.monotonic() + timeout
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size != last:
                last, since = size, time.monotonic()
            elif time.monotonic() - since >= settle:
                break
            time.sleep(0.02)
        self.proc.stop()

    @property
    def dropped_by_kernel(self) -> int | None:
        """Packets the kernel dropped before tcpdump read them, from the summary tcpdump prints
        when it stops (None before that): a capture with drops undercounts the load's packets and
        may miss its last ones. libpcap sizes each ring frame for the snapshot length, so `-i any`
        with the full 262144 bytes holds only ~8 packets in its 2 MB ring and drops under a burst."""
        m = re.search(r"(\d+) packets? dropped by kernel", self.proc.log_text())
        return int(m.group(1)) if m else None

    def segments(self) -> list[Segment]:
        return read_pcap(self.path)

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


LINKTYPES = {1: "Ethernet (1)", 113: "Linux cooked SLL (113)", 276: "Linux cooked SLL2 (276)"}


def read_pcap(path: str | Path) -> list[Segment]:
    data = Path(path).read_bytes()
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype not in LINKTYPES:
        # Silently decoding nothing would make every load of the capture look empty.
        raise ValueError(f"{path}: link type {linktype} is not read (only {', '.join(LINKTYPES.values())})")
    out: list[Segment] = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16: off + 16 + incl]
        off += 16 + incl
        ts = sec + frac / (1e9 if nano else 1e6)
        seg = _decode(pkt, linktype, ts, orig)
        if seg is not None:
            out.append(seg)
    return out


def _decode(pkt: bytes, linktype: int, ts: float, wire_len: int) -> Segment | None:
    if linktype == 1:          # Ethernet
        if len(pkt) < 14:
            return None
        etype = struct.unpack("!H", pkt[12:14])[0]
        off = 14
        if etype == 0x8100:
            etype = struct.unpack("!H", pkt[16:18])[0]
            off = 18
    elif linktype == 113:      # Linux cooked (any interface)
        if len(pkt) < 16:
            return None
        etype = struct.unpack("!H", pkt[14:16])[0]
        off = 16
    else:                      # 276, Linux cooked v2 (tcpdump -i any on newer libpcap)
        if len(pkt) < 20:
            return None
        etype = struct.unpack("!H", pkt[0:2])[0]
        off = 20
    if etype == 0x0800:
        ihl = (pkt[off] & 0x0F) * 4
        total = struct.unpack("!H", pkt[off + 2: off + 4])[0]
        if pkt[off + 9] != 6:
            return None
        src = str(ipaddress.IPv4Address(pkt[off + 12: off + 16]))
        dst = str(ipaddress.IPv4Address(pkt[off + 16: off + 20]))
        tcp = off + ihl
        end = off + total
    elif etype == 0x86DD:
        if pkt[off + 6] != 6:
            return None
        plen = struct.unpack("!H", pkt[off + 4: off + 6])[0]
        src = str(ipaddress.IPv6Address(pkt[off + 8: off + 24]))
        dst = str(ipaddress.IPv6Address(pkt[off + 24: off + 40]))
        tcp = off + 40
        end = tcp + plen
    else:
        return None
    sport, dport, seq, ack, offflags, window = struct.unpack("!HHIIHH", pkt[tcp: tcp + 16])
    hlen = (offflags >> 12) * 4
    mss, wscale, tsval, tsecr = _options(pkt[tcp + 20: tcp + hlen])
    if not offflags & SYN:
        mss = wscale = None           # meaningful only on a SYN (RFC 9293, RFC 7323)
    return Segment(ts, src, sport, dst, dport, offflags & 0x3F, seq, ack, window,
                   bytes(pkt[tcp + hlen: end]), wire_len, mss, wscale, tsval, tsecr)


def _options(opts: bytes) -> tuple[int | None, int | None, int | None, int | None]:
    """MSS, window scale and the timestamps (TSval, TSecr) from TCP options (a truncated
    option ends the walk)."""
    mss = wscale = tsval = tsecr = None
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2 or i + opts[i + 1] > len(opts):
            break
        size = opts[i + 1]
        if kind == 2 and size == 4:
            mss = struct.unpack("!H", opts[i + 2: i + 4])[0]
        elif kind == 3 and size == 3:
            wscale = opts[i + 2]
        elif kind == 8 and size == 10:
            tsval, tsecr = struct.unpack("!II", opts[i + 2: i + 10])
        i += size
    return mss, wscale, tsval, tsecr


def first_flight(segments: list[Segment], server: str, sport: int) -> int:
    """Data segments the server sent before it retransmitted anything or saw an ACK of its data.

    With the client's pure ACKs withheld (a test filter), this is the initial window in segments.
    """
    seen: set[int] = set()
    count = 0
    for s in segments:
        if s.src == server and s.sport == sport and s.payload:
            if s.seq in seen:
                break                 # retransmission: the first flight is over
            seen.add(s.seq)
            count += 1
    return count
