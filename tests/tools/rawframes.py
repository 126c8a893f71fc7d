"""Raw Ethernet frames in a namespace (AF_PACKET), for tests that need frames no socket API makes.

    python rawframes.py send IFACE HEX[,HEX...] [COUNT]  send each frame (hex) COUNT times, in order
    python rawframes.py capture IFACE SECONDS [ETHERTYPE] print JSON list of captured frames (hex)

`capture` prints "ready" on stderr once its socket is bound, and keeps only frames received (not
sent) on IFACE, optionally only those with the given EtherType (e.g. 0x0800).
"""

from __future__ import annotations

import json
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def send(iface: str, frames: list[bytes], count: int) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        for frame in frames:
            for _ in range(count):
                s.send(frame)
                time.sleep(0.001)


def capture(iface: str, seconds: float, ethertype: int | None) -> list[str]:
    frames = []
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as s:
        s.bind((iface, 0))
        print("ready", file=sys.stderr, flush=True)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                data, addr = s.recvfrom(65535)
            except TimeoutError:
                break
            if addr[2] == PACKET_OUTGOING:
                continue
            if ethertype is not None and int.from_bytes(data[12:14], "big") != ethertype:
                continue
            frames.append(data.hex())
    return frames


if __name__ == "__main__":
    mode, iface = sys.argv[1], sys.argv[2]
    if mode == "send":
        send(iface, [bytes.fromhex(h) for h in sys.argv[3].split(",")], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif mode == "capture":
        etype = int(sys.argv[4], 0) if len(sys.argv) > 4 else None
        json.dump(capture(iface, float(sys.argv[3]), etype), sys.stdout)
    else:
        raise SystemExit(__doc__)
