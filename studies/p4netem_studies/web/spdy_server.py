"""The SPDY/3.1 server (node-spdy, `web/spdy-server.js`) run inside a namespace.

It serves the same content tree as nginx (`<content>/<host>/<path>`), over TLS with ALPN offering
spdy/3.1 (and http/1.1), or plain SPDY. Its request log (JSON lines) gives connection and stream
numbers for each request, read back through `requests()`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .netns import NsProcess, wait_listening
from .nodejs import node_argv
from .pki import ServerCert


@dataclass(frozen=True)
class SpdyConfig:
    content_root: Path
    port: int = 443
    tls: bool = True
    protocols: tuple[str, ...] = ("spdy/3.1", "http/1.1")
    address: str = "0.0.0.0"


class SpdyServer:
    def __init__(self, ns: str | None, config: SpdyConfig, cert: ServerCert | None = None,
                 workdir: str | Path | None = None):
        if config.tls and cert is None:
            raise ValueError("a TLS SPDY server needs a server certificate")
        self.ns = ns
        self.config = config
        self.cert = cert
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="p4nw-spdy-"))
        self.proc: NsProcess | None = None

    @property
    def log(self) -> Path:
        return self.workdir / "requests.log"

    def start(self, timeout: float = 10.0) -> "SpdyServer":
        cfg = {
            "root": str(Path(self.config.content_root).resolve()),
            "port": self.config.port,
            "address": self.config.address,
            "protocols": list(self.config.protocols),
            "log": str(self.log),
            "tls": ({"cert": str(self.cert.cert), "key": str(self.cert.key)}
                    if self.config.tls and self.cert else None),
        }
        conf = self.workdir / "spdy.json"
        conf.write_text(json.dumps(cfg))
        self.proc = NsProcess(self.ns, node_argv("spdy-server.js", str(conf)),
                              self.workdir / "stdout.log")
        try:
            wait_listening(self.ns, [self.config.port], self.proc, timeout)
        except Exception:
            self.stop()
            raise
        return self

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "SpdyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
