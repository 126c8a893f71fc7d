"""Free local ports, picked by the kernel."""

from __future__ import annotations

import socket


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nobody is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
