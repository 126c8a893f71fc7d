"""Generate and send malformed frames from an interface (AF_PACKET), paced, for the fuzz suite.

    python fuzzframes.py IFACE SRC_MAC DST_MAC COUNT SEED
        prints two numbers: the frames sent, and how many of those the receiving kernel drops
        before any packet socket sees them (see `untaggable`)

Kinds, in turn: truncated IPv4/IPv6/TCP/UDP (cut anywhere), runts (< 14 bytes), bad IHL (0-4,
larger than the packet), bad total/payload lengths, bad checksums, VLAN stacks (1-4 tags, 0x8100
and 0x88a8), IPv6 extension-header chains (hop-by-hop, routing, fragment, destination; some
truncated or looping lengths), and random bytes after a valid Ethernet header. Frames are at most
1514 bytes, so every one enters the switch (longer ones stop at the RX ring). Sending is paced to
about 20 000 frames/s: the point is what the parser does with them, and a probe flow must keep
its share of the ring.
"""

from __future__ import annotations

import random
import socket
import struct
import sys
import time

RATE = 20_000
VLAN_TYPES = (0x8100, 0x88A8)


def untaggable(f: bytes) -> bool:
    """A frame the receiving Linux drops before its packet taps, so the switch never sees it: a
    VLAN EtherType with fewer than the tag and the next EtherType after it (skb_vlan_untag pulls
    14 + 4 + 2 bytes in __netif_receive_skb_core, before the taps, and frees the frame if it cannot)."""
    return len(f) < 20 and int.from_bytes(f[12:14], "big") in VLAN_TYPES


def _ipv4(rng: random.Random, payload: bytes, proto: int) -> bytes:
    ihl = rng.choice((5, 5, 5, 0, 1, 4, 6, 15))
    total = rng.choice((20 + len(payload), 0, 19, 65535, rng.randrange(65536)))
    hdr = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, total, rng.getrandbits(16), rng.choice((0, 0x4000, 0x2000, 0x1FFF)),
                      rng.choice((0, 1, 64)), proto, rng.getrandbits(16), bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    opts = rng.randbytes(4 * max(0, ihl - 5)) if rng.random() < 0.5 else b""
    return hdr + opts + payload


def _l4(rng: random.Random) -> tuple[int, bytes]:
    proto = rng.choice((6, 17, 1, 58, 0, 255))
    if proto == 6:
        off = rng.choice((5, 0, 4, 15))
        return proto, struct.pack("!HHIIBBHHH", rng.getrandbits(16), rng.choice((80, 443, 0)), 0, 0, off << 4,
                                  rng.getrandbits(8), 0, rng.getrandbits(16), 0) + rng.randbytes(rng.randint(0, 40))
    if proto == 17:
        return proto, struct.pack("!HHHH", rng.getrandbits(16), rng.choice((53, 0)), rng.choice((8, 0, 7, 65535)),
                                  rng.getrandbits(16)) + rng.randbytes(rng.randint(0, 40))
    return proto, rng.randbytes(rng.randint(0, 40))


def _ipv6(rng: random.Random) -> bytes:
    proto, l4 = _l4(rng)
    chain = b""
    nxt = proto
    for _ in range(rng.randint(0, 5)):
        ext = rng.choice((0, 43, 44, 60, 51, 135))
        hdr_len = rng.choice((0, 1, 255))
        body = rng.randbytes(6 + 8 * min(hdr_len, 2))
        chain = bytes([nxt, hdr_len]) + body + chain
        nxt = ext
    plen = rng.choice((len(chain) + len(l4), 0, 65535, rng.randrange(65536)))
    hdr = struct.pack("!IHBB16s16s", 6 << 28, plen, nxt, 64, bytes(15) + b"\x01", bytes(15) + b"\x02")
    return hdr + chain + l4


def frame(rng: random.Random, src: bytes, dst: bytes) -> bytes:
    kind = rng.randrange(7)
    vlans = b""
    if kind == 4 or rng.random() < 0.1:
        for _ in range(rng.randint(1, 4)):
            vlans += struct.pack("!HH", rng.choice(VLAN_TYPES), rng.getrandbits(16))
    if kind == 0:
        return rng.randbytes(rng.randint(0, 13))  # runt
    if kind == 6:
        return dst + src + vlans + rng.randbytes(rng.randint(0, 1500 - len(vlans)))
    if kind in (1, 2, 4):
        proto, l4 = _l4(rng)
        body = b"\x08\x00" + _ipv4(rng, l4, proto)
        if kind == 2 and len(body) > 12:  # a bad header checksum
            body = body[:12] + bytes([body[12] ^ 0xFF]) + body[13:]
    else:
        body = b"\x86\xdd" + _ipv6(rng)
    out = dst + src + vlans + body
    if rng.random() < 0.4:
        out = out[: rng.randint(0, len(out))]  # truncated anywhere
    return out[:1514]


def main() -> None:
    iface, src, dst, count, seed = sys.argv[1:6]
    rng = random.Random(int(seed))
    src_b, dst_b = bytes.fromhex(src.replace(":", "")), bytes.fromhex(dst.replace(":", ""))
    sent = untaggable_sent = 0
    t0 = time.monotonic()
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        for i in range(int(count)):
            f = frame(rng, src_b, dst_b)
            if len(f) < 14:
                f = f + bytes(14 - len(f)) if rng.random() < 0.5 else f  # the kernel needs a header
            try:
                s.send(f)
                sent += 1
                untaggable_sent += untaggable(f)
            except OSError:
                pass  # the kernel refuses some (shorter than a header): not sent, not counted
            if i % 256 == 255:
                ahead = (i + 1) / RATE - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    print(sent, untaggable_sent)


if __name__ == "__main__":
    main()
