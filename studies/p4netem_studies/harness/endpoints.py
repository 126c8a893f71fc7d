"""The lab's content and servers: pages generated once, nginx and the SPDY server on every server
host, optional dnsmasq, all started and stopped together.

Host names of a page are spread over the lab's servers in order (host i on server i mod K), which
is how E3 splits a page "equally" over 1, 2 or 4 servers; every server carries the whole content
tree, so the split is only a matter of name resolution. One per-run certificate covers every name.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..web import pages as page_models
from ..web import pki, site
from ..web.apache import ApacheConfig, ApacheServer
from ..web.manifest import Manifest
from ..web.nginx import NginxConfig, NginxServer
from ..web.spdy_server import SpdyConfig, SpdyServer
from .dns import DnsServer
from .protocols import APACHE_PLAIN, NGINX_H2C, NGINX_HTTP, NGINX_HTTPS, SPDY_PLAIN, SPDY_TLS


@dataclass
class SiteContent:
    """Generated pages under one root: page name -> manifest (and its path)."""

    root: Path
    manifests: dict[str, Manifest] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    cert: pki.ServerCert | None = None

    @classmethod
    def generate(cls, names: list[str], root: Path, seed: int = 1,
                 key_type: str = "rsa2048") -> "SiteContent":
        content = cls(root)
        hosts: list[str] = []
        written: dict[tuple[str, str], tuple[str, str]] = {}
        for name in dict.fromkeys(names):
            model = page_models.named(name, seed)
            manifest = site.generate(model, root / "site", seed=seed,
                                     manifest_name=f"{model.name}.manifest.json")
            # Pages share one tree: a page must not overwrite another's file with other bytes.
            for e in manifest.objects:
                other = written.setdefault((e.host, e.path), (name, e.sha256))
                if other[1] != e.sha256:
                    raise ValueError(f"pages {other[0]!r} and {name!r} both write "
                                     f"{e.host}{e.path} with different content")
            content.manifests[name] = manifest
            content.paths[name] = root / "site" / f"{model.name}.manifest.json"
            hosts += list(manifest.hosts)
        content.cert = pki.make_server_cert(root / "pki", list(dict.fromkeys(hosts)),
                                            key_type=key_type)
        return content

    @property
    def site_root(self) -> Path:
        return self.root / "site"


def assign_hosts(hosts: tuple[str, ...] | list[str], server_ips: list[str]) -> dict[str, str]:
    """Page host name -> server address, host i on server i mod K."""
    if not server_ips:
        raise ValueError("no server to carry the page")
    return {h: server_ips[i % len(server_ips)] for i, h in enumerate(hosts)}


class Endpoints:
    """nginx (HTTP/1.x, HTTP/2, TLS and plain) and node-spdy on every server host of `lab`."""

    def __init__(self, lab, content: SiteContent, *, gzip: bool = False, spdy: bool = True,
                 dns: bool = False, buffering: bool = False, workdir: Path | None = None,
                 send_timeout_s: int = 60):
        """`buffering`: also Apache on every server host (port 8082), the HTTP/1.x server that
        buffers responses to pipelined requests (conditions with server_buffering).
        `send_timeout_s`: how long the servers wait on a response that cannot be written (the
        page-load harness gives the load's timeout: a slow link must not be cut by a server
        timer, which no loss or rate of the profile asked for)."""
        self.lab = lab
        self.send_timeout_s = send_timeout_s
        self.buffering = buffering
        self.apache: dict[str, ApacheServer] = {}
        self.content = content
        self.gzip = gzip
        self.spdy = spdy
        self.dns_enabled = dns
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="p4n-endpoints-"))
        self.nginx: dict[str, NginxServer] = {}
        self.spdy_servers: dict[str, SpdyServer] = {}
        self.dns: DnsServer | None = None

    @property
    def server_hosts(self) -> list[str]:
        return [h.name for h in self.lab.topology.servers]

    def resolve_map(self, page: str) -> dict[str, str]:
        manifest = self.content.manifests[page]
        return assign_hosts(manifest.hosts, [self.lab.ip(h) for h in self.server_hosts])

    def start(self) -> "Endpoints":
        try:
            cert = self.content.cert
            for host in self.server_hosts:
                ns = self.lab.ns(host)
                d = self.workdir / host
                d.mkdir(parents=True, exist_ok=True)
                cfg = NginxConfig(self.content.site_root, http_port=NGINX_HTTP,
                                  https_port=NGINX_HTTPS, h2c_port=NGINX_H2C, gzip=self.gzip,
                                  send_timeout_s=self.send_timeout_s)
                (d / "nginx").mkdir()
                self.nginx[host] = NginxServer(ns, cfg, cert, workdir=d / "nginx").start()
                if self.buffering:
                    self.apache[host] = ApacheServer(
                        ns, ApacheConfig(self.content.site_root, port=APACHE_PLAIN, gzip=self.gzip,
                                     timeout_s=self.send_timeout_s),
                        workdir=d / "apache").start()
                if self.spdy:
                    (d / "spdy-tls").mkdir()
                    (d / "spdy-plain").mkdir()
                    self.spdy_servers[f"{host}/tls"] = SpdyServer(
                        ns, SpdyConfig(self.content.site_root, port=SPDY_TLS, tls=True), cert,
                        workdir=d / "spdy-tls").start()
                    self.spdy_servers[f"{host}/plain"] = SpdyServer(
                        ns, SpdyConfig(self.content.site_root, port=SPDY_PLAIN, tls=False),
                        workdir=d / "spdy-plain").start()
            if self.dns_enabled:
                records: dict[str, str] = {}
                for page in self.content.manifests:
                    records.update(self.resolve_map(page))
                first = self.server_hosts[0]
                self.dns = DnsServer(self.lab.ns(first), self.lab.ip(first), records,
                                     self.workdir / "dns").start()
                for client in self.lab.topology.clients:
                    self.dns.configure_client(self.lab.ns(client.name))
        except BaseException:
            self.stop()
            raise
        return self

    def versions(self) -> dict:
        out = {}
        if self.nginx:
            out["nginx"] = next(iter(self.nginx.values())).version_info()
        if self.dns:
            out["dnsmasq"] = self.dns.version()
        if self.apache:
            out["apache"] = next(iter(self.apache.values())).version_info()
        return out

    def stop(self) -> None:
        if self.dns is not None:
            for client in self.lab.topology.clients:
                self.dns.unconfigure_client(self.lab.ns(client.name))
            self.dns.stop()
            self.dns = None
        for srv in self.spdy_servers.values():
            srv.stop()
        self.spdy_servers.clear()
        for srv in self.apache.values():
            srv.stop()
        self.apache.clear()
        for srv in self.nginx.values():
            srv.stop()
        self.nginx.clear()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Endpoints":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
