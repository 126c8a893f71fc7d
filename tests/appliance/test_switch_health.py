"""The switch's own health (issue 12 item 3): p4netem-switch --metrics-addr serves OpenMetrics text
(data-plane loop busy time, kernel receive-ring frames and drops per port, buffers, P4Runtime
latency per RPC, each data-plane thread's heartbeat) that moves with traffic and requests; `p4netem
web --switch-metrics` re-exports it on /metrics and summarizes it on /api/health, which answers 503
while a data-plane thread is stalled."""

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
from p4netem.switch_health import BUSY_WINDOW_S  # /api/health's dataplane_busy_fraction window
from p4netem.lab.free import free_tcp_port

from webserver import WebServer, until


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


def test_busy_fraction_is_over_a_fixed_window_whoever_else_calls(health_lab, tmp_path):
    """`dataplane_busy_fraction` is over the last 10 s, the same for every caller. It was "since
    the previous call", anyone's: with a page polling /api/health every 2 s, a script's call right
    after another caller's got the fraction of a sliver of 0.01-0.1 s, and two scripts alternating
    changed each other's figure. Here, under a steady ping load through the switch's data-plane
    loop (ICMP is not fast-pathed), caller A and caller B call back to back while a page-like poller
    calls every 2 s: each answer states a window of 10 s to a little more (not since the switch's
    start, not a sliver), its figure is exactly the switch's busy time over that span (between two
    readings the callers saw), and A's and B's figures differ by no more than their windows' offset
    allows (|fA - fB| <= 2 D / window, D the seconds the two windows do not share): a bound that
    holds whatever the machine's timing."""
    lab, url = health_lab
    load = lab.h1.ns.popen(["ping", "-q", "-i", "0.002", "-w", "90", lab.h2.ip],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    web = WebServer(lab.switch.grpc_addr, "--switch-metrics", url, log=tmp_path / "web.log")
    answers: list[dict] = []  # every read of the switch's metrics in this test: each /api/health answer
    lock = threading.Lock()
    stop = threading.Event()

    def call() -> dict:
        status, health = web.request("GET", "/api/health")
        assert status == 200, health
        with lock:
            answers.append(health)
        return health

    def page() -> None:  # the dashboard: every 2 s
        while not stop.wait(2.0):
            call()

    poller = threading.Thread(target=page, daemon=True)
    try:
        first = call()
        poller.start()
        # Readings that are 10 s old exist, and the switch is well past 10 s (a window of its whole
        # uptime would be "since the start", which this test must tell apart from the window).
        until("10 s of readings and a switch 16 s up",
              lambda: call()["uptime_s"] >= max(first["uptime_s"] + BUSY_WINDOW_S + 2, 16), within=120, every=1.0)
        pairs = []
        for _ in range(3):
            a = call()
            b = call()  # right after A: the old code's figure for B was over this gap alone
            pairs.append((a, b))
            time.sleep(0.5)
    finally:
        stop.set()
        poller.join(timeout=60)
        web.stop()
        load.kill()
        load.wait()

    def window(h: dict) -> float:
        span = h.get("dataplane_busy_window_s")
        previous = max((x["uptime_s"] for x in answers if x["uptime_s"] < h["uptime_s"]), default=0.0)
        assert span is not None and BUSY_WINDOW_S - 0.002 <= span <= 20, (
            f"busy fraction {h['dataplane_busy_fraction']} over {span} s, not the {BUSY_WINDOW_S} s window "
            f"(the previous read of the switch was {h['uptime_s'] - previous:.3f} s earlier)")
        assert span < h["uptime_s"] - 2, \
            f"window {span} s: since the switch's start ({h['uptime_s']} s), not the last 10 s"
        return span

    for a, b in pairs:
        sa, sb = window(a), window(b)
        for h, span in ((a, sa), (b, sb)):
            # The figure is the switch's own busy time over that span: the reading at its start is
            # one of the answers (every read of the switch in this test was a call of ours).
            ref = [x for x in answers if abs(x["uptime_s"] - (h["uptime_s"] - span)) <= 0.002]
            assert ref, f"no reading at uptime {h['uptime_s'] - span:.3f} s, where the {span} s window starts"
            exact = (h["dataplane_busy_s"] - ref[0]["dataplane_busy_s"]) / span
            assert abs(h["dataplane_busy_fraction"] - exact) <= 0.0002, (h, ref[0])
            assert h["dataplane_busy_fraction"] > 0, f"the ping load does not show: {h}"  # a known load
        # The seconds A's and B's windows do not share, at their ends and at their starts.
        d = abs(b["uptime_s"] - a["uptime_s"]) + abs((b["uptime_s"] - sb) - (a["uptime_s"] - sa))
        fa, fb = a["dataplane_busy_fraction"], b["dataplane_busy_fraction"]
        assert abs(fa - fb) <= 2 * d / min(sa, sb) + 0.0002, (
            f"caller A saw {fa} over {sa} s, caller B {fb} over {sb} s right after (windows {d:.3f} s apart)")


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


TIMEOUT_S = 3.0  # the switch's default --heartbeat-timeout-ms
STALL_WAIT_S = 60.0  # generous on a loaded 2-core machine: the stall shows 3 s after the stop


def _until(what: str, check, within: float = STALL_WAIT_S):
    return until(what, check, within, every=0.2)


def _health(web: WebServer) -> tuple[int, dict]:
    return web.request("GET", "/api/health")


def test_health_says_when_the_data_plane_stalls_and_when_it_runs_again(health_lab, tmp_path):
    """The data-plane thread really stopped (ptrace, tests/thread_stop.py) while P4Runtime and the
    switch's metrics answer, so the counters just stand still: /api/health answers 503 with
    `dataplane.serving` false, the stalled thread and its age, and every figure as before, and
    `p4netem stats --switch-metrics` says STALLED; once the thread runs again, 200 and running."""
    from thread_stop import stopped_thread, thread_ids

    lab, url = health_lab
    web = WebServer(lab.switch.grpc_addr, "--switch-metrics", url, log=tmp_path / "web.log")
    try:
        status, health = _health(web)
        assert status == 200, health
        live = health["dataplane"]
        assert live["serving"] is True and live["timeout_s"] == TIMEOUT_S and live["stalled"] == [], live
        assert [t["thread"] for t in live["threads"]] == ["dataplane"], live  # no --tx-threads
        assert 0 <= live["threads"][0]["age_s"] < TIMEOUT_S, live
        r = _stats("--once", "--switch-metrics", url, addr=lab.switch.grpc_addr)
        assert r.returncode == 0 and "data plane: running (every thread ran within the last" in r.stdout, r.stdout

        pid = lab.switch.proc.pid
        (tid,) = thread_ids(pid, "p4netem-dp")
        with stopped_thread(pid, tid):
            status, health = _until("/api/health 503", lambda: (h := _health(web))[0] == 503 and h)
            live = health["dataplane"]
            assert live["serving"] is False, health
            (stall,) = live["stalled"]
            assert stall["thread"] == "dataplane" and stall["age_s"] > TIMEOUT_S, live
            assert live["threads"] == live["stalled"], live
            assert "data plane stalled: the data-plane loop has not run for" in health["error"], health
            assert health["problems"] == [{"path": "dataplane", "message": health["error"]}], health
            # Every figure all the same: the metrics and P4Runtime answer, only the loop stopped.
            assert [p["port"] for p in health["ports"]] == [1, 2] and health["buffers"] > 0, health
            r = _stats("--json", "--switch-metrics", url, addr=lab.switch.grpc_addr)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["rows"] and out["switch_health"]["dataplane"]["serving"] is False, out["switch_health"]
            r = _stats("--once", "--switch-metrics", url, addr=lab.switch.grpc_addr)
            assert r.returncode == 0 and "data plane: STALLED: the data-plane loop has not run for" in r.stdout, \
                r.stdout
            # The web's /metrics re-exports the ages: the alert of docs/prometheus-alerts.yml fires there.
            samples = _samples(prometheus_text(web.request("GET", "/metrics")[1]))
            assert (_get(samples, "p4netem_switch_heartbeat_age_seconds", thread="dataplane")
                    > _get(samples, "p4netem_switch_heartbeat_timeout_seconds")), samples

        status, health = _until("/api/health 200 again", lambda: (h := _health(web))[0] == 200 and h)
        assert health["dataplane"]["serving"] is True and "error" not in health, health
        r = _stats("--json", "--switch-metrics", url, addr=lab.switch.grpc_addr)
        assert json.loads(r.stdout)["switch_health"]["dataplane"]["serving"] is True, r.stdout
    finally:
        web.stop()


def test_health_names_a_stalled_tx_thread(start_lab, tmp_path):
    """With --tx-threads each port's TX thread has a heartbeat: one stopped shows as itself, with its
    port and interface (thread names are cut at 15 characters, the metric's labels are not)."""
    from thread_stop import stopped_thread, thread_ids

    metrics = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
    lab = start_lab("--tx-threads", "true", "--metrics-addr", metrics)
    url = f"http://{metrics}/metrics"
    web = WebServer(lab.switch.grpc_addr, "--switch-metrics", url, log=tmp_path / "web.log")
    try:
        status, health = _health(web)
        assert status == 200, health
        threads = health["dataplane"]["threads"]
        assert sorted((t["thread"], t.get("port"), t.get("iface")) for t in threads) == [
            ("dataplane", None, None), *(("tx", port, iface) for port, iface in sorted(lab.switch.ports.items()))]
        tids = thread_ids(lab.switch.proc.pid, "p4netem-tx-")
        assert len(tids) == 2, tids
        with stopped_thread(lab.switch.proc.pid, tids[0]):
            status, health = _until("/api/health 503", lambda: (h := _health(web))[0] == 503 and h)
        (stall,) = health["dataplane"]["stalled"]
        assert stall["thread"] == "tx" and stall["age_s"] > TIMEOUT_S, health["dataplane"]
        assert lab.switch.ports[stall["port"]] == stall["iface"], stall
        assert f"the TX thread of port {stall['port']} ({stall['iface']}) has not run for" in health["error"], health
        _until("/api/health 200 again", lambda: _health(web)[0] == 200)
    finally:
        web.stop()
