"""The server's first flight equals its initial window, seen from the client through the switch.

With a 400 ms RTT and no rate limit, the server's first flight of data leaves in one burst (BBR,
this kernel's default, paces it over about a third of an RTT) and the next data only after the
client's ACKs have come back one RTT later. The client-side capture shows the flights as bursts separated by most of an
RTT; the first one, counted in segments, is the initial window the lab set on the server's route
(the client's initrwnd is raised with it, so its advertised window never caps the flight).
"""

from __future__ import annotations

import subprocess

import pytest

from lab_env import BIG, delay_profile
from p4netem_studies.web.capture import Capture, read_pcap

RTT_MS = 400.0


def flights(segments, server_ip: str, gap_s: float) -> list[tuple[float, int]]:
    """(start time, data segments) of the server's bursts, separated by at least gap_s."""
    data = [s for s in segments if s.src == server_ip and s.payload]
    out: list[list] = []
    last = None
    for s in data:
        if last is None or s.ts - last >= gap_s:
            out.append([s.ts, 0])
        out[-1][1] += 1
        last = s.ts
    return [(t, n) for t, n in out]


@pytest.mark.parametrize("iw", [3, 10, 20])
def test_first_flight_is_the_initial_window(weblab, iw, tmp_path):
    weblab.set(delay_profile(RTT_MS), iw=iw)
    obj = weblab.content.manifests[BIG].embedded[0]          # 300 KB image
    server_ip = weblab.endpoints.resolve_map(BIG)[obj.host]
    pcap = tmp_path / f"iw{iw}.pcap"
    cap = Capture(weblab.client_ns, "eth0", pcap, "tcp port 80")
    try:
        proc = subprocess.run(
            ["ip", "netns", "exec", weblab.client_ns, "curl", "-s", "-o", "/dev/null",
             "-w", "%{http_code} %{size_download}", "--resolve", f"{obj.host}:80:{server_ip}",
             f"http://{obj.host}{obj.path}"], capture_output=True, text=True, timeout=60)
    finally:
        cap.stop()
    assert proc.stdout == f"200 {obj.size}", proc.stderr
    segs = read_pcap(pcap)
    assert max(len(s.payload) for s in segs if s.src == server_ip) <= 1460   # wire segments
    bursts = flights(segs, server_ip, gap_s=RTT_MS / 2 / 1000)
    counts = [n for _, n in bursts]
    assert len(bursts) >= 2, counts
    assert counts[0] == iw, counts
    # The flight ended because the window was used up: the next data waited for the ACKs of
    # the first, one RTT later (what follows depends on the congestion control, BBR here).
    assert (bursts[1][0] - bursts[0][0]) * 1000 == pytest.approx(RTT_MS, rel=0.25), bursts
