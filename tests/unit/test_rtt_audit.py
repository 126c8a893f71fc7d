"""The RTT audit (harness/rtt_audit.py) on hand-built captures with known causes, and the
protocol minimums (harness/round_trips.py) it is held to. The lab versions, on real servers and
captures, are tests/labs/test_lab_rtt_audit.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from p4netem_studies.harness.metrics import wire_metrics
from p4netem_studies.harness.round_trips import minimum_round_trips
from p4netem_studies.harness.rtt_audit import audit
from p4netem_studies.web.capture import ACK, FIN, PSH, SYN, Segment
from p4netem_studies.web.manifest import Entry, Manifest

CLIENT, SERVER = "10.0.0.1", "10.0.1.1"
RTT = 0.100
MSS = 1448


class Wire:
    """One connection's packets as the client's capture sees them (times in seconds)."""

    def __init__(self, port: int = 40000, server: str = SERVER):
        self.port, self.addr = port, server
        self.cseq, self.sseq = 1000, 5000     # next sequence numbers (ISNs below)
        self.segs: list[Segment] = []

    def _seg(self, t, up, flags, payload=b"", wscale=None, mss=None):
        if up:
            s = Segment(t, CLIENT, self.port, self.addr, 80, flags, self.cseq, self.sseq, 1000,
                        payload, 66 + len(payload), mss, wscale)
            self.cseq += len(payload) + (1 if flags & (SYN | FIN) else 0)
        else:
            s = Segment(t, self.addr, 80, CLIENT, self.port, flags, self.sseq, self.cseq, 1000,
                        payload, 66 + len(payload), mss, wscale)
            self.sseq += len(payload) + (1 if flags & (SYN | FIN) else 0)
        self.segs.append(s)
        return s

    def handshake(self, t, mss=None):
        self._seg(t, True, SYN, wscale=7, mss=mss)
        self._seg(t + RTT, False, SYN | ACK, wscale=7, mss=mss)
        self._seg(t + RTT + 1e-5, True, ACK)

    def client(self, t, n):
        return self._seg(t, True, ACK | PSH, b"q" * n)

    def ack(self, t):
        return self._seg(t, True, ACK)

    def server(self, t, *sizes):
        for i, n in enumerate(sizes):
            self._seg(t + i * 1e-5, False, ACK | PSH, b"d" * n)


def page_load(nagle: bool = False, think_ms: float = 0.0) -> list[Segment]:
    """TCP, the HTML (a 100-byte header segment, then the body), the objects: 3 round trips; with
    `nagle` the body's last partial segment waits for the ACK of the header segment."""
    w = Wire()
    w.handshake(0.0)
    w.client(RTT + 2e-5, 300)                              # the HTML request
    t = 2 * RTT + 1e-4 + think_ms / 1000
    w.server(t, 100, MSS)                                  # header, first full segment
    w.ack(t + 1e-4)                                        # ACK of both (quick-ACK)
    if nagle:
        t += RTT                                           # the tail leaves when that ACK arrives
    w.server(t + 2e-4, 600)
    w.ack(t + 3e-4)
    w.client(t + 4e-4, 800)                                # requests for the objects
    w.server(t + 4e-4 + RTT, MSS, MSS, 500)
    w.ack(t + 5e-4 + RTT)
    return w.segs


def test_a_clean_load_is_its_protocols_round_trips():
    a = audit(page_load(), CLIENT)
    assert (a.rtts, a.stalls, a.window_waits, a.rtt_path) == (3, 0, 0, "hrr")


def test_a_tail_held_for_an_ack_is_a_stall_and_a_round_trip():
    a = audit(page_load(nagle=True), CLIENT)
    assert (a.rtts, a.stalls, a.rtt_path) == (4, 1, "hrsr")
    assert a.stall_ms == pytest.approx(RTT * 1000, abs=1)
    assert a.stall_events[0]["bytes"] == 600


def test_server_think_time_is_not_a_stall():
    a = audit(page_load(think_ms=60), CLIENT)
    assert (a.rtts, a.stalls) == (3, 0)


def test_a_full_congestion_window_is_a_window_wait_not_a_stall():
    w = Wire()
    w.handshake(0.0)
    w.client(RTT + 2e-5, 300)
    t = 2 * RTT + 1e-4
    w.server(t, *[MSS] * 10)                               # the initial window, full
    w.ack(t + 1e-3)
    w.server(t + 1e-3 + RTT, *[MSS] * 5)                   # released by the ACKs
    a = audit(w.segs, CLIENT, initcwnd=10)
    assert (a.rtts, a.stalls, a.window_waits) == (3, 0, 1)
    # The same wait with a window of 20 the server never filled: a stall.
    b = audit(w.segs, CLIENT, initcwnd=20)
    assert (b.stalls, b.window_waits) == (1, 0)


