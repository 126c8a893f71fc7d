"""What one page load looked like on the client's wire, from a client-side capture.

Page-load time as E5 defines it: from the client's first SYN to the last packet a server sent
before `silence_s` seconds of silence on the link. "Sent as part of the load" excludes what a
server sends only because the client closed a connection at the end (its ACK of the client's FIN
and its own FIN then); a server closing first (HTTP/1.0) is part of the load.

Only the connections the load opened (their SYN is in the capture) are counted. Also: packets
and bytes per direction (wire bytes, link header included, so E1's header overhead can be
computed against payload bytes), TCP connections opened (SYNs) and used (carried a
request), the first SYN to its SYN-ACK (the first handshake's round trip: where a radio wake-up
shows), and server retransmissions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..web.capture import ACK, FIN, RST, SYN, Segment
from .rtt_audit import audit


@dataclass(frozen=True)
class WireMetrics:
    plt_ms: float | None                 # first SYN -> last server packet before the silence
    first_syn_to_synack_ms: float | None
    connections_opened: int
    connections_used: int
    packets_up: int
    packets_down: int
    bytes_up: int                        # wire bytes, client -> servers
    bytes_down: int
    payload_up: int                      # TCP payload bytes
    payload_down: int
    retransmissions_down: int            # server data segments sent again (duplicates and repairs)
    silence_cut: bool                    # a silence of silence_s ended the load early
    # The RTT audit (rtt_audit.py): round trips the load spent, waits no window explains.
    rtts: int | None = None
    stalls: int = 0
    stall_ms: float = 0.0
    window_waits: int = 0
    rtt_path: str = ""
    server_ms: float = 0.0               # servers' think time along the deepest chain
    client_ms: float = 0.0               # the client's, along the same chain

    def to_json(self) -> dict:
        return asdict(self)


def _conn_key(s: Segment, client_ip: str) -> tuple:
    """(client port, server address, server port): one TCP connection seen from the client."""
    if s.src == client_ip:
        return (s.sport, s.dst, s.dport)
    return (s.dport, s.src, s.sport)


def wire_metrics(segments: list[Segment], client_ip: str, silence_s: float = 10.0,
                 initcwnd: int = 10) -> WireMetrics:
    """`initcwnd`: the servers' initial window (packets), the audit's floor of their congestion
    window."""
    segs = sorted((s for s in segments if client_ip in (s.src, s.dst)), key=lambda s: s.ts)
    syns = [s for s in segs if s.src == client_ip and s.flags & SYN and not s.flags & ACK]
    # Only connections this load opened: the last packets of an earlier load's connections
    # (closing handshakes still in a delay line) may land in the capture too.
    mine = {_conn_key(s, client_ip) for s in syns}
    segs = [s for s in segs if _conn_key(s, client_ip) in mine]
    up = [s for s in segs if s.src == client_ip]
    down = [s for s in segs if s.dst == client_ip]
    opened = {(_conn_key(s, client_ip), s.seq) for s in syns}
    used = {_conn_key(s, client_ip) for s in up if s.payload}

    first_syn = syns[0] if syns else None
    synack_ms = None
    plt_ms = None
    cut = False
    if first_syn is not None:
        key = _conn_key(first_syn, client_ip)
        for s in down:
            if (s.ts >= first_syn.ts and s.flags & SYN and s.flags & ACK
                    and _conn_key(s, client_ip) == key):
                synack_ms = (s.ts - first_syn.ts) * 1000.0
                break
        # End of the load: the first silence of silence_s (either direction) after the first SYN.
        end = None
        prev = first_syn.ts
        for s in segs:
            if s.ts < first_syn.ts:
                continue
            if s.ts - prev >= silence_s:
                end, cut = prev, True
                break
            prev = s.ts
        client_fin: set[tuple] = set()
        last = None
        for s in segs:
            if s.ts < first_syn.ts or (end is not None and s.ts > end):
                continue
            k = _conn_key(s, client_ip)
            if s.src == client_ip:
                if s.flags & (FIN | RST):
                    client_fin.add(k)
                continue
            if k in client_fin:
                continue    # the server answering the client's close, not serving the page
            last = s.ts
        if last is not None:
            plt_ms = (last - first_syn.ts) * 1000.0

    # A server data segment that starts below the highest sequence number already seen on its
    # connection was sent again: a duplicate of one that arrived, or the repair of one the
    # network dropped before the client's capture saw it (which a duplicate count alone would
    # miss). The labs' profiles keep order unless asked to reorder, so nothing else lands there.
    highest: dict[tuple, int] = {}
    retrans = 0
    for s in down:
        if s.payload:
            key = _conn_key(s, client_ip)
            end = (s.seq + len(s.payload)) & 0xFFFFFFFF
            top = highest.get(key)
            if top is None:
                highest[key] = end
                continue
            if 0 < (top - s.seq) & 0xFFFFFFFF < 1 << 31:
                retrans += 1
            if 0 < (end - top) & 0xFFFFFFFF < 1 << 31:
                highest[key] = end
    checked = audit(segs, client_ip, initcwnd=initcwnd,
                    end_ts=None if plt_ms is None else first_syn.ts + plt_ms / 1000.0)
    return WireMetrics(
        **checked.columns(),
        plt_ms=plt_ms, first_syn_to_synack_ms=synack_ms, connections_opened=len(opened),
        connections_used=len(used), packets_up=len(up), packets_down=len(down),
        bytes_up=sum(s.wire_len for s in up), bytes_down=sum(s.wire_len for s in down),
        payload_up=sum(len(s.payload) for s in up), payload_down=sum(len(s.payload) for s in down),
        retransmissions_down=retrans, silence_cut=cut)


def silence_understates(plt_ms: float | None, silence_cut: bool, loader_elapsed_ms: float | None,
                        silence_s: float) -> str | None:
    """Why the capture's page-load time cannot stand, or None. It ends at the first silence of
    silence_s, but when the loader's own last body byte came more than that silence later the page
    was not done at the cut (seen at load average 16: a modem load of 17.3 s measured as 3.0 s, the
    client starved of CPU): a plt_ms that understates the load must not pass as a result. Scalars,
    so that `experiment recheck` judges a stored record by the same rule."""
    if not silence_cut or plt_ms is None or loader_elapsed_ms is None:
        return None
    if loader_elapsed_ms <= plt_ms + silence_s * 1000:
        return None
    return (f"a silence of {silence_s:g} s ended the capture's page-load time at {plt_ms / 1000:.2f} s "
            f"but the loader's last byte came at {loader_elapsed_ms / 1000:.2f} s")
