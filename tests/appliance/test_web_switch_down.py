"""`p4netem web` while the switch is down (stopped, or not started yet): every request that needs the
switch answers 503 `{"error", "code", "problems"}` within about the connect timeout (2 s, webapp/
session.py), where it used to queue behind the live stream's own attempt and take two 5-s timeouts
(10-12 s each); the live stream says the switch is unavailable; /metrics keeps its families and the
switch's own health (--switch-metrics) whether or not P4Runtime answers. Once the switch is back,
so is everything, on one connection per side again."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4netem.lab.free import free_tcp_port

from webserver import WebServer

# The old server took 10 s and more per request here; the fixed one about 2 s at most.
FAST_S = 5.0


@pytest.fixture
def metrics_lab(start_lab):
    """A lab whose switch also serves its own health (--metrics-addr), and that health's URL."""
    port = free_tcp_port("127.0.0.1")
    return start_lab("--metrics-addr", f"127.0.0.1:{port}"), f"http://127.0.0.1:{port}/metrics"


class LiveStream:
    """The events of /api/live, read on a thread as a page reads them."""

    def __init__(self, web: WebServer):
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._response = urllib.request.urlopen(web.base + "/api/live", timeout=60)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._response:
                if self._stop.is_set():
                    return
                if line.startswith(b"data: "):
                    self.events.append(json.loads(line[6:]))
        except (OSError, ValueError):
            pass  # closed

    def wait_for(self, test, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for event in self.events[seen:]:
                if test(event):
                    return event
            seen = len(self.events)
            time.sleep(0.05)
        raise AssertionError(f"no such live event in {timeout} s; last: {self.events[-3:]}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)  # at the next event (one per refresh period)
        self._response.close()


def _timed(web: WebServer, method: str, path: str, body: object | None = None) -> tuple[int, object, float]:
    t0 = time.monotonic()
    status, answer = web.request(method, path, body)
    return status, answer, time.monotonic() - t0


def _metrics(web: WebServer) -> tuple[dict[str, float], str, float]:
    status, text, took = _timed(web, "GET", "/metrics")
    assert status == 200, text
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    return values, text, took


def _until(fn, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        out = fn()
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


SWITCH_REQUESTS = [("GET", "/api/show", None), ("GET", "/api/stats", None), ("GET", "/api/radio", None),
                   ("GET", "/api/self", None), ("POST", "/api/apply", {"profile": "lan"})]


def test_requests_fail_fast_while_the_switch_is_down_and_work_again_once_it_is_back(metrics_lab, tmp_path):
    lab, url = metrics_lab
    web = WebServer(lab.switch.grpc_addr, "--refresh", "0.5", "--switch-metrics", url, log=tmp_path / "web.log")
    live = None
    try:
        assert web.request("GET", "/api/show")[0] == 200
        live = LiveStream(web)
        live.wait_for(lambda e: "rows" in e)
        lab.switch.stop()
        # Two rounds, apart: the requests meet the live stream's attempts at different moments.
        for _ in range(2):
            for method, path, body in SWITCH_REQUESTS:
                status, answer, took = _timed(web, method, path, body)
                assert took < FAST_S, f"{method} {path} took {took:.1f} s with the switch down"
                assert status == 503, (path, status, answer)
                assert set(answer) == {"error", "code", "problems"}, answer
                assert "unavailable" in answer["error"] and answer["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
                assert answer["problems"][0]["path"] == "switch", answer
            time.sleep(0.7)
        values, text, took = _metrics(web)
        assert took < FAST_S, f"/metrics took {took:.1f} s with the switch down"
        assert values["p4netem_switch_up"] == 0 and values["p4netem_switch_health_up"] == 0, values
        # The app's families stay defined (no samples: nothing is known), e.g. for recording rules.
        for family in ("p4netem_packets_in_total", "p4netem_parser_errors_total", "p4netem_scrape_read_seconds"):
            assert f"# TYPE {family} " in text, family
        event = live.wait_for(lambda e: "error" in e)
        assert event["unavailable"] is True and event["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), event

        lab.switch.start()  # the same gRPC and metrics ports
        assert _until(lambda: web.request("GET", "/api/show")[0] == 200), "the web did not find the switch back"
        live.wait_for(lambda e: "rows" in e and e["t"] > event["t"])
        status, answer = web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})
        assert status == 200, answer
        assert [r["profile"] for r in web.request("GET", "/api/show")[1]["rules"]] == ["lan"]
        values = _until(lambda: (v := _metrics(web)[0])["p4netem_switch_health_up"] == 1 and v)
        assert values and values["p4netem_switch_up"] == 1, values
    finally:
        if live is not None:
            live.close()
        web.stop()


def test_metrics_keep_the_switch_health_while_p4runtime_is_down(metrics_lab, tmp_path):
    """P4Runtime unreachable (here: a wrong -s), the switch's own metrics reachable: /metrics says
    p4netem_switch_up 0 and still re-exports the switch's health (they were dropped whole)."""
    lab, url = metrics_lab
    nowhere = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
    web = WebServer(nowhere, "--switch-metrics", url, log=tmp_path / "web.log")
    try:
        values, text, took = _metrics(web)
        assert values["p4netem_switch_up"] == 0 and values.get("p4netem_switch_health_up") == 1, values
        assert values["p4netem_switch_buffers"] > 0 and "p4netem_switch_ring_drops_total{" in text
        assert took < FAST_S, f"/metrics took {took:.1f} s"
        status, health = web.request("GET", "/api/health")
        assert status == 200 and [p["port"] for p in health["ports"]] == [1, 2], health
        # Both down: both `up`s say so, and /api/health answers as the API's other 503s.
        lab.switch.stop()
        values, text, took = _metrics(web)
        assert took < FAST_S and values["p4netem_switch_up"] == 0 and values["p4netem_switch_health_up"] == 0
        status, body = web.request("GET", "/api/health")
        assert status == 503 and set(body) == {"error", "problems"} and url in body["error"], body
    finally:
        web.stop()
