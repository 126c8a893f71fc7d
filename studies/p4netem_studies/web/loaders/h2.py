"""HTTP/2 page loader: one connection per host, every request multiplexed on it (python-h2).

Over TLS the protocol is chosen by ALPN (h2 only is offered, so a server without h2 fails the
load instead of silently falling back); over plain TCP it speaks h2c with prior knowledge. The
receive windows default to Chrome's (6 MB per stream, 15 MB per connection), since the 64 KB
protocol default would make large objects window-limited rather than network-limited. Requests
beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for a stream to end. Until the
server's SETTINGS arrive the limit is unknown (the protocol's initial value is unlimited), so the
loader assumes 100 as Chrome does (its initial max concurrent streams) instead of firing every
request of a 512-object page into a server that allows 128 or 256; a stream the server refuses
anyway (REFUSED_STREAM: not processed, RFC 9113 8.7) is requested again, as browsers do.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

from ..manifest import Entry, Manifest
from .common import ConnectionResult, LoadOptions, decode_body, request_headers
from .session import PageLoad


# Streams opened before the server's SETTINGS arrive (Chrome's kInitialMaxConcurrentStreams).
INITIAL_MAX_STREAMS = 100
REFUSED_STREAM = 7
MAX_RETRIES = 3            # as the HTTP/1.x loader


class _H2Conn:
    def __init__(self, load: "H2PageLoad", host: str, cid: int):
        self.load = load
        self.host = host
        self.rec = ConnectionResult(cid, host, load.opts.address(host), load.opts.effective_port,
                                    load.ms())
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_inbound_headers=True))
        self.queue: deque[Entry] = deque()
        self.streams: dict[int, dict] = {}
        self.writer: asyncio.StreamWriter | None = None
        self.ready = False
        self.settings_received = False
        self._start_pending = False
        self.task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, entry: Entry) -> None:
        # Requests found together (the references of one received piece of HTML) leave in one
        # write: started once this turn of the event loop is over, not one send() each. One
        # small segment per request used up the client's initial congestion window (10
        # segments with the SETTINGS before them) on pages with 10 or more objects per host,
        # and the rest waited a round trip for the server's ACK (uniform-12x1000 on lte-200ms:
        # the 12th request 222 ms after the 11th; docs/labs.md).
        self.queue.append(entry)
        if not self._start_pending:
            self._start_pending = True
            asyncio.get_running_loop().call_soon(self._start_soon)

    def _start_soon(self) -> None:
        self._start_pending = False
        self._start_streams()

    def _start_streams(self) -> None:
        if not self.ready:
            return
        limit = self.h2.remote_settings.max_concurrent_streams
        if not self.settings_received:
            limit = min(limit, INITIAL_MAX_STREAMS)
        # What was queued before (window updates) goes out first; each request's HEADERS
        # frames are taken on their own so their size (HPACK-compressed, frame headers
        # included) is the request's header bytes, as E5 counts them.
        out = bytearray(self.h2.data_to_send())
        while self.queue and self.h2.open_outbound_streams < limit:
            entry = self.queue.popleft()
            sid = self.h2.get_next_available_stream_id()
            authority = entry.host
            if self.load.opts.effective_port != (443 if self.load.opts.scheme == "https" else 80):
                authority += f":{self.load.opts.effective_port}"
            headers = [(":method", "GET"), (":authority", authority),
                       (":scheme", self.load.opts.scheme), (":path", entry.path)]
            headers += request_headers(entry, self.load.opts, self.load.manifest.last_modified)
            self.h2.send_headers(sid, [(k.encode(), v.encode()) for k, v in headers],
                                 end_stream=True)
            frames = self.h2.data_to_send()
            out += frames
            self.streams[sid] = {"entry": entry, "body": bytearray(), "status": None,
                                 "encoding": None}
            res = self.load.result(entry)
            res.conn = self.rec.id
            res.stream = sid
            res.t_sent = self.load.ms()
            res.request_header_bytes = len(frames)
            self.rec.requests += 1
        self._send(bytes(out))

    def _write(self) -> None:
        self._send(self.h2.data_to_send())

    def _send(self, data: bytes) -> None:
        if data and self.writer is not None:
            self.writer.write(data)
            self.rec.bytes_sent += len(data)

    async def _connect(self):
        opts = self.load.opts
        if not self.rec.address:
            self.rec.address = await self.load.lookup(self.host)
        sock = socket.socket(socket.AF_INET6 if ":" in self.rec.address else socket.AF_INET,
                             socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (self.rec.address, self.rec.port))
        self.rec.t_connected = self.load.ms()
        if opts.scheme == "https":
            reader, writer = await asyncio.open_connection(
                sock=sock, ssl=self.load.ssl_context(["h2"]), server_hostname=self.host)
            obj = writer.get_extra_info("ssl_object")
            self.rec.t_secure = self.load.ms()
            self.rec.alpn = obj.selected_alpn_protocol()
            self.rec.tls_version = obj.version()
            if self.rec.alpn != "h2":
                raise ConnectionError(f"server chose ALPN {self.rec.alpn!r}, not h2")
        else:
            reader, writer = await asyncio.open_connection(sock=sock)
            self.rec.alpn = "h2c"
        return reader, writer

    async def _run(self) -> None:
        error = None
        try:
            reader, self.writer = await self._connect()
            opts = self.load.opts
            self.h2.local_settings = h2.settings.Settings(client=True, initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: opts.h2_window,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000,
                h2.settings.SettingCodes.HEADER_TABLE_SIZE: 65536,
            })
            self.h2.initiate_connection()
            grow = opts.h2_connection_window - 65535
            if grow > 0:
                self.h2.increment_flow_control_window(grow)
            self.ready = True
            self._write()
            self._start_streams()
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                self.rec.bytes_received += len(data)
                for event in self.h2.receive_data(data):
                    self._event(event)
                self._start_streams()
                self._write()
        except asyncio.CancelledError:
            error = "cancelled"
        except (OSError, ConnectionError, h2.exceptions.ProtocolError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.rec.error = error
        finally:
            self.ready = False
            if self.writer is not None:
                self.writer.close()
            self.rec.t_closed = self.load.ms()
            for st in self.streams.values():
                self.load.complete(st["entry"], st["status"], None,
                                   error or "connection closed before the stream ended")
            for entry in self.queue:
                self.load.complete(entry, None, None, error or "connection closed")
            self.streams.clear()
            self.queue.clear()

    def _event(self, ev) -> None:
        if isinstance(ev, h2.events.ResponseReceived):
            st = self.streams.get(ev.stream_id)
            if st is None:
                return
            hdrs = {k.decode(): v.decode() for k, v in ev.headers}
            st["status"] = int(hdrs.get(":status", "0"))
            st["encoding"] = hdrs.get("content-encoding")
            res = self.load.result(st["entry"])
            res.t_first_byte = self.load.ms()
            res.content_encoding = st["encoding"]
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams.get(ev.stream_id)
            self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if st is None:
                return
            st["body"] += ev.data
            if st["entry"] is self.load.manifest.root and st["status"] == 200:
                self.load.html_data(self, ev.data, st["encoding"])
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.pop(ev.stream_id, None)
            if st is None:
                return
            res = self.load.result(st["entry"])
            res.wire_body_bytes = len(st["body"])
            body = None
            error = None
            if st["status"] == 200:
                try:
                    body = decode_body(bytes(st["body"]), st["encoding"])
                except Exception as exc:
                    error = f"bad body encoding: {exc}"
            self.load.complete(st["entry"], st["status"], body, error)
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings_received = True
        elif isinstance(ev, h2.events.StreamReset):
            st = self.streams.pop(ev.stream_id, None)
            if st is not None and ev.error_code == REFUSED_STREAM:
                # Not processed by the server: ask again when a stream is free.
                self.queue.appendleft(st["entry"])
            elif st is not None:
                self.load.complete(st["entry"], st["status"], None,
                                   f"stream reset by server (error {ev.error_code})")
        elif isinstance(ev, h2.events.ConnectionTerminated):
            # Streams above last_stream_id were never processed (RFC 9113 6.8; nginx sends
            # GOAWAY when a connection has been idle for keepalive_timeout, and the requests
            # the loader sent meanwhile cross it): request them again on a new connection, as
            # browsers do. The others end with the connection.
            last = ev.last_stream_id if ev.last_stream_id is not None else 0
            again = [self.streams.pop(sid)["entry"] for sid in sorted(self.streams) if sid > last]
            again += list(self.queue)
            self.queue.clear()
            self.load.reconnect(self, again)
            raise ConnectionError(f"GOAWAY error {ev.error_code} last stream {ev.last_stream_id}")


class H2PageLoad(PageLoad):
    loader = "p4netem_studies.web.loaders.h2"
    protocol = "h2"

    def __init__(self, manifest: Manifest, opts: LoadOptions):
        super().__init__(manifest, opts)
        self.conns: dict[str, _H2Conn] = {}

    def reconnect(self, conn: _H2Conn, entries: list[Entry]) -> None:
        """`conn` is going away: later requests for its host open a new connection, and
        `entries` (requests the server never processed) are asked for again there, each at
        most MAX_RETRIES times."""
        if self.conns.get(conn.host) is conn:
            del self.conns[conn.host]
        for entry in entries:
            res = self.result(entry)
            if res.retries >= MAX_RETRIES:
                self.complete(entry, None, None, "connection closed before the stream ended "
                              f"({MAX_RETRIES} retries)")
                continue
            res.retries += 1
            self.submit(entry, True)

    def submit(self, entry: Entry, urgent: bool) -> None:
        conn = self.conns.get(entry.host)
        if conn is None:
            conn = self.conns[entry.host] = _H2Conn(self, entry.host,
                                                        len(self.report.connections) + 1)
            self.report.connections.append(conn.rec)
        conn.submit(entry)

    async def close(self) -> None:
        for conn in self.conns.values():
            if conn.ready and conn.writer is not None:
                try:
                    conn.h2.close_connection()
                    conn._write()
                except Exception:
                    pass
        tasks = [c.task for c in self.conns.values()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def load_page(manifest: Manifest, opts: LoadOptions):
    return await H2PageLoad(manifest, opts).run()
