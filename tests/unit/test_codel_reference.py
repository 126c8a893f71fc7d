"""bench/codel_reference.py, the reference the AQM benchmarks replay captured arrivals through, pinned to
the same numbers as the switch's Rust tests (dataplane/src/stage/rate.rs), so that neither side can
drift alone: CoDel on a 10 Mbit/s FIFO (`replay`), and on Mahimahi's trace-driven link
(`replay_trace`) with Linux's backlog rule and with the switch's; and small packets sharing an
opportunity in the replay's link."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import codel_reference as ref  # noqa: E402

MS = 1_000_000


def test_rate_link_drops_as_the_switchs_unit_test_pattern() -> None:
    # rate.rs codel_drop_schedule_matches_the_rfc_pseudocode_with_linux_arithmetic: 1500-byte packets
    # at 800 ns/byte; the first drops (dequeue instant, arrival ms).
    pattern = ref.unit_test_pattern()
    drops = [(now, pattern[i] // MS) for now, i in ref.replay(pattern)]
    assert drops[:4] == [(130_800_000, 109), (231_600_000, 194), (280_800_000, 236), (337_200_000, 284)]
    assert len(drops) == 15 and drops[-1] == (1_227_600_000, 1179)


def _lcg_arrivals(n: int, period_ms: int) -> list[int]:
    """rate.rs codel_on_a_sparse_trace_...: gaps of 1 ms + (LCG >> 33) mod (2 * period * 0.95 ms)."""
    x, now, out = 12345, 10**9, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        now += MS + (x >> 33) % (2 * period_ms * MS * 95 // 100)
        out.append(now)
    return out


def test_trace_link_drops_as_the_switchs_trace_tests() -> None:
    # codel_manages_a_trace_queue_...: one opportunity per ms, 1514-byte frames at 1.05 per ms, 20 s.
    gap = MS * 100 // 105
    steady = [10**9 + i * gap for i in range(20_000_000_000 // gap)]
    for ahead in (False, True):  # while frames keep arriving the two backlog rules agree
        drops = [i for _, i in ref.replay_trace(steady, [1514] * len(steady), [1], steady[0], ahead=ahead)]
        assert len(drops) == 992 and drops[:6] == [185, 286, 337, 395, 445, 490]
    # codel_on_a_sparse_trace_...: one opportunity per 20 ms: the switch's rule gives the switch's
    # drops; Linux's as many, each two packets earlier.
    sparse = _lcg_arrivals(3000, 20)
    ahead = [i for _, i in ref.replay_trace(sparse, [1514] * 3000, [20], sparse[0], ahead=True)]
    assert (len(ahead), sum(ahead), ahead[:4], ahead[-3:]) == (144, 230_285, [23, 29, 40, 46], [2902, 2908, 2912])
    behind = [i for _, i in ref.replay_trace(sparse, [1514] * 3000, [20], sparse[0])]
    assert len(behind) == 144 and behind[:4] == [21, 27, 38, 44]


def test_small_packets_share_an_opportunity_in_the_replay() -> None:
    # A burst at t0 into a trace of one 1504-byte opportunity per ms, from t0: packet k's first byte
    # goes in opportunity floor(k * size' / 1504) (size' = frame - 10), at t0 + 1 ms + that. CoDel
    # sets first_above at the first dequeue 5 ms after t0 and drops at the first one after 100 ms
    # more: the opportunity at t0 + 106 ms, whose first new packet is k = 105 for 1514-byte frames
    # (one per opportunity) and k = 323 for 500-byte ones (ceil(105 * 1504 / 490): three share one).
    t0 = 10**9
    full = ref.replay_trace([t0] * 300, [1514] * 300, [1], t0)
    small = ref.replay_trace([t0] * 900, [500] * 900, [1], t0)
    assert full[0] == (t0 + 106 * MS, 105)
    assert small[0] == (t0 + 106 * MS, -(-105 * 1504 // 490))
    # 100 ms of backlog or less: CoDel's interval never runs out, nothing is dropped.
    assert ref.replay_trace([t0] * 100, [1514] * 100, [1], t0) == []
