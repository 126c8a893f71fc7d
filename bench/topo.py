"""The benchmark topology: two hosts in namespaces, each joined by a veth to the root namespace.

    [ns p4nb<T>h1] h1-eth0 10.77.0.1 ==veth== p4nb<T>s1 (root ns, switch port 1)
    [ns p4nb<T>h2] h2-eth0 10.77.0.2 ==veth== p4nb<T>s2 (root ns, switch port 2)

and, for latency measurements, a reference path between the same two hosts that the switch never
sees: h1-ref 10.78.0.1 ==veth== p4nb<T>r1 -- bridge p4nb<T>b1 -- p4nb<T>r2 ==veth== h2-ref 10.78.0.2.
<T> is a token unique to the run (see make()).
Probes sent over both paths at the same time show which latency tails belong to the machine
(scheduling, vCPU steal) rather than to the switch.

The root-namespace ends are what either forwarder attaches to: the p4netem-switch (port 1 and 2) or,
for the baseline, a Linux bridge enslaving the very same two ends. Offloads are off on all four ends in
both cases (raw-socket forwarding needs it, and the baseline must run with identical settings), IPv6 is
off (no router solicitations or MLD reports in the measurements) and neighbours are static (no ARP
during a measurement).

Only names starting with ``p4nb<T>`` are created and deleted here, so that a benchmark never touches
another run's or another engineer's ``p4n*`` namespaces.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

OFFLOADS = ("tx", "rx", "gso", "tso", "gro", "sg")


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@dataclass(frozen=True)
class Host:
    ns: str
    dev: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Topo:
    h1: Host
    h2: Host
    ports: tuple[str, str]  # root-namespace ends: switch port 1, port 2
    ref: tuple[Host, Host]  # the hosts' ends of the reference path
    ref_ports: tuple[str, str]
    bridge: str
    ref_bridge: str

    def netns(self, host: Host, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", host.ns, *cmd]


def make(token: str) -> Topo:
    """The topology's names for one run: every name carries `token`, so that two benchmark runs
    (or a benchmark and a test) on one machine never touch each other's namespaces and links."""
    n = f"p4nb{token}"
    if len(n) + 2 > 15:
        raise ValueError(f"token {token!r} too long for interface names")
    return Topo(
        h1=Host(f"{n}h1", "h1-eth0", "10.77.0.1", "02:77:00:00:00:01"),
        h2=Host(f"{n}h2", "h2-eth0", "10.77.0.2", "02:77:00:00:00:02"),
        ports=(f"{n}s1", f"{n}s2"),
        ref=(Host(f"{n}h1", "h1-ref", "10.78.0.1", "02:78:00:00:00:01"),
             Host(f"{n}h2", "h2-ref", "10.78.0.2", "02:78:00:00:00:02")),
        ref_ports=(f"{n}r1", f"{n}r2"),
        bridge=f"{n}b0",
        ref_bridge=f"{n}b1",
    )


def _offloads_off(dev: str, ns: str | None = None) -> None:
    pre = ["ip", "netns", "exec", ns] if ns else []
    # ethtool refuses the whole command if one feature is fixed; set them one at a time.
    for feat in OFFLOADS:
        subprocess.run([*pre, "ethtool", "-K", dev, feat, "off"], capture_output=True)


def _ipv6_off(dev: str, ns: str | None = None) -> None:
    pre = ["ip", "netns", "exec", ns] if ns else []
    subprocess.run([*pre, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"], capture_output=True)


def teardown(t: Topo) -> None:
    for br in (t.bridge, t.ref_bridge):
        sh("ip", "link", "del", br, check=False)
    for p in t.ports + t.ref_ports:
        sh("ip", "link", "del", p, check=False)
    for h in (t.h1, t.h2):
        sh("ip", "netns", "del", h.ns, check=False)


def setup(t: Topo) -> Topo:
    teardown(t)
    for h in (t.h1, t.h2):
        sh("ip", "netns", "add", h.ns)
        sh(*t.netns(h, "ip", "link", "set", "lo", "up"))
    pairs = ((t.h1, t.ports[0]), (t.h2, t.ports[1]), (t.ref[0], t.ref_ports[0]),
             (t.ref[1], t.ref_ports[1]))
    for h, port in pairs:
        sh("ip", "link", "add", port, "type", "veth", "peer", "name", h.dev, "netns", h.ns)
        sh(*t.netns(h, "ip", "link", "set", h.dev, "address", h.mac))
        sh(*t.netns(h, "ip", "addr", "add", f"{h.ip}/24", "dev", h.dev))
        _ipv6_off(h.dev, h.ns)
        _ipv6_off(port)
        _offloads_off(h.dev, h.ns)
        _offloads_off(port)
        sh(*t.netns(h, "ip", "link", "set", h.dev, "up"))
        sh("ip", "link", "set", port, "up")
    for h, peer in ((t.h1, t.h2), (t.h2, t.h1), (t.ref[0], t.ref[1]), (t.ref[1], t.ref[0])):
        sh(*t.netns(h, "ip", "neigh", "replace", peer.ip, "lladdr", peer.mac, "dev", h.dev,
                    "nud", "permanent"))
    sh("ip", "link", "add", t.ref_bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    _ipv6_off(t.ref_bridge)
    for p in t.ref_ports:
        sh("ip", "link", "set", p, "master", t.ref_bridge)
    sh("ip", "link", "set", t.ref_bridge, "up")
    return t


def bridge_up(t: Topo) -> None:
    """Enslave both root-namespace ends to a plain Linux bridge (the throughput baseline)."""
    sh("ip", "link", "add", t.bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    _ipv6_off(t.bridge)
    _offloads_off(t.bridge)
    for p in t.ports:
        sh("ip", "link", "set", p, "master", t.bridge)
    sh("ip", "link", "set", t.bridge, "up")


def bridge_down(t: Topo) -> None:
    for p in t.ports:
        sh("ip", "link", "set", p, "nomaster", check=False)
    sh("ip", "link", "del", t.bridge, check=False)


def offload_state(t: Topo) -> dict[str, dict[str, str]]:
    """What ethtool reports for each end, recorded in the results so both runs are shown identical."""
    out: dict[str, dict[str, str]] = {}
    ends = [(None, p) for p in t.ports] + [(t.h1.ns, t.h1.dev), (t.h2.ns, t.h2.dev)]
    names = {"tx-checksumming", "rx-checksumming", "generic-segmentation-offload",
             "tcp-segmentation-offload", "generic-receive-offload", "scatter-gather"}
    for ns, dev in ends:
        pre = ["ip", "netns", "exec", ns] if ns else []
        r = subprocess.run([*pre, "ethtool", "-k", dev], capture_output=True, text=True)
        feats = {}
        for line in r.stdout.splitlines():
            k, _, v = line.strip().partition(":")
            if k in names:
                feats[k] = v.strip().split()[0] if v.strip() else ""
        out[f"{ns or 'root'}/{dev}"] = feats
    return out
