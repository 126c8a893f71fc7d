"""The HTTP/1.x response parser: pipelined responses back to back, every split point, chunked
bodies with extensions and trailers, read-until-close, bodiless responses, and bad input."""

from __future__ import annotations

import gzip

import pytest

from p4netem_studies.web.loaders.http1_parser import ProtocolError, ResponseParser

R1 = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
R2 = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      b"4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Trailer: yes\r\n\r\n")
R3 = b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 999\r\n\r\n"
R4 = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
STREAM = R1 + R2 + R3 + R4


def _expect(p: ResponseParser, n: int) -> None:
    for _ in range(n):
        p.expect("GET")


def test_pipelined_responses_in_one_read():
    p = ResponseParser()
    _expect(p, 4)
    out = p.feed(STREAM)
    assert [r.status for r in out] == [200, 200, 304, 204]
    assert out[0].body == b"hello" and out[0].header_bytes == len(R1) - 5
    assert out[1].body == b"wikipedia" and out[1].chunked
    assert out[1].trailers == [("x-trailer", "yes")]
    assert out[1].wire_body_bytes == len(R2) - R2.index(b"\r\n\r\n") - 4
    assert out[2].body == b"" and out[3].body == b""
    assert p.idle


@pytest.mark.parametrize("step", [1, 2, 3, 7, 13])
def test_every_split_point(step):
    p = ResponseParser()
    _expect(p, 4)
    out = []
    for i in range(0, len(STREAM), step):
        out += p.feed(STREAM[i:i + step])
    assert [r.body for r in out] == [b"hello", b"wikipedia", b"", b""]


def test_read_until_close_and_truncation():
    p = ResponseParser()
    p.expect("GET")
    assert p.feed(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\nabc") == []
    assert p.feed(b"def") == []
    (r,) = p.eof()
    assert r.body == b"abcdef" and r.until_close and not r.keep_alive
    p = ResponseParser()
    p.expect("GET")
    p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    with pytest.raises(ProtocolError, match="closed inside"):
        p.eof()


def test_head_response_has_no_body():
    p = ResponseParser()
    p.expect("HEAD")
    p.expect("GET")
    out = p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + R1)
    assert [r.body for r in out] == [b"", b"hello"]


def test_keep_alive_rules():
    p = ResponseParser()
    _expect(p, 3)
    a, b, c = p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                     b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
                     b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert (a.keep_alive, b.keep_alive, c.keep_alive) == (False, True, False)


def test_gzip_body_decoded():
    body = gzip.compress(b"x" * 1000)
    p = ResponseParser()
    p.expect("GET")
    (r,) = p.feed(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert r.decoded_body() == b"x" * 1000 and r.wire_body_bytes == len(body)


@pytest.mark.parametrize("bad", [
    b"HTTX/1.1 200 OK\r\n\r\n",
    b"HTTP/1.1 abc OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
])
def test_bad_responses_raise(bad):
    p = ResponseParser()
    p.expect("GET")
    with pytest.raises(ProtocolError):
        p.feed(bad)


def test_oversized_header_raises():
    p = ResponseParser()
    p.expect("GET")
    with pytest.raises(ProtocolError, match="longer than"):
        p.feed(b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70000)
