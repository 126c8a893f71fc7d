"""CoDel's drop schedule on a FIFO link, replayed step by step from RFC 8289's pseudocode with
Linux's arithmetic (include/net/codel_impl.h): the reference for the switch's unit test
(dataplane/src/stage/rate.rs, codel_drop_schedule_matches_the_rfc_pseudocode_with_linux_arithmetic)
and for bench/aqm.py, which replays the arrivals it captured at the switch's port through it.

    python bench/codel_reference.py [--exact] [--no-tail]   the unit test's pattern: prints
                                                             (dequeue instant ns, arrival ms) per drop

Independent of the switch's code, which decides each packet's fate when it arrives (its dequeue
instant is known then): here the link pulls packets at their real dequeue instants, as a qdisc's
dequeue does, with the RFC's drop loop (a dropped packet takes no link time; the next one is
looked at in the same instant) and Linux's backlog test (bytes left after the dequeued packet).
`--exact` uses the RFC's exact interval / sqrt(count) instead of Linux's 16-bit Newton steps.
Times in ns (Linux keeps 1.024 us units).
"""

from __future__ import annotations

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


def replay(arrivals_ns: list[int], size: int | list[int] = 1500, ns_per_byte: int = 800,
           exact: bool = False) -> list[tuple[int, int]]:
    """Drops of a FIFO served at ns_per_byte with CoDel (target 5 ms, interval 100 ms): one
    (dequeue instant, index of the packet in `arrivals_ns`) each. `size`: every packet's wire
    bytes, or one per packet; arrivals in order."""
    sizes = size if isinstance(size, list) else [size] * len(arrivals_ns)
    queue: list[int] = []  # indices of waiting packets, in arrival order
    backlog = 0
    v = {"first_above": 0, "drop_next": 0, "count": 0, "lastcount": 0, "rec_inv_sqrt": 0, "dropping": False}
    drops: list[tuple[int, int]] = []

    def dequeue() -> int | None:
        nonlocal backlog
        if not queue:
            return None
        backlog -= sizes[queue[0]]
        return queue.pop(0)

    def should_drop(i: int | None, now: int) -> bool:
        if i is None:
            v["first_above"] = 0
            return False
        if now - arrivals_ns[i] < TARGET_NS or backlog <= MTU:
            v["first_above"] = 0
            return False
        if v["first_above"] == 0:
            v["first_above"] = now + INTERVAL_NS
            return False
        return now > v["first_above"]

    def control_law(t: int) -> int:
        if exact:
            return t + int(INTERVAL_NS / math.sqrt(v["count"]))
        return t + ((INTERVAL_NS * (v["rec_inv_sqrt"] << 16)) >> 32)

    def codel_dequeue(now: int) -> int | None:
        p = dequeue()
        if p is None:
            v["dropping"] = False
            return None
        drop = should_drop(p, now)
        if v["dropping"]:
            if not drop:
                v["dropping"] = False
            else:
                while v["dropping"] and now >= v["drop_next"]:
                    v["count"] += 1
                    v["rec_inv_sqrt"] = newton_step(v["count"], v["rec_inv_sqrt"])
                    drops.append((now, p))
                    p = dequeue()
                    if not should_drop(p, now):
                        v["dropping"] = False
                    else:
                        v["drop_next"] = control_law(v["drop_next"])
        elif drop:
            drops.append((now, p))
            p = dequeue()
            should_drop(p, now)
            v["dropping"] = True
            delta = v["count"] - v["lastcount"]
            if delta > 1 and now - v["drop_next"] < 16 * INTERVAL_NS:
                v["count"] = delta
                v["rec_inv_sqrt"] = newton_step(v["count"], v["rec_inv_sqrt"])
            else:
                v["count"], v["rec_inv_sqrt"] = 1, 0xFFFF
            v["lastcount"] = v["count"]
            v["drop_next"] = control_law(now)
        return p

    i, free = 0, 0
    while i < len(arrivals_ns) or queue:
        now = free if queue else max(free, arrivals_ns[i])
        while i < len(arrivals_ns) and arrivals_ns[i] <= now:
            queue.append(i)
            backlog += sizes[i]
            i += 1
        if (p := codel_dequeue(now)) is not None:
            free = now + sizes[p] * ns_per_byte
    return drops


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
