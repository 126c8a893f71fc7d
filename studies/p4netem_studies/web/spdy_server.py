"""The SPDY/3.1 server (node-spdy, `web/spdy-server.js`) run inside a namespace.

It serves the same content tree as nginx (`<content>/<host>/<path>`), over TLS with ALPN offering
spdy/3.1 (and http/1.1), or plain SPDY. Its request log (JSON lines) gives connection and stream
numbers for each request, read back through `requests()`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .nodejs import node_argv
from .pki import ServerCert
from .server_process import ServerProcess


@dataclass(frozen=True)
class SpdyConfig:
    content_root: Path
    port: int = 443
    tls: bool = True
    protocols: tuple[str, ...] = ("spdy/3.1", "http/1.1")
    address: str = "0.0.0.0"
    # Nagle off, as node-spdy sets it (docs/labs.md "Nagle, corking and output buffering");
    # False turns it back on for plain connections, to put a stall back on purpose (the RTT
    # audit's lab tests).
    tcp_nodelay: bool = True
    # Page-like SPDY sessions (7 requests each) the server answers over loopback before it
    # listens, so that node has compiled node-spdy's code before the first measured request
    # (web/spdy-server.js warmUp; docs/labs.md). 0: start cold.
    warmup_sessions: int = 10


class SpdyServer(ServerProcess):
    """node-spdy in namespace `ns` until stop(); usable as a context manager."""

    prefix = "p4nw-spdy-"
    request_log_name = "requests.log"
    kept_files = ("requests.log", "stdout.log")

    def __init__(self, ns: str | None, config: SpdyConfig, cert: ServerCert | None = None,
                 workdir: str | Path | None = None):
        if config.tls and cert is None:
            raise ValueError("a TLS SPDY server needs a server certificate")
        super().__init__(ns, workdir)
        self.config = config
        self.cert = cert

    @property
    def log(self) -> Path:
        return self.request_log

    @property
    def conf(self) -> Path:
        return self.workdir / "spdy.json"

    def prepare(self) -> None:
        self.conf.write_text(json.dumps({
            "root": str(Path(self.config.content_root).resolve()),
            "port": self.config.port,
            "address": self.config.address,
            "protocols": list(self.config.protocols),
            "log": str(self.log),
            "nodelay": self.config.tcp_nodelay,
            "warmup_sessions": self.config.warmup_sessions,
            "tls": ({"cert": str(self.cert.cert), "key": str(self.cert.key)}
                    if self.config.tls and self.cert else None),
        }))

    def argv(self) -> list[str]:
        return node_argv("spdy-server.js", str(self.conf))

    def ports(self) -> list[int]:
        return [self.config.port]

    def warmup(self) -> dict | None:
        """What the warm-up did ({"sessions", "requests", "ms"}), from the server's stdout."""
        m = re.search(r"warmed up: (\d+) sessions, (\d+) requests in (\d+) ms",
                      (self.workdir / "stdout.log").read_text(errors="replace"))
        return dict(zip(("sessions", "requests", "ms"), map(int, m.groups()))) if m else None
