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
ring: with MTU 9000 on both sides the switch says at once that it forwards no frame above 1982
bytes, and drops them as `malformed`.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from wirestats import MS, ns_per_byte_q16, send_raw, settled_counters

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.lab.netns import run
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
    for src, dst, direction in ((lab.h1, lab.h2, UPLINK), (lab.h2, lab.h1, DOWNLINK)):
        frames = frames_to(dst, src)
        before = settled_counters(lab, direction)
        got, primers = crossing(src, dst, frames, tmp_path)
        for name, frame in frames.items():
            n = got.count(frame)
            assert n == 1, (f"{src.name} -> {dst.name}: {name!r} arrived {n} times unchanged; "
                            f"received: {[g[:24].hex() for g in got if g not in frames.values()]}")
        c = settled_counters(lab, direction)
        assert c.profile_in - before.profile_in == len(frames) + primers, c
        assert c.profile_out - before.profile_out == len(frames) + primers and c.dropped == before.dropped, c


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
        host.ns.run(["ip", "link", "set", host.iface, "mtu", str(mtu)])
        run(["ip", "link", "set", host.switch_iface, "mtu", str(mtu)])


def test_jumbo_mtu_is_named_at_once_and_frames_above_the_ring_are_malformed_drops(lab: TwoHostLab) -> None:
    """MTU 9000 on both sides of the wire (a jumbo-frame LAN): the switch, which reads each port's
    MTU every second, says within a few seconds, before any traffic, which MTU it forwards; a
    frame of that MTU (1982 bytes) crosses, one byte more is a `malformed` drop."""
    set_mtu(lab, 9000)
    deadline = time.monotonic() + 10
    while "MTU 9000 is above the largest this switch forwards (1968" not in lab.switch.log_tail(200):
        assert time.monotonic() < deadline, f"no MTU warning in the switch's log:\n{lab.switch.log_tail(30)}"
        time.sleep(0.2)
    log = lab.switch.log_tail(200)
    for host in (lab.h1, lab.h2):
        assert f"iface={host.switch_iface} mtu=9000" in log, log
    d, s = mac(lab.h2), mac(lab.h1)
    fits = udp4(d, s, b"n" * (1982 - 42))
    too_long = udp4(d, s, b"o" * (1983 - 42))
    assert (len(fits), len(too_long)) == (1982, 1983)
    before = settled_counters(lab, UPLINK)
    send_raw(lab.h1.ns, lab.h1.iface, [fits, too_long])
    deadline = time.monotonic() + 5
    while (c := settled_counters(lab, UPLINK)).profile_in - before.profile_in < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.profile_out - before.profile_out == 1, c
    assert c.drops[DropReason.MALFORMED] - before.drops[DropReason.MALFORMED] == 1, c
