"""Classic pcap files (microsecond or nanosecond timestamps, either byte order), read and written
whole: what tcpreplay takes and tcpdump writes. Frames are (timestamp ns, bytes)."""

from __future__ import annotations

import struct
from pathlib import Path

_MAGIC_US = 0xA1B2C3D4
_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1


class PcapError(ValueError):
    """Not a classic Ethernet pcap file (one line, naming the file)."""


def read_pcap(path: str | Path) -> list[tuple[int, bytes]]:
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise PcapError(f"{path}: not a pcap file (shorter than its 24-byte header)")
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in (_MAGIC_US, _MAGIC_NS):
            break
    else:
        raise PcapError(f"{path}: not a classic pcap file (magic {data[:4].hex()}; pcapng: convert it with "
                        "`tcpdump -r FILE -w OUT.pcap`)")
    scale = 1 if magic == _MAGIC_NS else 1000
    linktype = struct.unpack(order + "I", data[20:24])[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise PcapError(f"{path}: link type {linktype}, only Ethernet (1) can be replayed into a switch port")
    rec = struct.Struct(order + "IIII")
    frames, off = [], 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = rec.unpack_from(data, off)
        off += 16
        if off + caplen > len(data):
            break  # a capture cut short (tcpdump killed mid-write): keep what is whole
        frames.append((sec * 1_000_000_000 + frac * scale, data[off:off + caplen]))
        off += caplen
    return frames


def write_pcap(path: str | Path, frames: list[tuple[int, bytes]], nanosecond: bool = False) -> None:
    scale = 1 if nanosecond else 1000
    out = [struct.pack("<IHHiIII", _MAGIC_NS if nanosecond else _MAGIC_US, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)]
    for ts, frame in frames:
        out.append(struct.pack("<IIII", ts // 1_000_000_000, (ts % 1_000_000_000) // scale, len(frame), len(frame)))
        out.append(frame)
    Path(path).write_bytes(b"".join(out))
