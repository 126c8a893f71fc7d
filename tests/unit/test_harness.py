"""The harness's pure parts: page-load time from a capture (first SYN to the last server packet
before the silence, the client's own close not counted), the plan's conditions and run order,
and medians/quartiles."""

from __future__ import annotations

import pytest

from p4netem_studies.harness.environment import with_environment
from p4netem_studies.harness.metrics import silence_understates, wire_metrics
from p4netem_studies.harness.plan import Condition, Plan, make_run_plan, matrix
from p4netem_studies.harness.results import quartiles
from p4netem_studies.web.capture import ACK, FIN, PSH, SYN, Segment

C, S = "10.0.0.1", "10.0.1.1"


def seg(ts, up, flags, payload=b"", sport=40000, seq=1):
    if up:
        return Segment(ts, C, sport, S, 443, flags, seq, 0, 0, payload, 54 + len(payload))
    return Segment(ts, S, 443, C, sport, flags, seq, 0, 0, payload, 54 + len(payload))


def load(close_at: float, extra: list | None = None) -> list[Segment]:
    return [
        seg(0.95, True, ACK),                       # left over from before the load: ignored
        seg(1.00, True, SYN),
        seg(1.10, False, SYN | ACK),
        seg(1.20, True, ACK | PSH, b"GET"),
        seg(1.30, False, ACK | PSH, b"x" * 1000, seq=10),
        seg(1.40, False, ACK | PSH, b"y" * 500, seq=1010),
        seg(1.41, True, ACK),
        *(extra or []),
        seg(close_at, True, FIN | ACK),             # the client closes at the end...
        seg(close_at + 0.1, False, FIN | ACK),      # ...and the server's answer is not the page
    ]


def test_plt_is_first_syn_to_last_server_packet():
    m = wire_metrics(load(1.5), C, silence_s=10)
    assert m.plt_ms == pytest.approx(400.0)
    assert m.first_syn_to_synack_ms == pytest.approx(100.0)
    assert (m.connections_opened, m.connections_used) == (1, 1)
    assert (m.packets_up, m.packets_down) == (5, 4)
    assert m.payload_down == 1500 and m.bytes_down == 1500 + 4 * 54
    assert m.retransmissions_down == 0 and not m.silence_cut


def test_silence_ends_the_load():
    # A server packet 12 s after the rest comes after a 10 s silence: not part of the load.
    m = wire_metrics(load(20.0, [seg(13.5, False, ACK | PSH, b"late", seq=1510)]), C, silence_s=10)
    assert m.silence_cut and m.plt_ms == pytest.approx(400.0)
    m = wire_metrics(load(20.0, [seg(5.0, False, ACK | PSH, b"late", seq=1510)]), C, silence_s=10)
    assert m.plt_ms == pytest.approx(4000.0)


def test_a_silence_cut_the_loader_outlived_is_an_error():
    # Cut at 0.4 s; a loader whose last byte came at 12.5 s was not done there: the row must
    # not pass with plt_ms 400. One done at 10.3 s (within the silence) and an uncut load pass.
    m = wire_metrics(load(20.0, [seg(13.5, False, ACK | PSH, b"late", seq=1510)]), C, silence_s=10)
    why = silence_understates(m.plt_ms, m.silence_cut, 12_500.0, 10)
    assert why is not None and "0.40 s" in why and "12.50 s" in why
    assert silence_understates(m.plt_ms, m.silence_cut, 10_300.0, 10) is None
    assert silence_understates(m.plt_ms, m.silence_cut, None, 10) is None
    uncut = wire_metrics(load(1.5), C, silence_s=10)
    assert silence_understates(uncut.plt_ms, uncut.silence_cut, 60_000.0, 10) is None


def test_retransmissions_and_unused_connections():
    extra = [seg(1.45, False, ACK | PSH, b"x" * 1000, seq=10),       # same seq again
             seg(1.46, True, SYN, sport=40001)]                       # opened, never used
    m = wire_metrics(load(1.5, extra), C)
    assert m.retransmissions_down == 1
    assert (m.connections_opened, m.connections_used) == (2, 1)


def test_packets_of_earlier_connections_are_not_counted():
    # The previous load's server FIN, still in the delay line when this capture started.
    m = wire_metrics([seg(0.5, False, FIN | ACK, sport=39999)] + load(1.5), C)
    assert (m.packets_up, m.packets_down) == (5, 4)


