"""Mahimahi traces (p4netem.control.trace): reading, looping, windows to rates, the timeline
they become, and the shipped synthetic traces being what their generator writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from p4netem.control.trace import (FRAME_BYTES, TraceError, load_trace, parse_trace, trace_timeline,
                                   window_rates)

MS = 1_000_000
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def test_opportunities_loop_like_mm_link() -> None:
    trace = parse_trace("0\n0\n1\n2\n3\n4\n")
    assert trace.period_ms == 4
    assert trace.count(0, 4 * MS) == 5  # 0, 0, 1, 2, 3
    assert trace.count(4 * MS, 5 * MS) == 3  # line "4" of loop 0 and both 0s of loop 1
    assert trace.count(0, 8 * MS) == 11  # 6 lines of loop 0, 5 of loop 1 before 8 ms
    assert trace.count(0, 400 * MS) == 100 * 6 - 1 + 0  # every line of 100 loops but loop 99's "4" (at 400)
    assert trace.count(3 * MS, 3 * MS) == 0
    assert trace.mean_rate_bps == 6 * FRAME_BYTES * 8 / 0.004


def test_windows_become_rates_and_empty_windows_merge_forward() -> None:
    one_per_ms = parse_trace("\n".join(str(i) for i in range(1, 1001)))
    rates = window_rates(one_per_ms, 20 * MS, 2000 * MS)
    per_window = 20 * FRAME_BYTES * 8 / 0.02
    assert rates[0] == (0, round(19 * FRAME_BYTES * 8 / 0.02))  # ms 1..19: the opportunity at 20 is window 1's
    assert rates[1:] == [(20 * MS, round(per_window))]  # then constant: one entry
    sparse = parse_trace("5\n10\n100\n")
    assert window_rates(sparse, 20 * MS, 120 * MS) == [
        (0, round(2 * FRAME_BYTES * 8 / 0.02)),
        # 20..100 ms are empty: merged into 100..120, which has loop 0's 100 and loop 1's 5 and 10.
        (20 * MS, round(3 * FRAME_BYTES * 8 / 0.1))]


def test_trace_timeline_sets_rates_in_place_at_the_window_times() -> None:
    steps = parse_trace("\n".join([str(i) for i in range(1, 1001)] + [str(1000 + 4 * i) for i in range(1, 251)]))
    timeline = trace_timeline(None, steps, window_ns=100 * MS, duration_ns=2000 * MS)
    events = timeline.compile(lambda name: timeline.profiles[0])
    assert timeline.duration_ns() == 2000 * MS
    # 99 opportunities in 0..100 ms (1..99), then 100 per 100 ms, then 25 (one every 4 ms): as
    # 1514-byte frames.
    assert [(e.at_ns // MS, e.in_place) for e in events] == [(0, False), (100, True), (1000, True)]
    assert [str(e.profile.downlink.rate) for e in events] == ["11.99088Mbit", "12.112Mbit", "3.028Mbit"]
    assert all(e.profile.uplink.rate.unlimited for e in events)
    switched = trace_timeline(steps, steps, window_ns=100 * MS, duration_ns=2000 * MS, set_mode="switch")
    events = switched.compile(lambda name: switched.profiles[0])
    assert not any(e.in_place for e in events) and events[1].action == \
        "set uplink.rate=12.112Mbit, downlink.rate=12.112Mbit"


def test_bad_traces_name_the_line(tmp_path) -> None:
    with pytest.raises(TraceError) as info:
        parse_trace("1\n2\nx\n1\n-3\n", "t.trace")
    assert str(info.value) == ("t.trace: 3 problems\n  line 3: 'x' is not a whole number of milliseconds\n"
                               "  line 4: 1 is before the line above (2): timestamps must not decrease\n"
                               "  line 5: -3 is negative")
    with pytest.raises(TraceError, match="no delivery opportunities"):
        parse_trace("")
    # mm-link's strtol takes digits only: Python's int() would read "1_0" as 10 and "٣" as 3.
    with pytest.raises(TraceError) as info:
        parse_trace("1\n1_0\n\u0663\n4\n", "u.trace")
    assert "line 2: '1_0' is not a whole number" in str(info.value) and "line 3: '\u0663'" in str(info.value)
    assert parse_trace("1\r\n+2\r\n").opportunities_ms == (1, 2)  # CRLF lines, a sign as strtol reads it
    with pytest.raises(TraceError, match="period\\) is 0 ms"):
        parse_trace("0\n0\n")
    with pytest.raises(TraceError, match="no trace"):
        trace_timeline(None, None, window_ns=MS, duration_ns=MS)


def test_an_empty_line_is_refused_as_mm_link_refuses_it() -> None:
    # mm-link (LinkQueue's constructor, src/frontend/link_queue.cc): `getline` lines, `if ( line.empty() )
    # throw ... "invalid empty line"`; a line of spaces fails its myatoi (strtol reads no digits).
    with pytest.raises(TraceError) as info:
        parse_trace("1\n\n2\n \n3\n", "gap.trace")
    assert str(info.value) == (
        "gap.trace: 2 problems\n"
        "  line 2: is empty: mm-link refuses it (\"invalid empty line\"); remove it\n"
        "  line 4: is blank: mm-link refuses it (spaces only: its strtol finds no number); remove it")
    # At the end of the file: the newline that ends the last line is not an empty line; a second one is.
    assert parse_trace("1\n2\n").opportunities_ms == parse_trace("1\n2").opportunities_ms == (1, 2)
    with pytest.raises(TraceError) as info:
        parse_trace("1\n2\n\n", "end.trace")
    assert str(info.value) == ('end.trace: line 3: is empty: mm-link refuses it ("invalid empty line"); remove it '
                               "(the file may end with one newline, not with an empty line)")
    with pytest.raises(TraceError, match="line 2: is empty"):
        parse_trace("1\r\n\r\n2\r\n")  # CRLF lines: the empty one still named
    with pytest.raises(TraceError, match="line 1: is empty"):
        parse_trace("\n")


def test_shipped_traces_are_what_the_generator_writes(tmp_path) -> None:
    subprocess.run([sys.executable, str(TRACES / "generate.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    shipped = sorted(p.name for p in TRACES.glob("*.trace"))
    assert shipped == sorted(p.name for p in tmp_path.glob("*.trace")) and len(shipped) == 3
    for name in shipped:
        assert (tmp_path / name).read_text() == (TRACES / name).read_text(), name
        load_trace(TRACES / name)


def test_rates_no_profile_takes_are_named_by_window_before_anything_runs(tmp_path) -> None:
    """A window whose rate is below 1kbit or above 100Gbit (LinkRate) cannot be played: `trace
    check` said "ok, rates 1kbit..1kbit" for a sparse trace (the display clamped 403 bit/s to
    1kbit) while `trace run` then failed with a bare `downlink.rate: 403bit out of range`. Now
    window_rates names each such window, so check and run refuse it alike."""
    from p4netem.profiles import Profile, ProfileError

    sparse = parse_trace("30000\n", "sparse.trace")  # one opportunity every 30 s: 404 bit/s
    with pytest.raises(TraceError) as info:
        window_rates(sparse, 10_000 * MS, 200_000 * MS)
    text = str(info.value)
    assert text.startswith("sparse.trace: 4 problems"), text
    assert "1 delivery opportunity in 0s..40s is 303bit/s, below the lowest rate a profile takes (1kbit)" in text
    assert "and 3 more windows out of range" in text
    dense = parse_trace("1\n" * 10_000, "dense.trace")  # 10000 per ms: 121 Gbit/s
    with pytest.raises(TraceError, match=r"200000 delivery opportunities in 20ms..40ms are 121.12Gbit/s, above "
                                         r"the highest rate a profile takes \(100Gbit\)"):
        trace_timeline(None, dense, window_ns=20 * MS, duration_ns=100 * MS)
    assert window_rates(sparse, 10_000 * MS, 200_000 * MS, check=False)[0] == (0, 303)
    # The bounds are the profile's: its lowest and highest rates parse, one bit/s beyond does not.
    for ok in ("1kbit", "100Gbit"):
        Profile.parse({"name": "x", "both": {"rate": ok}})
    for bad in ("999bit", "100000000001bit"):
        with pytest.raises(ProfileError):
            Profile.parse({"name": "x", "both": {"rate": bad}})


def test_trace_check_refuses_what_trace_run_would_and_names_the_window_not_duration(tmp_path) -> None:
    p4netem = Path(sys.executable).parent / "p4netem"
    sparse = tmp_path / "sparse.trace"
    sparse.write_text("30000\n")
    r = subprocess.run([str(p4netem), "trace", "check", "--downlink", str(sparse), "--duration", "60s"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "below the lowest rate a profile takes (1kbit)" in r.stderr, r
    # Rates below 1 kbit/s are shown to the bit/s, not clamped to 1kbit.
    from p4netem.cli.trace_cmd import _kbit

    assert (str(_kbit(403.7)), str(_kbit(5_312_345))) == ("404bit", "5.312Mbit")
    # A trace shorter than the window, no --duration given: the message must not blame --duration.
    short = tmp_path / "short.trace"
    short.write_text("1\n2\n")
    r = subprocess.run([str(p4netem), "trace", "check", "--downlink", str(short)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "error: --window: 20ms is longer than the trace's period 2ms, the default " \
                                 "--duration" in r.stderr, r


def test_a_trace_with_no_opportunity_in_the_run_says_what_is_wrong_with_it(tmp_path) -> None:
    """A one-line trace `60000` (one opportunity at the end of each 60 s period) got "no delivery
    opportunity in the first 60s" from `trace check`, which names neither the trace's rate nor a
    way out; a trace too sparse for any rate is said as a sparse window is (`below the lowest rate`),
    and a denser one whose first opportunity is at the end of the run is told to run longer."""
    p4netem = Path(sys.executable).parent / "p4netem"
    one = tmp_path / "one.trace"
    one.write_text("60000\n")
    r = subprocess.run([str(p4netem), "trace", "check", "--downlink", str(one)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r
    assert "1 delivery opportunity per 60s period (none in 0s..60s, the first is at 60000 ms) is 202bit/s, " \
           "below the lowest rate a profile takes (1kbit)" in r.stderr, r
    assert "trace load" in r.stderr, r
    # 1000 opportunities at 60 s: 202 kbit/s on average, a rate plays it, but not in a run of 0s..60s.
    late = parse_trace("60000\n" * 1000, "late.trace")
    with pytest.raises(TraceError, match=r"late.trace: no delivery opportunity in the run \(none in 0s..60s, "
                                         r"the first is at 60000 ms\): .*longer than 60000 ms \(--duration\)"):
        window_rates(late, 20 * MS, 60_000 * MS)
    assert window_rates(late, 20 * MS, 120_000 * MS)  # a longer run plays it


def test_a_duration_beyond_a_timelines_24h_is_named_as_duration() -> None:
    """`trace check --duration 25h` said ok and `trace run` then failed with 360 problems about
    steps the user never wrote (`steps[8641].at: 86410s out of range 0s..86400s`)."""
    p4netem = Path(sys.executable).parent / "p4netem"
    trace = TRACES / "steps-12-3mbit.trace"
    for command in ("check", "run"):
        r = subprocess.run([str(p4netem), "trace", command, "--downlink", str(trace), "--duration", "25h", "--window",
                            "10s", "-s", "127.0.0.1:1"][: 9 if command == "check" else None],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.strip() == ("error: --duration: 90000s out of range 10s..86400s (a "
                                                          "timeline's steps are at most 24h from its start)"), r
    # 24 h itself plays.
    timeline = trace_timeline(None, load_trace(trace), window_ns=3600 * 10**9, duration_ns=24 * 3600 * 10**9)
    assert timeline.compile(lambda name: timeline.profiles[0]) and timeline.duration_ns() == 24 * 3600 * 10**9
