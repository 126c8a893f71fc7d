"""bench/run.py --trace-sched (bench/sched_trace.py): from `perf script` lines, which CPU the
data-plane thread was on, the longest stretch in which that CPU logged nothing while a late packet
waited, and which late packets such a stretch accounts for (long and covering most of the
lateness); events on another CPU do not break a silence."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sched_trace  # noqa: E402

US = 1_000
OFFSET = 1_700_000_000 * 1_000_000_000  # realtime - monotonic


def _line(cpu: int, t_us: int, event: str, text: str) -> str:
    t = 5_000_000_000 + t_us * US  # monotonic ns
    return f"[{cpu:03d}] {t // 1_000_000_000}.{t % 1_000_000_000:09d}: {event}: {text}"


SWITCH_IN = "prev_comm=python prev_pid=9 prev_prio=120 prev_state=R ==> next_comm=p4netem-dp next_pid=7 next_prio=89"
SWITCH_OUT = "prev_comm=p4netem-dp prev_pid=7 prev_prio=89 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"
LINES = [
    "some header line perf prints",
    _line(1, 0, "sched:sched_switch", SWITCH_IN),
    _line(1, 100, "irq:softirq_entry", "vec=3 [action=NET_RX]"),
    _line(1, 150, "sched:sched_switch", SWITCH_OUT),
    # CPU 1 logs nothing from 150 us to 5150 us; CPU 0 goes on.
    *[_line(0, t, "irq:softirq_entry", "vec=3 [action=NET_RX]") for t in range(200, 5200, 240)],
    _line(1, 5150, "irq:softirq_entry", "vec=7 [action=SCHED]"),
    _line(1, 5200, "sched:sched_switch", SWITCH_IN.replace("python", "swapper/1")),
    _line(1, 5210, "irq:softirq_entry", "vec=3 [action=NET_RX]"),
    _line(1, 5300, "irq:softirq_entry", "vec=3 [action=NET_RX]"),
]


def _real(t_us: int) -> int:
    return OFFSET + 5_000_000_000 + t_us * US


def test_parse_finds_the_thread_and_every_cpu():
    tr = sched_trace.parse(LINES, OFFSET, lost=0)
    assert tr.count == len(LINES) - 1
    assert [c for _, c, _ in tr.dp_switches] == [1, 1, 1]
    assert [i for *_, i in tr.dp_switches] == [True, False, True]
    assert tr.dp_cpu(_real(1000) - OFFSET) == 1


def test_a_packet_late_through_the_silence_is_held_and_one_late_elsewhere_is_not():
    tr = sched_trace.parse(LINES, OFFSET)
    # Due at 1000 us, arrived at 5210 us: the silence 1000..5150 covers 98 % of the 4.21 ms.
    assert tr.silent_ns(_real(1000), _real(5210)) == 4150 * US
    assert tr.held(_real(1000), _real(5210))
    # Due at 5205, arrived at 5290: 85 us late, the CPU busy (an event at 5210): not held.
    assert tr.silent_ns(_real(5205), _real(5290)) == 80 * US
    assert not tr.held(_real(5205), _real(5290))
    # Due at 20 us, arrived at 60 us: silent throughout, but 40 us is what a spinning loop looks like.
    assert tr.silent_ns(_real(20), _real(60)) == 40 * US
    assert not tr.held(_real(20), _real(60))
    # An event inside the stretch splits it: 2000..5150 covers 75 % of the 4.21 ms, under COVER.
    split = sched_trace.parse(LINES + [_line(1, 2000, "irq:softirq_entry", "vec=1 [action=TIMER]")], OFFSET)
    assert split.silent_ns(_real(1000), _real(5210)) == 3150 * US
    assert not split.held(_real(1000), _real(5210))


def test_summary_counts_what_it_can_attribute_and_what_it_cannot():
    tr = sched_trace.parse(LINES, OFFSET, lost=3)
    s = sched_trace.summary(tr, [(_real(1000), _real(5210)), (_real(5205), _real(5290)), (_real(20), _real(60))])
    assert s["late_at_least_silent_min"] == 1 and s["held_by_a_silent_cpu"] == 1
    assert s["silent_stretch_ms"] == [4.15, 4.15]
    assert s["late_below_silent_min"] == 2 and s["lost_events"] == 3
