"""The protocols a comparison can load a page with: which loader, which server and port, and
what the connection must negotiate.

Every server runs on every server host of the lab at fixed ports, so one lab serves every
protocol at once and a comparison switches protocol per load without restarting anything:

    nginx   80 HTTP/1.x            443 TLS (ALPN h2, http/1.1)     8080 h2c (prior knowledge)
    spdy    8081 plain SPDY/3.1    8443 TLS (ALPN spdy/3.1, http/1.1)
    apache  8082 plain HTTP/1.x, buffering responses to pipelined requests (a condition's
            server_buffering: E1's servers; web/apache.py), started only when a plan asks
"""

from __future__ import annotations

from dataclasses import dataclass

NGINX_HTTP, NGINX_HTTPS, NGINX_H2C = 80, 443, 8080
SPDY_PLAIN, SPDY_TLS = 8081, 8443
APACHE_PLAIN = 8082


@dataclass(frozen=True)
class Protocol:
    name: str               # as conditions and tables name it
    loader: str             # p4netem_studies.web.load protocol
    server: str             # nginx | spdy
    plain_port: int | None  # None: not available without TLS
    tls_port: int
    alpn: str               # what ALPN must pick over TLS
    conns_per_host: int | None   # default parallelism (None: the loader's own)
    browser_args: tuple[str, ...] = ()
    description: str = ""

    def port(self, tls: bool) -> int:
        if tls:
            return self.tls_port
        if self.plain_port is None:
            raise ValueError(f"{self.name} needs TLS (browsers speak HTTP/2 only over TLS)")
        return self.plain_port

    def expected_alpn(self, tls: bool) -> str | None:
        """ALPN every connection must report (None over plain TCP; 'h2c' for prior knowledge)."""
        if tls:
            return self.alpn
        return "h2c" if self.loader == "h2" else None

    @property
    def browser(self) -> bool:
        return self.loader == "chromium"


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("h1.0", "h1.0", "nginx", NGINX_HTTP, NGINX_HTTPS, "http/1.1", 4,
             description="HTTP/1.0, a connection per object, 4 at once"),
    Protocol("h1.1", "h1.1", "nginx", NGINX_HTTP, NGINX_HTTPS, "http/1.1", 6,
             description="HTTP/1.1 persistent, 6 connections per host"),
    Protocol("h1.1-pipelined", "h1.1-pipelined", "nginx", NGINX_HTTP, NGINX_HTTPS, "http/1.1",
             1, description="HTTP/1.1 pipelined (1024 B / 50 ms flush), 1 connection per host"),
    Protocol("h2", "h2", "nginx", NGINX_H2C, NGINX_HTTPS, "h2", 1,
             description="HTTP/2, one connection per host"),
    Protocol("spdy", "spdy", "spdy", SPDY_PLAIN, SPDY_TLS, "spdy/3.1", 1,
             description="SPDY/3.1 (node-spdy agent), one session per host"),
    Protocol("chromium-h2", "chromium", "nginx", None, NGINX_HTTPS, "h2", None,
             description="headless Chromium over HTTP/2 (TLS)"),
    Protocol("chromium-h1", "chromium", "nginx", NGINX_HTTP, NGINX_HTTPS, "http/1.1", None,
             browser_args=("--disable-http2",),
             description="headless Chromium over HTTP/1.1 (6 connections per host)"),
)}


def protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None
