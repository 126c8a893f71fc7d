"""Every protocol path costs the round trips it should: the RTT audit of a real load, through the
switch, equals the protocol's minimum (harness/round_trips.py, docs/labs.md "Round trips per
protocol path"), with no stall, for each protocol x TLS on/off x one and two origins, on a
lossless 200 ms link whose initial window (32 segments) no response fills. And a stall put back
on purpose (Nagle on in nginx, nginx's own h2c sendfile path) is found.

A hidden round trip in a path (a server holding a partial segment for an ACK, tiny packets
using up the window, a client waiting on a timer for a round trip) shows as rtts above the
minimum or stalls > 0, whatever the machine's load: the audit counts causes, not time.
"""

from __future__ import annotations

import pytest

from lab_env import BIG, SMALL, TWO_ORIGINS, delay_profile
from p4netem_studies.harness.round_trips import minimum_round_trips
from p4netem_studies.web.nginx import NginxConfig, NginxServer
from p4netem_studies.web.spdy_server import SpdyConfig, SpdyServer

RTT_MS = 200.0
LARGE_IW = 32
PROTOCOLS = ("h1.0", "h1.1", "h1.1-pipelined", "h2", "spdy")
CASES = [(p, tls, page) for p in PROTOCOLS for tls in (False, True) for page in (SMALL, TWO_ORIGINS)]


@pytest.fixture(scope="module")
def lossless(weblab):
    weblab.set(delay_profile(RTT_MS), iw=LARGE_IW)
    return weblab


def _explain(load) -> str:
    w = load.wire
    return (f"rtts {w.rtts} ({w.rtt_path}), stalls {w.stalls} ({w.stall_ms} ms), window waits "
            f"{w.window_waits}, page-load time {w.plt_ms:.0f} ms; pcap {load.pcap}")


@pytest.mark.parametrize("proto,tls,page", CASES,
                         ids=[f"{p}-{'tls' if t else 'plain'}-{'two' if pg == TWO_ORIGINS else 'one'}"
                              for p, t, pg in CASES])
def test_every_path_costs_its_minimum_round_trips(lossless, proto, tls, page):
    load = lossless.load(proto, page, tls=tls)
    assert load.report["ok"], load.report["errors"]
    versions = {c.get("tls_version") for c in load.report.get("connections", [])} - {None}
    expected = minimum_round_trips(proto, tls, lossless.content.manifests[page],
                                   tls_version=max(versions) if versions else None)
    w = load.wire
    assert (w.rtts, w.stalls, w.window_waits) == (expected, 0, 0), (
        f"{proto} {'TLS' if tls else 'plain'} {page}: expected {expected} round trips and no "
        f"wait; {_explain(load)}")


@pytest.fixture(scope="module")
def stalling_nginx(lossless, tmp_path_factory):
    """A second nginx on the server with the stalls back: Nagle on (`tcp_nodelay off`) on its
    HTTP/1.x port, nginx's own sendfile path on its h2c port."""
    lab = lossless.lab
    cfg = NginxConfig(lossless.content.site_root, http_port=18080, https_port=None,
                      h2c_port=18081, tcp_nodelay=False, h2c_sendfile=True)
    srv = NginxServer(lab.ns("server"), cfg, workdir=tmp_path_factory.mktemp("stalling-nginx"))
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("proto,port", [("h1.1", 18080), ("h2", 18081)], ids=["nagle-h1.1", "h2c-sendfile"])
def test_an_injected_stall_is_found(lossless, stalling_nginx, proto, port):
    load = lossless.load(proto, SMALL, tls=False, port=port)
    assert load.report["ok"], load.report["errors"]
    minimum = minimum_round_trips(proto, False, lossless.content.manifests[SMALL])
    w = load.wire
    assert w.stalls >= 1 and w.rtts > minimum, (
        f"{proto} against a stalling server: expected a stall and more than {minimum} round "
        f"trips; {_explain(load)}")
    # Each stall held its data for about a round trip (the client ACKs at once at first).
    assert w.stall_ms / w.stalls >= 0.8 * RTT_MS