def test_a_full_segment_right_after_an_ack_is_the_servers_time_not_a_stall():
    """Nagle and corks hold only a partial segment (one that fills leaves at once), so a full
    segment leaving right when an ACK of everything arrived, the window far from full, was
    written then: server think time that ended near an ACK (node-spdy's answers on a busy
    machine; docs/labs.md), not a stall. A partial segment the same way is one (Nagle's), and
    so is the full one when the handshake gave no MSS to say what full is."""
    def load(size: int, mss: int | None) -> list[Segment]:
        w = Wire()
        w.handshake(0.0, mss=mss)
        w.client(RTT + 2e-5, 300)                          # two requests in one segment
        t = 2 * RTT + 1e-4
        w.server(t, MSS, 600)                              # the first response, a partial tail
        w.ack(t + 1e-4)                                    # acknowledges all of it
        w.server(t + 1e-4 + RTT + 5e-4, size, 300)         # the second, right when that ACK came
        w.ack(t + 2e-4 + RTT + 5e-4)
        return w.segs
    full = audit(load(MSS, 1460), CLIENT)
    assert (full.rtts, full.stalls, full.window_waits, full.rtt_path) == (2, 0, 0, "hr")
    assert full.server_ms == pytest.approx(RTT * 1000, abs=2)
    partial = audit(load(1000, 1460), CLIENT)
    assert (partial.rtts, partial.stalls, partial.rtt_path) == (3, 1, "hrs")
    unknown = audit(load(MSS, None), CLIENT)
    assert (unknown.rtts, unknown.stalls) == (3, 1)


def test_a_resent_request_gives_no_rtt_sample():
    """Karn's rule: a request sent again (the uplink was slow, the client's timer fired) and
    answered right after its second copy (the answer was already on its way to the first) must
    not make the RTT look like 8 ms; else the response's queued packets, in pairs 10 ms apart on a slow
    downlink with the client ACKing each pair, each look released by an ACK: stalls. An HSPA load
    showed 10 such stalls, none real."""
    w = Wire()
    w.handshake(0.0)
    req = w.client(RTT + 2e-5, 300)
    w.cseq -= 300                                          # the same request, sent again
    w.client(RTT + 0.3, 300)
    t = RTT + 0.308                                        # the answer to the first copy
    for i in range(8):                                     # in pairs (jitter bunches them)
        w.server(t + i * 0.010, MSS, MSS)
        w.ack(t + i * 0.010 + 3e-5)
    assert req.seq == w.segs[-26].seq                      # both copies carry one sequence range
    a = audit(w.segs, CLIENT)
    assert (a.rtts, a.stalls) == (2, 0), a.stall_events


def test_a_paced_send_with_data_in_flight_is_no_stall():
    """BBR (the labs' default) paces: a packet that follows an ACK after a silence while the
    server still had data in flight waited for its pacer or window, not for the ACK of all it
    sent: a window wait. The same silence with everything acknowledged is a stall, and so is
    one whose ACK acknowledged a partial segment with full ones still in flight (Linux's Nagle,
    Minshall's variant, holds a partial segment until the last partial one is acknowledged)."""
    def load(first: int, acked_all: bool) -> list[Segment]:
        w = Wire()
        w.handshake(0.0)
        w.client(RTT + 2e-5, 300)
        t = 2 * RTT + 1e-4
        w.server(t, first, MSS)
        acked_first = w.sseq
        w.server(t + 0.060, MSS, MSS)                      # still in flight when the ACK comes
        acked = w.sseq if acked_all else acked_first
        w.segs.append(Segment(t + 0.061, CLIENT, w.port, SERVER, 80, ACK, w.cseq, acked, 1000,
                              b"", 66, None, None))
        w.server(t + 0.061 + RTT, 700)                     # right when that ACK reached it
        return w.segs
    paced = audit(load(MSS, acked_all=False), CLIENT)
    assert (paced.stalls, paced.window_waits) == (0, 1)
    held = audit(load(MSS, acked_all=True), CLIENT)
    assert (held.stalls, held.window_waits) == (1, 0)
    nagle = audit(load(200, acked_all=False), CLIENT)
    assert (nagle.stalls, nagle.window_waits) == (1, 0)


