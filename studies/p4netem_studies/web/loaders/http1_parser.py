"""Incremental HTTP/1.x response parser (no I/O): bytes in, complete responses out.

Pipelined responses arrive back to back in one read, a response can end mid-read and a header can
be split across reads, so the parser keeps a buffer and a state, and `feed` returns every response
it completed. Body framing follows RFC 9112 section 6.3: no body for HEAD, 1xx, 204 and 304;
chunked when Transfer-Encoding ends in chunked; else Content-Length; else until the connection
closes (`eof`). Interim 1xx responses are skipped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

MAX_HEADER_BYTES = 64 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not a valid HTTP/1.x response."""


@dataclass
class Response:
    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    header_bytes: int
    body: bytes = b""
    wire_body_bytes: int = 0      # body bytes as framed on the wire (chunk framing included)
    chunked: bool = False
    until_close: bool = False
    trailers: list[tuple[str, str]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    @property
    def keep_alive(self) -> bool:
        conn = (self.header("connection") or "").lower()
        tokens = {t.strip() for t in conn.split(",")}
        if self.until_close or "close" in tokens:
            return False
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return True

    def decoded_body(self) -> bytes:
        """The body with Content-Encoding (gzip, deflate) removed."""
        from .common import decode_body
        return decode_body(self.body, self.header("content-encoding"))


_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE = range(7)


class ResponseParser:
    def __init__(self) -> None:
        self._buf = bytearray()
        self._state = _HEAD
        self._cur: Response | None = None
        self._body = bytearray()
        self._remaining = 0
        self._no_body: deque[bool] = deque()  # per expected response: True for HEAD requests

    def expect(self, method: str) -> None:
        """Announce the next request's method, in order (HEAD responses have no body)."""
        self._no_body.append(method.upper() == "HEAD")

    @property
    def current(self) -> Response | None:
        """The response whose body is being read, if any (headers known, body incomplete)."""
        return self._cur

    @property
    def body_length(self) -> int:
        return len(self._body)

    def body_since(self, offset: int) -> bytes:
        """Body bytes of `current` received after the first `offset` (chunk framing removed)."""
        return bytes(self._body[offset:])

    @property
    def idle(self) -> bool:
        """No byte of a next response has arrived yet."""
        return self._state == _HEAD and not self._buf

    def feed(self, data: bytes) -> list[Response]:
        self._buf += data
        done: list[Response] = []
        while True:
            progressed = self._step(done)
            if not progressed:
                return done

    def eof(self) -> list[Response]:
        """The peer closed: finish a read-until-close body, or complain about a truncated one."""
        if self._state == _UNTIL_CLOSE:
            resp = self._finish()
            return [resp]
        if self._state == _HEAD and not self._buf:
            return []
        raise ProtocolError(f"connection closed inside a response (state {self._state}, "
                            f"{len(self._buf)} bytes buffered)")

    # --- states -----------------------------------------------------------------------------

    def _step(self, done: list[Response]) -> bool:
        if self._state == _HEAD:
            return self._parse_head()
        if self._state == _LENGTH:
            take = min(self._remaining, len(self._buf))
            if take == 0 and self._remaining:
                return False
            self._body += self._buf[:take]
            del self._buf[:take]
            self._remaining -= take
            self._cur.wire_body_bytes += take
            if self._remaining == 0:
                done.append(self._finish())
                return True
            return False
        if self._state == _CHUNK_SIZE:
            end = self._buf.find(b"\r\n")
            if end < 0:
                if len(self._buf) > 1024:
                    raise ProtocolError("chunk size line too long")
                return False
            line = bytes(self._buf[:end]).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {line!r}") from None
            if size < 0:
                raise ProtocolError(f"bad chunk size {line!r}")
            del self._buf[: end + 2]
            self._cur.wire_body_bytes += end + 2
            if size == 0:
                self._state = _TRAILERS
            else:
                self._remaining = size
                self._state = _CHUNK_DATA
            return True
        if self._state == _CHUNK_DATA:
            take = min(self._remaining, len(self._buf))
            if take == 0:
                return False
            self._body += self._buf[:take]
            del self._buf[:take]
            self._remaining -= take
            self._cur.wire_body_bytes += take
            if self._remaining == 0:
                self._state = _CHUNK_END
            return True
        if self._state == _CHUNK_END:
            if len(self._buf) < 2:
                return False
            if self._buf[:2] != b"\r\n":
                raise ProtocolError("chunk data not followed by CRLF")
            del self._buf[:2]
            self._cur.wire_body_bytes += 2
            self._state = _CHUNK_SIZE
            return True
        if self._state == _TRAILERS:
            end = self._buf.find(b"\r\n")
            if end < 0:
                return False
            line = bytes(self._buf[:end])
            del self._buf[: end + 2]
            self._cur.wire_body_bytes += end + 2
            if not line:
                done.append(self._finish())
                return True
            name, _, value = line.decode("latin-1").partition(":")
            self._cur.trailers.append((name.strip().lower(), value.strip()))
            return True
        if self._state == _UNTIL_CLOSE:
            self._body += self._buf
            self._cur.wire_body_bytes += len(self._buf)
            self._buf.clear()
            return False
        raise AssertionError(self._state)

    def _parse_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEADER_BYTES:
                raise ProtocolError(f"response header longer than {MAX_HEADER_BYTES} bytes")
            return False
        raw = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[: end + 4]
        lines = raw.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        status = int(parts[1])
        headers = []
        for line in lines[1:]:
            if line[:1] in (" ", "\t"):
                raise ProtocolError("obsolete header line folding")
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"bad header line {line[:80]!r}")
            headers.append((name.lower(), value.strip()))
        resp = Response(parts[0], status, parts[2] if len(parts) > 2 else "", headers, end + 4)
        if 100 <= status < 200 and status != 101:
            return True  # interim response: the real one follows
        no_body = self._no_body.popleft() if self._no_body else False
        self._cur = resp
        self._body = bytearray()
        te = [v.strip().lower() for k, v in headers if k == "transfer-encoding"
              for v in v.split(",")]
        cls = [v for k, v in headers if k == "content-length"]
        if no_body or status in (204, 304):
            self._state = _LENGTH
            self._remaining = 0
        elif te:
            if te[-1] != "chunked":
                resp.until_close = True
                self._state = _UNTIL_CLOSE
            else:
                resp.chunked = True
                self._state = _CHUNK_SIZE
        elif cls:
            values = {v.strip() for c in cls for v in c.split(",")}
            if len(values) != 1 or not next(iter(values)).isdigit():
                raise ProtocolError(f"bad Content-Length {cls!r}")
            self._remaining = int(values.pop())
            self._state = _LENGTH
        else:
            resp.until_close = True
            self._state = _UNTIL_CLOSE
        return True

    def _finish(self) -> Response:
        resp = self._cur
        resp.body = bytes(self._body)
        self._cur = None
        self._body = bytearray()
        self._state = _HEAD
        return resp
