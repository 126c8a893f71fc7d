"""Corruption: one random bit of the bytes after the Ethernet header is flipped, at the configured
rate. The probe sends without UDP checksum, so the receiver sees the flips that the kernel lets
through: any bit of the UDP payload, of the UDP source port, and the set bits of the UDP length (a
shorter length is accepted and the datagram trimmed). Every other bit (IPv4 header: its checksum
fails; destination port, UDP checksum field, length bits that lengthen) makes the kernel drop the
packet."""

from __future__ import annotations

from wirestats import assert_binomial, prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK

SIZE = 1000  # UDP payload bytes
IP_LEN = SIZE + 8 + 20
VISIBLE_BITS = SIZE * 8 + 16 + bin(SIZE + 8).count("1")


def test_corruption_rate(lab: TwoHostLab) -> None:
    p, n = 0.10, 10_000
    lab.impair(UPLINK, corrupt_prob=prob(p))
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=3000, size=SIZE, port=9040)
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n
    assert_binomial(c.profile_corrupt, n, p, "profile_corrupt counter")
    assert_binomial(result.corrupted, n, p * VISIBLE_BITS / (IP_LEN * 8), "corrupted payloads seen")
    # Exactly one bit per corrupted packet.
    flipped = [f for f in result.flips if f]
    assert all(f == 1 for f in flipped), f"bit flips per corrupted payload: {sorted(set(flipped))}"
    # What was not seen corrupted was lost to a header flip, and only then. (A datagram whose probe
    # header is corrupted is seen corrupted but, its sequence number unknown, also counts as lost.)
    assert result.corrupted <= c.profile_corrupt
    dropped_by_kernel = result.lost - result.bad_header
    assert dropped_by_kernel == c.profile_corrupt - result.corrupted, (result.lost, result.bad_header, c, result.corrupted)
