"""What the loaders and helpers do on the wire, seen in packet captures: pipelined requests
really leave before the responses, HTTP/1.0 uses a connection per object, and the server's
first flight equals the initial window set with the route helper."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from p4netem_studies.web import tcp_tuning
from p4netem_studies.web.capture import Capture, first_flight
from p4netem_studies.web.load import run_loader
from web_env import CLIENT_IF, CLIENT_NS, H2C, HTTP, SERVER_IF, SERVER_IP, SERVER_NS


def _client_requests(segments):
    """Per client TCP connection: the list of (index in capture, number of GETs) of its data."""
    out = []
    for i, s in enumerate(segments):
        if s.dst == SERVER_IP and s.payload:
            out.append((i, s.payload.count(b"GET ")))
    return out


def test_pipelining_sends_requests_before_responses(content, nginx, tmp_path):
    before = len(nginx.requests())
    cap = Capture(CLIENT_NS, CLIENT_IF, tmp_path / "pipe.pcap", f"tcp port {HTTP}")
    try:
        report = run_loader(CLIENT_NS, "h1.1-pipelined", content.demo_path,
                            resolve=content.resolve(content.demo), timeout_s=30)
    finally:
        cap.stop()
    assert report["ok"], report["errors"]
    segs = cap.segments()
    # Follow one connection (to www): requests sent vs responses started.
    www = next(c for c in report["connections"] if c["host"] == content.demo.root.host)
    assert www["requests"] >= 10
    # Several GETs share one segment: requests were buffered and flushed together...
    gets = [n for _, n in _client_requests(segs)]
    assert max(gets) >= 2, gets
    # ...and on the wire several requests are outstanding at once: count, for each moment, the
    # GETs a connection has sent minus the responses (status lines) it has received.
    outstanding, peak = {}, 0
    for s in segs:
        if not s.payload:
            continue
        if s.dst == SERVER_IP:
            key = s.sport
            outstanding[key] = outstanding.get(key, 0) + s.payload.count(b"GET ")
        else:
            key = s.dport
            outstanding[key] = outstanding.get(key, 0) - s.payload.count(b"HTTP/1.1 ")
        peak = max(peak, outstanding[key])
    assert peak >= 3, peak
    # nginx marks requests it read while earlier ones were still in its buffer ($pipe = "p").
    time.sleep(0.3)
    rows = nginx.requests()[before:]
    assert sum(r["pipe"] == "p" for r in rows) >= 5


def test_pipeline_flush_timer(content, nginx):
    # With a huge size threshold only the 50 ms timer flushes: requests wait about that long.
    report = run_loader(CLIENT_NS, "h1.1-pipelined", content.demo_path,
                        resolve=content.resolve(content.demo), timeout_s=30,
                        extra_args=["--flush-bytes", "1000000", "--flush-ms", "50"])
    assert report["ok"], report["errors"]
    waits = [o["t_sent"] - o["t_queued"] for o in report["objects"][1:]]
    assert max(waits) >= 45, waits
    assert report["objects"][0]["t_sent"] - report["objects"][0]["t_queued"] < 20  # HTML: at once


def test_http10_one_connection_per_object_on_the_wire(content, nginx, tmp_path):
    cap = Capture(CLIENT_NS, CLIENT_IF, tmp_path / "h10.pcap", f"tcp port {HTTP}")
    try:
        report = run_loader(CLIENT_NS, "h1.0", content.demo_path,
                            resolve=content.resolve(content.demo), timeout_s=30)
    finally:
        cap.stop()
    assert report["ok"], report["errors"]
    syns = [s for s in cap.segments() if s.dst == SERVER_IP and s.flags & 0x02]
    # Count handshakes, not ports: the kernel may reuse a source port for a later connection.
    assert len({(s.sport, s.seq) for s in syns if not s.flags & 0x10}) == len(content.demo.objects)


def _nft(ns: str, script: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script, text=True,
                   check=True, capture_output=True)


_CLIENT = r"""
import socket, sys
host, path, ip, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.create_connection((ip, port))
print("connected", flush=True)
sys.stdin.readline()
s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
data = b""
while chunk := s.recv(65536):
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode(), len(body), flush=True)
"""


@pytest.mark.parametrize("iw", [3, 10, 20])
def test_initcwnd_sets_first_flight(content, nginx, tmp_path, iw):
    """Withhold the client's pure ACKs at the server once the connection is up: the server sends
    exactly its initial window, then waits for a retransmission timeout. The capture counts that
    first flight. (The handshake completes first: were its last ACK dropped too, the request
    would complete it and Linux would count one more packet in the first flight.)"""
    # A receiver advertises 10 segments at first unless its route says otherwise, which would cap
    # the flight at 10: raise the client's initrwnd too (labs with IW > 10 must do the same).
    tcp_tuning.set_initial_window(CLIENT_NS, 10, 64)
    record = tcp_tuning.set_initial_window(SERVER_NS, iw)
    assert record and all(r["initcwnd"] == iw and r["initrwnd"] == iw for r in record)
    tcp_tuning.set_standard_sysctls(SERVER_NS)
    # No tail loss probe: with ACKs withheld it would send one new segment ~10 ms after the
    # flight, which a count up to the first retransmission would take for part of the window.
    saved = tcp_tuning.set_sysctls(SERVER_NS, {"net.ipv4.tcp_early_retrans": 0})
    big = content.big.embedded[0]
    cap = Capture(SERVER_NS, SERVER_IF, tmp_path / f"iw{iw}.pcap", f"tcp port {HTTP}")
    client = subprocess.Popen(["ip", "netns", "exec", CLIENT_NS, sys.executable, "-c", _CLIENT,
                               big.host, big.path, SERVER_IP, str(HTTP)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "connected"
        _nft(SERVER_NS, f"""table inet p4nwtest {{
            chain input {{ type filter hook input priority 0; policy accept;
                tcp dport {HTTP} tcp flags == ack ip length < 100 drop
            }}
        }}""")
        client.stdin.write("go\n")
        client.stdin.flush()
        time.sleep(1.5)          # past the first RTO (>= 200 ms), so the flight is over
        _nft(SERVER_NS, "delete table inet p4nwtest")
        out, _ = client.communicate(timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        subprocess.run(["ip", "netns", "exec", SERVER_NS, "nft", "delete", "table", "inet",
                        "p4nwtest"], capture_output=True)
        cap.stop()
        tcp_tuning.set_initial_window(SERVER_NS, 10)
        tcp_tuning.set_sysctls(SERVER_NS, {
            "net.ipv4.tcp_early_retrans": saved["net.ipv4.tcp_early_retrans"]["before"]})
    assert out.strip() == f"HTTP/1.1 200 OK {big.size}", out
    segs = cap.segments()
    data = [s for s in segs if s.src == SERVER_IP and s.payload]
    assert data and max(len(s.payload) for s in data) <= 1460  # offloads off: wire segments
    assert first_flight(segs, SERVER_IP, HTTP) == iw


def _h2_headers_frames(payload: bytes) -> int:
    """HEADERS frames that start in this client segment (whole frames only)."""
    if payload.startswith(b"PRI * HTTP/2.0"):
        payload = payload[24:]
    n = 0
    while len(payload) >= 9:
        length = int.from_bytes(payload[:3], "big")
        n += payload[3] == 0x1
        payload = payload[9 + length:]
    return n


def test_h2_requests_found_together_leave_together(content, nginx, tmp_path):
    """The HTTP/2 loader sends the requests it finds in one piece of HTML in one write, not one
    segment each: one segment per request used up the client's initial window on pages with
    10 or more objects per host, and the rest waited a round trip (issue 16, docs/labs.md)."""
    cap = Capture(CLIENT_NS, CLIENT_IF, tmp_path / "h2c.pcap", f"tcp port {H2C}")
    try:
        report = run_loader(CLIENT_NS, "h2", content.demo_path, scheme="http", port=H2C,
                            resolve=content.resolve(content.demo), timeout_s=30)
    finally:
        cap.stop()
    assert report["ok"], report["errors"]
    per_segment = [_h2_headers_frames(s.payload) for s in cap.segments()
                   if s.dst == SERVER_IP and s.payload]
    carrying = [n for n in per_segment if n]
    assert sum(carrying) == len(content.demo.objects), per_segment
    # 31 requests on 2 connections: the HTML's, then its references in a few batches (one per
    # read of the HTML as it arrives), where one segment per request gave 31 segments.
    assert max(carrying) >= 5 and len(carrying) <= len(content.demo.objects) // 2, carrying
