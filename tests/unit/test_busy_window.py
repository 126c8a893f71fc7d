"""The data-plane busy fraction of `/api/health` over a fixed trailing window
(switch_health.BusyWindow), from readings of the switch's (uptime, busy time) on the web server's
clock: the same figure whoever else reads, over the window or a little more, since the switch's
start for a young switch or a first read, and a switch restart (its start moved) starts anew.
The real switch and web server: tests/appliance/test_switch_health.py."""

from __future__ import annotations

from p4netem.switch_health import BusyWindow

START = 1000.0  # the switch's start on the web server's monotonic clock


def test_two_callers_alternating_see_the_window_not_each_others_sliver() -> None:
    """A steady 25 % load, read by two callers 5 ms apart every 0.5 s: every answer is over 10 s to
    10.5 s (the old "since the previous call" was over 5 ms for the second caller) and both callers'
    figures are the load."""
    w = BusyWindow()
    answers = []
    for i in range(100):
        for dt in (0.0, 0.005):
            u = 1.0 + i * 0.5 + dt
            answers.append(w.observe(u, 0.25 * u, START + u))
    for fraction, span in answers[40:]:  # from 20 s up
        assert 10.0 <= span <= 10.5 and fraction == 0.25, (fraction, span)


def test_a_switch_younger_than_the_window_and_a_first_read_are_since_its_start() -> None:
    w = BusyWindow()
    assert w.observe(4.0, 1.0, START + 4) == (0.25, 4.0)
    assert w.observe(6.0, 1.5, START + 6) == (0.25, 6.0)
    assert w.observe(0.0, 0.0, START) == (None, 0.0)  # nothing to divide by: no figure
    # The web server's first read of a switch that has run for an hour: its average since then.
    assert BusyWindow().observe(3600.0, 36.0, START + 3600) == (0.01, 3600.0)


def test_after_a_pause_the_span_is_since_the_last_read_before_the_window() -> None:
    w = BusyWindow()
    w.observe(100.0, 10.0, START + 100)
    assert w.observe(160.0, 16.0, START + 160) == (0.1, 60.0)


def test_a_restarted_switch_starts_anew_even_once_older_than_the_old_readings() -> None:
    """The old process's readings (uptime 10-30 s at 10 % load) would give the new one's figure
    against a reading of another process (0.55 over 15 s here): its start on our clock moved, so
    they are dropped and the new one's figure is since its own start."""
    w = BusyWindow()
    for u in range(10, 31):
        w.observe(float(u), u / 10, START + u)
    # Restarted 100 s later, read again 45 s into its life, at 25 % load.
    assert w.observe(45.0, 11.25, START + 100 + 45) == (0.25, 45.0)


def test_a_read_that_arrives_after_a_newer_one_is_answered_and_resets_nothing() -> None:
    w = BusyWindow()
    for u in range(1, 31):
        w.observe(float(u), u / 2, START + u)
    w.observe(31.0, 15.5, START + 31)
    assert w.observe(30.9, 15.45, START + 30.95) == (0.5, 10.9)  # its read ended after the newer one's
    assert w.observe(32.0, 16.0, START + 32) == (0.5, 10.0)


def test_the_history_is_bounded_and_a_counter_faster_than_the_clock_is_clamped() -> None:
    w = BusyWindow()
    for i in range(10_000):  # a script calling every millisecond
        u = 1.0 + i * 0.001
        w.observe(u, u, START + u)
    assert len(w._readings) <= w.keep
    fraction, span = w.observe(12.0, 12.001, START + 12)  # counters read a moment apart
    assert fraction == 1.0 and 10.0 <= span <= 10.5, (fraction, span)


def test_a_slow_read_is_not_taken_for_a_restart() -> None:
    """A read answered 3 s after the request (a loaded machine): the switch's start lies somewhere in
    those 3 s, which hold the start seen so far, so the history stays."""
    w = BusyWindow()
    for u in range(1, 31):
        w.observe(float(u), u / 2, START + u)
    assert w.observe(31.0, 15.5, START + 30.9, START + 34.0) == (0.5, 10.0)
