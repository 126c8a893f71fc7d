"""`p4netem web` as the user runs it: a subprocess against a lab's switch, and a small HTTP client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from p4netem.lab.free import free_tcp_port

P4NETEM = Path(sys.executable).parent / "p4netem"


def until(what: str, check, within: float, every: float = 0.2):
    """check()'s first truthy value, tried every `every` seconds for at most `within` seconds (an
    assertion naming `what` after that)."""
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        time.sleep(every)


class WebServer:
    def __init__(self, switch_addr: str, *args: str, log: Path, election_id: int = 5,
                 port: int | None = None):
        # `port`: one picked earlier (a Prometheus that already scrapes it: test_prometheus_grafana).
        self.port = port or free_tcp_port("127.0.0.1")
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_")}
        self.proc = subprocess.Popen(
            [str(P4NETEM), "web", "--listen", f"127.0.0.1:{self.port}", "-s", switch_addr,
             "--election-id", str(election_id), *args],
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"p4netem web exited {self.proc.returncode}:\n{log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"p4netem web did not listen in 60 s:\n{log.read_text()}")

    def request(self, method: str, path: str, body: object | None = None,
                token: str | None = None, headers: dict[str, str] | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                raw, status, ctype = r.read(), r.status, r.headers.get("content-type", "")
        except urllib.error.HTTPError as err:
            raw, status, ctype = err.read(), err.code, err.headers.get("content-type", "")
        return status, (json.loads(raw) if "json" in ctype else raw.decode())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
