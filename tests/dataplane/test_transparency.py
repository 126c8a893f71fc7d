"""The switch inline as a network engineer puts it between a router and a LAN: what it does not
shape crosses unchanged, and what it shapes is classified as docs/pipeline-contract.md says.

Frames are sent from a raw socket on one host and captured with tcpdump on the other (tcpdump puts
back the VLAN tags the kernel hands over beside the frame), then compared byte for byte: non-IP
EtherTypes (LLDP, an 802.3 LLC frame with an STP BPDU, an unknown EtherType, ARP), broadcast and
multicast, 802.1Q tags (with PCP, a priority tag), QinQ, IPv4 options, every DSCP/ECN codepoint
kind, TTL 1 (no router here: not decremented, not dropped), a bad header checksum, fragments,
and frames of exactly the MTU (1514 bytes, 1518 with a tag); both ways, with no impairment and
with a rate and a delay. Classification: an address rule matches inside one or two tags (802.1Q,
802.1ad) and not behind a third or an unknown TPID; ports are 0 for IPv4 fragments after the first
and for IPv6 packets with an extension header (their next header is not TCP/UDP). Frames above the
ring: an MTU raised to 9000 while the switch runs is named at once (rings and buffers are sized
at start), and frames above 1982 bytes are `malformed` drops. Jumbo frames: with MTU 9000 on all
four ends at start, 9000-byte pings, a TCP transfer and frames of exactly 9014 and 9018 bytes
cross (with no impairment and shaped), a rate holds for 9000-byte frames, and what the switch
cannot do at that MTU (a small --buffer-size, forced AF_XDP) is said at start.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from pings import ping
from wirestats import MS, iperf3_tcp, median, ns_per_byte_q16, send_raw, settled_counters

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import disable_offloads, run, unique_token
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe
from p4netem.lab.twohost import Host
from p4netem.p4rt.encoding import to_int
from p4netem.pipeline import DOWNLINK, UPLINK, DropReason
from p4netem.replay.pcapfile import read_pcap
from p4netem.stats import read_pd_counters
from p4netem_studies.web.capture import Capture as Tcpdump

# Destinations no host owns, so that neither host answers (no ICMP back across the switch).
DST4 = "192.0.2.77"
DST6 = "2001:db8::77"


def mac(host: Host) -> bytes:
    return to_int(host.mac).to_bytes(6, "big")


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ipv4(src: str, dst: str, proto: int, payload: bytes, tos: int = 0, ttl: int = 64, frag: int = 0,
         options: bytes = b"", ident: int = 1) -> bytes:
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | (5 + len(options) // 4), tos, 20 + len(options) + len(payload), ident,
                    frag, ttl, proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    return h[:10] + struct.pack("!H", checksum(h)) + h[12:] + payload


def udp(sport: int, dport: int, data: bytes) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data  # checksum 0: none (IPv4)


def ipv6(next_header: int, payload: bytes, dst: str = DST6) -> bytes:
    return (struct.pack("!IHBB", 0x6000_0000, len(payload), next_header, 64)
            + socket.inet_pton(socket.AF_INET6, "2001:db8::1") + socket.inet_pton(socket.AF_INET6, dst) + payload)


def ether(dst: bytes, src: bytes, ethertype: int, payload: bytes, tags: tuple[tuple[int, int], ...] = ()) -> bytes:
    return dst + src + b"".join(struct.pack("!HH", tpid, tci) for tpid, tci in tags) + struct.pack("!H", ethertype) + payload


def udp4(dst: bytes, src: bytes, data: bytes, tags: tuple[tuple[int, int], ...] = (), **ip: object) -> bytes:
    return ether(dst, src, 0x0800, ipv4("10.0.0.1", DST4, 17, udp(4000, 5000, data), **ip), tags)


def frames_to(dst_host: Host, src_host: Host) -> dict[str, bytes]:
    """One frame of each kind, from src_host to dst_host (payloads tell them apart)."""
    d, s = mac(dst_host), mac(src_host)
    big = udp(4000, 5000, b"F" * 3000)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + s + socket.inet_aton("10.0.0.9") + b"\0" * 6 + socket.inet_aton("10.0.0.8")
    stp = bytes.fromhex("424203") + bytes.fromhex("000000000080000254000000010000000080000254000000018001000014000200") + b"\0" * 8
    return {
        "lldp": ether(bytes.fromhex("0180c200000e"), s, 0x88CC, bytes.fromhex("020704") + s + b"\x00" * 40),
        "stp bpdu (802.3 llc)": bytes.fromhex("0180c2000000") + s + struct.pack("!H", len(stp)) + stp,
        "unknown ethertype": ether(d, s, 0x88B5, b"\xab" * 50),
        "broadcast": ether(b"\xff" * 6, s, 0x88B5, b"\xcd" * 46),
        "arp request (broadcast)": ether(b"\xff" * 6, s, 0x0806, arp),
        "ipv4 multicast": ether(bytes.fromhex("01005e000001"), s, 0x88B5, b"\xef" * 46),
        "802.1q pcp 7 vid 100": udp4(d, s, b"a" * 40, tags=((0x8100, 0xE064),)),
        "priority tag (vid 0)": udp4(d, s, b"b" * 40, tags=((0x8100, 0x2000),)),
        "qinq 88a8/8100": udp4(d, s, b"c" * 40, tags=((0x88A8, 200), (0x8100, 300))),
        "ipv4 options (record route)": udp4(d, s, b"d" * 40, options=bytes([7, 11, 4]) + b"\0" * 9),
        "ipv4 router alert": udp4(d, s, b"e" * 40, options=bytes([148, 4, 0, 0])),
        "dscp ef ect(0)": udp4(d, s, b"f" * 40, tos=0xB8 | 2),
        "dscp cs1 ect(1)": udp4(d, s, b"g" * 40, tos=0x20 | 1),
        "ecn ce": udp4(d, s, b"h" * 40, tos=3),
        "ttl 1": udp4(d, s, b"i" * 40, ttl=1),
        "bad ipv4 header checksum": (lambda f: f[:24] + b"\xde\xad" + f[26:])(udp4(d, s, b"j" * 40)),
        "first fragment": ether(d, s, 0x0800, ipv4("10.0.0.1", DST4, 17, big[:1480], frag=0x2000, ident=7)),
        "middle fragment": ether(d, s, 0x0800, ipv4("10.0.0.1", DST4, 17, big[1480:2960], frag=0x2000 | 185, ident=7)),
        "last fragment": ether(d, s, 0x0800, ipv4("10.0.0.1", DST4, 17, big[2960:], frag=370, ident=7)),
        "ipv6 udp, traffic class af41 ect(0)": ether(d, s, 0x86DD, (lambda p: p[:1] + bytes([p[1] | 0x82]) + p[2:])(
            ipv6(17, udp(4000, 5000, b"k" * 40)))),
        "1514 bytes (mtu 1500)": udp4(d, s, b"l" * 1472),
        "1518 bytes with a tag (mtu 1500)": udp4(d, s, b"m" * 1472, tags=((0x8100, 7),)),
    }


def crossing(src: Host, dst: Host, frames: dict[str, bytes], tmp_path: Path) -> tuple[list[bytes], int]:
    """Sends the frames from src (raw socket): what dst received (tcpdump, inbound), and how many
    primer frames went before them."""
    cap = Tcpdump(dst.ns.name, dst.iface, tmp_path / f"{dst.name}.pcap", bpf="inbound")
    try:
        # tcpdump says "listening" a moment before its filter takes frames: a primer frame is sent
        # until it shows in the file, so that no frame of the test goes before the capture.
        primer = ether(mac(dst), mac(src), 0x88B5, b"primer".ljust(46, b"\0"))
        deadline, primers = time.monotonic() + 10, 0
        while not any(f == primer for _, f in read_pcap(cap.path)):
            assert time.monotonic() < deadline, "tcpdump captured none of the primer frames"
            send_raw(src.ns, src.iface, primer)
            primers += 1
            time.sleep(0.05)
        send_raw(src.ns, src.iface, list(frames.values()))
    finally:
        cap.stop(settle=0.5)
    return [f for _, f in read_pcap(cap.path) if f != primer], primers


@pytest.mark.parametrize("shaped", [False, True], ids=["no impairment", "rate and delay"])
def test_frames_cross_byte_for_byte_both_ways(lab: TwoHostLab, tmp_path: Path, shaped: bool) -> None:
    if shaped:
        for direction in (UPLINK, DOWNLINK):
            lab.impair(direction, delay_ns=20 * MS, ns_per_byte_q16=ns_per_byte_q16(20e6))
    cross_each_way_once(lab, tmp_path, frames_to,
                        lambda got, frames: [g[:24].hex() for g in got if g not in frames.values()])


def cross_each_way_once(lab: TwoHostLab, tmp_path: Path, frames_for, received) -> list[tuple[dict, object, object]]:
    """Sends frames_for(dst, src) from h1 to h2 and back: each must arrive exactly once,
    unchanged, and the direction's counters take every one in and out with no drop (primers
    included). `received(got, frames)` says what did arrive when one did not. Returns, per
    direction, (frames, counters before, counters after)."""
    out = []
    for src, dst, direction in ((lab.h1, lab.h2, UPLINK), (lab.h2, lab.h1, DOWNLINK)):
        frames = frames_for(dst, src)
        before = settled_counters(lab, direction)
        got, primers = crossing(src, dst, frames, tmp_path)
        for name, frame in frames.items():
            n = got.count(frame)
            assert n == 1, (f"{src.name} -> {dst.name}: {name!r} arrived {n} times unchanged; "
                            f"received: {received(got, frames)}")
        c = settled_counters(lab, direction)
        assert c.profile_in - before.profile_in == len(frames) + primers, c
        assert c.profile_out - before.profile_out == len(frames) + primers and c.dropped == before.dropped, c
        out.append((frames, before, c))
    return out


def test_address_rule_matches_inside_two_tags_and_ports_only_where_the_contract_has_them(lab: TwoHostLab) -> None:
    """Classifier entries by IPv4 and IPv6 destination, and by UDP port, each to a profile of its
    own; the profile_in counters say which frames each one took."""
    by_v4, by_v6, by_port = 2, 3, 4
    client = lab.client
    # The address entries above the port entry (every UDP frame here goes to port 5000 or 4001).
    for profile, key, priority in ((by_v4, {"meta.ipv4_dst": (DST4, 0xFFFFFFFF)}, 40),
                                   (by_v6, {"meta.ipv6_dst": (DST6, (1 << 128) - 1)}, 39),
                                   (by_port, {"meta.ip_proto": (17, 0xFF), "meta.l4_dst_port": (5000, 5000)}, 30)):
        client.insert_table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": 1, **key}, pl.SET_PROFILE,
                                  {"profile_id": profile, "direction": UPLINK, "ue_id": 0}, priority=priority)
    d, s = mac(lab.h2), mac(lab.h1)
    other = "10.0.0.99"  # not DST4: only the port entry can take these
    big = udp(4000, 5000, b"F" * 3000)
    v4_addr = [udp4(d, s, b"a", tags=tags) for tags in
               ((), ((0x8100, 100),), ((0x88A8, 200), (0x8100, 300)), ((0x8100, 200), (0x8100, 300)))]
    v4_untaken = [udp4(d, s, b"b", tags=((0x9100, 200), (0x8100, 300))),  # 0x9100 is no TPID the parser knows
                  udp4(d, s, b"c", tags=((0x88A8, 200), (0x8100, 300), (0x8100, 5)))]  # a third tag
    v6 = [ether(d, s, 0x86DD, ipv6(17, udp(4000, 4001, b"d")), tags) for tags in ((), ((0x8100, 100),))]
    by_port_taken = [ether(d, s, 0x0800, ipv4("10.0.0.1", other, 17, udp(4000, 5000, b"e"))),
                     ether(d, s, 0x0800, ipv4("10.0.0.1", other, 17, big[:1480], frag=0x2000, ident=9)),
                     ether(d, s, 0x86DD, ipv6(17, udp(4000, 5000, b"f"), dst="2001:db8::99"))]
    by_port_not = [ether(d, s, 0x0800, ipv4("10.0.0.1", other, 17, big[1480:2960], frag=0x2000 | 185, ident=9)),
                   ether(d, s, 0x0800, ipv4("10.0.0.1", other, 17, big[2960:], frag=370, ident=9)),
                   # hop-by-hop options, then UDP: the next header is 0, not 17
                   ether(d, s, 0x86DD, ipv6(0, bytes([17, 0, 1, 4, 0, 0, 0, 0]) + udp(4000, 5000, b"g"),
                                            dst="2001:db8::99")),
                   # an atomic fragment header (offset 0), then UDP: the next header is 44
                   ether(d, s, 0x86DD, ipv6(44, bytes([17, 0, 0, 0, 0, 0, 0, 1]) + udp(4000, 5000, b"h"),
                                            dst="2001:db8::99"))]
    send_raw(lab.h1.ns, lab.h1.iface, v4_addr + v4_untaken + v6 + by_port_taken + by_port_not)
    pds = {p: pl.pd_index(p, UPLINK) for p in (by_v4, by_v6, by_port)}
    deadline = time.monotonic() + 5
    while True:
        counts = {p: read_pd_counters(client, pd).profile_in for p, pd in pds.items()}
        lab_in = lab.counters(UPLINK).profile_in
        if sum(counts.values()) + lab_in >= len(v4_addr + v4_untaken + v6 + by_port_taken + by_port_not) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert counts == {by_v4: len(v4_addr), by_v6: len(v6), by_port: len(by_port_taken)}, counts
    assert lab_in == len(v4_untaken) + len(by_port_not), lab_in


def set_mtu(lab: TwoHostLab, mtu: int) -> None:
    for host in (lab.h1, lab.h2):
        set_host_mtu(host, mtu)


def set_host_mtu(host: Host, mtu: int) -> None:
    """Both ends of the host's veth pair: the host's and the switch's."""
    host.ns.run(["ip", "link", "set", host.iface, "mtu", str(mtu)])
    run(["ip", "link", "set", host.switch_iface, "mtu", str(mtu)])


