"""Ping between two lab hosts (shared by the data-plane, control and P4Runtime tests; tests/ is on
sys.path through its conftest)."""

from __future__ import annotations

import re

from p4netem.lab import Host


def ping(src: Host, dst: Host, count: int = 5) -> tuple[int, int]:
    """(transmitted, received) of a ping from one lab host to another."""
    out = src.ns.run(["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst.ip], check=False).stdout
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m, f"unexpected ping output:\n{out}"
    return int(m.group(1)), int(m.group(2))
