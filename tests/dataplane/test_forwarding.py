"""Forwarding with no impairment: ICMP both ways and a TCP transfer through the switch."""

from __future__ import annotations


from wirestats import iperf3_tcp, ping

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
    received = iperf3_tcp(lab.h1, lab.h2)
    assert received["bytes"] > 1_000_000, f"only {received['bytes']} bytes crossed"
    assert received["bits_per_second"] > 10e6, f"TCP goodput {received['bits_per_second'] / 1e6:.1f} Mbit/s"
