"""Match the frames sent into port 1 with the frames that left port 2.

A frame is identified by its bytes. Identical frames in the capture are matched in order. A frame
that left with bytes no sent frame has is a corrupted copy of a lost sent frame of the same
length (the closest by differing bits, at most MAX_CORRUPT_BITS); received frames that match
nothing (a namespace's own chatter) are counted as foreign and left out. Fates, per sent frame:
delivered (first copy's delay), lost, corrupted (delivered with changed bytes); plus the number of
extra copies (duplicates) and whether it arrived after a frame sent later (reordered)."""

from __future__ import annotations

import enum
from collections import defaultdict, deque
from dataclasses import dataclass

MAX_CORRUPT_BITS = 64


class Fate(enum.Enum):
    DELIVERED = "delivered"
    LOST = "lost"
    CORRUPTED = "corrupted"


@dataclass
class PacketFate:
    index: int  # order sent
    tx_ns: int
    length: int
    fate: Fate = Fate.LOST
    rx_ns: int | None = None
    copies: int = 0  # frames received for it (2 or more: duplicated)
    reordered: bool = False
    flipped_bits: int = 0

    @property
    def delay_ns(self) -> int | None:
        return None if self.rx_ns is None else self.rx_ns - self.tx_ns

    @property
    def duplicates(self) -> int:
        return max(0, self.copies - 1)


def _bits(a: bytes, b: bytes) -> int:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).bit_count()


def match_frames(sent: list[tuple[int, bytes]], received: list[tuple[int, bytes]]) -> tuple[list[PacketFate], int]:
    """(a PacketFate per sent frame, in send order; the number of foreign received frames)."""
    fates = [PacketFate(i, ts, len(frame)) for i, (ts, frame) in enumerate(sent)]
    by_bytes: dict[bytes, deque[int]] = defaultdict(deque)
    for i, (_, frame) in enumerate(sent):
        by_bytes[frame].append(i)
    # Copies of one frame beyond the sent count are duplicates of the last one sent.
    last_of: dict[bytes, int] = {frame: idx[-1] for frame, idx in by_bytes.items()}
    unmatched: list[tuple[int, bytes]] = []
    for rx, frame in sorted(received, key=lambda f: f[0]):
        pending = by_bytes.get(frame)
        if pending is None:
            unmatched.append((rx, frame))
            continue
        i = pending.popleft() if pending else last_of[frame]
        f = fates[i]
        f.copies += 1
        if f.rx_ns is None:
            f.rx_ns, f.fate = rx, Fate.DELIVERED
    lost_by_len: dict[int, list[int]] = defaultdict(list)
    for f in fates:
        if f.fate is Fate.LOST:
            lost_by_len[f.length].append(f.index)
    foreign = 0
    for rx, frame in unmatched:
        candidates = lost_by_len.get(len(frame), [])
        best = min(((_bits(sent[i][1], frame), i) for i in candidates if fates[i].rx_ns is None), default=None)
        if best is None or best[0] > MAX_CORRUPT_BITS:
            foreign += 1
            continue
        f = fates[best[1]]
        f.fate, f.rx_ns, f.copies, f.flipped_bits = Fate.CORRUPTED, rx, 1, best[0]
    # Reordered: arrived after a frame that was sent later had arrived.
    highest = -1
    for f in sorted((f for f in fates if f.rx_ns is not None), key=lambda f: f.rx_ns):
        if f.index < highest:
            f.reordered = True
        highest = max(highest, f.index)
    return fates, foreign
