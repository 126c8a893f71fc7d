"""Names, addresses and ports of the web test network (shared by conftest and tests).

Names carry a token unique to this test run (p4netem.lab.netns.unique_token): several worktrees
run these tests on one machine at the same time, and fixed names would let one run delete the
other's namespaces. Addresses may repeat between runs: each run's pair is its own L2 segment."""

from __future__ import annotations

import subprocess

from p4netem.lab.netns import unique_token

TOKEN = unique_token()
CLIENT_NS, SERVER_NS = f"p4nw{TOKEN}c", f"p4nw{TOKEN}s"
CLIENT_IF, SERVER_IF = f"p4nw{TOKEN}c0", f"p4nw{TOKEN}s0"
CLIENT_IP, SERVER_IP = "10.231.0.1", "10.231.0.2"
HTTP, HTTPS, H2C, SPDY_TLS, SPDY_PLAIN = 80, 443, 8080, 8443, 8081



def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def make_pair(client_ns: str, server_ns: str, client_if: str, server_if: str,
              client_ip: str, server_ip: str) -> None:
    for ns in (client_ns, server_ns):
        sh("ip", "netns", "del", ns, check=False)  # ours, left by an aborted run
    sh("ip", "netns", "add", client_ns)
    sh("ip", "netns", "add", server_ns)
    sh("ip", "link", "add", client_if, "netns", client_ns, "type", "veth",
       "peer", "name", server_if, "netns", server_ns)
    for ns, dev, ip in ((client_ns, client_if, client_ip), (server_ns, server_if, server_ip)):
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
           "gro", "off", check=False)


def delete_pair(*namespaces: str) -> None:
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check=False)
