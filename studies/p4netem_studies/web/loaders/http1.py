"""HTTP/1.0, persistent HTTP/1.1 and pipelined HTTP/1.1 page loaders over asyncio sockets.

The three differ only in how requests map onto connections (`H1Mode`):
- h1.0: one request per connection, at most N connections per host at once (E1: 4);
- h1.1: persistent connections, one outstanding request each, k per host (browsers: 6);
- h1.1-pipelined: requests written back to back without waiting for responses. As in the 1997
  libwww client, requests are buffered and the buffer is flushed when it reaches `flush_bytes`
  (1024 B) or `flush_ms` (50 ms) after the first buffered request, and the HTML request is flushed
  at once. Nagle is off on every socket, so a flush is a segment on the wire.
A connection the server closes with requests unanswered (keepalive_requests reached) has them
re-queued on a new connection, and each such retry is counted.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from dataclasses import dataclass

from ..manifest import Entry, Manifest
from .common import ConnectionResult, LoadOptions, request_headers
from .http1_parser import ProtocolError, Response, ResponseParser
from .session import PageLoad

MAX_RETRIES = 3


@dataclass(frozen=True)
class H1Mode:
    name: str
    version: str
    one_request_per_conn: bool
    max_depth: int | None      # outstanding requests per connection (None: unbounded)
    buffered: bool             # pipelining flush policy
    default_conns: int


MODES = {
    "h1.0": H1Mode("h1.0", "HTTP/1.0", True, 1, False, 4),
    "h1.1": H1Mode("h1.1", "HTTP/1.1", False, 1, False, 6),
    "h1.1-pipelined": H1Mode("h1.1-pipelined", "HTTP/1.1", False, None, True, 1),
}


class _Request:
    __slots__ = ("entry", "wire", "urgent")

    def __init__(self, entry: Entry, wire: bytes, urgent: bool):
        self.entry = entry
        self.wire = wire
        self.urgent = urgent


class _Conn:
    """One TCP (or TLS) connection carrying HTTP/1.x requests in order."""

    def __init__(self, load: "H1PageLoad", pool: "_HostPool", cid: int):
        self.load = load
        self.pool = pool
        self.rec = ConnectionResult(cid, pool.host, load.opts.address(pool.host),
                                    load.opts.effective_port, load.ms())
        self.assigned: deque[_Request] = deque()   # written or buffered, response not complete
        self.total_assigned = 0
        self.parser = ResponseParser()
        self.writer: asyncio.StreamWriter | None = None
        self.buf = bytearray()
        self.buf_reqs: list[_Request] = []
        self.timer: asyncio.TimerHandle | None = None
        self.flush_wanted = False
        self.closing = False
        self.html_fed = 0                              # HTML body bytes given to discovery
        self.task = asyncio.get_running_loop().create_task(self._run())

    # --- requests in ----------------------------------------------------------------------------

    def capacity(self) -> bool:
        mode = self.load.mode
        if self.closing:
            return False
        if mode.one_request_per_conn and self.total_assigned >= 1:
            return False
        return mode.max_depth is None or len(self.assigned) < mode.max_depth

    def assign(self, req: _Request) -> None:
        self.assigned.append(req)
        self.total_assigned += 1
        self.parser.expect("GET")
        self.buf += req.wire
        self.buf_reqs.append(req)
        mode = self.load.mode
        if not mode.buffered or req.urgent or len(self.buf) >= self.load.opts.flush_bytes:
            self.flush()
        elif self.timer is None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(self.load.opts.flush_ms / 1000.0, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.writer is None:          # not connected yet: flush on connect
            self.flush_wanted = True
            return
        if not self.buf:
            return
        t = self.load.ms()
        for req in self.buf_reqs:
            self.load.result(req.entry).t_sent = t
        self.writer.write(bytes(self.buf))
        self.rec.bytes_sent += len(self.buf)
        self.buf.clear()
        self.buf_reqs.clear()

    # --- connection life ------------------------------------------------------------------------

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        opts = self.load.opts
        if not self.rec.address:
            self.rec.address = await self.load.lookup(self.pool.host)
        sock = socket.socket(socket.AF_INET6 if ":" in self.rec.address else socket.AF_INET,
                             socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if opts.window_clamp:
            # Before connect, so the SYN already offers at most this window (E2's receiver cap).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, opts.window_clamp)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (self.rec.address, self.rec.port))
        self.rec.t_connected = self.load.ms()
        if opts.scheme == "https":
            ctx = self.load.ssl_context(["http/1.1"])
            reader, writer = await asyncio.open_connection(sock=sock, ssl=ctx,
                                                           server_hostname=self.pool.host)
            obj = writer.get_extra_info("ssl_object")
            self.rec.t_secure = self.load.ms()
            self.rec.alpn = obj.selected_alpn_protocol() or "http/1.1"
            self.rec.tls_version = obj.version()
        else:
            reader, writer = await asyncio.open_connection(sock=sock)
            self.rec.alpn = None
        return reader, writer

    async def _run(self) -> None:
        error = None
        try:
            reader, self.writer = await self._connect()
            if self.flush_wanted or (self.buf and not self.load.mode.buffered):
                self.flush()
            while self.assigned or not self.closing:
                data = await reader.read(65536)
                if not data:
                    self._responses(self.parser.eof(), eof=True)
                    break
                self.rec.bytes_received += len(data)
                if self.parser.idle and self.assigned:
                    res = self.load.result(self.assigned[0].entry)
                    if res.t_first_byte is None:
                        res.t_first_byte = self.load.ms()
                self._responses(self.parser.feed(data))
                self._progress()
                if self.closing and not self.assigned:
                    break
        except asyncio.CancelledError:
            error = "cancelled"
        except (OSError, ProtocolError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.rec.error = error
        finally:
            self.closing = True
            if self.timer is not None:
                self.timer.cancel()
            if self.writer is not None:
                self.writer.close()
            self.rec.t_closed = self.load.ms()
            self.pool.closed(self, list(self.assigned), error)
            self.assigned.clear()

    def _progress(self) -> None:
        """Stream the HTML body into discovery while it arrives."""
        cur = self.parser.current
        if cur is None or not self.assigned or self.assigned[0].entry is not self.load.manifest.root:
            return
        if cur.status == 200:
            self.load.html_data(self, self.parser.body_since(self.html_fed),
                                cur.header("content-encoding"))
            self.html_fed = self.parser.body_length

    def _responses(self, responses: list[Response], eof: bool = False) -> None:
        for resp in responses:
            if not self.assigned:
                raise ProtocolError(f"unsolicited response {resp.status}")
            req = self.assigned.popleft()
            self.rec.requests += 1
            res = self.load.result(req.entry)
            if res.t_first_byte is None:
                res.t_first_byte = self.load.ms()
            res.conn = self.rec.id
            res.header_bytes = resp.header_bytes
            res.wire_body_bytes = resp.wire_body_bytes
            res.content_encoding = resp.header("content-encoding")
            res.request_header_bytes = len(req.wire)
            if req.entry is self.load.manifest.root and resp.status == 200:
                self.load.html_data(self, resp.body[self.html_fed:], res.content_encoding)
            try:
                body = resp.decoded_body() if resp.status == 200 else None
            except Exception as exc:  # zlib.error or unknown encoding
                self.load.complete(req.entry, resp.status, None, f"bad body encoding: {exc}")
            else:
                self.load.complete(req.entry, resp.status, body)
            if not resp.keep_alive or self.load.mode.one_request_per_conn:
                self.closing = True
        if self.assigned and not self.closing:
            # The next response may already be queued behind this one.
            pass
        self.pool.dispatch()


OPEN = object()      # choose_connection: open a new connection for the request


def choose_connection(conns, *, retry: bool, can_open: bool, pipelining: bool):
    """Where a host's next request goes: an idle connection, OPEN (a new one), the least loaded
    connection when pipelining, or None (wait). A retry (the server closed a connection under a
    request) avoids connections that have sat idle after serving requests: they have likely been
    idle as long as the one that failed and been closed by the same keep-alive timeout, their
    FINs still queued behind the downlink's data on a slow link. It takes a connection that has
    served nothing yet, else a new one when one may open (where a browser ends up), and only
    then a used idle one."""
    usable = [c for c in conns if c.capacity()]
    idle = [c for c in usable if not c.assigned]
    if retry and idle:
        fresh = [c for c in idle if c.total_assigned == 0]
        if fresh or can_open:
            idle = fresh
    if idle:
        return idle[0]
    if can_open:
        return OPEN
    if usable and pipelining:
        return min(usable, key=lambda c: len(c.assigned))
    return None


class _HostPool:
    """Requests for one host and the connections that carry them."""

    def __init__(self, load: "H1PageLoad", host: str):
        self.load = load
        self.host = host
        self.queue: deque[_Request] = deque()
        self.conns: list[_Conn] = []
        mode = load.mode
        self.limit = load.opts.conns_per_host or mode.default_conns

    def add(self, req: _Request, front: bool = False) -> None:
        (self.queue.appendleft if front else self.queue.append)(req)
        self.dispatch()

    def dispatch(self) -> None:
        while self.queue:
            retry = self.load.result(self.queue[0].entry).retries > 0
            can_open = len(self.conns) < self.limit and self.load.may_open()
            conn = choose_connection(self.conns, retry=retry, can_open=can_open,
                                     pipelining=self.load.mode.max_depth is None)
            if conn is None:
                return
            if conn is OPEN:
                conn = self.load.open_conn(self)
            conn.assign(self.queue.popleft())

    def closed(self, conn: _Conn, unanswered: list[_Request], error: str | None) -> None:
        if conn in self.conns:
            self.conns.remove(conn)
        self.load.conn_closed()
        for req in reversed(unanswered):
            res = self.load.result(req.entry)
            if res.retries >= MAX_RETRIES or self.load.closing:
                self.load.complete(req.entry, None, None,
                                   error or "connection closed before the response")
                continue
            res.retries += 1
            req.urgent = True
            self.queue.appendleft(req)
        if not self.load.closing:
            self.load.dispatch_all()


class H1PageLoad(PageLoad):
    loader = "p4netem_studies.web.loaders.http1"

    def __init__(self, manifest: Manifest, opts: LoadOptions, mode: str):
        if mode not in MODES:
            raise ValueError(f"HTTP/1 mode must be one of {sorted(MODES)}, not {mode!r}")
        self.mode = MODES[mode]
        self.protocol = mode
        super().__init__(manifest, opts)
        self.pools: dict[str, _HostPool] = {}
        self.open_count = 0
        self.closing = False
        self._next_id = 1

    def may_open(self) -> bool:
        return self.opts.max_conns is None or self.open_count < self.opts.max_conns

    def open_conn(self, pool: _HostPool) -> _Conn:
        conn = _Conn(self, pool, self._next_id)
        self._next_id += 1
        self.open_count += 1
        pool.conns.append(conn)
        self.report.connections.append(conn.rec)
        return conn

    def conn_closed(self) -> None:
        self.open_count -= 1

    def dispatch_all(self) -> None:
        for pool in self.pools.values():
            pool.dispatch()

    def _wire(self, entry: Entry) -> bytes:
        port = self.opts.effective_port
        default = 443 if self.opts.scheme == "https" else 80
        host = entry.host if port == default else f"{entry.host}:{port}"
        lines = [f"GET {entry.path} {self.mode.version}", f"Host: {host}"]
        for name, value in request_headers(entry, self.opts, self.manifest.last_modified):
            lines.append(f"{'-'.join(p.capitalize() for p in name.split('-'))}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def submit(self, entry: Entry, urgent: bool) -> None:
        pool = self.pools.get(entry.host)
        if pool is None:
            pool = self.pools[entry.host] = _HostPool(self, entry.host)
        pool.add(_Request(entry, self._wire(entry), urgent))

    async def close(self) -> None:
        self.closing = True
        tasks = [c.task for p in self.pools.values() for c in p.conns]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def load_page(manifest: Manifest, opts: LoadOptions, mode: str):
    return await H1PageLoad(manifest, opts, mode).run()
