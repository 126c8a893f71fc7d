"""A page loads through the p4netem switch of a Mininet lab under every protocol, every object
whole, over the connections and with the ALPN its protocol implies; the switch's counters saw
the traffic, so it went through the impaired path and nowhere else."""

from __future__ import annotations

import time

import pytest

from p4netem import pipeline as pl

from lab_env import DEMO

CASES = [
    # protocol, TLS, expected ALPN of every connection (None: plain TCP), connections per host
    ("h1.0", False, None, None),
    ("h1.1", True, "http/1.1", 6),
    ("h1.1-pipelined", False, None, 1),
    ("h2", True, "h2", 1),
    ("h2", False, "h2c", 1),
    ("spdy", True, "spdy/3.1", 1),
    ("spdy", False, None, 1),
]


def _counters(lab):
    return {d: c.profile_in for d, c in lab.counters("client").items()}


@pytest.mark.parametrize("proto,tls,alpn,per_host", CASES,
                         ids=[f"{c[0]}-{'tls' if c[1] else 'plain'}" for c in CASES])
def test_page_loads_through_the_switch(weblab, proto, tls, alpn, per_host):
    weblab.set("lte")
    before = _counters(weblab.lab)
    load = weblab.load(proto, DEMO, tls=tls)
    report, wire = load.report, load.wire
    assert report["ok"], report["errors"]
    manifest = weblab.content.manifests[DEMO]
    assert [o["size"] for o in report["objects"]] == [e.size for e in manifest.objects]
    conns = report["connections"]
    assert all(c["alpn"] == alpn for c in conns), [c["alpn"] for c in conns]
    hosts = len(manifest.hosts)
    if proto == "h1.0":
        # A connection per object, at most 4 at once per host.
        assert wire.connections_opened == len(manifest.objects)
    else:
        assert hosts <= wire.connections_opened <= per_host * hosts
    assert wire.connections_used == wire.connections_opened
    # LTE: 25 ms RTT. A load needs at least a handshake and a request: >= 2 RTTs.
    assert wire.first_syn_to_synack_ms >= 24.0
    assert wire.plt_ms >= 2 * 25.0
    time.sleep(0.2)
    after = _counters(weblab.lab)
    # Every packet the client sent and received crossed the switch in the client's slot.
    assert after[pl.UPLINK] - before[pl.UPLINK] >= wire.packets_up
    assert after[pl.DOWNLINK] - before[pl.DOWNLINK] >= wire.packets_down
