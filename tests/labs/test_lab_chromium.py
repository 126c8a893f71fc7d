"""Headless Chromium loads the page inside the lab's client host, through the switch: every
object arrives whole and decodes, over the protocol asked for (HTTP/2, or HTTP/1.1 with HTTP/2
turned off), and the load takes at least the round trips that protocol needs on the impaired
link. Nothing of the browser is left in the namespace afterwards."""

from __future__ import annotations

import time

import pytest

from lab_env import DEMO
from p4netem_studies.mininet.nodes import netns_pids

RTT_MS = 100.0


@pytest.mark.parametrize("proto,expected", [("chromium-h2", "h2"), ("chromium-h1", "http/1.1")])
def test_chromium_loads_the_page_in_the_lab(weblab, proto, expected):
    from lab_env import delay_profile
    weblab.set(delay_profile(RTT_MS), iw=10)
    before = set(netns_pids(weblab.client_ns))
    load = weblab.load(proto, DEMO, tls=True, timeout_s=90)
    report, wire = load.report, load.wire
    assert report["ok"], report["errors"]
    manifest = weblab.content.manifests[DEMO]
    nav = report["navigation"]
    assert nav["broken"] == 0
    assert nav["images"] == sum(e.type == "image" for e in manifest.embedded)
    assert {o["protocol"] for o in report["objects"]} == {expected}
    assert [o["size"] for o in report["objects"]] == [e.size for e in manifest.objects]
    # TCP, TLS, the HTML and its objects: at least four round trips before onload.
    assert report["onload_ms"] >= 4 * RTT_MS
    assert wire.plt_ms >= 4 * RTT_MS
    assert wire.first_syn_to_synack_ms == pytest.approx(RTT_MS, rel=0.1)
    if expected == "h2":
        assert wire.connections_used <= len(manifest.hosts)
    else:
        assert len(manifest.hosts) < wire.connections_used <= 6 * len(manifest.hosts)
    deadline = time.monotonic() + 5
    while set(netns_pids(weblab.client_ns)) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(netns_pids(weblab.client_ns)) - before
