"""`p4netem stats --switch-metrics URL` on a real p4netem-switch without ports (P4Runtime only, or a
switch whose ports are still to be given): it says plainly that the switch has no ports, and whether
its data plane runs (the loop beats with or without ports), running or STALLED as on a switch with
ports. Until 2026-11-30 it said `kernel ring drops: unknown: no ports in the metrics at URL (not a
p4netem-switch --metrics-addr?)`, and --json gave that error with no `dataplane`, so a stalled loop
of such a switch went unseen. A URL that serves no switch's metrics is still an error.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from p4netem.lab import Resources, SwitchProcess
from p4netem.lab.free import free_tcp_port
from thread_stop import stopped_thread, thread_ids

STALL_WAIT_S = 60.0  # generous on a loaded 2-core machine: the stall shows 3 s after the stop


def _stats(*args: str, addr: str) -> subprocess.CompletedProcess[str]:
    """`p4netem stats ...` as a user runs it, stdout a pipe."""
    env = {**os.environ, "P4NETEM_ADDR": addr, "COLUMNS": "200"}
    return subprocess.run([str(Path(sys.executable).parent / "p4netem"), "stats", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def _health(url: str, addr: str) -> dict:
    r = _stats("--json", "--switch-metrics", url, addr=addr)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["switch_health"]


@pytest.fixture
def portless(switch_bin: str, tmp_path):
    """A p4netem-switch with no ports and --metrics-addr; (switch, metrics URL)."""
    if os.geteuid() != 0:
        pytest.fail("switch tests need root (ptrace)", pytrace=False)
    resources = Resources()
    metrics = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
    sw = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log", resources=resources,
                       extra_args=["--rt-priority", "0", "--metrics-addr", metrics])
    try:
        yield sw.start(), f"http://{metrics}/metrics"
    finally:
        sw.stop()
        resources.close()


def test_a_switch_without_ports_shows_its_data_plane_and_no_ports(portless) -> None:
    switch, url = portless
    addr = switch.grpc_addr
    health = _health(url, addr)
    assert "error" not in health, health
    assert health["url"] == url and health["ports"] == [] and health["ring_drops"] == 0, health
    dp = health["dataplane"]
    assert dp["serving"] is True and dp["stalled"] == [] and dp["timeout_s"] == 3.0, dp
    assert [t["thread"] for t in dp["threads"]] == ["dataplane"], dp

    r = _stats("--once", "--switch-metrics", url, addr=addr)
    assert r.returncode == 0, r.stderr
    assert "switch ports: none (the switch has no ports" in r.stdout, r.stdout
    assert "data plane: running" in r.stdout, r.stdout
    assert "unknown" not in r.stdout.split("parser errors")[1].split("radio:")[0], r.stdout

    # Its loop stopped (ptrace, that thread alone): STALLED, as on a switch with ports.
    (tid,) = thread_ids(switch.proc.pid, "p4netem-dp")
    with stopped_thread(switch.proc.pid, tid):
        deadline = time.monotonic() + STALL_WAIT_S
        while _health(url, addr)["dataplane"]["serving"] is not False:
            assert time.monotonic() < deadline, "no stall seen"
            time.sleep(0.5)
        r = _stats("--once", "--switch-metrics", url, addr=addr)
        assert "switch ports: none" in r.stdout, r.stdout
        assert "data plane: STALLED: the data-plane loop has not run for" in r.stdout, r.stdout


class _NotASwitch(http.server.BaseHTTPRequestHandler):
    """Another exporter's OpenMetrics page: valid, with none of the switch's metrics."""

    def do_GET(self) -> None:
        body = b"# TYPE other_exporter_up gauge\nother_exporter_up 1\n# EOF\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_url_without_switch_metrics_is_still_an_error(bare_switch) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotASwitch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        health = _health(url, bare_switch.grpc_addr)
        assert set(health) == {"url", "error"} and health["url"] == url, health
        assert url in health["error"] and "(not a p4netem-switch --metrics-addr?)" in health["error"], health
        r = _stats("--once", "--switch-metrics", url, addr=bare_switch.grpc_addr)
        assert r.returncode == 0 and "kernel ring drops: unknown: " in r.stdout, r.stdout
        assert "(not a p4netem-switch --metrics-addr?)" in r.stdout, r.stdout
        assert "data plane:" not in r.stdout and "switch ports: none" not in r.stdout, r.stdout
    finally:
        server.shutdown()
        server.server_close()
