"""The switch's gRPC health check (grpc.health.v1 on the P4Runtime port, dataplane/src/p4rt/
health_check.rs), against the real switch: SERVING on an idle running switch (the data-plane loop's
heartbeat advances with no traffic), for the switch ("") and for P4Runtime, by Check and Watch;
NOT_SERVING once one data-plane thread has really been stopped for --heartbeat-timeout-ms (ptrace
stops that thread alone, tests/thread_stop.py), while the P4Runtime server still answers, with the
heartbeat's age on --metrics-addr; SERVING again once the thread runs. The same for a port's TX
thread (--tx-threads)."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from p4netem.lab import Resources, SwitchProcess
from p4netem.lab.free import free_tcp_port
from p4netem.p4rt import P4RuntimeClient, P4RuntimeError

from thread_stop import stopped_thread, thread_ids

TIMEOUT_S = 3.0  # --heartbeat-timeout-ms's default
# Generous bounds for a loaded 2-core machine: a state change is seen well within this.
CHANGE_S = 30.0
SERVICES = ("", "p4.v1.P4Runtime")


def _metrics(url: str) -> dict[tuple, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        families = text_string_to_metric_families(r.read().decode())
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def _ages(url: str) -> dict[tuple, float]:
    return {labels: v for (name, labels), v in _metrics(url).items() if name == "p4netem_switch_heartbeat_age_seconds"}


def _until(client: P4RuntimeClient, status: str, within: float = CHANGE_S) -> float:
    """Seconds until every service's Check answers `status` (fails after `within`)."""
    t0 = time.monotonic()
    while True:
        got = [client.health(s) for s in SERVICES]
        if got == [status] * len(SERVICES):
            return time.monotonic() - t0
        assert time.monotonic() - t0 < within, f"health {got} after {within} s, not {status}"
        time.sleep(0.1)


class _Watch:
    """A Watch of service "" read on a thread: the statuses the switch streams, in order."""

    def __init__(self, addr: str) -> None:
        self.channel = grpc.insecure_channel(addr)
        self.call = health_pb2_grpc.HealthStub(self.channel).Watch(health_pb2.HealthCheckRequest(service=""))
        self.seen: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for reply in self.call:
                self.seen.put(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
        except grpc.RpcError:
            pass

    def next(self) -> str:
        return self.seen.get(timeout=CHANGE_S)

    def close(self) -> None:
        self.call.cancel()
        self.channel.close()


@pytest.fixture
def switch(switch_bin: str, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("switch tests need root", pytrace=False)
    resources = Resources()
    metrics = f"127.0.0.1:{free_tcp_port()}"
    sw = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log", resources=resources,
                       extra_args=["--rt-priority", "0", "--grpc-rt-priority", "0", "--metrics-addr", metrics])
    sw.start()
    sw.metrics_url = f"http://{metrics}/metrics"
    client = P4RuntimeClient(sw.grpc_addr, timeout=10).connect(arbitrate=False)
    try:
        yield sw, client
    finally:
        client.close()
        sw.stop()
        resources.close()


def test_an_idle_switch_is_serving(switch) -> None:
    sw, client = switch
    watch = _Watch(sw.grpc_addr)
    try:
        assert watch.next() == "SERVING"
        # Idle for longer than the timeout: an idle loop beats too (it wakes every 100 ms).
        end = time.monotonic() + TIMEOUT_S + 2
        while time.monotonic() < end:
            assert [client.health(s) for s in SERVICES] == ["SERVING", "SERVING"]
            time.sleep(0.5)
        ages = _ages(sw.metrics_url)
        assert list(ages) == [(("thread", "dataplane"),)], ages  # no ports, no TX threads
        assert 0 <= ages[(("thread", "dataplane"),)] < TIMEOUT_S, ages
        assert _metrics(sw.metrics_url)[("p4netem_switch_heartbeat_timeout_seconds", ())] == TIMEOUT_S
        with pytest.raises(P4RuntimeError) as unknown:
            client.health("no.such.Service")
        assert unknown.value.code == grpc.StatusCode.NOT_FOUND
        assert watch.seen.empty(), "Watch sends changes only"
    finally:
        watch.close()


def test_a_stopped_dataplane_loop_is_not_serving_while_p4runtime_answers(switch) -> None:
    sw, client = switch
    (tid,) = thread_ids(sw.proc.pid, "p4netem-dp")
    watch = _Watch(sw.grpc_addr)
    try:
        assert watch.next() == "SERVING"
        with stopped_thread(sw.proc.pid, tid):
            took = _until(client, "NOT_SERVING")
            # Not before the timeout: its last beat was at most an idle sleep (0.1 s) before the stop.
            assert took > TIMEOUT_S - 0.5, took
            assert watch.next() == "NOT_SERVING"
            # The gRPC server runs on: only the data plane has stopped.
            assert client.answers(10)
            age = _ages(sw.metrics_url)[(("thread", "dataplane"),)]
            assert age > TIMEOUT_S, age
            time.sleep(1)
            assert _ages(sw.metrics_url)[(("thread", "dataplane"),)] > age + 0.5  # it keeps growing
            assert client.health() == "NOT_SERVING"
        _until(client, "SERVING")
        assert watch.next() == "SERVING"
        assert _ages(sw.metrics_url)[(("thread", "dataplane"),)] < TIMEOUT_S
    finally:
        watch.close()
    log = sw.log_path.read_text()
    assert "data-plane loop has not run for" in log and "gRPC health NOT_SERVING" in log, log
    assert "every data-plane thread runs again: gRPC health SERVING" in log


def test_a_stopped_tx_thread_is_not_serving(start_lab) -> None:
    metrics = f"127.0.0.1:{free_tcp_port()}"
    lab = start_lab("--tx-threads", "true", "--metrics-addr", metrics)
    url = f"http://{metrics}/metrics"
    pid = lab.switch.proc.pid
    tids = thread_ids(pid, "p4netem-tx-")
    assert len(tids) == 2, tids  # one per port
    assert {labels for labels in _ages(url)} == {
        (("thread", "dataplane"),),
        *((("iface", iface), ("port", str(port)), ("thread", "tx")) for port, iface in lab.switch.ports.items())}
    _until(lab.client, "SERVING")
    # Idle ports: their TX threads beat at least once a second.
    time.sleep(TIMEOUT_S + 1)
    assert lab.client.health() == "SERVING"
    with stopped_thread(pid, tids[0]):
        _until(lab.client, "NOT_SERVING")
        ages = _ages(url)
        assert ages[(("thread", "dataplane"),)] < TIMEOUT_S, ages  # the loop runs on
        # Thread names are cut at 15 characters: which port's thread it was, the metric says.
        stale = [dict(labels) for labels, age in ages.items() if age > TIMEOUT_S]
        assert len(stale) == 1 and stale[0]["thread"] == "tx", ages  # that one, the other port's runs
    _until(lab.client, "SERVING")
    port, iface = stale[0]["port"], stale[0]["iface"]
    assert f"TX thread of port {port} ({iface}) has not run for" in lab.switch.log_path.read_text()


def test_the_timeout_flag_has_a_range(switch_bin: str) -> None:
    for bad in ("100", "3600001", "soon"):
        r = subprocess.run([switch_bin, "--heartbeat-timeout-ms", bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r
        assert "--heartbeat-timeout-ms" in r.stderr and (bad == "soon" or "2000..=3600000" in r.stderr), r.stderr
