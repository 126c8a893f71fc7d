"""The switch's own health (issue 12 item 3): p4netem-switch --metrics-addr serves OpenMetrics text
(data-plane loop busy time, kernel receive-ring frames and drops per port, buffers, P4Runtime
latency per RPC) that moves with traffic and requests; `p4netem web --switch-metrics` re-exports
it on /metrics and summarizes it on /api/health."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus_text

from p4netem.control import Controller
from p4netem.lab.probe import ProbeResult, run_probe
from p4netem.profiles import Profile
from p4netem.lab.free import free_tcp_port

from webserver import WebServer


def _samples(families) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def _get(samples: dict, name: str, **labels) -> float:
    hits = [v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels, sorted(k for k in samples if k[0].startswith(name[:20])))
    return hits[0]


def _scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["content-type"].startswith("application/openmetrics-text")
        return _samples(openmetrics(r.read().decode()))


def test_switch_health_moves_with_traffic_and_requests(health_lab, tmp_path):
    lab, url = health_lab
    before = _scrape(url)
    rx_before = _get(before, "p4netem_switch_kernel_rx_packets_total", port="1")
    assert _get(before, "p4netem_switch_ring_drops_total", port="2") >= 0
    assert _get(before, "p4netem_switch_buffers") > 0
    # Every buffer is free or holds a packet, also before the first frame (free read 0 then).
    assert (_get(before, "p4netem_switch_free_buffers") + _get(before, "p4netem_switch_held_packets")
            == _get(before, "p4netem_switch_buffers"))

    lab.h1.ns.run(["ping", "-c", "100", "-i", "0.01", "-W", "2", lab.h2.ip], timeout=60)
    with Controller.connect(lab.switch.grpc_addr, primary=False) as reader:
        reader.stats()
    time.sleep(1.2)  # the ring statistics are read once a second
    after = _scrape(url)
    assert _get(after, "p4netem_switch_kernel_rx_packets_total", port="1", iface=lab.switch.ports[1]) >= rx_before + 100
    assert _get(after, "p4netem_switch_kernel_rx_packets_total", port="2") >= 100
    busy = _get(after, "p4netem_switch_dataplane_busy_seconds_total")
    assert 0 < busy < _get(after, "p4netem_switch_uptime_seconds_total")
    assert _get(after, "p4netem_switch_dataplane_busy_turns_total") > _get(before, "p4netem_switch_dataplane_busy_turns_total")
    # Served, and a few pings are nowhere near the loop's spin budget (docs/dataplane.md).
    assert _get(after, "p4netem_switch_spin_budget_exhausted_total") == 0
    reads_before = [v for (n, ls), v in before.items()
                    if n == "p4netem_switch_p4runtime_request_seconds_count" and dict(ls)["rpc"] == "Read"]
    assert _get(after, "p4netem_switch_p4runtime_request_seconds_count", rpc="Read") > sum(reads_before)
    assert _get(after, "p4netem_switch_p4runtime_request_seconds_count", rpc="Write") >= 1  # the lab's setup

    web = WebServer(lab.switch.grpc_addr, "--switch-metrics", url, log=tmp_path / "web.log")
    try:
        status, text = web.request("GET", "/metrics")
        assert status == 200
        samples = _samples(prometheus_text(text))
        assert _get(samples, "p4netem_switch_health_up") == 1
        assert _get(samples, "p4netem_switch_dataplane_busy_seconds_total") >= busy
        assert _get(samples, "p4netem_switch_ring_drops_total", port="1") >= 0
        status, health = web.request("GET", "/api/health")
        assert status == 200, health
        assert [p["port"] for p in health["ports"]] == [1, 2] and health["ports"][0]["kernel_rx"] >= 100
        io = {p["iface"]: p["io"] for p in health["ports"]}
        assert set(io.values()) <= {"af_xdp", "af_packet"} and len(io) == 2, health["ports"]
        assert _get(after, "p4netem_switch_port_io", port="1", io=io[lab.switch.ports[1]]) == 1
        assert 0 <= health["dataplane_busy_fraction"] <= 1 and health["buffers"] > 0
        # The release slack in force (the lab runs the switch's default, auto: 500 us for links
        # that serve 32 frames within it, every other release precise).
        assert health["release_slack_us"] == 500 and _get(after, "p4netem_switch_release_slack_seconds") == 500e-6
        assert health["release_slack_auto"] is True and _get(after, "p4netem_switch_release_slack_auto") == 1
        # The CPU wake-up latency request the switch holds by default (--cpu-latency-us 0), which
        # the kernel reports back as the combined request in force while the switch runs.
        assert health["cpu_latency_us"] == 0 and _get(after, "p4netem_switch_cpu_latency_request_seconds") == 0
        with open("/dev/cpu_dma_latency", "rb") as f:
            assert int.from_bytes(f.read(4), "little", signed=True) == 0
        # The kernel fast path's state as the switch reports it (ICMP is not fast-pathed: no hits).
        assert health["fast_path"]["state"] == "on" and health["fast_path"]["packets"] == 0, health["fast_path"]
        assert health["p4runtime"]["Read"]["requests"] >= 1 and health["p4runtime"]["Read"]["mean_ms"] > 0
    finally:
        web.stop()


def test_health_without_switch_metrics_says_how(lab, tmp_path):
    web = WebServer(lab.switch.grpc_addr, log=tmp_path / "web.log")
    try:
        status, body = web.request("GET", "/api/health")
        assert status == 404 and "--metrics-addr" in body["error"] and "--switch-metrics" in body["error"]
    finally:
        web.stop()


def test_held_packets_counts_the_bearer_queues(health_lab):
    """`p4netem_switch_held_packets` counts every packet the switch holds, not only the delay line's:
    a 2 Mbit/s cell with bearer queues (docs/pipeline-contract.md stage 6a) keeps a 3 Mbit/s download
    waiting in its UE's bearer (limit 100), where only the frame on the link is in the delay line.
    Counting the delay line alone gave 0-2 here; all of it gives the bearer's backlog. Once the
    download has drained, nothing is held."""
    lab, url = health_lab
    lab.apply_profile(Profile.parse({"name": "cell", "downlink": {"rate": "2Mbit", "queue": 100, "bearers": "drr"}}))
    done: list[ProbeResult] = []
    download = threading.Thread(target=lambda: done.append(run_probe(
        lab.h2.ns, lab.h1.ns, lab.h1.ip, count=1000, rate=250, size=1472, port=9311, idle=2.0)))
    download.start()
    try:
        # After 2.5 s of 1.5x overload the bearer is full (its 100 frames last 0.6 s at 2 Mbit/s).
        time.sleep(2.5)
        during = _get(_scrape(url), "p4netem_switch_held_packets")
    finally:
        download.join()
    assert done and done[0].lost > 0, "the download never filled its bearer"
    assert during >= 50, f"held_packets {during} while the bearer held a full queue (limit 100)"
    assert during <= 100 + 2, f"held_packets {during}: more than the bearer and the link can hold"
    after = _get(_scrape(url), "p4netem_switch_held_packets")
    assert after == 0, f"held_packets {after} after the download drained"


def _stats(*args: str, addr: str) -> subprocess.CompletedProcess[str]:
    """`p4netem stats ...` as a user runs it, stdout a pipe."""
    env = {**os.environ, "P4NETEM_ADDR": addr, "COLUMNS": "200"}
    return subprocess.run([str(Path(sys.executable).parent / "p4netem"), "stats", *args], capture_output=True,
                          text=True, timeout=60, env=env)


# 20 000 UDP frames from h1 as fast as a socket sends them: more than any receive ring holds.
FLOOD = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
         "for _ in range(20000):\n    s.sendto(b'x' * 100, ('10.0.0.2', 9))\n")


def test_stats_shows_the_kernel_ring_drops_the_counters_cannot(health_lab):
    """A switch that stops taking frames (SIGSTOP here, a data-plane thread that falls behind in
    real life) loses them in the kernel's receive ring: the switch never sees them, so its counters
    show in = out. `p4netem stats --switch-metrics URL` shows them per port, in the table and in
    --json; without it, the table says they are not known."""
    lab, url = health_lab
    addr = lab.switch.grpc_addr
    os.kill(lab.switch.proc.pid, signal.SIGSTOP)
    try:
        lab.h1.ns.run([sys.executable, "-c", FLOOD])
    finally:
        os.kill(lab.switch.proc.pid, signal.SIGCONT)

    def dropped() -> float:
        return _get(_scrape(url), "p4netem_switch_ring_drops_total", port="1")
    deadline = time.monotonic() + 30
    while dropped() == 0 and time.monotonic() < deadline:
        time.sleep(0.2)  # the switch reads the ring statistics once a second
    seen = dropped()
    assert seen > 0, "no ring drops: the flood did not fill the ring"

    r = _stats("--json", "--switch-metrics", url, addr=addr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    health = out["switch_health"]
    ports = {p["port"]: p for p in health["ports"]}
    assert sorted(ports) == [1, 2] and health["url"] == url, health
    assert ports[1]["ring_drops"] >= seen and health["ring_drops"] == ports[1]["ring_drops"] + ports[2]["ring_drops"]
    assert ports[1]["kernel_rx"] >= 20000 and ports[1]["iface"] == lab.switch.ports[1], ports
    assert {p["io"] for p in ports.values()} <= {"af_xdp", "af_packet"}, ports
    # What the counters cannot tell: what entered the switch from port 1 is all it let out.
    uplink = sum(row["packets_in"] for row in out["rows"] if row["direction"] == "uplink")
    assert uplink + ports[1]["ring_drops"] <= ports[1]["kernel_rx"], (uplink, ports[1])

    r = _stats("--once", "--switch-metrics", url, addr=addr)
    assert r.returncode == 0, r.stderr
    assert "kernel rx" in r.stdout and "ring drops" in r.stdout and lab.switch.ports[1] in r.stdout, r.stdout
    assert "frames dropped on full receive rings before the switch saw them" in r.stdout, r.stdout
    # Without the URL the table says what it cannot know; --json is as before.
    r = _stats("--once", addr=addr)
    assert r.returncode == 0 and "kernel ring drops: unknown (--switch-metrics URL" in r.stdout, r.stdout
    assert "switch_health" not in json.loads(_stats("--json", addr=addr).stdout)
    # A URL that does not answer: the counters all the same, and why the ports are missing.
    nowhere = f"http://127.0.0.1:{free_tcp_port('127.0.0.1')}/metrics"
    r = _stats("--json", "--switch-metrics", nowhere, addr=addr)
    assert r.returncode == 0 and json.loads(r.stdout)["rows"], r.stderr
    assert nowhere in json.loads(r.stdout)["switch_health"]["error"]
    r = _stats("--once", "--switch-metrics", nowhere, addr=addr)
    assert r.returncode == 0 and "kernel ring drops: unknown: switch metrics at" in r.stdout, r.stdout
