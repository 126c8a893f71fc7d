"""Added round-trip time shows up in the page-load time as each protocol's round trips predict.

The page (8 objects of 1000 B and a 1 KB HTML document on one host) is small enough that no
response waits for the congestion window (server IW 10), so its load time is a count of round
trips. Loading it at a 200 ms RTT and on the LAN, the difference divided by 200 ms is that count:

  h2 over TLS 1.3     TCP + TLS + HTML + all objects multiplexed                       = 4
  SPDY/3.1 over TLS   the same on one session                                          = 4
  HTTP/1.1 plain, 6 connections per host: TCP + HTML, then the first connection fetches the
                      next object while five new ones connect (1) and fetch (1); the 8th object
                      waits for the first connection to be free again (1)               = 5
  HTTP/1.1 over TLS   as above with a TLS round trip on every connection               = 6
  HTTP/1.0, 4 at once a connection per object: TCP + HTML, then two rounds of four
                      objects, each a connection and a request                         = 6

The capture's first SYN to SYN-ACK is the RTT itself.
"""

from __future__ import annotations

import statistics

import pytest

from lab_env import SMALL, delay_profile

RTT_MS = 200.0
LOADS = 3

CASES = [("h2", True, 4), ("spdy", True, 4), ("h1.1", False, 5), ("h1.1", True, 6),
         ("h1.0", False, 6)]


def _median_plt(weblab, proto: str, tls: bool) -> tuple[float, list]:
    loads = [weblab.load(proto, SMALL, tls=tls) for _ in range(LOADS)]
    for load in loads:
        assert load.report["ok"], load.report["errors"]
    return statistics.median(l.wire.plt_ms for l in loads), loads


@pytest.mark.parametrize("proto,tls,round_trips", CASES,
                         ids=[f"{c[0]}-{'tls' if c[1] else 'plain'}" for c in CASES])
def test_page_load_time_grows_by_the_protocols_round_trips(weblab, proto, tls, round_trips):
    weblab.set("lan", iw=10)
    base, _ = _median_plt(weblab, proto, tls)
    weblab.set(delay_profile(RTT_MS), iw=10)
    slow, loads = _median_plt(weblab, proto, tls)
    measured = (slow - base) / RTT_MS
    # Half a round trip either way: a shared 2-core machine adds tens of milliseconds, never
    # a hundred, to a load; a wrong protocol behaviour moves this by whole round trips.
    assert abs(measured - round_trips) <= 0.5, (
        f"{proto}: {measured:.2f} round trips ({base:.0f} ms on the LAN, {slow:.0f} ms at "
        f"{RTT_MS:.0f} ms RTT), expected {round_trips}")
    synack = statistics.median(l.wire.first_syn_to_synack_ms for l in loads)
    assert synack == pytest.approx(RTT_MS, rel=0.1)
