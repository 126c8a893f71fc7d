"""netem's cell framing on the wire (contract stage 6, cell_bytes / cell_overhead_bytes).

ATM's `rate 1mbit 0 48 5`: a frame takes ceil(frame / 48) cells of 53 bytes on the link. A 96-byte
frame fills 2 cells exactly (106 bytes, 848 us at 1 Mbit/s); one byte more needs a third (159
bytes, 1272 us), where without cells the two frames would take 768 and 776 us. With a backlog the
datagrams leave one link time apart, so the median gap between their arrivals is that time.

netem's overheads may be negative (two's complement in their 16-bit params): PACKETOVERHEAD -42
makes a 100-byte frame 58 bytes on the link (464 us), CELLOVERHEAD -5 makes 53-byte cells carry 48
bytes (a 100-byte frame: 2 cells, 96 bytes, 768 us). Read unsigned, the same params would give
about 524 ms and 1.3 s.
"""

from __future__ import annotations

import pytest
from wirestats import median, ns_per_byte_q16, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import UDP_IP_ETH_OVERHEAD, run_probe
from p4netem.pipeline import UPLINK

RATE = 1_000_000
CELL, CELL_OVERHEAD = 48, 5


def _sixteen_bits(value: int) -> int:
    return value & 0xFFFF


@pytest.mark.parametrize("frame, overhead, cell, cell_overhead, link_bytes", [
    (96, 0, CELL, CELL_OVERHEAD, 2 * (CELL + CELL_OVERHEAD)),
    (97, 0, CELL, CELL_OVERHEAD, 3 * (CELL + CELL_OVERHEAD)),
    (100, -42, 0, 0, 58),
    (100, 0, 53, -5, 96),
])
def test_the_link_time_counts_overheads_and_cells(lab: TwoHostLab, frame: int, overhead: int, cell: int,
                                                  cell_overhead: int, link_bytes: int) -> None:
    lab.impair(UPLINK, ns_per_byte_q16=ns_per_byte_q16(RATE), queue_limit_pkts=1000,
               overhead_bytes=_sixteen_bits(overhead), cell_bytes=cell,
               cell_overhead_bytes=_sixteen_bits(cell_overhead), cell_recip=(1 << 32) // cell if cell else 0)
    want_ns = link_bytes * 8 * 1e9 / RATE
    n = 400
    # Twice what the link carries: the queue never runs dry after the first few datagrams.
    # (No duplicates: the probe ends once all n are in, stop_when_complete, not a second later.)
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=2 * 1e9 / want_ns,
                       size=frame - UDP_IP_ETH_OVERHEAD, port=9046, stop_when_complete=True)
    assert result.lost == 0
    rx = sorted(result.rx_ns)
    gaps = [b - a for a, b in zip(rx[20:], rx[21:])]
    # Receive-path noise moves single gaps (a late one is followed by a short one); the median
    # is the link time. Without cells it would be 768 or 776 us, with the wrong cell count
    # 848 or 1272 us, without the negative overheads 800 us: 2 % tells them apart.
    assert abs(median(gaps) - want_ns) < 0.02 * want_ns, f"median gap {median(gaps) / 1e3:.1f} us, want {want_ns / 1e3:.0f}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_out == n and c.dropped == 0, c
