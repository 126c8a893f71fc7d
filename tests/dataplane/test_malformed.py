"""A malformed frame (IPv4 EtherType with a truncated IPv4 header, sent from a raw socket) is counted
in parser_errors, forwarded as a plain L2 frame, and the switch keeps forwarding."""

from __future__ import annotations

from wirestats import Capture, ping, send_raw

from p4netem.lab import TwoHostLab
from p4netem.p4rt.encoding import to_int
from p4netem.pipeline import UPLINK
from p4netem.stats import read_parser_errors


def test_truncated_ipv4_header(lab: TwoHostLab) -> None:
    count = 5
    # Ethernet h1 -> h2, EtherType IPv4, then 10 of the 20 bytes of an IPv4 header.
    frame = (
        to_int(lab.h2.mac).to_bytes(6, "big")
        + to_int(lab.h1.mac).to_bytes(6, "big")
        + b"\x08\x00"
        + bytes.fromhex("45000054000040004011")
    )
    before = sum(read_parser_errors(lab.client).values())
    capture = Capture(lab.h2.ns, lab.h2.iface, seconds=2.0, ethertype=0x0800)
    send_raw(lab.h1.ns, lab.h1.iface, frame, count)
    arrived = [f for f in capture.frames() if f[6:12] == frame[6:12]]

    errors = read_parser_errors(lab.client)
    assert sum(errors.values()) - before == count, f"parser_errors: {errors}"
    assert len(arrived) == count, f"{len(arrived)} of {count} malformed frames forwarded to h2"
    assert all(f[: len(frame)] == frame for f in arrived)
    assert lab.counters(UPLINK).profile_in >= count
    # Still forwarding, both ways.
    assert ping(lab.h1, lab.h2, count=3) == (3, 3)
    assert ping(lab.h2, lab.h1, count=3) == (3, 3)
