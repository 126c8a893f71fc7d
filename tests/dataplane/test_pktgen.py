"""p4netem-pktgen, the benchmarks' packet generator: its destination sequence (--first, --stride)
on a real veth, and its refusal of a stride that would skip destinations."""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RAWFRAMES = Path(__file__).resolve().parents[1] / "tools" / "rawframes.py"
NS = f"p4ntpg{os.getpid() % 100000}"


@pytest.fixture
def veth_ns():
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        ns = ["ip", "netns", "exec", NS]
        subprocess.run([*ns, "ip", "link", "add", "pga", "type", "veth", "peer", "name", "pgb"], check=True)
        for dev in ("pga", "pgb"):
            subprocess.run([*ns, "ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off", "tso", "off",
                            "gro", "off"], check=True, capture_output=True)
            subprocess.run([*ns, "ip", "link", "set", dev, "up"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)


def _pktgen(switch_bin: str, ns: list[str], *args: str) -> subprocess.CompletedProcess:
    gen = Path(switch_bin).with_name("p4netem-pktgen")
    return subprocess.run([*ns, str(gen), "--iface", "pga", "--src-mac", "02:00:00:00:00:01",
                           "--dst-mac", "02:00:00:00:00:02", "--src-ip", "10.77.0.1", "--dst-ip", "10.96.0.0",
                           *args], capture_output=True, text=True, timeout=60)


def test_destinations_follow_first_and_stride(switch_bin, veth_ns):
    cap = subprocess.Popen([*veth_ns, sys.executable, str(RAWFRAMES), "capture", "pgb", "3", "0x0800"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert cap.stderr.readline().strip() == "ready"
    r = _pktgen(switch_bin, veth_ns, "--dst-count", "10", "--first", "3", "--stride", "7", "--count", "12",
                "--rate", "1000")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sent"] == 12
    frames = [bytes.fromhex(h) for h in json.loads(cap.communicate(timeout=30)[0])]
    got = [int(ipaddress.IPv4Address(f[30:34])) - int(ipaddress.IPv4Address("10.96.0.0")) for f in frames]
    assert got == [((3 + i) * 7) % 10 for i in range(12)]


def test_stride_sharing_a_factor_with_the_count_is_refused(switch_bin, veth_ns):
    r = _pktgen(switch_bin, veth_ns, "--dst-count", "100000", "--stride", "10", "--count", "1")
    assert r.returncode != 0
    assert "--stride 10 must be coprime with --dst-count 100000" in r.stderr
