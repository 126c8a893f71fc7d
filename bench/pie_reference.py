"""PIE as /work/notes/pie-spec.md (docs/pipeline-contract.md) writes it, on a FIFO of a fixed rate:
replayed arrivals in, each packet's fate out. Written from the spec's pseudo-code alone (not from
the data plane's code), in Python integers, so that bench/pie.py can set what the switch measured
beside what the contract predicts for the same arrivals. The random draws are Python's, so single
drops differ from the switch's; the delays' and the drop rate's statistics are what compare.
"""
from __future__ import annotations

import collections
import random
from dataclasses import dataclass

MAX = 2**56 - 1
P_10, P_20 = MAX // 10, MAX // 5
ACCU_LOW, ACCU_HIGH = (MAX // 100) * 85, (MAX // 2) * 17
STEP_2, CLAMP_2 = MAX // 50, (MAX // 100) * 2
QDELAY_BOOST = 250_000_000
TWO_MTU = 2 * 1514
MAX_CATCHUP = 4096


@dataclass
class Params:
    target_ns: int = 15_000_000
    tupdate_ns: int = 15_000_000
    alpha: int = 9_007_199  # 0.125 Hz
    beta: int = 90_071_992  # 1.25 Hz
    max_burst_ns: int = 150_000_000
    ecn: bool = False


@dataclass
class Fate:
    delay_ns: int | None  # arrival to the end of its transmission; None: dropped
    reason: str | None = None  # "aqm_drop" or "queue_full"
    marked: bool = False
    prob: float = 0.0  # PIE's probability at the decision


def replay(arrivals_ns: list[int], wire_bytes: list[int], ns_per_byte: float, p: Params = Params(),
           limit_pkts: int = 1000, ect: list[bool] | None = None, seed: int = 1) -> list[Fate]:
    """Each packet's fate, the arrivals in order."""
    rng = random.Random(seed)
    prob = qold = burst = accu = nxt = 0
    free = 0  # departure (end of transmission) of the last admitted packet
    queued: collections.deque[int] = collections.deque()  # departures of the admitted packets

    def tick(t: int) -> bool:
        nonlocal prob, qold, burst, accu
        q = free - t if free > t else 0
        a, b = p.alpha, p.beta
        if prob < P_10:
            a >>= 1
            b >>= 1
            for d in (100, 1000, 10**4, 10**5, 10**6):
                if prob < MAX // d:
                    a >>= 2
                    b >>= 2
        inc, dec = a * q + b * q, a * p.target_ns + b * qold
        up = inc >= dec
        mag = inc - dec if up else dec - inc
        if up and mag > STEP_2 and prob >= P_10:
            mag = CLAMP_2
        delta = mag if up else -mag
        if q > QDELAY_BOOST:
            delta += STEP_2
        update_prob = True
        if delta >= 0:
            new = prob + delta
            if new > MAX:
                new, update_prob = MAX, False
        else:
            new = 0 if -delta > prob else prob + delta
        if q == 0 and qold == 0 and update_prob:
            new -= new >> 6
        burst = burst - p.tupdate_ns if burst > p.tupdate_ns else 0
        if q < p.target_ns // 2 and qold < p.target_ns // 2 and new == 0:
            burst, accu = p.max_burst_ns, 0
        stop = new == 0 and q == 0 and qold == 0
        qold, prob = q, new
        return stop

    out = []
    for i, (t, size) in enumerate(zip(arrivals_ns, wire_bytes)):
        n = 0
        while p.tupdate_ns:
            if nxt == 0:
                nxt, burst = t + p.tupdate_ns, p.max_burst_ns
                break
            if nxt > t:
                break
            if n == MAX_CATCHUP:
                nxt = t + p.tupdate_ns
                break
            stop = tick(nxt)
            n += 1
            nxt = 0 if stop else nxt + p.tupdate_ns
        while queued and queued[0] <= t:
            queued.popleft()
        now_prob = prob / 2**56
        if len(queued) >= limit_pkts:  # the tail-drop limit first, as Linux
            accu = 0
            out.append(Fate(None, "queue_full", prob=now_prob))
            continue
        q = free - t if free > t else 0
        backlog = q / ns_per_byte
        drop = False
        if not (burst > 0 or (qold < p.target_ns // 2 and prob < P_20) or backlog < TWO_MTU):
            accu = 0 if prob == 0 else accu + prob
            if accu >= ACCU_HIGH:
                drop = True
            elif accu >= ACCU_LOW and rng.getrandbits(56) < prob:
                accu, drop = 0, True
        marked = False
        if drop:
            if p.ecn and prob <= P_10 and (ect is None or ect[i]):
                marked = True
            else:
                accu = 0
                out.append(Fate(None, "aqm_drop", prob=now_prob))
                continue
        free = max(free, t) + round(size * ns_per_byte)
        queued.append(free)
        out.append(Fate(free - t, None, marked, now_prob))
    return out
