"""`p4netem web` left running under churn (a soak in small): browsers that open the live stream
and vanish mid-response (FIN or RST), slow readers that stop reading, requests aborted half-sent,
Prometheus scraping, and the switch restarted under it. Whatever the clients left, the process
holds nothing more afterwards: its file descriptors are back at their count before the churn, no
socket waits in CLOSE_WAIT, its threads stay within the request thread pool's bound, it is back on
exactly its two connections to the switch (one per side, session.py), and with no client left it
reads nothing from the switch.

A guard, not the regression test of a fix: a 15-minute soak of the same kinds of clients found no
leak in the web server, and this keeps it so. Checked against an injected fault: live streams
that outlive their clients (disconnects neither listened for nor checked) fail it (the switch
counted 22 Reads in the 2 idle seconds), while their sockets, closed by uvicorn, do not show."""

from __future__ import annotations

import collections
import os
import random
import socket
import struct
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4netem.lab.free import free_tcp_port

from webserver import WebServer

# anyio's default thread limiter: sync endpoints and the live stream's reads run on at most this
# many worker threads, kept idle once started (reused, pruned only at the next call).
POOL = 40
IDLE_S = 2.0

_TCP_STATES = {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}


def _held(pid: int, switch_port: int) -> dict:
    """What the process holds: fds, threads, its TCP sockets' states, connections to the switch."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    states: collections.Counter = collections.Counter()
    to_switch = 0
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[9] not in inodes:
                    continue
                state = _TCP_STATES.get(cols[3], cols[3])
                states[state] += 1
                if state == "ESTABLISHED" and int(cols[2].rsplit(":", 1)[1], 16) == switch_port:
                    to_switch += 1
    with open(f"/proc/{pid}/status") as f:
        threads = int(next(line for line in f if line.startswith("Threads:")).split()[1])
    return {"fds": fds, "threads": threads, "close_wait": states["CLOSE_WAIT"], "to_switch": to_switch}


def _switch_reads(url: str) -> float:
    """P4Runtime Reads the switch has answered (its own metrics, --metrics-addr)."""
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "p4netem_switch_p4runtime_request_seconds_count" and s.labels.get("rpc") == "Read")


def _rst(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a browser tab that is killed."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _vanishing_stream(web: WebServer, rng: random.Random) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as s:
        s.sendall(b"GET /api/live HTTP/1.1\r\nHost: p4netem\r\nAccept: text/event-stream\r\n\r\n")
        want = rng.choice([0, 1, 300, 3000])  # before the answer, in the headers, after an event or three
        got = 0
        while got < want:
            chunk = s.recv(want - got)
            if not chunk:
                break
            got += len(chunk)
        if rng.random() < 0.5:
            _rst(s)


def _slow_reader(web: WebServer) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # full after a few events: the server's writes wait
    s.settimeout(30)
    s.connect(("127.0.0.1", web.port))
    s.sendall(b"GET /api/live HTTP/1.1\r\nHost: p4netem\r\n\r\n")
    time.sleep(2.0)
    _rst(s)


def _aborted_request(web: WebServer, kind: int) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as s:
        if kind == 0:
            s.sendall(b"GET /api/sta")  # half a request line
        elif kind == 1:  # a body announced and never sent whole
            s.sendall(b"POST /api/apply HTTP/1.1\r\nHost: p4netem\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"profile\": ")
        else:  # asked, then gone before the answer
            s.sendall(b"GET /api/stats HTTP/1.1\r\nHost: p4netem\r\n\r\n")
        time.sleep(0.05)
        _rst(s)


def _until(fn, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.25)
    return fn()


@pytest.fixture
def metrics_lab(start_lab):
    """A lab whose switch also serves its own metrics (--metrics-addr), and their URL."""
    port = free_tcp_port("127.0.0.1")
    return start_lab("--metrics-addr", f"127.0.0.1:{port}"), f"http://127.0.0.1:{port}/metrics"


def test_a_churned_web_server_holds_nothing_more_afterwards(metrics_lab, tmp_path):
    lab, metrics_url = metrics_lab
    web = WebServer(lab.switch.grpc_addr, "--refresh", "0.2", log=tmp_path / "web.log")
    rng = random.Random(62)
    stop = threading.Event()
    try:
        # Both connections open, each kind of request served once: the baseline.
        assert web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})[0] == 200
        assert web.request("GET", "/api/show")[0] == 200
        assert web.request("GET", "/metrics")[0] == 200
        _vanishing_stream(web, random.Random(1))
        time.sleep(1.0)
        before = _held(web.proc.pid, lab.switch.grpc_port)
        assert before["to_switch"] == 2 and before["close_wait"] == 0, before

        def scrape() -> None:  # Prometheus, closer than any real one
            while not stop.is_set():
                web.request("GET", "/metrics")
                time.sleep(0.1)

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        jobs = ([lambda: _vanishing_stream(web, rng)] * 40 + [lambda: _slow_reader(web)] * 6
                + [lambda k=k: _aborted_request(web, k % 3) for k in range(30)])
        rng.shuffle(jobs)
        workers = [threading.Thread(target=lambda part=jobs[i::6]: [job() for job in part], daemon=True)
                   for i in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=120)
        assert not any(w.is_alive() for w in workers), "a client of the churn never finished"

        # The switch restarted under it: 503s meanwhile, then both connections back, once each.
        lab.switch.stop()
        assert web.request("GET", "/api/show")[0] == 503
        lab.switch.start()  # the same gRPC port
        assert _until(lambda: web.request("GET", "/api/show")[0] == 200, 30), "the web did not find the switch back"
        assert _until(lambda: web.request("POST", "/api/apply", {"profile": "lan"})[0] == 200, 30)
        stop.set()
        scraper.join(timeout=30)

        def settled() -> bool:
            now = _held(web.proc.pid, lab.switch.grpc_port)
            return now["fds"] <= before["fds"] and now["close_wait"] == 0 and now["to_switch"] == 2
        assert _until(settled, 30), (before, _held(web.proc.pid, lab.switch.grpc_port))
        after = _held(web.proc.pid, lab.switch.grpc_port)
        assert after["threads"] <= before["threads"] + POOL, (before, after)
        # With no client left, nothing reads the switch: no stream of a vanished client goes on
        # reading it and writing events to nobody (its socket is closed either way, so only
        # this shows it: the switch's own count of Reads).
        reads = _switch_reads(metrics_url)
        time.sleep(IDLE_S)
        assert _switch_reads(metrics_url) == reads, "the web read the switch with no client asking"
        # And it still serves: the live stream answers with an event.
        with socket.create_connection(("127.0.0.1", web.port), timeout=30) as s:
            s.sendall(b"GET /api/live HTTP/1.1\r\nHost: p4netem\r\n\r\n")
            seen = b""
            while b"data: " not in seen:
                chunk = s.recv(4096)
                assert chunk, seen
                seen += chunk
    finally:
        stop.set()
        web.stop()