def test_no_syn_no_plt():
    m = wire_metrics([seg(1.0, False, ACK | PSH, b"x")], C)
    assert m.plt_ms is None and m.first_syn_to_synack_ms is None


def test_quartiles():
    assert quartiles([3.0]) == (3.0, 3.0, 3.0)
    assert quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    assert quartiles([]) is None


def test_make_run_plan_is_the_readme_matrix():
    plan = make_run_plan()
    assert {c.profile for c in plan.conditions} == {"lan", "lte", "hspa", "gprs"}
    assert {c.protocol for c in plan.conditions} == {"h1.1", "h2", "spdy"}
    assert {c.initcwnd for c in plan.conditions} == {3, 10}
    assert all(c.radio == (c.profile == "hspa") for c in plan.conditions)
    assert all(c.tls for c in plan.conditions)
    assert all(c.conns_per_host == 6 for c in plan.conditions if c.protocol == "h1.1")
    assert len(plan.conditions) == 24 and plan.total_loads == 24 * plan.repetitions


def test_schedule_groups_profiles_and_interleaves_repetitions():
    plan = Plan("t", matrix(["lan", "lte"], ["h1.1", "h2"], [3, 10]), repetitions=2)
    order = plan.schedule()
    assert len(order) == 16
    profiles = [c.profile for c, _ in order]
    assert profiles == ["lan"] * 8 + ["lte"] * 8            # one profile switch
    first_lan = [(c.variant, r) for c, r in order[:8]]
    assert [r for _, r in first_lan] == [0] * 4 + [1] * 4   # every cell once, then again


def test_conditions_refuse_bad_values():
    with pytest.raises(ValueError, match="unknown protocol"):
        Condition("lan", "http3")
    with pytest.raises(ValueError, match="needs TLS"):
        Condition("lan", "chromium-h2", tls=False)
    with pytest.raises(ValueError, match="initcwnd 0 out of range"):
        Condition("lan", "h2", initcwnd=0)
    with pytest.raises(ValueError, match="unknown page"):
        Condition("lan", "h2", page="nope")
    with pytest.raises(ValueError, match="no built-in profile or file 'nope'"):
        Plan("t", [Condition("nope", "h2")])


def test_prewoken_conditions_need_the_radio_and_are_their_own_cells():
    with pytest.raises(ValueError, match="pre-waking the radio needs the radio on"):
        Condition("hspa", "h2", prewake=True)
    conds = (matrix(["hspa"], ["h2"], [10], radio_profiles=("hspa",))
             + matrix(["hspa"], ["h2"], [10], radio_profiles=("hspa",), prewake=True))
    assert [c.profile_label for c in conds] == ["hspa+radio", "hspa+prewoken"]
    plan = Plan("t", conds, repetitions=2)
    # One profile on the switch for both: they alternate, repetition by repetition.
    assert [(c.profile_label, r) for c, r in plan.schedule()] == [
        ("hspa+radio", 0), ("hspa+prewoken", 0), ("hspa+radio", 1), ("hspa+prewoken", 1)]


def test_a_repair_of_a_segment_lost_before_the_capture_is_a_retransmission():
    # The segment at 1010 never reaches the client; 1510 arrives, then 1010 is sent again.
    extra = [seg(1.42, False, ACK | PSH, b"z" * 500, seq=1510),
             seg(1.43, False, ACK | PSH, b"y" * 500, seq=1010)]
    segs = [s for s in load(1.5, extra) if not (s.seq == 1010 and s.ts == 1.40)]
    m = wire_metrics(segs, C)
    assert m.retransmissions_down == 1
    # In order, nothing was sent again (sequence numbers wrapping around 2^32 included).
    wrap = [seg(1.0, True, SYN), seg(1.1, False, SYN | ACK),
            seg(1.2, False, ACK, b"a" * 100, seq=2**32 - 50),
            seg(1.3, False, ACK, b"b" * 100, seq=50)]
    assert wire_metrics(wrap, C).retransmissions_down == 0


