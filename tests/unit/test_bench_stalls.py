"""Which packets a watched host stall may have held (HostStalls.may_have_held, used by the bench's
slot and delay steps): a packet is held when its [due, arrival] interval meets the span in which
the watcher's CPU may have stopped (the late wake-up's last period plus its lateness); and the
step's JSON summary of the stalls (bench/hoststats.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import hoststats  # noqa: E402

from p4netem.lab.hoststall import HostStalls, Stall  # noqa: E402

MS = 1_000_000
P = hoststats.WATCH_PERIOD_NS


def test_a_packet_is_held_only_by_a_stall_that_meets_its_interval() -> None:
    # A 6 ms late wake-up at t = 100 ms: the CPU stopped somewhere in [100 - 6 - 5, 100] ms.
    watch = hoststats.watch_stalls()
    watch.stalls = [Stall(cpu=0, late_ns=6 * MS, at_ns=0, at_real_ns=100 * MS)]
    intervals = [
        (95 * MS, 101 * MS),  # due inside the window, arrived after it: held
        (88 * MS, 89 * MS + 1),  # ends just inside the window's start (89 ms): held
        (80 * MS, 89 * MS - 1),  # over before the window: not held
        (100 * MS + 1, 102 * MS),  # due after the wake-up: not held
    ]
    assert watch.may_have_held(intervals) == [True, True, False, False]
    assert 100 * MS - 6 * MS - P == 89 * MS


def test_no_stalls_hold_nothing_and_the_summary_lists_the_longest_first() -> None:
    assert HostStalls(period_ns=P).may_have_held([(0, 10 * MS)]) == [False]

    class Watched:
        wakes = 400
        stalls = [Stall(1, 2 * MS, 0, 3_000 * MS), Stall(0, 7 * MS, 0, 1_500 * MS)]
        worst_ns = 7 * MS

    s = hoststats.stalls_summary(Watched(), t0_real_ns=1_000 * MS)
    assert s["over_1ms"] == 2 and s["worst_ms"] == 7.0
    assert s["longest"] == [[7.0, 0, 0.5], [2.0, 1, 2.0]]
