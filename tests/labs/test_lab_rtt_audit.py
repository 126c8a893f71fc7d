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

from lab_env import SMALL, TWO_ORIGINS, delay_profile
from p4netem_studies.harness.round_trips import minimum_round_trips
from p4netem_studies.web.nginx import NginxConfig, NginxServer

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