def _wait_log(lab: TwoHostLab, what: str, count: int, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while (log := lab.switch.log_path.read_text()).count(what) < count:
        assert time.monotonic() < deadline, f"{count} x {what!r} not in the switch's log:\n{log[-3000:]}"
        time.sleep(0.2)
    return log


def test_mtu_raised_while_running_has_the_ports_reopened_for_it_and_jumbo_frames_cross(lab: TwoHostLab) -> None:
    """MTU 9000 set on both sides of the wire while the switch runs (started at MTU 1500, its rings
    and buffers sized for 1968): the switch, which reads each port's MTU every second, says it
    reopens each port with rings and packet buffers for the new MTU, and does (same port number,
    counters kept): then 8000-byte pings that must not be fragmented cross both ways, and a frame
    of exactly 9014 bytes crosses counted out. The MTU lowered again needs no reopen: small pings
    cross, and a frame longer than the new MTU is a tx_error drop (never sent). Until 2026-11-30 the
    switch only warned that a restart was needed: longer frames were `malformed` drops, and these
    pings were lost."""
    before = settled_counters(lab, UPLINK)
    set_mtu(lab, 9000)
    log = _wait_log(lab, "port reopened with rings for its MTU", 2)
    for host in (lab.h1, lab.h2):
        assert re.search(f"MTU 9000 is above the 1968 this port's rings were sized for: reopening the port with rings "
                         f".* port={host.switch_port} iface={host.switch_iface} mtu=9000", log), log[-3000:]
    assert "restart the switch" not in log and "port reopened port=" not in log, log[-3000:]
    for src, dst in ((lab.h1, lab.h2), (lab.h2, lab.h1)):
        r = src.ns.run(["ping", "-n", "-c", "3", "-i", "0.2", "-W", "3", "-M", "do", "-s", "8000", dst.ip],
                       check=False, timeout=30)
        assert r.returncode == 0 and " 0% packet loss" in r.stdout, f"{src.name} -> {dst.name}: {r.stdout}{r.stderr}"
    d, s = mac(lab.h2), mac(lab.h1)
    jumbo = udp4(d, s, b"J" * (9000 - 28))
    assert len(jumbo) == 9014
    mid = settled_counters(lab, UPLINK)
    send_raw(lab.h1.ns, lab.h1.iface, [jumbo])
    deadline = time.monotonic() + 5
    while (c := settled_counters(lab, UPLINK)).profile_out - mid.profile_out < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (c.profile_in - mid.profile_in, c.profile_out - mid.profile_out) == (1, 1), c
    assert c.drops.get(DropReason.MALFORMED, 0) == before.drops.get(DropReason.MALFORMED, 0), c
    # Counted since the start across the reopen: the pings and the frame, none lost.
    assert c.profile_in - before.profile_in == c.profile_out - before.profile_out >= 4, (before, c)

    set_mtu(lab, 1500)
    time.sleep(2.5)  # two MTU reads: nothing to reopen for
    log = lab.switch.log_path.read_text()
    assert log.count("reopening the port") == 2 and log.count("port reopened") == 2, log[-3000:]
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    # A frame the host may still send (its MTU is its own) but the egress port's MTU refuses.
    run(["ip", "link", "set", lab.h2.switch_iface, "mtu", "1400"])
    time.sleep(2.5)
    mid = settled_counters(lab, UPLINK)
    send_raw(lab.h1.ns, lab.h1.iface, [udp4(d, s, b"o" * (1500 - 28))])
    deadline = time.monotonic() + 5
    while (c := settled_counters(lab, UPLINK)).profile_in - mid.profile_in < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.profile_out == mid.profile_out and c.drops.get(DropReason.TX_ERROR, 0) - mid.drops.get(DropReason.TX_ERROR, 0) == 1, c


def test_mtu_raised_on_af_xdp_ports_is_named_and_longer_frames_do_not_cross(start_lab) -> None:
    """The case a live reopen does not cover (dataplane/port_lifecycle.rs `resize_for_mtu`): AF_XDP ports keep the
    frame size of their UMEM, so MTU 9000 set on both sides while the switch runs is said once per
    port (the MTU it forwards, and that a restart takes the new one), no port is reopened, a frame
    of the forwarded size (1982 bytes) crosses and one byte more does not."""
    lab = start_lab("--io", "af_xdp")
    set_mtu(lab, 9000)
    log = _wait_log(lab, "MTU 9000 is above the largest this switch forwards (1968, as sized at start", 2)
    assert log.count("restart the switch to size its rings and buffers for this MTU") == 2, log[-3000:]
    for host in (lab.h1, lab.h2):
        assert f"iface={host.switch_iface} mtu=9000" in log, log[-3000:]
    d, s = mac(lab.h2), mac(lab.h1)
    fits, too_long = udp4(d, s, b"n" * (1982 - 42)), udp4(d, s, b"o" * (1983 - 42))
    assert (len(fits), len(too_long)) == (1982, 1983)
    before = settled_counters(lab, UPLINK)
    send_raw(lab.h1.ns, lab.h1.iface, [fits, too_long, fits])
    deadline = time.monotonic() + 5
    while (c := settled_counters(lab, UPLINK)).profile_out - before.profile_out < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # what else may still come (nothing should)
    c = settled_counters(lab, UPLINK)
    assert c.profile_out - before.profile_out == 2, c
    log = lab.switch.log_path.read_text()
    assert "reopening the port" not in log and "port reopened" not in log, log[-3000:]
    assert log.count("restart the switch to size its rings and buffers for this MTU") == 2, log[-3000:]


# --- Jumbo frames: MTU 9000 on all four veth ends before the switch starts -------------------------

JUMBO = 9000


class JumboLab(TwoHostLab):
    """A two-host lab whose veth ends (hosts' and switch's) have MTU 9000 before the switch starts,
    as on a jumbo-frame LAN: the switch sizes its rings and buffers for it."""

    def _wire(self, host: Host) -> None:
        super()._wire(host)
        set_host_mtu(host, JUMBO)


@pytest.fixture
def start_jumbo_lab(start_lab):
    """start_lab's, with JumboLabs."""
    return lambda *switch_args: start_lab(*switch_args, lab_class=JumboLab)


def jumbo_frames(dst_host: Host, src_host: Host) -> dict[str, bytes]:
    d, s = mac(dst_host), mac(src_host)
    return {
        "9014 bytes (mtu 9000)": udp4(d, s, b"J" * (JUMBO - 28)),
        "9018 bytes with a tag (mtu 9000)": udp4(d, s, b"T" * (JUMBO - 28), tags=((0x8100, 42),)),
    }


def ping_jumbo(src: Host, dst: Host) -> None:
    """Three echo requests of 9000-byte IP packets, not to be fragmented (-M do), all answered."""
    r = src.ns.run(["ping", "-c", "3", "-i", "0.2", "-W", "3", "-M", "do", "-s", str(JUMBO - 28), dst.ip],
                   check=False, timeout=30)
    assert r.returncode == 0, f"{src.name} -> {dst.name}: ping -s {JUMBO - 28}: {r.stdout}{r.stderr}"


@pytest.mark.parametrize("shaped", [False, True], ids=["no impairment", "rate and delay"])
def test_jumbo_frames_cross_whole_pings_tcp_and_exact_frames(start_jumbo_lab, tmp_path: Path, shaped: bool) -> None:
    """With MTU 9000 on all four ends, the switch says at start that it sized its rings for jumbo
    frames (and warns of nothing); 9000-byte pings cross both ways, an iperf3 TCP transfer with a
    9000-byte MTU's segments completes, and frames of exactly 9014 and 9018 (tagged) bytes cross
    byte for byte both ways, with counters that conserve: with no impairment (the fast path's XDP
    flow cache carries the TCP flow) and through a 20 ms delay and a 200 Mbit/s rate."""
    port = free_tcp_port("127.0.0.1")
    lab = start_jumbo_lab("--metrics-addr", f"127.0.0.1:{port}")
    log = lab.switch.log_tail(200)
    assert "jumbo frames" in log and "ring frames of 16384 bytes" in log, log
    assert "above the largest this switch forwards" not in log, log
    if shaped:
        for direction in (UPLINK, DOWNLINK):
            lab.impair(direction, delay_ns=20 * MS, ns_per_byte_q16=ns_per_byte_q16(200e6))
    ping_jumbo(lab.h1, lab.h2)
    ping_jumbo(lab.h2, lab.h1)

    up0, down0 = settled_counters(lab, UPLINK), settled_counters(lab, DOWNLINK)
    hits0 = fast_path_packets(f"http://127.0.0.1:{port}/metrics")
    received = iperf3_tcp(lab.h1, lab.h2)
    assert received["bytes"] > 1_000_000, received
    up, down = settled_counters(lab, UPLINK), settled_counters(lab, DOWNLINK)
    assert up.conservation_gap() == 0 and down.conservation_gap() == 0, (up, down)
    assert up.dropped == up0.dropped, up.drops
    # The data segments filled the 9000-byte MTU: the uplink's frames average well above 1518.
    packets, nbytes = up.profile_in - up0.profile_in, up.bytes_in - up0.bytes_in
    assert nbytes / packets > 4000, f"{nbytes} bytes in {packets} frames: no jumbo segments crossed"
    hits = fast_path_packets(f"http://127.0.0.1:{port}/metrics") - hits0
    crossed = packets + down.profile_in - down0.profile_in
    if shaped:
        assert hits == 0, hits
    else:
        assert hits >= 0.9 * crossed, f"{hits} of {crossed} TCP packets took the fast path"

    for frames, before, c in cross_each_way_once(lab, tmp_path, jumbo_frames,
                                                 lambda got, _frames: f"lengths {[len(g) for g in got]}"):
        assert c.bytes_out - before.bytes_out >= sum(len(f) for f in frames.values()), c


def fast_path_packets(url: str) -> int:
    """Packets the kernel fast path forwarded, from the switch's /metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    for f in text_string_to_metric_families(text):
        for sample in f.samples:
            if sample.name == "p4netem_switch_fast_path_packets_total":
                return int(sample.value)
    raise AssertionError(f"no p4netem_switch_fast_path_packets_total in /metrics:\n{text[:2000]}")


@pytest.mark.p4netem_timing
def test_jumbo_frames_get_the_configured_rate(start_jumbo_lab) -> None:
    """A flow of 9000-byte frames through a 20 Mbit/s rate, offered at 1.5x: the rate stage counts
    each frame's 9000 bytes, so the frames leave one 3.6 ms serialisation time apart (the shaped
    rate within the 2 % and 5 % of tests/dataplane/test_rate.py), and the excess is tail-dropped.
    Offered for 1.5 s (it was 3): 624 frames, ~400 gaps for the median, nearly all one
    serialisation time (the queue never empties at 1.5x), and a share lost (a third, less the 11
    frames of the 100 KB queue: ~0.32) far inside 0.2..0.45."""
    lab = start_jumbo_lab()
    rate, size = 20_000_000, JUMBO - UDP_IP_ETH_OVERHEAD
    frame_bits = JUMBO * 8
    offered_pps = 1.5 * rate / frame_bits
    n = int(offered_pps * 1.5)
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(rate), queue_limit_bytes=100_000)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=offered_pps, size=size, port=9052)
    assert set(result.sizes) == {size}, set(result.sizes)
    gaps = [b - a for a, b in zip(result.rx_ns, result.rx_ns[1:])]
    shaped = frame_bits / median(gaps) * 1e9
    assert abs(shaped - rate) <= 0.02 * rate, f"shaped rate {shaped / 1e6:.3f} Mbit/s, configured {rate / 1e6}"
    goodput = result.backlogged_bits_per_second()
    assert abs(goodput - rate) <= 0.05 * rate, f"goodput with a packet waiting {goodput / 1e6:.3f} Mbit/s"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n and c.conservation_gap() == 0, c
    assert c.drops[DropReason.QUEUE_FULL] == result.lost and c.dropped == result.lost, c.drops
    assert 0.2 * n <= result.lost <= 0.45 * n, f"{result.lost} of {n} dropped"


def test_jumbo_frames_are_captured_whole_by_pcap(start_jumbo_lab, tmp_path: Path) -> None:
    """--pcap at MTU 9000: the 9014- and 9018-byte frames are in the in and out captures whole."""
    pcap = tmp_path / "pcap"
    lab = start_jumbo_lab("--pcap", str(pcap))
    frames = jumbo_frames(lab.h2, lab.h1)
    before = settled_counters(lab, UPLINK)
    send_raw(lab.h1.ns, lab.h1.iface, list(frames.values()))
    deadline = time.monotonic() + 5
    while (c := settled_counters(lab, UPLINK)).profile_out - before.profile_out < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.profile_out - before.profile_out == 2 and c.dropped == before.dropped, c
    lab.switch.stop()  # flushes the captures
    for name in (f"1-{lab.h1.switch_iface}_in.pcap", f"2-{lab.h2.switch_iface}_out.pcap"):
        got = [f for _, f in read_pcap(pcap / name)]
        for what, frame in frames.items():
            assert got.count(frame) == 1, f"{name}: {what!r} not captured whole; lengths {[len(g) for g in got]}"


def test_jumbo_start_refusals_and_the_af_xdp_fallback(start_jumbo_lab, switch_bin: str) -> None:
    """At MTU 9000: a --buffer-size too small for the MTU is refused at start with the size to give;
    --io auto opens AF_PACKET where AF_XDP (a page per frame) cannot carry the MTU, and says why;
    --io af_xdp forced fails naming the MTU."""
    lab = start_jumbo_lab("--io", "auto")
    log = lab.switch.log_tail(200)
    assert "AF_XDP unavailable" in log and "MTU 9000 is above the largest the AF_XDP path carries (1968" in log, log
    assert "port up: af_packet" in log, log
    ping_jumbo(lab.h1, lab.h2)
    lab.close()
    # The veths are gone with the lab: two more for the refusals.
    a = f"p4nj{unique_token()}"
    run(["ip", "link", "add", a + "a", "mtu", str(JUMBO), "type", "veth", "peer", "name", a + "b", "mtu", str(JUMBO)])
    try:
        for dev in (a + "a", a + "b"):
            disable_offloads(dev)
            run(["ip", "link", "set", dev, "up"])
        grpc = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
        small = subprocess.run([switch_bin, "-i", f"1@{a}a", "--buffer-size", "2048", "--grpc-addr", grpc],
                               capture_output=True, text=True, timeout=30)
        assert small.returncode == 1, small.stderr
        assert "--buffer-size 2048 is too small for the ports' MTU 9000" in small.stderr, small.stderr
        assert "give --buffer-size 9018 or more" in small.stderr, small.stderr
        forced = subprocess.run([switch_bin, "-i", f"1@{a}a", "--io", "af_xdp", "--grpc-addr", grpc],
                                capture_output=True, text=True, timeout=30)
        assert forced.returncode == 1, forced.stderr
        assert "MTU 9000 is above the largest the AF_XDP path carries" in forced.stderr, forced.stderr
    finally:
        run(["ip", "link", "del", a + "a"], check=False)