def test_the_echoed_timestamp_says_which_ack_had_reached_the_server():
    """With delay jitter a round trip can be shorter than every RTT sample of its connection:
    the Nagle-held body below comes back 97 ms after the ACK that released it, the samples
    are 100 and 104 ms, so by timing alone that ACK had not reached the server yet and the
    stall went unseen (an HSPA load in a fresh-clone make test). The body's TSecr echoes the
    ACK's TSval: it had arrived, and the body is a stall. Echoing the request's TSval instead
    (the server wrote the body before the ACK came) it is the server's own time."""
    def load(echo_ack: bool) -> list[Segment]:
        w = Wire()
        w.handshake(0.0)
        req = w.client(RTT + 2e-5, 300)
        t = 2 * RTT + 0.004                                # a 104 ms sample
        w.server(t, 100)                                   # the header, a partial segment
        ack = w.ack(t + 1e-4)
        w.server(t + 1e-4 + 0.097, 600)                    # the body, 97 ms after that ACK
        w.ack(t + 2e-4 + 0.097)
        stamp = {id(req): 100, id(ack): 304}               # the client's millisecond clock
        echo = 304 if echo_ack else 100
        return [replace(s, tsval=stamp.get(id(s)), tsecr=echo if i == len(w.segs) - 2 else None)
                for i, s in enumerate(w.segs)]
    held = audit(load(echo_ack=True), CLIENT)
    assert (held.rtts, held.stalls, held.rtt_path) == (3, 1, "hrs")
    early = audit(load(echo_ack=False), CLIENT)
    assert (early.rtts, early.stalls, early.rtt_path) == (2, 0, "hr")


def test_a_second_origin_costs_its_handshake():
    w1, w2 = Wire(40000), Wire(40002, "10.0.1.2")
    w1.handshake(0.0)
    w1.client(RTT + 2e-5, 300)
    w1.server(2 * RTT + 1e-4, 900)                         # the HTML names the second host
    w1.ack(2 * RTT + 2e-4)
    w2.handshake(2 * RTT + 3e-4)
    w2.client(3 * RTT + 4e-4, 300)
    w2.server(4 * RTT + 5e-4, 700)
    w2.ack(4 * RTT + 6e-4)
    segs = sorted(w1.segs + w2.segs, key=lambda s: s.ts)
    a = audit(segs, CLIENT)
    assert (a.rtts, a.stalls, a.rtt_path) == (4, 0, "hrhr")
    m = wire_metrics(segs, CLIENT)
    assert (m.rtts, m.stalls, m.rtt_path) == (4, 0, "hrhr")


def _manifest(hosts: list[str]) -> Manifest:
    objs = [Entry(f"//{h}/o{i}", h, f"/o{i}", 1000, "image", "image/gif", "") for i, h in
            enumerate(hosts)]
    root = Entry("/", hosts[0], "/", 1000, "html", "text/html", "")
    return Manifest("p", "", 1, "", tuple(dict.fromkeys(hosts)), (root, *objs))


@pytest.mark.parametrize("proto,tls,hosts,rtts", [
    ("h2", False, ["a"] * 8, 3), ("h2", True, ["a"] * 8, 4),
    ("h2", False, ["a", "b"] * 3, 4), ("h2", True, ["a", "b"] * 3, 6),
    ("spdy", False, ["a"] * 8, 3), ("h1.1-pipelined", True, ["a", "b"], 6),
    ("h1.1", False, ["a"] * 8, 5), ("h1.1", True, ["a"] * 8, 6),
    ("h1.1", False, ["a", "b"] * 3, 4), ("h1.0", False, ["a"] * 8, 6),
    ("h1.0", True, ["a"] * 8, 9), ("h1.0", False, ["a", "b"] * 3, 4),
])
def test_minimum_round_trips(proto, tls, hosts, rtts):
    assert minimum_round_trips(proto, tls, _manifest(hosts)) == rtts


def test_tls12_costs_one_more_round_trip_per_connection():
    m = _manifest(["a"] * 8)
    assert minimum_round_trips("h2", True, m, tls_version="TLSv1.2") == 5
    assert minimum_round_trips("chromium", True, m) is None


def test_server_buffering_is_a_plain_http1_server_option(tmp_path):
    from p4netem_studies.harness.plan import Condition
    from p4netem_studies.web.apache import ApacheConfig, render
    c = Condition("lan", "h1.1-pipelined", tls=False, page="microscape", server_buffering=True)
    assert c.variant.endswith(" buffered")
    with pytest.raises(ValueError, match="server_buffering"):
        Condition("lan", "h1.1-pipelined", tls=True, server_buffering=True)
    with pytest.raises(ValueError, match="server_buffering"):
        Condition("lan", "h2", tls=False, server_buffering=True)
    conf = render(ApacheConfig(tmp_path, port=8082, gzip=True), tmp_path / "w")
    assert "mod_mpm_worker.so" in conf and "FlushMaxPipelined -1" in conf
    assert "DEFLATE text/html" in conf
    assert "DEFLATE" not in render(ApacheConfig(tmp_path), tmp_path / "w")
