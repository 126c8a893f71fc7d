"""ALPN picks h2 or spdy/3.1 as the client asks: nginx offers h2 and http/1.1, the SPDY server
spdy/3.1 and http/1.1, and each settles on what the client offered. The client's offer is read
from its ClientHello on the wire (plaintext in TLS 1.3), the choice from the server's own log."""

from __future__ import annotations

import time

import pytest

from lab_env import DEMO
from p4netem_studies.harness.protocols import NGINX_HTTPS, SPDY_TLS, protocol
from p4netem_studies.web.capture import Capture, read_pcap
from p4netem_studies.web.load import run_loader

CASES = [
    # loader, server port, ALPN the client offers (in its ClientHello), ALPN chosen
    ("h2", NGINX_HTTPS, b"h2", "h2"),
    ("h1.1", NGINX_HTTPS, b"http/1.1", "http/1.1"),
    ("spdy", SPDY_TLS, b"spdy/3.1", "spdy/3.1"),
    ("h1.1", SPDY_TLS, b"http/1.1", "http/1.1"),
]


def _server_rows(weblab, port):
    if port == NGINX_HTTPS:
        return weblab.endpoints.nginx["server"].requests()
    return weblab.endpoints.spdy_servers["server/tls"].requests()


@pytest.mark.parametrize("loader,port,offer,chosen", CASES,
                         ids=[f"{c[0]}@{c[1]}" for c in CASES])
def test_alpn_picks_what_the_client_asks(weblab, loader, port, offer, chosen, tmp_path):
    weblab.set("lte")
    before = len(_server_rows(weblab, port))
    pcap = tmp_path / "alpn.pcap"
    cap = Capture(weblab.client_ns, "eth0", pcap, f"tcp port {port}")
    try:
        report = run_loader(weblab.client_ns, protocol(loader).loader,
                            weblab.content.paths[DEMO], resolve=weblab.endpoints.resolve_map(DEMO),
                            scheme="https", port=port, ca_file=str(weblab.content.cert.ca_cert),
                            timeout_s=60, extra_args=["--conns-per-host", "2"])
    finally:
        cap.stop()
    assert report["ok"], report["errors"]
    assert {c["alpn"] for c in report["connections"]} == {chosen}
    # ClientHello: handshake record (0x16), type client_hello (0x01); the ALPN extension lists
    # the offered protocols as length-prefixed strings.
    hellos = [s.payload for s in read_pcap(pcap)
              if s.dport == port and s.payload[:1] == b"\x16" and s.payload[5:6] == b"\x01"]
    assert len(hellos) == len(report["connections"])
    for hello in hellos:
        assert bytes([len(offer)]) + offer in hello
        others = {b"h2", b"spdy/3.1", b"http/1.1"} - {offer}
        assert not any(bytes([len(o)]) + o in hello for o in others)
    deadline = time.monotonic() + 3
    while True:
        rows = _server_rows(weblab, port)[before:]
        if len(rows) >= len(report["objects"]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(rows) == len(report["objects"])
    assert {r["alpn"] for r in rows} == {chosen}
