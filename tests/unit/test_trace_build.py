"""What `trace run` builds from a trace in short windows, pinned, and how long that takes.

100 s of a trace in 1 ms windows took 7.5 s to build before the first change (the looped trace
was counted with Fraction comparisons, each window twice, and every `set` step validated a whole
profile). The windows are now counted with integers and each distinct profile is validated once
per compile: the steps and events below must stay exactly what they were."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from p4netem.control.timeline import Timeline, TimelineError, modify_profile
from p4netem.control.trace import FRAME_BYTES, load_trace, parse_trace, trace_timeline, window_rates
from p4netem.profiles import builtin_profile

MS = 1_000_000
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def brute_count(ts: list[int], start_ns: int, end_ns: int) -> int:
    """Opportunities in [start, end) of the looped trace, listed loop by loop (mm-link plays line i of
    loop m at (t_i + m * period) ms)."""
    period, n, m = ts[-1], 0, 0
    while m * period * MS < end_ns:
        n += sum(1 for t in ts if start_ns <= (t + m * period) * MS < end_ns)
        m += 1
    return n


def test_counts_are_the_looped_opportunities() -> None:
    rng = random.Random(51)
    for _ in range(200):
        ts = sorted(rng.randrange(10) for _ in range(rng.randrange(1, 12)))
        if ts[-1] == 0:
            ts[-1] = rng.randrange(1, 10)
        trace = parse_trace("\n".join(map(str, ts)) + "\n")
        for _ in range(20):
            a = rng.randrange(0, 50 * MS, rng.choice((MS, MS // 4, 1)))
            b = a + rng.randrange(0, 20 * MS, rng.choice((MS, MS // 3, 7)))
            assert trace.count(a, b) == brute_count(ts, a, b), (ts, a, b)


def test_a_small_trace_in_1ms_windows_builds_these_steps() -> None:
    # Uplink: period 4 ms, so loop 1's line "0" and loop 0's line "4" are both at 4 ms; 2 ms and 6 ms
    # are empty and merge into the next window. Downlink: 3 opportunities at 2 ms of each 2 ms loop:
    # every odd window is empty and merges forward, the trailing one (9..10 ms) back into the last.
    up, down = parse_trace("0\n1\n3\n3\n4\n"), parse_trace("2\n2\n2\n")
    one = FRAME_BYTES * 8 * 1000  # one opportunity per ms: 12.112 Mbit/s
    assert window_rates(up, MS, 10 * MS) == [(0, one), (4 * MS, 2 * one), (5 * MS, one), (8 * MS, 2 * one),
                                             (9 * MS, one)]
    assert window_rates(down, MS, 10 * MS) == [(0, one), (3 * MS, 3 * one // 2), (7 * MS, one)]
    timeline = trace_timeline(up, down, window_ns=MS, duration_ns=10 * MS)
    assert [(s.action, None if s.at is None else int(s.at), s.set or s.wait) for s in timeline.steps] == [
        ("apply", None, None),
        ("set", 3 * MS, {"downlink.rate": "18.168Mbit"}),
        ("set", 4 * MS, {"uplink.rate": "24.224Mbit"}),
        ("set", 5 * MS, {"uplink.rate": "12.112Mbit"}),
        ("set", 7 * MS, {"downlink.rate": "12.112Mbit"}),
        ("set", 8 * MS, {"uplink.rate": "24.224Mbit"}),
        ("set", 9 * MS, {"uplink.rate": "12.112Mbit"}),
        ("wait", 10 * MS - 1, 1)]
    events = timeline.compile(lambda name: timeline.profiles[0])
    assert [(e.at_ns, e.action, e.in_place, str(e.profile.uplink.rate), str(e.profile.downlink.rate))
            for e in events] == [
        (0, "apply trace", False, "12.112Mbit", "12.112Mbit"),
        (3 * MS, "set downlink.rate=18.168Mbit", True, "12.112Mbit", "18.168Mbit"),
        (4 * MS, "set uplink.rate=24.224Mbit", True, "24.224Mbit", "18.168Mbit"),
        (5 * MS, "set uplink.rate=12.112Mbit", True, "12.112Mbit", "18.168Mbit"),
        (7 * MS, "set downlink.rate=12.112Mbit", True, "12.112Mbit", "12.112Mbit"),
        (8 * MS, "set uplink.rate=24.224Mbit", True, "24.224Mbit", "12.112Mbit"),
        (9 * MS, "set uplink.rate=12.112Mbit", True, "12.112Mbit", "12.112Mbit")]
    # The profile of 9 ms is that of 7 ms (both rates 12.112Mbit), validated once.
    assert events[6].profile is events[4].profile


def test_compiled_profiles_are_those_of_one_modify_profile_per_step() -> None:
    """Each event's profile is what modify_profile gives step after step, whatever compile shares."""
    walk = load_trace(TRACES / "walk-cellular.trace")
    timeline = trace_timeline(walk, load_trace(TRACES / "steps-12-3mbit.trace"), window_ns=MS, duration_ns=3000 * MS,
                              base=builtin_profile("lte"))
    events = timeline.compile(lambda name: timeline.profiles[0])
    assert len(events) > 1000
    current = timeline.profiles[0]
    for event, step in zip(events[1:], timeline.steps[1:]):
        current = modify_profile(current, step.set)
        assert event.profile == current and event.profile.model_dump() == current.model_dump()
        assert event.profile.uplink.delay == builtin_profile("lte").uplink.delay
    assert len({id(e.profile) for e in events}) < len(events) / 2  # validated once each, then shared


