"""A port whose link goes down and up again: the switch says so and forwards again, and its
data-plane thread goes back to sleeping. Before 2026-11-29 the error the kernel leaves pending on
the port's AF_PACKET socket ended every ppoll at once, so after one link flap the thread spun at
50-80 % of a CPU for the rest of its life, with nothing in the log.

A port whose interface is deleted and created again under its name: the switch opens it again
and forwards (on each I/O path, with and without the fast path)."""

from __future__ import annotations

import os
import time
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from wirestats import settled_counters

from p4netem.lab import TwoHostLab, run
from p4netem.lab.free import free_tcp_port
from p4netem.lab.probe import run_probe
from p4netem.pipeline import DOWNLINK, UPLINK, DropReason
from pings import ping

DP_THREAD = "p4netem-dp"


def _dp_cpu_ns(pid: int) -> int:
    """CPU time of the switch's data-plane thread so far (the scheduler's own accounting)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        d = f"/proc/{pid}/task/{task}"
        if open(f"{d}/comm").read().strip() == DP_THREAD:
            return int(open(f"{d}/schedstat").read().split()[0])
    raise AssertionError(f"no {DP_THREAD} thread in pid {pid}")


def test_a_link_flap_is_logged_and_the_loop_sleeps_again(lab: TwoHostLab) -> None:
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    assert lab.switch is not None and lab.switch.proc is not None
    iface = lab.h1.switch_iface
    run(["ip", "link", "set", iface, "down"])
    time.sleep(0.5)
    run(["ip", "link", "set", iface, "up"])
    time.sleep(0.5)

    # Idle, with nothing sent on the port since (a send would have collected the pending error):
    # the thread sleeps in ppoll. Spinning on the error took 0.5-0.8 s of CPU a second; an idle
    # loop takes milliseconds, however busy the machine (the thread's own CPU time, not the wall
    # clock's).
    pid = lab.switch.proc.pid
    before, t0 = _dp_cpu_ns(pid), time.monotonic()
    time.sleep(2.0)
    used = (_dp_cpu_ns(pid) - before) / ((time.monotonic() - t0) * 1e9)
    assert used < 0.2, f"data-plane thread busy {used:.0%} of a CPU while idle after the link flap"

    deadline = time.monotonic() + 10
    while ping(lab.h1, lab.h2, count=3)[1] != 3 and time.monotonic() < deadline:
        pass
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    log = lab.switch.log_tail(200)
    assert "port error" in log and "link down?" in log, log


# How the switch runs (the lab's switch; the fast path is on by default, `auto`).
MODES = {
    "af_packet": ("--fast-path", "off"),
    "af_packet+fast_path": ("--fast-path", "on"),
    "af_xdp": ("--io", "af_xdp"),
}


def _samples(url: str, name: str) -> list:
    """The samples called `name` on the switch's /metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def _port_up(url: str) -> dict[str, float]:
    """{port: value} of the switch's p4netem_switch_port_up gauge."""
    return {s.labels["port"]: s.value for s in _samples(url, "p4netem_switch_port_up")}


def _fast_path_packets(url: str) -> int:
    return int(_samples(url, "p4netem_switch_fast_path_packets_total")[0].value)


def _until(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("io", ["af_packet", "af_xdp"])
def test_link_down_and_up_are_logged_on_each_path(start_lab, io: str) -> None:
    """Down is a warning (an AF_PACKET socket's error, or the once-a-second check, which an AF_XDP
    port has only), up an info line; the port forwards again. An AF_XDP port used to log nothing."""
    lab = start_lab("--io", io)
    assert lab.switch is not None
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    iface = lab.h1.switch_iface
    run(["ip", "link", "set", iface, "down"])
    assert _until(lambda: "link down" in lab.switch.log_tail(200), 5), lab.switch.log_tail(50)
    run(["ip", "link", "set", iface, "up"])
    assert _until(lambda: "port link up" in lab.switch.log_tail(200), 5), lab.switch.log_tail(50)
    deadline = time.monotonic() + 10
    while ping(lab.h1, lab.h2, count=1)[1] != 1 and time.monotonic() < deadline:
        pass
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    if io == "af_xdp":
        assert lab.switch.log_tail(200).count("port link down") == 1, lab.switch.log_tail(50)


@pytest.mark.parametrize("mode", MODES)
def test_a_port_whose_interface_is_deleted_opens_again_when_it_is_back(start_lab, mode: str) -> None:
    """A veth deleted and created again under the same names (a container runtime's, a NIC
    hot-plugged again): the switch drops, as tx_error, what its delay line releases to the gone
    port (counters conserve), opens the port again on the new interface on its start-up path,
    says so, and forwards again. The port used to stay dead until a restart."""
    metrics_port = free_tcp_port("127.0.0.1")
    lab = start_lab(*MODES[mode], "--metrics-addr", f"127.0.0.1:{metrics_port}")
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    assert lab.switch is not None
    h1, h2 = lab.h1, lab.h2
    assert ping(h1, h2, count=3)[1] == 3

    # Requests towards h1 held 2 s in the delay line, then h1's veth deleted under them: released
    # to a gone port, they are tx_error drops (not sent, as a port that cannot send would count them).
    lab.impair(DOWNLINK, delay_ns=2_000_000_000)
    h2.ns.run(["ping", "-n", "-q", "-c", "5", "-i", "0.01", "-W", "0.05", h1.ip], check=False)
    lab.unplug(h1)
    c = settled_counters(lab, DOWNLINK, timeout=10)
    assert c.conservation_gap() == 0 and c.drops.get(DropReason.TX_ERROR, 0) >= 1, c
    assert _until(lambda: _port_up(url).get("1") == 0, 5), "port 1 still reported up after its interface went"

    lab.impair(DOWNLINK)
    lab.replug(h1)
    start = time.monotonic()
    while ping(h1, h2, count=1)[1] != 1 and time.monotonic() - start < 15:
        pass
    back = time.monotonic() - start
    assert ping(h1, h2, count=3)[1] == 3, f"{mode}: no forwarding {back:.1f} s after the interface came back"
    log = lab.switch.log_tail(300)
    io = "af_xdp" if mode == "af_xdp" else "af_packet"
    assert f'port reopened port=1 iface={h1.switch_iface} io="{io}"' in log, log
    assert _port_up(url) == {"1": 1, "2": 1}
    if mode == "af_packet+fast_path":
        # The flow cache's program is on the new interface: a UDP flow in on it is fast-pathed.
        assert "fast path: on" in log and "fast path: not attached" not in log, log
        before, n = _fast_path_packets(url), 500
        result = run_probe(h1.ns, h2.ns, h2.ip, count=n, rate=1000, size=200, port=9070)
        hits = _fast_path_packets(url) - before
        assert result.received == n and hits >= 0.8 * n, f"{hits} of {n} datagrams took the fast path"
    up = settled_counters(lab, UPLINK)
    assert up.conservation_gap() == 0, up
