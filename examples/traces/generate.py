"""Write the synthetic Mahimahi traces of this directory (`p4netem trace run --downlink ...`).

Each line of a trace is a millisecond timestamp at which the link can deliver one 1500-byte
packet (12 kbit); the trace repeats with the period of its last timestamp. One opportunity per
millisecond is 12 Mbit/s. The traces are generated, seeded, so running this again writes the
same files:

- constant-6mbit.trace: 6 Mbit/s (one opportunity every 2 ms) for 2 s;
- steps-12-3mbit.trace: 12 Mbit/s for 2 s, then 3 Mbit/s for 2 s (a cell edge, and back);
- walk-cellular.trace: 10 s of a rate that random-walks between 1 and 18 Mbit/s every 100 ms,
  with opportunities placed at random within each millisecond budget (bursty, like a cell).

usage: .venv/bin/python examples/traces/generate.py [--out DIR]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

MS_PER_S = 1000
OPPORTUNITY_BITS = 1500 * 8


def paced(rate_bps: float, start_ms: int, length_ms: int) -> list[int]:
    """Opportunities at `rate_bps`, evenly paced over [start, start + length) ms (a credit
    accumulates each millisecond and pays out whole opportunities)."""
    out, credit = [], 0.0
    per_ms = rate_bps / OPPORTUNITY_BITS / MS_PER_S
    for ms in range(start_ms + 1, start_ms + length_ms + 1):
        credit += per_ms
        while credit >= 1:
            out.append(ms)
            credit -= 1
    return out


def walk(seed: int, seconds: int) -> list[int]:
    rng = random.Random(seed)
    rate, out = 8e6, []
    for step in range(seconds * 10):
        rate = min(18e6, max(1e6, rate * rng.choice((0.6, 0.8, 1.0, 1.25, 1.6))))
        start = step * 100
        # The 100 ms's opportunities, each at a random millisecond: bursts and gaps.
        n = round(rate * 0.1 / OPPORTUNITY_BITS)
        out += sorted(start + 1 + rng.randrange(100) for _ in range(n))
    if out[-1] != seconds * MS_PER_S:
        out.append(seconds * MS_PER_S)  # the period is the last timestamp: make it the whole 10 s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    traces = {
        "constant-6mbit.trace": paced(6e6, 0, 2000),
        "steps-12-3mbit.trace": paced(12e6, 0, 2000) + paced(3e6, 2000, 2000),
        "walk-cellular.trace": walk(seed=2026, seconds=10),
    }
    for name, stamps in traces.items():
        (args.out / name).write_text("".join(f"{t}\n" for t in stamps))
        print(f"{args.out / name}: {len(stamps)} opportunities over {stamps[-1]} ms")


if __name__ == "__main__":
    main()
