"""Both packet I/O paths of p4netem-switch (issue 14): AF_PACKET rings (the default, and the
fallback of --io auto) and AF_XDP in copy mode. On each, forced with --io:
the path is reported (log line, p4netem_switch_port_io metric), TCP and ICMP cross, a shaper holds
its rate with counters that conserve, and a delay holds. --io auto falls back to AF_PACKET, logged
and reported, on an interface AF_XDP cannot serve; a forced --io af_xdp there fails the start with
a one-line reason. (The whole tests/dataplane suite runs on either path with P4NETEM_SWITCH_IO.)"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from wirestats import MS, iperf3_tcp, median, ms, ns_per_byte_q16, ping, settled_counters

from p4netem.lab import SwitchProcess, TwoHostLab, unique_token
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import run
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe
from p4netem.pipeline import UPLINK, DropReason

PATHS = ("af_xdp", "af_packet")


def _port_io(url: str) -> dict[str, str]:
    """{port: io} from the switch's p4netem_switch_port_io samples."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {s.labels["port"]: s.labels["io"] for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "p4netem_switch_port_io" and s.value == 1}


@pytest.fixture(params=PATHS)
def path_lab(request: pytest.FixtureRequest, start_lab) -> tuple[TwoHostLab, str, str]:
    port = free_tcp_port("127.0.0.1")
    lab = start_lab("--io", request.param, "--metrics-addr", f"127.0.0.1:{port}")
    return lab, request.param, f"http://127.0.0.1:{port}/metrics"


def test_forwarding_on_each_path(path_lab) -> None:
    lab, io, url = path_lab
    assert _port_io(url) == {"1": io, "2": io}
    log = lab.switch.log_tail(100)
    assert f"port up: {io}" in log and "AF_XDP unavailable" not in log, log
    assert ping(lab.h1, lab.h2) == (5, 5)
    assert ping(lab.h2, lab.h1) == (5, 5)
    received = iperf3_tcp(lab.h1, lab.h2)
    assert received["bytes"] > 1_000_000, f"only {received['bytes']} bytes crossed on {io}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in > 1000 and c.conservation_gap() == 0, c


RATE = 10_000_000  # bit/s
SIZE = 1000
FRAME_BITS = (SIZE + UDP_IP_ETH_OVERHEAD) * 8


def test_shaping_and_delay_on_each_path(path_lab) -> None:
    """1.5x a 10 Mbit/s shaper for 1.5 s, then a 20 ms delay: the shaped rate (median gap between
    arrivals), tail drops equal to the frames lost, conservation, and the added delay. 1.5 s (it
    was 3) is 2800 datagrams: the median takes ~1900 gaps, nearly all one serialisation time (the
    queue is never empty at 1.5x), and the share lost (a third, less the ~19 frames the 20 KB
    queue keeps: ~0.33) sits far inside 0.2..0.45."""
    lab, io, _ = path_lab
    offered_pps = 1.5 * RATE / FRAME_BITS
    n = int(offered_pps * 1.5)
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_bytes=20_000)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=offered_pps, size=SIZE, port=9060)
    gaps = [b - a for a, b in zip(result.rx_ns, result.rx_ns[1:])]
    shaped = FRAME_BITS / median(gaps) * 1e9
    assert abs(shaped - RATE) <= 0.02 * RATE, f"{io}: shaped {shaped / 1e6:.3f} Mbit/s, configured {RATE / 1e6}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n
    assert c.drops[DropReason.QUEUE_FULL] == result.lost == c.dropped, (c.drops, result.lost)
    assert 0.2 * n <= result.lost <= 0.45 * n, f"{io}: {result.lost} of {n} tail-dropped"
    assert c.conservation_gap() == 0

    lab.impair(UPLINK, delay_ns=20 * MS)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=200, rate=200, size=200, port=9061,
                       stop_when_complete=True)  # delay only: done once all 200 are in
    assert result.lost == 0
    typical = median(result.delays_ns)
    assert 20 * MS <= typical <= 22 * MS, f"{io}: median one-way delay {ms(typical)} for 20 ms"


@pytest.fixture
def multiqueue_veth() -> Iterator[tuple[str, str]]:
    """A veth pair whose ends have two receive queues (AF_XDP binds one: the switch refuses it)."""
    a, b = f"p4nq{unique_token()}a", None
    b = a[:-1] + "b"
    run(["ip", "link", "add", a, "numrxqueues", "2", "numtxqueues", "2", "type", "veth", "peer", "name", b,
         "numrxqueues", "2", "numtxqueues", "2"])
    try:
        for dev in (a, b):
            for feat in ("tx", "rx", "gso", "tso", "gro"):
                run(["ethtool", "-K", dev, feat, "off"], check=False)
            run(["ip", "link", "set", dev, "up"])
        yield a, b
    finally:
        run(["ip", "link", "del", a], check=False)


def test_auto_falls_back_to_af_packet_and_says_so(multiqueue_veth, switch_bin, tmp_path) -> None:
    a, _ = multiqueue_veth
    port = free_tcp_port("127.0.0.1")
    sw = SwitchProcess({1: a}, binary=switch_bin, log_path=tmp_path / "auto.log",
                       extra_args=["--io", "auto", "--metrics-addr", f"127.0.0.1:{port}"])
    with sw:
        assert _port_io(f"http://127.0.0.1:{port}/metrics") == {"1": "af_packet"}
        log = sw.log_tail(50)
    assert "AF_XDP unavailable" in log and "2 receive queues" in log and "port up: af_packet" in log, log

    forced = subprocess.run([switch_bin, "-i", f"1@{a}", "--io", "af_xdp", "--grpc-addr",
                             f"127.0.0.1:{free_tcp_port('127.0.0.1')}"], capture_output=True, text=True, timeout=30)
    assert forced.returncode == 1
    assert "opening port 1" in forced.stderr and "2 receive queues" in forced.stderr, forced.stderr

    bad = subprocess.run([switch_bin, "--io", "dpdk"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "auto, af_packet or af_xdp" in bad.stderr, bad.stderr