def test_environment_columns_follow_the_rows_initial_window():
    def env(cc: str, iw: int) -> dict:
        return {"s": {"sysctls": {"net.ipv4.tcp_congestion_control": cc},
                      "routes": [f"10.0.0.0/24 dev eth0 initcwnd {iw}"]},
                "c": {"sysctls": {}, "routes": []}}
    meta = {"host": {"kernel": "k"},
            "topology": {"hosts": [{"name": "s", "role": "server"}, {"name": "c", "role": "client"}]}}
    rows = [{"initcwnd": 4}, {"initcwnd": 10}]
    # Keys as the page-load runner keeps them (ints), as JSON gives them back (strings), and as
    # a workload labels split settings ("A/B": the rows' initcwnd is A).
    for by_iw in ({4: env("reno", 4), 10: env("cubic", 10)},
                  {"4": env("reno", 4), "10": env("cubic", 10)},
                  {"10": env("cubic", 10), "4/10": env("reno", 4)}):
        out = with_environment(rows, {**meta, "tcp_environment_by_initcwnd": by_iw})
        assert [(r["tcp_congestion_control"], r["server_route_initcwnd"]) for r in out] == [
            ("reno", 4), ("cubic", 10)]
        assert all(r["kernel"] == "k" for r in out)


def test_environment_columns_say_which_congestion_control_ran_and_how():
    """The namespace default, the routes' congctl and the probed sockets are separate columns,
    server and client side: with `--cc cubic` the sysctl still reads the machine's default."""
    env = {"s": {"sysctls": {"net.ipv4.tcp_congestion_control": "bbr"},
                 "routes": ["10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.1.1 "
                            "congctl cubic initcwnd 10 initrwnd 10",
                            "10.0.0.1 dev eth0 scope link initcwnd 4"]},
           "c": {"sysctls": {"net.ipv4.tcp_congestion_control": "bbr"},
                 "routes": ["10.0.0.0/16 dev eth0 congctl lock cubic initrwnd 10"]}}
    cc = {"requested": "cubic", "mechanism": "route congctl", "client": "cubic",
          "server": "cubic", "probes": []}
    meta = {"host": {"kernel": "k"}, "tcp_environment_by_initcwnd": {10: env},
            "tcp_sysctls_set": {"s": {}, "c": {}, "congestion_control": cc},
            "topology": {"hosts": [{"name": "s", "role": "server"}, {"name": "c", "role": "client"}]}}
    [row] = with_environment([{"initcwnd": 10}], meta)
    assert (row["tcp_congestion_control"], row["client_tcp_congestion_control"]) == ("bbr", "bbr")
    # A route without congctl would run the default: the column shows the mix, not "cubic".
    assert row["server_route_congctl"] == "cubic/default"
    assert row["client_route_congctl"] == "cubic"
    assert (row["server_socket_congestion_control"], row["client_socket_congestion_control"],
            row["congestion_control_requested"], row["congestion_control_via"]) == (
        "cubic", "cubic", "cubic", "route congctl")
    # Older result files (no record) still give the other columns.
    del meta["tcp_sysctls_set"]
    [row] = with_environment([{"initcwnd": 10}], meta)
    assert "server_socket_congestion_control" not in row and row["client_route_congctl"] == "cubic"


def test_route_rewrites_keep_or_drop_exactly_the_named_attributes():
    from p4netem_studies.web.tcp_tuning import _strip, route_congctl
    r = "10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.1.1 linkdown congctl lock cubic initcwnd 4 initrwnd 4"
    assert _strip(r, ("initcwnd", "initrwnd")) == (
        "10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.1.1 congctl lock cubic".split())
    assert _strip(r, ("congctl",)) == (
        "10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.1.1 initcwnd 4 initrwnd 4".split())
    assert route_congctl(r) == "cubic" and route_congctl("10.0.0.0/16 dev eth0") is None


def test_a_failed_loads_record_keeps_what_nginx_said_about_it(tmp_path):
    """Lines written after the load's mark, the ones that say why a connection ended, once each."""
    from p4netem_studies.harness.runner import _server_complaints
    log = tmp_path / "error.log"
    log.write_text("2026/11/25 20:00:00 [info] 1#1: *1 client timed out (110: Connection timed "
                   "out) while sending response to client, client: 10.0.0.1\n")
    mark = log.stat().st_size
    with open(log, "a") as f:
        f.write("2026/11/25 20:01:00 [notice] 1#1: signal process started\n"
                "2026/11/25 20:01:01 [info] 1#1: *9 client timed out (110: Connection timed out)"
                " while sending to client, client: 10.0.0.1\n" * 2)
    assert _server_complaints(log, mark) == [
        "*9 client timed out (110: Connection timed out) while sending to client, client: 10.0.0.1"]
    assert _server_complaints(tmp_path / "missing.log", 0) == []
