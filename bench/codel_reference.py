"""CoDel's drop schedule on a FIFO link, replayed step by step from RFC 8289's pseudocode with
Linux's arithmetic (include/net/codel_impl.h): the reference for the switch's unit test
(dataplane/src/stage/rate.rs, codel_drop_schedule_matches_the_rfc_pseudocode_with_linux_arithmetic)
and for bench/aqm.py, which replays the arrivals it captured at the switch's port through it.

    python bench/codel_reference.py [--exact] [--no-tail]   the unit test's pattern: prints
                                                             (dequeue instant ns, arrival ms) per drop

`replay_trace` is the same CoDel on Mahimahi's trace-driven link (mm-link's LinkQueue) instead of
a constant rate: the reference of bench/trace_aqm.py.

Independent of the switch's code, which decides each packet's fate when it arrives (its dequeue
instant is known then): here the link pulls packets at their real dequeue instants, as a qdisc's
dequeue does, with the RFC's drop loop (a dropped packet takes no link time; the next one is
looked at in the same instant) and Linux's backlog test (bytes left after the dequeued packet).
`--exact` uses the RFC's exact interval / sqrt(count) instead of Linux's 16-bit Newton steps.
Times in ns (Linux keeps 1.024 us units).
"""

from __future__ import annotations

import collections
import math
import sys

TARGET_NS, INTERVAL_NS, MTU = 5_000_000, 100_000_000, 1514
MS = 1_000_000


def newton_step(count: int, rec_inv_sqrt: int) -> int:
    """codel_Newton_step: one step of x (3 - count x^2) / 2 in Q0.32, kept in 16 bits."""
    inv = rec_inv_sqrt << 16
    inv2 = (inv * inv) >> 32
    val = ((3 << 32) - count * inv2) >> 2
    val = (val * inv) >> (32 - 2 + 1)
    return (val >> 16) & 0xFFFF


class Fifo:
    """The waiting packets (indices into the arrivals, in arrival order) and their bytes; for the
    switch's backlog rule also the packets sent (departure, bytes) whose departure may still lie
    after a later packet's arrival."""

    def __init__(self, sizes: list[int]):
        self.sizes, self.queue, self.backlog = sizes, collections.deque(), 0
        self.sent: collections.deque = collections.deque()
        self.sent_bytes = 0

    def push(self, i: int) -> None:
        self.queue.append(i)
        self.backlog += self.sizes[i]

    def pop(self) -> int | None:
        if not self.queue:
            return None
        i = self.queue.popleft()
        self.backlog -= self.sizes[i]
        return i

    def departed(self, i: int, t: int) -> None:
        """Packet i's last byte left at t."""
        self.sent.append((t, self.sizes[i]))
        self.sent_bytes += self.sizes[i]

    def bytes_ahead(self, arrival: int) -> int:
        """The bytes the switch saw queued when a packet arrived at `arrival`: every packet ahead of
        it (all sent by its dequeue, FIFO) not dropped whose departure came after that arrival.
        Arrivals only grow, so the ones gone by then are forgotten."""
        while self.sent and self.sent[0][0] <= arrival:
            self.sent_bytes -= self.sent.popleft()[1]
        return self.sent_bytes


class Codel:
    """RFC 8289's dequeue with Linux's arithmetic (target 5 ms, interval 100 ms): `dequeue(fifo,
    now)` pulls the packet the link sends at `now`, dropping (recorded in `drops` as (now, index))
    the ones CoDel drops on the way. The one-MTU backlog floor counts the bytes left behind the
    packet (Linux's, Mahimahi's), or with `ahead` the bytes queued ahead of it when it arrived (the
    switch's rule, dataplane/src/stage/codel.rs; the link must report departures to the Fifo)."""

    def __init__(self, arrivals_ns: list[int], exact: bool = False, ahead: bool = False):
        self.arrivals_ns, self.exact, self.ahead = arrivals_ns, exact, ahead
        self.first_above = self.drop_next = self.count = self.lastcount = self.rec_inv_sqrt = 0
        self.dropping = False
        self.drops: list[tuple[int, int]] = []

    def _should_drop(self, fifo: Fifo, i: int | None, now: int) -> bool:
        if i is None:
            self.first_above = 0
            return False
        backlog = fifo.bytes_ahead(self.arrivals_ns[i]) if self.ahead else fifo.backlog
        if now - self.arrivals_ns[i] < TARGET_NS or backlog <= MTU:
            self.first_above = 0
            return False
        if self.first_above == 0:
            self.first_above = now + INTERVAL_NS
            return False
        return now > self.first_above

    def _control_law(self, t: int) -> int:
        if self.exact:
            return t + int(INTERVAL_NS / math.sqrt(self.count))
        return t + ((INTERVAL_NS * (self.rec_inv_sqrt << 16)) >> 32)

    def dequeue(self, fifo: Fifo, now: int) -> int | None:
        p = fifo.pop()
        if p is None:
            self.dropping = False
            return None
        drop = self._should_drop(fifo, p, now)
        if self.dropping:
            if not drop:
                self.dropping = False
            else:
                while self.dropping and now >= self.drop_next:
                    self.count += 1
                    self.rec_inv_sqrt = newton_step(self.count, self.rec_inv_sqrt)
                    self.drops.append((now, p))
                    p = fifo.pop()
                    if not self._should_drop(fifo, p, now):
                        self.dropping = False
                    else:
                        self.drop_next = self._control_law(self.drop_next)
        elif drop:
            self.drops.append((now, p))
            p = fifo.pop()
            self._should_drop(fifo, p, now)
            self.dropping = True
            delta = self.count - self.lastcount
            if delta > 1 and now - self.drop_next < 16 * INTERVAL_NS:
                self.count = delta
                self.rec_inv_sqrt = newton_step(self.count, self.rec_inv_sqrt)
            else:
                self.count, self.rec_inv_sqrt = 1, 0xFFFF
            self.lastcount = self.count
            self.drop_next = self._control_law(now)
        return p


