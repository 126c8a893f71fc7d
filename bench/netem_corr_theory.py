"""netem's correlated random loss as Linux computes it (sch_netem's get_crandom), the reference
of bench/netem_corr.py and of the tests (tests/dataplane/test_correlation.py,
tests/unit/test_correlation_profiles.py).

init_crandom seeds `last` with a uniform 32-bit draw; each packet draws `value` and, with rho =
corr + 1, answer = (value * (2^32 - rho) + last * rho) >> 32, last = answer (u64 arithmetic:
both weights add up to 2^32, so the sum stays below 2^64). A correlation of 0 is the plain draw.
The packet is lost when answer < p, the switch's comparison (netem's `p >= answer` differs at one
value in 2^32). Correlated losses have no closed form for their statistics, so `reference`
simulates whole runs.
"""
from __future__ import annotations

import math
import random

from ge_theory import measure


def losses(p: int, corr: int, n: int, rng: random.Random) -> list[bool]:
    """n outcomes (True = lost) of netem's random loss `p` with correlation `corr` (both 32-bit)."""
    rho = corr + 1
    keep = (1 << 32) - rho
    last = rng.getrandbits(32)
    out = []
    for _ in range(n):
        value = rng.getrandbits(32)
        if corr:
            last = (value * keep + last * rho) >> 32
            assert last >> 32 == 0
        else:
            last = value
        out.append(last < p)
    return out


def reference(p: int, corr: int, n: int, batches: int, seed: int = 20261128) -> dict:
    """Mean and per-run standard deviation of the loss and the mean burst over `batches` runs of n."""
    rng = random.Random(seed)
    runs = [measure(losses(p, corr, n, rng)) for _ in range(batches)]
    out = {}
    for name in ("mean_loss", "mean_burst"):
        xs = [getattr(r, name) for r in runs]
        mean = sum(xs) / len(xs)
        out[name] = (mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)))
    return out
