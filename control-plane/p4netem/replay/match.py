"""Match the frames sent into port 1 with the frames that left port 2.

A frame is identified by its bytes. Identical frames in the capture are matched in order. A frame
that left with bytes no sent frame has is a corrupted copy of the sent frame of the same length
closest by differing bits (at most MAX_CORRUPT_BITS) among those sent before it arrived: of a
frame not received otherwise, that frame corrupted; of one received intact too, a corrupted
duplicate. Received frames that match nothing (a namespace's own chatter) are counted as foreign
and left out. Fates, per sent frame:
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
    # A frame that matches nothing was changed on the way: a corrupted copy of the sent frame of
    # its length closest in bits, among those sent before it arrived (a frame cannot arrive before
    # it is sent: captures of similar frames, e.g. with counters 256 apart, differ in a few bits
    # only). The copy of a frame that had not arrived otherwise is that frame, corrupted; of one
    # that had (a duplicate that was corrupted, the other copy intact), one more copy of it.
    by_len: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # length -> [(tx, index, bits)]
    lost_by_len: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # the same, frames not arrived
    for i, (ts, frame) in enumerate(sent):
        entry = (ts, i, int.from_bytes(frame, "big"))
        by_len[len(frame)].append(entry)
        if fates[i].rx_ns is None:
            lost_by_len[len(frame)].append(entry)
    foreign = 0
    for rx, frame in unmatched:
        value = int.from_bytes(frame, "big")
        best: tuple[int, int, int] | None = None  # (bits, not lost, index): fewest bits, a lost frame first

        def closest(entries: list[tuple[int, int, int]]) -> None:
            nonlocal best
            for ts, i, bits in entries:
                if ts <= rx:
                    key = ((bits ^ value).bit_count(), fates[i].rx_ns is not None, i)
                    if best is None or key < best:
                        best = key

        closest(lost_by_len.get(len(frame), []))
        if best is None or best[0] > 1:  # one bit (netem's corruption) beats any delivered frame
            closest(by_len.get(len(frame), []))
        if best is None or best[0] > MAX_CORRUPT_BITS:
            foreign += 1
            continue
        f = fates[best[2]]
        if f.rx_ns is None:
            f.fate, f.rx_ns, f.copies, f.flipped_bits = Fate.CORRUPTED, rx, 1, best[0]
        else:
            f.copies += 1
    # Reordered: arrived after a frame that was sent later had arrived.
    highest = -1
    for f in sorted((f for f in fates if f.rx_ns is not None), key=lambda f: f.rx_ns):
        if f.index < highest:
            f.reordered = True
        highest = max(highest, f.index)
    return fates, foreign