def replay(arrivals_ns: list[int], size: int | list[int] = 1500, ns_per_byte: int = 800,
           exact: bool = False) -> list[tuple[int, int]]:
    """Drops of a FIFO served at ns_per_byte with CoDel (target 5 ms, interval 100 ms): one
    (dequeue instant, index of the packet in `arrivals_ns`) each. `size`: every packet's wire
    bytes, or one per packet; arrivals in order."""
    sizes = size if isinstance(size, list) else [size] * len(arrivals_ns)
    fifo, codel = Fifo(sizes), Codel(arrivals_ns, exact)
    i, free = 0, 0
    while i < len(arrivals_ns) or fifo.queue:
        now = free if fifo.queue else max(free, arrivals_ns[i])
        while i < len(arrivals_ns) and arrivals_ns[i] <= now:
            fifo.push(i)
            i += 1
        if (p := codel.dequeue(fifo, now)) is not None:
            free = now + sizes[p] * ns_per_byte
    return codel.drops


# Mahimahi's link (LinkQueue): one opportunity carries PACKET_SIZE bytes; a frame counts its IP
# packet plus the 4-byte header of Mahimahi's TUN frames (wire - 14 + 4), at least 1.
OPPORTUNITY_BYTES, FRAME_ADJUST = 1504, 10


def replay_trace(arrivals_ns: list[int], sizes: list[int], opportunities_ms: list[int], start_ns: int,
                 exact: bool = False, ahead: bool = False) -> list[tuple[int, int]]:
    """Drops of Mahimahi's trace-driven link queue (mm-link, LinkQueue::use_a_delivery_opportunity)
    managed by CoDel, written as mm-link runs it: at each opportunity (the trace's ms timestamps
    from `start_ns`, repeating every last timestamp), the packets that arrived by then are queued,
    and the opportunity's 1504 bytes go first to the packet in transit, then to packets CoDel's
    dequeue hands out at that instant, one after another, until the bytes or the queue run out
    (unused bytes are lost; a packet that does not fit goes on in the next opportunity). `sizes`:
    wire bytes (CoDel's backlog rule counts them, as on the rate link; `ahead`: see Codel). One
    (dequeue instant, index) per drop."""
    period_ns = opportunities_ms[-1] * MS
    fifo, codel = Fifo(sizes), Codel(arrivals_ns, exact, ahead)
    i, in_transit, cycle = 0, 0, start_ns
    while i < len(arrivals_ns) or fifo.queue or in_transit:
        for at_ms in opportunities_ms:
            now = cycle + at_ms * MS
            while i < len(arrivals_ns) and arrivals_ns[i] <= now:
                fifo.push(i)
                i += 1
            left = OPPORTUNITY_BYTES
            while left:
                if not in_transit:
                    p = codel.dequeue(fifo, now)
                    if p is None:
                        break
                    in_transit = min(max(sizes[p] - FRAME_ADJUST, 1), OPPORTUNITY_BYTES)
                sent = min(left, in_transit)
                in_transit -= sent
                left -= sent
                if not in_transit:
                    fifo.departed(p, now)
        cycle += period_ns
    return codel.drops


def unit_test_pattern(tail: bool = True) -> list[int]:
    """The unit test's arrivals (1500-byte packets): one per ms for 400 ms, then (`tail`) one per
    3 ms to 697 ms, then one per ms from 900 ms for 300 ms."""
    a = [i * MS for i in range(400)]
    if tail:
        a += [400 * MS + i * 3 * MS for i in range(1, 100)]
    return a + [900 * MS + i * MS for i in range(300)]


if __name__ == "__main__":
    # --no-tail: phase A ends abruptly, where the switch's bytes-ahead backlog rule departs from
    # Linux's bytes-behind one (see the unit test's comment).
    args = sys.argv[1:]
    pattern = unit_test_pattern(tail="--no-tail" not in args)
    for now, i in replay(pattern, exact="--exact" in args):
        print((now, pattern[i] // MS))
