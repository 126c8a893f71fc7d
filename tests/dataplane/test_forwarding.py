"""Forwarding with no impairment: ICMP both ways and a TCP transfer through the switch."""

from __future__ import annotations

import json
import subprocess

from wirestats import ping, wait_listening

from p4netem.lab import TwoHostLab
from p4netem.pipeline import UPLINK, DropReason


def test_ping_both_ways(lab: TwoHostLab) -> None:
    assert ping(lab.h1, lab.h2) == (5, 5)
    assert ping(lab.h2, lab.h1) == (5, 5)


def test_ping_fails_without_a_route(lab: TwoHostLab) -> None:
    """The converse: with port 1's port_map entry removed, h1's packets have no route."""
    lab.client.delete_table_entry("P4netemIngress.port_map", {"standard_metadata.ingress_port": 1})
    assert ping(lab.h1, lab.h2, count=3) == (3, 0)
    assert lab.counters(UPLINK).drops[DropReason.NO_ROUTE] >= 3


def test_tcp_transfer(lab: TwoHostLab) -> None:
    """iperf3 (TCP) from h1 to h2: the connection opens and data flows at a real rate."""
    server = lab.h2.ns.popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(lab.h2.ns, 5201)
    out = lab.h1.ns.run(["iperf3", "-c", lab.h2.ip, "-p", "5201", "-t", "2", "-J"], timeout=30).stdout
    server.wait(timeout=10)
    result = json.loads(out)
    assert "error" not in result, result.get("error")
    received = result["end"]["sum_received"]
    assert received["bytes"] > 1_000_000, f"only {received['bytes']} bytes crossed"
    assert received["bits_per_second"] > 10e6, f"TCP goodput {received['bits_per_second'] / 1e6:.1f} Mbit/s"
