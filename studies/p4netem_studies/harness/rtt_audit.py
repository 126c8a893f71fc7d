"""The RTT audit of one page load: how many round trips it spent, and which waits it did not need,
from the client-side capture alone.

Every packet gets a depth, the round trips before it:
- a client packet is as deep as the server packet that made the client send it: for a pure ACK
  the data it acknowledges; for a SYN or data (a request, a TLS flight) the last server packet
  received before it (the loader reacts to what arrives: HTML that names objects, a SYN-ACK, a
  finished response freeing a connection); the load's first SYN is depth 0;
- a server packet is one round trip deeper than the client packet that released it, found from
  what the server had received when it sent it: a SYN-ACK answers its SYN; data answers the last
  client data its ACK field covers (the server's rcv_nxt when it sent it, exact, no timing); a
  data packet sent right after a pure ACK reached the server (within `RELEASE_MS`; what had
  reached it is read from timing and, exactly, from the client timestamp the packet echoes)
  and after a silence of half an RTT on its connection was released by that ACK: it was held by
  the kernel (congestion or receive window, or Nagle) or by the server;
- a data packet close behind the previous one on its connection (less than half an RTT) continues
  its burst at the same depth, unless it answers newer client data.
When a packet left the server is its arrival at the client minus the connection's path delay;
a client packet reached the server at its capture time plus the same delay's other half; the
two halves' sum, the connection's RTT, is the smallest gap seen between a client packet and the
first server packet that acknowledges it (the SYN-ACK among them), so only the sum is needed.

`rtts` is the depth of the deepest server packet of the load: on a lossless link with a large
initial window, the protocol's round trips (round_trips.minimum_round_trips). An ACK-released
packet is a window wait (`window_waits`: not counted as a stall) when the server had at least
`initcwnd` packets in flight before the ACK (its congestion window never falls below that on a
lossless path) or the data would not have fit the client's advertised window; a retransmission
is loss repair. Any other ACK-released packet is a `stall`: a round trip the protocol does not
need (Nagle holding a partial segment behind an unacknowledged small one, a cork never
released, a server that writes only when an ACK wakes it), unless it is a full segment: neither
Nagle nor a cork holds one, and a server learns of an ACK only through a full window or send
buffer (window waits), so it left when the server wrote it (its think time ended near the ACK by
chance) and continues the chain of the request it answers. The price: a server that polled for
the ACK on purpose and then wrote full segments would pass; none of the labs' servers does.
`stall_ms` sums how long each stalled packet came after the previous data on its connection.

Packets that arrive right behind one another at the downlink's rate (a rate-limited link's
queue) tell nothing about when they left the server: they continue their burst, never count as
released by an ACK. `server_ms` and `client_ms` split the deepest chain's time beyond its
round trips: the servers' (think time, and the transmission of answers over a slow downlink)
and the client's (its own processing and timers: pipelining's 50 ms flush, a loader's start).

`rtt_path` spells the deepest packet's chain from the first SYN: one letter per round trip
(h handshake, r request or TLS flight, w window wait, s stall, l loss repair), so a reader sees
where a load's round trips went ("hrr" is TCP, the HTML, its objects).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from ..web.capture import ACK, FIN, RST, SYN, Segment

RELEASE_MS = 2.0        # an ACK-released packet leaves within this of the ACK's arrival
CAPTURE_EPS_MS = 0.3    # timestamp noise allowed when asking "had it arrived yet?"
GAP_FLOOR_MS = 1.0      # a silence shorter than this never ends a burst (a LAN's RTT is less)
RATE_RUN = 6            # packets per run when estimating the downlink's rate (see _downlink_rate)


@dataclass
class Audit:
    rtts: int | None = None
    stalls: int = 0
    stall_ms: float = 0.0
    window_waits: int = 0
    rtt_path: str = ""
    # Along the deepest chain: time servers took beyond the round trip before answering, and
    # time the client took before sending what the chain's next packet answered.
    server_ms: float = 0.0
    client_ms: float = 0.0
    stall_events: list[dict] = field(default_factory=list)

    def columns(self) -> dict:
        return {"rtts": self.rtts, "stalls": self.stalls, "stall_ms": round(self.stall_ms, 1),
                "window_waits": self.window_waits, "rtt_path": self.rtt_path,
                "server_ms": round(self.server_ms, 1), "client_ms": round(self.client_ms, 1)}


class _Pkt:
    __slots__ = ("seg", "conn", "up", "rel_seq", "rel_end", "rel_ack", "depth", "kind", "cause",
                 "index")

    def __init__(self, seg: Segment, conn: tuple, up: bool, index: int):
        self.seg = seg
        self.conn = conn
        self.up = up
        self.rel_seq = self.rel_end = self.rel_ack = 0
        self.depth: int | None = None
        self.kind = ""
        self.cause: _Pkt | None = None
        self.index = index

    @property
    def ts(self) -> float:
        return self.seg.ts

    @property
    def data(self) -> bool:
        return bool(self.seg.payload)

    @property
    def meaningful(self) -> bool:
        """Something a client reacts to: data, SYN-ACK or FIN."""
        return bool(self.seg.payload) or bool(self.seg.flags & (SYN | FIN))


def _rel(x: int, base: int) -> int:
    return (x - base) & 0xFFFFFFFF


class _Conn:
    def __init__(self, key: tuple):
        self.key = key
        self.pkts: list[_Pkt] = []
        self.client_isn: int | None = None
        self.server_isn: int | None = None
        self.client_wscale = 0
        self.rtt: float | None = None
        self.spread = 0.0                      # how much the RTT samples vary (delay jitter)
        self.up_times: list[float] = []
        self.up: list[_Pkt] = []
        self.pos: dict[int, int] = {}          # packet index -> position in `up`
        self.by_tsval: dict[int, list[int]] = {}  # client TSval -> positions in `up`
        self.up_data: list[_Pkt] = []
        self.up_data_times: list[float] = []
        self.down_data: list[_Pkt] = []        # server data sent so far, in time order
        self.top = 0                           # highest server sequence number sent so far
        self.mss = 0                           # the largest server segment so far
        self.syn_mss: list[int] = []           # the MSS options of the SYN and the SYN-ACK
        self.full_len: int | None = None       # a full segment's payload (see _full)
        self.client_closed = False


def audit(segments: list[Segment], client_ip: str, initcwnd: int = 10,
          end_ts: float | None = None) -> Audit:
    """Audit the load in `segments` (the client's capture of it); `end_ts`: the load's end (the
    page-load time's last server packet), later packets are ignored."""
    segs = sorted((s for s in segments if client_ip in (s.src, s.dst)), key=lambda s: s.ts)
    if end_ts is not None:
        segs = [s for s in segs if s.ts <= end_ts + 1e-9]
    conns: dict[tuple, _Conn] = {}
    pkts: list[_Pkt] = []
    for s in segs:
        up = s.src == client_ip
        key = (s.sport, s.dst, s.dport) if up else (s.dport, s.src, s.sport)
        if up and s.flags & SYN and not s.flags & ACK:
            conns[key] = _Conn(key)           # a new connection (a reused port starts over)
            conns[key].client_isn = s.seq
            conns[key].client_wscale = s.wscale or 0
        c = conns.get(key)
        if c is None:
            continue                          # not opened by this load
        if not up and s.flags & SYN and s.flags & ACK:
            c.server_isn = s.seq
        if s.flags & SYN and s.mss:
            c.syn_mss.append(s.mss)
        p = _Pkt(s, key, up, len(pkts))
        pkts.append(p)
        c.pkts.append(p)
    if not pkts:
        return Audit()
    deltas: list[float] = []
    for c in conns.values():
        _relative(c)
        c.rtt, c.spread, samples = _rtt(c)
        deltas += [x - c.rtt for x in samples[1:]]
    # The link's jitter, from every connection's samples: a download's connection has two
    # samples (SYN, request) of its own, too few to see the jitter that bunches its packets.
    # Their median above each connection's minimum: on HSPA (3.5 ms of one-way jitter, a
    # slow uplink) a Nagle-held body came 14.6 ms later than the minimum RTT says, and the
    # lower quartile (6 ms) let it pass for a packet nothing released.
    deltas.sort()
    pooled = deltas[len(deltas) // 2] if len(deltas) >= 4 else 0.0
    for c in conns.values():
        c.spread = max(c.spread, pooled)
    rtts_known = [c.rtt for c in conns.values() if c.rtt]
    fallback = min(rtts_known) if rtts_known else None
    for c in conns.values():
        c.rtt = c.rtt or fallback
        c.up = [p for p in c.pkts if p.up]
        c.up_times = [p.ts for p in c.up]
        c.pos = {p.index: i for i, p in enumerate(c.up)}
        for i, q in enumerate(c.up):
            if q.seg.tsval is not None:
                c.by_tsval.setdefault(q.seg.tsval, []).append(i)
        c.up_data = [p for p in c.up if p.data]
        c.up_data_times = [p.ts for p in c.up_data]
        c.full_len = _full_len(c)

    result = Audit()
    rate = _downlink_rate(pkts)
    first_syn = next((p for p in pkts if p.up and p.seg.flags & SYN), None)
    last_down: _Pkt | None = None              # the last meaningful server packet so far
    last_any: _Pkt | None = None               # the last server packet of any kind
    last_down_by_conn: dict[tuple, _Pkt] = {}
    prev_data: dict[tuple, _Pkt] = {}
    for p in pkts:
        c = conns[p.conn]
        if p.up:
            _client_depth(p, first_syn, last_down, last_down_by_conn)
            if p.seg.flags & (FIN | RST):
                c.client_closed = True
            continue
        if c.rtt is None or c.server_isn is None or c.client_closed:
            continue      # what a server sends after the client closed is not part of the load
        queued = _queued(p, last_any, rate, _jitter_s(c))
        _server_depth(p, c, prev_data.get(p.conn), initcwnd, result, queued)
        last_any = p
        if p.meaningful and p.depth is not None:
            last_down = p
            last_down_by_conn[p.conn] = p
        if p.data:
            prev_data[p.conn] = p
            c.down_data.append(p)
            c.mss = max(c.mss, len(p.seg.payload))
            c.top = max(c.top, p.rel_end)

    deepest = None
    for p in pkts:
        if not p.up and p.depth is not None and p.meaningful:
            if deepest is None or p.depth >= deepest.depth:
                deepest = p
    if deepest is not None:
        result.rtts = deepest.depth
        result.rtt_path = _path(deepest)
        result.server_ms, result.client_ms = _waits(deepest, conns)
    return result


def _relative(c: _Conn) -> None:
    for p in c.pkts:
        s = p.seg
        own, other = (c.client_isn, c.server_isn) if p.up else (c.server_isn, c.client_isn)
        if own is not None:
            p.rel_seq = _rel(s.seq, own)
            p.rel_end = p.rel_seq + len(s.payload) + (1 if s.flags & (SYN | FIN) else 0)
        if other is not None and s.flags & ACK:
            p.rel_ack = _rel(s.ack, other)


def _rtt(c: _Conn) -> tuple[float | None, float, list[float]]:
    """The smallest client-packet-to-acknowledging-server-packet gap on the connection
    (seconds), how far the samples' lower quartile lies above it (a profile's delay jitter:
    how uncertain "when did this packet leave the server" is), and the samples, sorted."""
    samples = []
    pending: list[_Pkt] = []
    sent_up_to = None                  # the highest client sequence number sent so far
    for p in c.pkts:
        if p.up:
            if p.seg.flags & SYN or p.data:
                if sent_up_to is not None and p.rel_seq < sent_up_to:
                    # Sent again (a lost request or SYN repaired): an ACK covering it may answer
                    # the first copy, so neither copy gives a sample (Karn's rule). A lossy
                    # link's retransmitted request acknowledged a few ms after its copy made
                    # the RTT look tiny, and every queued burst after it a stall.
                    pending = [q for q in pending if q.rel_end <= p.rel_seq]
                else:
                    pending.append(p)
                sent_up_to = max(sent_up_to or 0, p.rel_end)
            continue
        if not p.seg.flags & ACK:
            continue
        keep = []
        for q in pending:
            if p.rel_ack >= q.rel_end and p.ts >= q.ts:
                samples.append(p.ts - q.ts)
            else:
                keep.append(q)
        pending = keep
    if not samples:
        return None, 0.0, []
    samples.sort()
    return samples[0], samples[len(samples) // 4] - samples[0], samples


def _client_depth(p: _Pkt, first_syn: _Pkt | None, last_down: _Pkt | None,
                  last_by_conn: dict[tuple, _Pkt]) -> None:
    s = p.seg
    if p is first_syn:
        p.depth, p.kind = 0, "start"
        return
    if not p.data and not s.flags & (SYN | FIN | RST):
        cause = last_by_conn.get(p.conn)            # a pure ACK answers its own connection
    else:
        cause = last_down
        own = last_by_conn.get(p.conn)
        # Prefer what arrived on this connection if it is as recent (a SYN-ACK, a response's end).
        if own is not None and cause is not None and cause.ts - own.ts < 0.005:
            cause = own
    if cause is None:
        p.depth, p.kind = 0, "start"
        return
    p.depth, p.cause, p.kind = cause.depth, cause, "client"


def _arrived(c: _Conn, before: float, rcv_nxt: int) -> _Pkt | None:
    """The last client packet on `c` that had reached the server when it sent a packet leaving
    at `before` (client-capture clock minus the RTT) with ACK field `rcv_nxt`: data the ACK
    field does not cover had not arrived, whatever the timestamps say."""
    return _covered(c, bisect_right(c.up_times, before), rcv_nxt)


def _covered(c: _Conn, i: int, rcv_nxt: int) -> _Pkt | None:
    """The last of the client packets c.up[:i] that is no data beyond `rcv_nxt`."""
    while i > 0:
        q = c.up[i - 1]
        if not q.data or q.rel_end <= rcv_nxt:
            return q
        i -= 1
    return None


def _echoed(c: _Conn, p: _Pkt) -> _Pkt | None:
    """The client packet whose timestamp server packet p echoes (TSecr): the server had
    received it when it sent p, whatever the timing says. The client's clock ticks in
    milliseconds, so several packets may carry that TSval: the last of them sent before p
    arrived, unless it is data p's ACK field does not cover."""
    if p.seg.tsecr is None:
        return None
    for i in reversed(c.by_tsval.get(p.seg.tsecr, ())):
        if c.up[i].ts <= p.ts:
            return _covered(c, i + 1, p.rel_ack)
    return None


def _downlink_rate(pkts: list[_Pkt]) -> float | None:
    """Bytes per second of the client's downlink when it is the bottleneck: packets that
    queued there arrive spaced by their serialisation time. The 75th percentile, over runs of
    RATE_RUN consecutive server packets, of the wire bytes after the run's first packet / the
    time the run took (a queue's back-to-back packets dominate a rate-limited load; on an
    unlimited link the figure is huge and never matters). Runs, not single gaps: a link with
    delay jitter delivers its queue in bunches (two packets at one instant, then a double
    gap), and single gaps put the rate so high that nothing looked queued."""
    down = [p for p in pkts if not p.up]
    rates = []
    for i in range(len(down) - RATE_RUN):
        run = down[i:i + RATE_RUN + 1]
        took = run[-1].ts - run[0].ts
        wire = sum(p.seg.wire_len for p in run[1:])
        if took > 0 and wire >= 1000 * RATE_RUN:
            rates.append(wire / took)
    if len(rates) < 4:
        return None
    rates.sort()
    return rates[(3 * len(rates)) // 4]


def _queued(p: _Pkt, prev: _Pkt | None, rate: float | None, jitter: float = 0.0) -> bool:
    """Did p arrive right behind the previous server packet, at the downlink's rate (give or
    take the link's delay jitter, which bunches a queue's packets and widens the gaps between
    the bunches)? Then it waited in the bottleneck's queue, and when it left the server cannot
    be told from when it arrived: no release by an ACK can be read into its timing."""
    if prev is None or rate is None:
        return False
    return p.ts - prev.ts <= 1.5 * p.seg.wire_len / rate + jitter


def _server_depth(p: _Pkt, c: _Conn, prev: _Pkt | None, initcwnd: int, result: Audit,
                  queued: bool = False) -> None:
    s = p.seg
    rtt = c.rtt
    if s.flags & SYN:
        syn = next((q for q in reversed(c.up) if q.seg.flags & SYN and q.ts <= p.ts), None)
        if syn is not None and syn.depth is not None:
            p.depth, p.cause, p.kind = syn.depth + 1, syn, "h"
        return
    if not p.meaningful:
        return
    # The newest client data the server had received when it sent p (its ACK field covers it).
    data = None
    i = bisect_right(c.up_data_times, p.ts)
    while i > 0:
        i -= 1
        if c.up_data[i].rel_end <= p.rel_ack:
            data = c.up_data[i]
            break
    left = p.ts - rtt                       # when p left the server, as client time minus RTT
    gap = p.ts - prev.ts if prev is not None else None
    if prev is not None and (gap < max(rtt / 2, GAP_FLOOR_MS / 1000.0) or queued):
        # Still the burst prev belonged to, unless p answers client data newer than prev's.
        p.depth, p.cause, p.kind = prev.depth, prev.cause, prev.kind
        if data is not None and p.rel_ack > prev.rel_ack and data.depth is not None \
                and data.depth + 1 > (p.depth or 0):
            p.depth, p.cause, p.kind = data.depth + 1, data, "r"
        return
    # After a silence (or the connection's first data): what reached the server last before p left?
    last = _arrived(c, left + CAPTURE_EPS_MS / 1000.0, p.rel_ack)
    # A connection has few RTT samples, and with delay jitter p's round trip can be shorter than
    # all of them: then `left` is too early and the ACK that released p looks not yet arrived
    # (on HSPA a Nagle-held body came back 108.3 ms after its ACK, the smallest sample was
    # 108.9 ms, and the stall went unseen). The echoed timestamp says what had arrived.
    echoed = _echoed(c, p)
    if echoed is not None and (last is None or c.pos[echoed.index] > c.pos[last.index]):
        last = echoed
    # Released by an ACK: nothing new from the client since the previous burst (same ACK field:
    # the server's rcv_nxt did not move, so p answers no new request), and p left right when
    # a pure ACK acknowledging new data arrived.
    ack_release = (prev is not None and p.rel_ack == prev.rel_ack and last is not None
                   and not last.data and not last.seg.flags & (SYN | FIN | RST)
                   and left - last.ts <= _release_s(c) and _new_ack(c, last))
    kind = None
    if ack_release and last.depth is not None:
        kind = _why_held(p, c, last, left, initcwnd)
    if kind is not None and not (kind == "s" and _full(p, c)):
        p.depth, p.cause, p.kind = last.depth + 1, last, kind
        if kind == "w":
            result.window_waits += 1
        elif kind == "s":
            held = gap if gap is not None else p.ts - last.ts
            result.stalls += 1
            result.stall_ms += held * 1000.0
            result.stall_events.append({"t": round(p.ts, 6), "conn": list(c.key),
                                        "bytes": len(s.payload), "held_ms": round(held * 1e3, 1)})
        return
    # Not released by an ACK, or a full segment that merely left right after one: neither Nagle
    # nor a cork holds a full segment (a segment that fills leaves at once), and with the window
    # not full nothing else in the server's TCP does, so the server wrote it then. Plain SPDY's
    # node-spdy answers after tens of ms of CPU on a busy machine, and 4 of the 5 "stalls" the
    # audit once found in 16 LTE loads were such full segments; server-side captures and strace
    # showed each write happening on node's own schedule (docs/labs.md).
    if data is not None and data.depth is not None:
        p.depth, p.cause, p.kind = data.depth + 1, data, "r"
    elif last is not None and last.depth is not None:
        # The server spoke unasked (an HTTP/2 or SPDY SETTINGS on accept): the handshake's
        # last ACK reaching it released that.
        p.depth, p.cause, p.kind = last.depth + 1, last, "r"
    elif prev is not None:
        p.depth, p.cause, p.kind = prev.depth, prev.cause, prev.kind


def _release_s(c: _Conn) -> float:
    """How soon after an ACK's arrival a packet it released leaves: RELEASE_MS, less on a LAN
    (a quarter of the RTT), where ACKs arrive every few hundred microseconds; more on a link
    with delay jitter (twice the RTT samples' spread), where arrival times blur departures, but
    never more than a quarter RTT: behind a rate-limited queue the samples also spread by the
    queueing delay (66 ms on an HSPA load), and a packet a retransmission timer sent 130 ms
    after the last ACK then passed for one that ACK released."""
    return max(min(RELEASE_MS / 1000.0, c.rtt / 4), _jitter_s(c))


def _jitter_s(c: _Conn) -> float:
    """How much the link's delay jitter may move one packet's arrival: twice the RTT samples'
    spread, at most a quarter RTT (the samples also spread by queueing delay; see _release_s)."""
    return min(2 * c.spread, c.rtt / 4) if c.rtt else 0.0


def _new_ack(c: _Conn, ack: _Pkt) -> bool:
    """Did this pure ACK acknowledge something the previous client packet had not?"""
    i = c.pos[ack.index]
    before = c.up[i - 1].rel_ack if i else 0
    return ack.rel_ack > before


def _why_held(p: _Pkt, c: _Conn, ack: _Pkt, left: float, initcwnd: int) -> str:
    """'l' a retransmission, 'w' the congestion or receive window was full before an ACK that
    arrived just before p left (any of them, when several did: the benefit of the doubt goes to
    the window), or the server still had data in flight, 's' a stall: the data could have left
    earlier."""
    if p.rel_seq < c.top:
        return "l"
    # The ACKs that may have released p: a quarter RTT back, which of several did is a matter
    # of milliseconds of jitter.
    recent = []
    i = c.pos[ack.index]
    while i >= 0:
        q = c.up[i]
        if q.ts < left - max(_release_s(c), c.rtt / 4):
            break
        if not q.data:
            recent.append(i)
        i -= 1
    if ack.rel_ack < c.top and not any(_acks_a_small_segment(c, j) for j in recent):
        # The server still had data in flight after those ACKs, and sent p only then: its
        # congestion window or its pacing held p (BBR, the labs' default, paces a connection
        # that a 25 ms LTE RTT and ACKs for two packets leave 13 ms apart). A stall with data in
        # flight is Nagle's: Linux holds a partial segment until its last partial segment is
        # acknowledged (Minshall's variant), so one of those ACKs covers a small segment (and
        # the next, 0.1 ms behind it, may cover only full ones).
        return "w"
    # A window full before any of them explains the wait (a Nagle stall has one or two packets
    # in flight, so this never hides one).
    if any(_window_full(p, c, j, initcwnd) for j in recent):
        return "w"
    return "s"


def _full_len(c: _Conn) -> int | None:
    """The payload of a full segment on this connection: its largest server segment, when that
    is within a TCP option block (40 bytes) of the MSS the handshake announced (the timestamps
    option takes 12: 1448 of 1460); None when the handshake announced none or no segment was
    full, and then no segment counts as full."""
    largest = max((len(p.seg.payload) for p in c.pkts if not p.up), default=0)
    if not c.syn_mss or largest < min(c.syn_mss) - 40:
        return None
    return largest


def _full(p: _Pkt, c: _Conn) -> bool:
    return c.full_len is not None and len(p.seg.payload) >= c.full_len


def _acks_a_small_segment(c: _Conn, i: int) -> bool:
    """Did the client packet c.up[i] newly acknowledge a server data segment shorter than the
    connection's largest so far (a partial segment, which Nagle waits for)?"""
    before = c.up[i - 1].rel_ack if i else 0
    for q in reversed(c.down_data):
        if q.rel_end <= before:
            break
        if q.rel_end <= c.up[i].rel_ack and len(q.seg.payload) < c.mss:
            return True
    return False


def _window_full(p: _Pkt, c: _Conn, i: int, initcwnd: int) -> bool:
    """Was the server's window full before the client packet c.up[i] arrived?"""
    acked_before = c.up[i - 1].rel_ack if i else 0
    window = (c.up[i - 1].seg.window if i else c.up[i].seg.window) << c.client_wscale
    # Packets in flight (the congestion window counts packets, not bytes; the capture sees
    # wire packets: offloads are off in the labs).
    in_flight = 0
    for q in reversed(c.down_data):
        if q.rel_end <= acked_before:
            break
        in_flight += 1
    return in_flight >= initcwnd or c.top - acked_before + len(p.seg.payload) > window > 0


def _waits(p: _Pkt, conns: dict[tuple, _Conn]) -> tuple[float, float]:
    """Server and client think time along the chain that ends at p (ms)."""
    server = client = 0.0
    q: _Pkt | None = p
    while q is not None and q.cause is not None:
        gap = q.ts - q.cause.ts
        if q.up:
            client += max(0.0, gap)
        elif q.kind == "r":
            server += max(0.0, gap - (conns[q.conn].rtt or 0.0))
        q = q.cause
    return server * 1000.0, client * 1000.0


def _path(p: _Pkt) -> str:
    letters = []
    q: _Pkt | None = p
    while q is not None:
        if not q.up and q.kind in ("h", "r", "w", "s", "l"):
            letters.append(q.kind)
        q = q.cause
    return "".join(reversed(letters))
