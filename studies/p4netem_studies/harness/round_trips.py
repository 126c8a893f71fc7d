"""The fewest round trips a protocol path needs to load a page: what the RTT audit
(rtt_audit.py) must find on a lossless link whose windows never fill (docs/labs.md "Round
trips per protocol path").

A round trip is one exchange on the load's deepest chain: a TCP handshake, a TLS handshake
(1 with TLS 1.3, 2 with TLS 1.2), a request and its response. The HTML is requested first on
the first host's connection; every object is named in it and requested once its reference
arrives; nothing waits for a window. Then, with h = 1 + TLS round trips per new connection:

- one connection per host, multiplexed or pipelined (h2, spdy, h1.1-pipelined): the HTML takes
  h + 1; its host's objects one more; another host's objects a connection of their own, opened
  when the HTML names them: h + 1 more. So h + 2 for one host (3 plain, 4 TLS 1.3) and 2h + 2
  for two or more (4 plain, 6 TLS 1.3);
- persistent HTTP/1.1, k connections per host, one request outstanding on each: each free
  connection takes the next object (1 round trip), new connections (up to k) are opened for the
  objects waiting when the HTML names them and are ready h round trips later;
- HTTP/1.0, one request per connection, k at once per host: every object costs h + 1, in
  batches of k.
"""

from __future__ import annotations

import heapq
from collections import Counter

from ..web.manifest import Manifest

MULTIPLEXED = ("h2", "spdy", "h1.1-pipelined")
DEFAULT_CONNS = {"h1.0": 4, "h1.1": 6, "h1.1-pipelined": 1, "h2": 1, "spdy": 1}


def handshake_round_trips(tls: bool, tls_version: str | None = "TLSv1.3") -> int:
    """TCP plus TLS (1 for TLS 1.3, 2 for TLS 1.2 without False Start)."""
    if not tls:
        return 1
    return 1 + (2 if tls_version == "TLSv1.2" else 1)


def minimum_round_trips(protocol: str, tls: bool, manifest: Manifest,
                        conns_per_host: int | None = None,
                        tls_version: str | None = "TLSv1.3") -> int | None:
    """Round trips of `protocol` loading `manifest`'s page (None: a browser, not modelled)."""
    if protocol not in DEFAULT_CONNS:
        return None
    h = handshake_round_trips(tls, tls_version)
    k = conns_per_host or DEFAULT_CONNS[protocol]
    root = manifest.root
    html_done = h + 1
    per_host = Counter(e.host for e in manifest.embedded)
    worst = html_done
    for host, n in per_host.items():
        same = host == root.host
        if protocol in MULTIPLEXED:
            done = html_done + (1 if same else h + 1)
        elif protocol == "h1.1":
            done = _persistent(n, k, html_done, h, same)
        else:
            done = html_done + -(-n // k) * (h + 1)
        worst = max(worst, done)
    return worst


def _persistent(n: int, k: int, html_done: int, h: int, reuse_first: bool) -> int:
    """n objects over at most k persistent connections: the HTML's connection (when it is this
    host's) is free at html_done, new ones are ready h round trips after the HTML names them."""
    free = [html_done] if reuse_first else []
    new = min(k - len(free), max(0, n - len(free)))
    free += [html_done + h] * new
    heapq.heapify(free)
    done = html_done
    for _ in range(n):
        t = heapq.heappop(free) + 1
        done = max(done, t)
        heapq.heappush(free, t)
    return done