def test_a_set_memo_keeps_types_and_problems_apart() -> None:
    # `true` equals 1 in Python; as a loss it is refused where 1 (percent) is taken, each time.
    timeline = Timeline.parse({"profiles": [{"name": "p", "both": {"rate": "1Mbit"}}], "steps": [
        {"apply": "p"}, {"at": "1s", "set": {"loss": 1}}, {"at": "2s", "set": {"loss": True}},
        {"at": "3s", "set": {"loss": 1}}, {"at": "4s", "set": {"loss": True}}]})
    with pytest.raises(TimelineError) as info:
        timeline.compile(lambda name: timeline.profiles[0])
    assert [str(p) for p in info.value.problems] == ["steps[2].set.loss: True is not a percentage; allowed 0..100%",
                                                     "steps[4].set.loss: True is not a percentage; allowed 0..100%"]


def test_a_wait_of_0s_is_a_wait() -> None:
    # Duration(0) == False: the step's action was looked up by equality and it had none (StopIteration).
    timeline = Timeline.parse({"steps": [{"apply": "lte"}, {"wait": "0s"}, {"at": "1s", "set": {"delay": "5ms"}}]})
    assert [s.action for s in timeline.steps] == ["apply", "wait", "set"]
    assert timeline.duration_ns() == 10**9
    assert [e.at_ns for e in timeline.compile(lambda name: builtin_profile(name))] == [0, 10**9]


def test_100s_of_1ms_windows_build_in_seconds_not_tens() -> None:
    """A 100 s trace of 1 to 3 opportunities per millisecond, both ways, in 1 ms windows (62782
    changes): about 1 s of CPU to build and compile here (2 cores, other suites running), 5.2 s
    before. CPU time, so that a busy machine's waiting does not count; the bound is 3x the one and
    0.6x the other."""
    rng = random.Random(51)
    trace = parse_trace("".join(f"{ms}\n" * rng.choice((1, 1, 2, 3)) for ms in range(1, 100_001)))
    start = time.process_time()
    timeline = trace_timeline(trace, trace, window_ns=MS, duration_ns=100_000 * MS)
    events = timeline.compile(lambda name: timeline.profiles[0])
    spent = time.process_time() - start
    assert len(events) == 62_782
    assert {"12.112Mbit", "24.224Mbit", "36.336Mbit"} <= {str(e.profile.downlink.rate) for e in events}
    assert spent < 3.0, f"{spent:.2f} s of CPU to build and compile 100 s of 1 ms windows"
