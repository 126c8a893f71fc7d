"""The harness's pcap reader on what tcpdump really writes: an interface capture (Ethernet) and
`-i any` (Linux cooked, SLL2 with this machine's libpcap) decode the same TCP exchange, and the
capture reports the kernel's drops (0 here); a link type it does not read is an error, never an
empty capture that makes a load look empty."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from p4netem_studies.web.capture import Capture, read_pcap


def _exchange(port: int) -> None:
    """One TCP connection on loopback: 'ping' up, 'pong' down."""
    srv = socket.create_server(("127.0.0.1", port))

    def serve() -> None:
        c, _ = srv.accept()
        with c:
            c.recv(16)
            c.sendall(b"pong")

    t = threading.Thread(target=serve)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"ping")
        assert c.recv(16) == b"pong"
    t.join()
    srv.close()


@pytest.mark.parametrize("interface", ["lo", "any"])
def test_capture_of_an_interface_and_of_any_decode_the_same_exchange(tmp_path, interface: str) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    pcap = tmp_path / f"{interface}.pcap"
    # A snapshot length of 256: with the full 262144 bytes libpcap's ring for `any` holds ~8
    # packets and the kernel drops some of these 9-10 (seen: 12 of 20).
    with Capture(None, interface, pcap, bpf=f"tcp port {port}", snaplen=256) as cap:
        _exchange(port)
        # tcpdump may be scheduled late on a busy machine: wait (up to 10 s) for the answer to
        # reach the file instead of trusting the capture's settle time.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and b"pong" not in [s.payload for s in read_pcap(pcap)]:
            time.sleep(0.05)
    assert cap.dropped_by_kernel == 0, cap.proc.log_text()
    linktype = struct.unpack("<I", pcap.read_bytes()[20:24])[0]
    segs = read_pcap(pcap)
    assert segs, f"nothing decoded from a link type {linktype} capture"
    payloads = [s.payload for s in segs if s.payload]
    # lo is seen once per packet on `lo`; `any` may show each on lo only as well.
    assert b"ping" in payloads and b"pong" in payloads, (linktype, payloads)
    assert {s.src for s in segs} == {"127.0.0.1"}
    assert any(s.sport == port for s in segs) and any(s.dport == port for s in segs)


def test_a_link_type_it_does_not_read_is_an_error(tmp_path) -> None:
    pcap = tmp_path / "raw.pcap"
    # A pcap header with link type 101 (raw IP) and no packets.
    pcap.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
    with pytest.raises(ValueError, match="link type 101"):
        read_pcap(pcap)
