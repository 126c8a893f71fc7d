"""What every loader shares: options, request headers, discovery of objects in the HTML as it
arrives, per-object and per-connection records, and the JSON report.

A load starts with the HTML request. By default (`discover="stream"`) an embedded object is
requested the moment its reference appears in the HTML received so far, as a browser's preload
scanner does; "after-html" waits for the whole HTML; "at-once" requests everything at time zero
(E4's "all objects requested at once"). Objects the HTML never named are requested when it ends,
and reported. Every object is checked against the manifest (status, size, SHA-256).
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from dataclasses import asdict, dataclass, field

from ..manifest import Entry, Manifest

USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/120.0.0.0 Safari/537.36 p4netem-loader/1")
ACCEPT = {
    "html": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "image": "image/avif,image/webp,image/apng,image/*,*/*;q=0.8",
    "script": "*/*",
    "stylesheet": "text/css,*/*;q=0.1",
}
DEFAULT_COOKIE = "p4n_session=6f1c2a9e4b7d3f08; p4n_pref=lang%3Den%26tz%3DUTC; _p4n_ab=variant-b"


@dataclass
class LoadOptions:
    resolve: dict[str, str]                  # host name -> IP address
    scheme: str = "http"                     # http | https
    port: int | None = None                  # default 80/443
    ca_file: str | None = None               # CA the server certificate chains to (https)
    conns_per_host: int | None = None        # None: the protocol's usual limit
    max_conns: int | None = None             # cap over all hosts
    discover: str = "stream"                 # stream | after-html | at-once
    revalidate: bool = False                 # conditional GETs (If-Modified-Since) -> 304
    accept_encoding: str = "gzip, deflate"
    user_agent: str = USER_AGENT
    cookie: str | None = DEFAULT_COOKIE
    timeout_s: float = 60.0
    flush_bytes: int = 1024                  # pipelining: flush the request buffer at this size
    flush_ms: float = 50.0                   # ... or this long after the first buffered request
    dns: bool = False                        # names missing from `resolve`: ask the system resolver
    h2_window: int = 6 * 1024 * 1024         # HTTP/2 per-stream receive window (Chrome's value)
    h2_connection_window: int = 15 * 1024 * 1024
    window_clamp: int | None = None          # TCP_WINDOW_CLAMP (bytes): cap the advertised window

    def __post_init__(self) -> None:
        if self.scheme not in ("http", "https"):
            raise ValueError(f"scheme must be http or https, not {self.scheme!r}")
        if self.discover not in ("stream", "after-html", "at-once"):
            raise ValueError(f"discover must be stream, after-html or at-once, not {self.discover!r}")
        self.resolve = {k.lower(): v for k, v in self.resolve.items()}
        if self.window_clamp is not None and not 1024 <= self.window_clamp <= 1 << 30:
            raise ValueError(f"window_clamp must be 1024..{1 << 30} bytes, not {self.window_clamp}")

    @property
    def effective_port(self) -> int:
        return self.port or (443 if self.scheme == "https" else 80)

    def address(self, host: str) -> str:
        """The mapped address of `host`; "" when it is to be looked up (dns on)."""
        try:
            return self.resolve[host.lower()]
        except KeyError:
            if self.dns:
                return ""
            raise ValueError(f"no address for host {host!r} (give it in the host map)") from None


def request_headers(entry: Entry, opts: LoadOptions, last_modified: str) -> list[tuple[str, str]]:
    """Browser-like request headers, in the order a browser sends them (Host is added by caller)."""
    h = [("user-agent", opts.user_agent), ("accept", ACCEPT.get(entry.type, "*/*")),
         ("accept-encoding", opts.accept_encoding), ("accept-language", "en-US,en;q=0.9")]
    if entry.type != "html":
        h.append(("referer", f"{opts.scheme}://{entry.host}/"))
    if opts.cookie:
        h.append(("cookie", opts.cookie))
    if opts.revalidate:
        h.append(("if-modified-since", last_modified))
    return h


_REF = re.compile(rb'(?:src|href)\s*=\s*"([^"]+)"')


def split_url(url: str, default_host: str) -> tuple[str, str]:
    """(host, path) of an absolute, protocol-relative or root-relative URL."""
    if url.startswith("//"):
        rest = url[2:]
    elif "://" in url:
        rest = url.split("://", 1)[1]
    elif url.startswith("/"):
        return default_host.lower(), url
    else:
        return default_host.lower(), "/" + url
    authority, _, path = rest.partition("/")
    return authority.split(":")[0].lower(), "/" + path


class Discovery:
    """Finds object references in HTML as it arrives (decoding gzip/deflate on the fly)."""

    def __init__(self, manifest: Manifest, content_encoding: str | None):
        self.manifest = manifest
        self._targets = manifest.by_target()
        self._seen: set[tuple[str, str]] = set()
        self._text = bytearray()
        self._pos = 0
        self.unknown: list[str] = []
        enc = (content_encoding or "").lower()
        self._z = (zlib.decompressobj(16 + zlib.MAX_WBITS) if enc in ("gzip", "x-gzip")
                   else zlib.decompressobj() if enc == "deflate" else None)

    def feed(self, data: bytes) -> list[Entry]:
        self._text += self._z.decompress(data) if self._z else data
        found = []
        for m in _REF.finditer(self._text, self._pos):
            self._pos = m.end()
            target = split_url(m.group(1).decode("latin-1"), self.manifest.root.host)
            if target in self._seen:
                continue
            self._seen.add(target)
            entry = self._targets.get(target)
            if entry is None:
                self.unknown.append(m.group(1).decode("latin-1"))
            elif entry is not self.manifest.root:
                found.append(entry)
        # A reference is far shorter than this; never rescan more than the tail.
        self._pos = max(self._pos, len(self._text) - 1024)
        return found


def decode_body(body: bytes, encoding: str | None) -> bytes:
    """`body` with its Content-Encoding (gzip, deflate) removed."""
    enc = (encoding or "identity").lower().strip()
    if enc in ("identity", ""):
        return body
    if enc in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if enc == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:  # some servers send raw deflate for "deflate"
            return zlib.decompress(body, -zlib.MAX_WBITS)
    raise ValueError(f"unsupported content-encoding {enc!r}")


def now_ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


@dataclass
class ObjectResult:
    url: str
    host: str
    path: str
    type: str
    expected_size: int
    conn: int | None = None
    stream: int | None = None
    status: int | None = None
    size: int | None = None                 # decoded body bytes
    wire_body_bytes: int | None = None      # body as transferred (encoded, chunk framing)
    header_bytes: int | None = None         # response header bytes (HTTP/1.x) or None
    request_header_bytes: int | None = None
    content_encoding: str | None = None
    t_queued: float | None = None           # ms since load start: object known
    t_sent: float | None = None             # request written to the socket
    t_first_byte: float | None = None       # first response byte
    t_done: float | None = None             # last body byte
    retries: int = 0
    error: str | None = None
    discovered: bool = True                 # False: requested although the HTML never named it

    def check(self, entry: Entry, body: bytes | None, revalidate: bool) -> None:
        """Record an error if the object is not what the manifest says."""
        want = 304 if revalidate else 200
        if self.status != want:
            self.error = self.error or f"status {self.status}, expected {want}"
            return
        if want == 200 and body is not None:
            if len(body) != entry.size:
                self.error = f"size {len(body)}, expected {entry.size}"
            elif hashlib.sha256(body).hexdigest() != entry.sha256:
                self.error = "content differs from the manifest (sha256)"


@dataclass
class ConnectionResult:
    id: int
    host: str
    address: str
    port: int
    t_start: float
    t_connected: float | None = None
    t_secure: float | None = None
    alpn: str | None = None
    tls_version: str | None = None
    requests: int = 0
    bytes_sent: int = 0        # application bytes written (plaintext under TLS)
    bytes_received: int = 0
    t_closed: float | None = None
    error: str | None = None


@dataclass
class LoadReport:
    loader: str
    protocol: str
    page: str
    options: dict
    t_start_wall: float
    elapsed_ms: float | None = None
    onload_ms: float | None = None
    ok: bool = False
    objects: list[ObjectResult] = field(default_factory=list)
    connections: list[ConnectionResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unknown_references: list[str] = field(default_factory=list)
    dns: dict = field(default_factory=dict)   # host -> {t_start, t_done, address} (ms)

    def finish(self) -> "LoadReport":
        done = [o.t_done for o in self.objects if o.t_done is not None]
        self.elapsed_ms = max(done) if done else None
        bad = [f"{o.url}: {o.error or 'not fetched'}" for o in self.objects
               if o.error or o.t_done is None]
        self.errors.extend(bad)
        self.ok = not self.errors
        return self

    def to_json(self) -> dict:
        d = asdict(self)
        conns = self.connections
        d["summary"] = {
            "objects": len(self.objects),
            "objects_ok": sum(1 for o in self.objects if o.t_done is not None and not o.error),
            "connections": len(conns),
            "requests_per_connection": [c.requests for c in conns],
            "alpn": sorted({c.alpn for c in conns if c.alpn}),
            "bytes_sent": sum(c.bytes_sent for c in conns),
            "bytes_received": sum(c.bytes_received for c in conns),
            "body_bytes": sum(o.size or 0 for o in self.objects),
        }
        return d
