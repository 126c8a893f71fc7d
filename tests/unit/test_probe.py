"""The UDP probe over loopback (real sockets, kernel timestamps) and its result arithmetic."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from p4netem.lab.free import free_udp_port
from p4netem.lab.probe import HEADER_LEN, UDP_IP_ETH_OVERHEAD, ProbeResult, filler, make_datagram, send


def test_send_and_receive_over_loopback() -> None:
    port = free_udp_port()
    receiver = subprocess.Popen(
        [sys.executable, "-m", "p4netem.lab.probe", "recv", "--bind", "127.0.0.1", "--port", str(port),
         "--idle", "0.5", "--max-time", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert "ready" in receiver.stderr.readline()
    sent = send("127.0.0.1", port, count=300, rate=3000, size=100)
    out, _ = receiver.communicate(timeout=30)
    data = json.loads(out)
    assert sent["sent"] == 300
    # Paced: 300 datagrams at 3000/s take about 0.1 s.
    assert 0.08e9 <= sent["end_ns"] - sent["start_ns"] <= 1e9
    result = ProbeResult(sent=300, size=100, seq=data["seq"], tx_ns=data["tx_ns"], rx_ns=data["rx_ns"],
                         flips=data["flips"], sizes=data["size"], sports=data["sport"], bad_header=data["bad_header"],
                         sender=sent, wall_offsets_ns=data["wall_offsets_ns"])
    # Both ends record the wall clock's offset at start and end; nothing steps it on this machine
    # during a test (a few microseconds of read noise at most).
    assert len(result.wall_offsets_ns) == 2 and len(sent["wall_offsets_ns"]) == 2
    assert result.wall_clock_step_ns < 1_000_000
    assert result.lost == 0 and result.duplicates == 0 and result.reordered == 0 and result.corrupted == 0
    # Kernel receive timestamps come after the send timestamps, by little on loopback.
    assert all(0 < d < 50_000_000 for d in result.delays_ns)


def _receiver(port: int, *args: str) -> subprocess.Popen:
    receiver = subprocess.Popen(
        [sys.executable, "-m", "p4netem.lab.probe", "recv", "--bind", "127.0.0.1", "--port", str(port), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert "ready" in receiver.stderr.readline()
    return receiver


def test_a_complete_probe_ends_without_waiting_out_its_idle_time() -> None:
    """--expect N (run_probe's stop_when_complete): the receiver returns once datagrams 0..N-1 are
    all in, not `--idle` seconds later; a copy sent after that is not recorded; with one missing
    it waits its idle time as without the option."""
    port = free_udp_port()
    receiver = _receiver(port, "--idle", "20", "--max-time", "60", "--expect", "300")
    send("127.0.0.1", port, count=300, rate=3000, size=100)
    sent = time.monotonic()
    out, _ = receiver.communicate(timeout=60)
    assert time.monotonic() - sent < 10, "the receiver waited out its idle time"  # 20 s without --expect
    assert sorted(json.loads(out)["seq"]) == list(range(300))

    port = free_udp_port()
    receiver = _receiver(port, "--idle", "20", "--max-time", "60", "--expect", "3")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in (0, 1, 2, 1):  # the second 1, a copy, comes after the last original
            s.sendto(make_datagram(seq, time.time_ns(), filler(10)), ("127.0.0.1", port))
    out, _ = receiver.communicate(timeout=60)
    assert json.loads(out)["seq"] == [0, 1, 2]

    port = free_udp_port()
    receiver = _receiver(port, "--idle", "1", "--max-time", "60", "--expect", "300")
    send("127.0.0.1", port, count=299, rate=3000, size=100)  # the 300th never comes
    sent = time.monotonic()
    out, _ = receiver.communicate(timeout=60)
    assert time.monotonic() - sent >= 0.9 and len(json.loads(out)["seq"]) == 299

    bad = subprocess.run([sys.executable, "-m", "p4netem.lab.probe", "recv", "--expect", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--expect 0: must be at least 1" in bad.stderr, bad.stderr


def synthetic(seq: list[int], sent: int, **kw) -> ProbeResult:
    n = len(seq)
    fields = {"tx_ns": list(range(n)), "rx_ns": [i + 10 for i in range(n)], "flips": [0] * n,
              "sizes": [64] * n, "sports": [5000] * n, "bad_header": 0}
    fields.update(kw)
    return ProbeResult(sent=sent, size=64, seq=seq, **fields)


def test_result_statistics() -> None:
    r = synthetic([0, 2, 1, 3, 3, 7, 8], sent=10)
    assert r.received == 7 and r.unique == 6 and r.duplicates == 1
    assert r.lost == 4  # 4, 5, 6, 9
    assert r.loss_bursts() == [3, 1]
    assert r.reordered == 1  # 1 after 2
    assert r.delays_ns == [10] * 7


def test_corruption_detection() -> None:
    r = synthetic([0, 1, 2, 3], sent=4, flips=[0, 1, 0, 0], sizes=[64, 64, 40, 64], sports=[5000, 5000, 5000, 4999],
                  bad_header=2)
    assert r.corrupted == 2 + 3


def test_datagram_layout() -> None:
    d = make_datagram(5, 123, filler(10))
    assert len(d) == HEADER_LEN + 10 and d[:4] == b"P4NP"


def test_wall_clock_step_is_the_spread_of_both_ends_offsets() -> None:
    r = synthetic([0, 1], sent=2, sender={"wall_offsets_ns": [1_000_000, 1_000_400]},
                  wall_offsets_ns=[1_000_100, 999_800])
    assert r.wall_clock_step_ns == 600
    assert synthetic([0], sent=1).wall_clock_step_ns == 0  # an old result without offsets


def _shaped(tx_ns: list[int], serialisation_ns: int, idle_after: int | None = None,
            idle_ns: int = 0) -> ProbeResult:
    """A FIFO shaper's arrivals: each packet leaves one serialisation time after both its own
    arrival (1 ms of path) and the previous one's departure; `idle_after` makes it sit idle
    for `idle_ns` with packets queued once that many have left."""
    rx, last = [], 0
    for i, t in enumerate(tx_ns):
        start = max(t + 1_000_000, last)
        if idle_after is not None and i == idle_after:
            start += idle_ns
        last = start + serialisation_ns
        rx.append(last)
    return synthetic(list(range(len(tx_ns))), sent=len(tx_ns), tx_ns=tx_ns, rx_ns=rx,
                     sizes=[64] * len(tx_ns), flips=[0] * len(tx_ns), sports=[5000] * len(tx_ns))


def test_backlogged_rate_ignores_a_pausing_sender_and_sees_an_idling_shaper() -> None:
    """Offered at twice the shaped rate with a 50 ms pause of the sender in the middle: the
    link idles for want of packets, so the rate from first to last arrival is low, but while
    packets waited the shaper kept its rate exactly. A shaper idling 50 ms with packets queued
    shows in the backlogged rate."""
    s = 100_000                                              # 100 us per frame
    frame_bits = (64 + UDP_IP_ETH_OVERHEAD) * 8
    tx = [i * s // 2 for i in range(200)] + [100 * s + 50_000_000 + i * s // 2 for i in range(200)]
    paused = _shaped(tx, s)
    span = paused.rx_ns[-1] - paused.rx_ns[0]
    assert (paused.received - 1) * frame_bits * 1e9 / span < 0.5 * frame_bits * 1e9 / s
    assert paused.backlogged_bits_per_second() == pytest.approx(frame_bits * 1e9 / s, rel=1e-9)
    idler = _shaped(tx[:200], s, idle_after=100, idle_ns=50_000_000)
    assert idler.backlogged_bits_per_second() < 0.5 * frame_bits * 1e9 / s
    assert _shaped([i * 2 * s for i in range(50)], s).backlogged_bits_per_second() == 0.0
