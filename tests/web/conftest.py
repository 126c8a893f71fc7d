"""Fixtures for the web endpoint and loader tests: two namespaces joined by a veth pair (no
switch), generated content, a per-run certificate, and nginx / SPDY servers in the server side.

Namespaces are named p4nw<token>c (client, 10.231.0.1) and p4nw<token>s (server, 10.231.0.2),
the token unique to the test run (web_env.py). Offloads are off on both veth ends so captures
show wire-sized segments.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from p4netem_studies.web import pages, pki, site
from p4netem_studies.web.manifest import Manifest
from p4netem_studies.web.nginx import NginxConfig, NginxServer
from p4netem_studies.web.spdy_server import SpdyConfig, SpdyServer

from web_env import (CLIENT_IF, CLIENT_IP, CLIENT_NS, HTTP, HTTPS, H2C, SERVER_IF, SERVER_IP,
                     SERVER_NS, SPDY_PLAIN, SPDY_TLS, delete_pair, make_pair)


@dataclass
class Content:
    root: Path
    demo: Manifest
    demo_path: Path
    big: Manifest
    big_path: Path
    cert: pki.ServerCert

    def resolve(self, manifest: Manifest) -> dict[str, str]:
        return {h: SERVER_IP for h in manifest.hosts}


@pytest.fixture(scope="session")
def webnet() -> Iterator[None]:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.fail("nginx is missing: run scripts/setup-system.sh", pytrace=False)
    make_pair(CLIENT_NS, SERVER_NS, CLIENT_IF, SERVER_IF, CLIENT_IP, SERVER_IP)
    try:
        yield
    finally:
        delete_pair(CLIENT_NS, SERVER_NS)


@pytest.fixture(scope="session")
def content(tmp_path_factory: pytest.TempPathFactory) -> Content:
    root = tmp_path_factory.mktemp("p4nw-content")
    demo = site.generate(pages.demo(seed=7), root, seed=7, manifest_name="demo.json")
    # Two large objects on their own host for first-flight measurements.
    big = site.generate(pages.uniform(2, 400_000, kind="png", domain="big.test"), root,
                        manifest_name="big.json")
    cert = pki.make_server_cert(root.parent / "pki", list(demo.hosts) + list(big.hosts))
    return Content(root, demo, root / "demo.json", big, root / "big.json", cert)


@pytest.fixture(scope="session")
def nginx(webnet: None, content: Content) -> Iterator[NginxServer]:
    srv = NginxServer(SERVER_NS, NginxConfig(content.root, http_port=HTTP, https_port=HTTPS,
                                             h2c_port=H2C, gzip=True), content.cert)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def spdy_servers(webnet: None, content: Content) -> Iterator[dict[str, SpdyServer]]:
    tls = SpdyServer(SERVER_NS, SpdyConfig(content.root, port=SPDY_TLS, tls=True), content.cert)
    plain = SpdyServer(SERVER_NS, SpdyConfig(content.root, port=SPDY_PLAIN, tls=False))
    tls.start()
    try:
        plain.start()
        try:
            yield {"https": tls, "http": plain}
        finally:
            plain.stop()
    finally:
        tls.stop()