@pytest.fixture(scope="module")
def nagle_spdy(lossless, tmp_path_factory):
    """A second plain node-spdy server on the server with Nagle back on."""
    cfg = SpdyConfig(lossless.content.site_root, port=18083, tls=False, tcp_nodelay=False)
    srv = SpdyServer(lossless.lab.ns("server"), cfg, workdir=tmp_path_factory.mktemp("nagle-spdy"))
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("page", [SMALL, TWO_ORIGINS], ids=["one", "two"])
def test_nagle_on_the_spdy_server_is_found(lossless, nagle_spdy, page):
    """node-spdy with Nagle on: a response's tail waits for the ACK of the previous response's
    partial segment. The audit must find that even though it takes a full segment leaving right
    after an ACK for the server's own time (what plain SPDY's flagged loads on LTE were,
    docs/labs.md): Nagle holds partial segments."""
    load = lossless.load("spdy", page, tls=False, port=18083)
    assert load.report["ok"], load.report["errors"]
    assert {r["status"] for r in nagle_spdy.requests()} == {200}
    minimum = minimum_round_trips("spdy", False, lossless.content.manifests[page])
    w = load.wire
    assert w.stalls >= 1 and w.rtts > minimum, (
        f"spdy against node-spdy with Nagle on: expected a stall and more than {minimum} round "
        f"trips; {_explain(load)}")


@pytest.fixture(scope="module")
def buffering_server(lossless, tmp_path_factory):
    """Apache, the server that buffers responses to pipelined requests (E1's servers)."""
    from p4netem_studies.web.apache import ApacheConfig, ApacheServer, available
    if not available():
        pytest.fail("apache2-bin is not installed (scripts/setup-system.sh)", pytrace=False)
    srv = ApacheServer(lossless.lab.ns("server"),
                       ApacheConfig(lossless.content.site_root, port=18082),
                       workdir=tmp_path_factory.mktemp("apache"))
    srv.start()
    yield srv
    srv.stop()


def _server_data_segments(load) -> int:
    from p4netem_studies.web.capture import read_pcap
    client = "10.0.0.1"
    return sum(1 for s in read_pcap(load.pcap) if s.dst == client and s.payload)


def test_the_buffering_server_coalesces_pipelined_answers(lossless, buffering_server):
    """Eight pipelined conditional GETs: nginx answers each 304 in a segment of its own, the
    buffering server (Apache) writes them together once no request is waiting; neither costs
    a round trip more than pipelining's minimum."""
    reval = ("--revalidate",)
    nginx = lossless.load("h1.1-pipelined", SMALL, tls=False, extra_args=reval)
    apache = lossless.load("h1.1-pipelined", SMALL, tls=False, port=18082, extra_args=reval)
    minimum = minimum_round_trips("h1.1-pipelined", False, lossless.content.manifests[SMALL])
    for load in (nginx, apache):
        assert load.report["ok"], load.report["errors"]
        assert (load.wire.rtts, load.wire.stalls) == (minimum, 0), _explain(load)
    assert {r["status"] for r in buffering_server.requests()} == {304}
    n, a = _server_data_segments(nginx), _server_data_segments(apache)
    assert n >= 9 and a <= n - 4, f"server data segments: nginx {n}, apache {a}"


def test_on_a_jittery_rate_limited_link_the_audit_finds_the_stall_and_only_it(
        lossless, stalling_nginx):
    """The builtin HSPA profile (3 Mbit/s down with a queue, 0.37 Mbit/s up, 100 ms RTT with
    3.5 ms delay jitter): the jitter bunches queued packets, the slow uplink makes clients send
    requests again, and the queue drops. A clean 300 KB page through it has no stall; the
    Nagle stall is still found. Before the audit applied Karn's rule, read the downlink rate
    over runs of packets and left waits with data in flight to the window, E5 flagged 20-55 %
    of cellular loads."""
    try:
        lossless.set("hspa", iw=10)
        clean = lossless.load("h1.1", BIG, tls=False)
        assert clean.report["ok"], clean.report["errors"]
        assert clean.wire.stalls == 0, _explain(clean)
        nagle = lossless.load("h1.1", SMALL, tls=False, port=18080)
        assert nagle.report["ok"], nagle.report["errors"]
        assert nagle.wire.stalls >= 1, _explain(nagle)
    finally:
        lossless.set(delay_profile(RTT_MS), iw=LARGE_IW)
