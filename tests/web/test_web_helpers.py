"""Name resolution and TCP tuning helpers, and that servers and loaders leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from p4netem.lab.netns import unique_token
from p4netem_studies.web import netns, tcp_tuning
from p4netem_studies.web.load import run_loader
from p4netem_studies.web.nginx import NginxConfig, NginxServer
from p4netem_studies.web.spdy_server import SpdyConfig, SpdyServer
from web_env import CLIENT_NS, HTTP, SERVER_IP, SERVER_NS, delete_pair, make_pair


def test_netns_hosts_file_resolves_names(content, nginx):
    m = content.demo
    path = netns.write_netns_hosts(CLIENT_NS, content.resolve(m))
    try:
        out = netns.run(CLIENT_NS, ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                    f"http://{m.root.host}{m.root.path}"]).stdout
        assert out == "200"
        report = run_loader(CLIENT_NS, "h1.1", content.demo_path, hosts_file="/etc/hosts")
        assert report["ok"], report["errors"]
        assert netns.parse_hosts(path.read_text())[m.root.host] == SERVER_IP
    finally:
        netns.remove_netns_hosts(CLIENT_NS)
    assert not path.exists()
    # Without the map the loader stops, naming the missing host, instead of guessing.
    with pytest.raises(RuntimeError, match="no address for host 'www.demo.test'"):
        run_loader(CLIENT_NS, "h1.1", content.demo_path, resolve={})


def test_sysctl_and_window_helpers_record_what_they_set(webnet):
    rec = tcp_tuning.set_standard_sysctls(SERVER_NS)
    assert rec["net.ipv4.tcp_no_metrics_save"]["after"] == "1"
    assert rec["net.ipv4.tcp_slow_start_after_idle"]["after"] == "0"
    routes = tcp_tuning.set_initial_window(SERVER_NS, 7, 9)
    assert [(r["initcwnd"], r["initrwnd"]) for r in routes] == [(7, 9)] * len(routes)
    env = tcp_tuning.tcp_environment(SERVER_NS)
    assert env["kernel"] and env["sysctls"]["net.ipv4.tcp_congestion_control"]
    assert any("initcwnd 7" in r for r in env["routes"])
    tcp_tuning.set_initial_window(SERVER_NS, 10)
    with pytest.raises(ValueError, match="initcwnd"):
        tcp_tuning.set_initial_window(SERVER_NS, 0)
    with pytest.raises(RuntimeError, match="sysctl"):
        tcp_tuning.set_sysctls(SERVER_NS, {"net.ipv4.no_such_knob": 1})


def test_sysctls_are_read_with_one_process_and_one_that_cannot_be_read_is_none(webnet, monkeypatch):
    """A lab start reads a few hundred sysctls (every host's recorded TCP environment): one
    `sysctl` per call, not one per name; a name that cannot be read is None, the others read."""
    names = tcp_tuning.RECORDED_SYSCTLS
    one_by_one = {n: tcp_tuning.read_sysctls(SERVER_NS, [n])[n] for n in names}
    assert one_by_one["net.ipv4.tcp_rmem"] and len(one_by_one["net.ipv4.tcp_rmem"].split()) == 3
    started = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: started.append(argv) or real_run(argv, **kw))
    assert tcp_tuning.read_sysctls(SERVER_NS, names) == one_by_one
    assert len(started) == 1, started
    bad = tcp_tuning.read_sysctls(SERVER_NS, ["net.ipv4.tcp_sack", "net.ipv4.no_such_knob"])
    assert bad == {"net.ipv4.tcp_sack": one_by_one["net.ipv4.tcp_sack"], "net.ipv4.no_such_knob": None}


# Sends one GET with a tiny receive buffer, says "sent", reads nothing until stdin closes.
_HOLD_REQUEST = """
import socket, sys
ip, port, host, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((ip, port))
s.sendall(f"GET {path} HTTP/1.1\\r\\nHost: {host}\\r\\n\\r\\n".encode())
print("sent", flush=True)
sys.stdin.read()
s.close()
"""


def test_route_congctl_gives_both_ends_cubic_without_touching_the_machine(webnet, content, nginx):
    """The namespace default may only be an algorithm of the machine-wide allowed list (here
    `reno bbr`), but a route's congctl takes any loaded one, for both ends' sockets: a probe
    connection and nginx's own socket in the middle of a transfer run it (what `ss -ti` shows)."""
    allowed = tcp_tuning.read_sysctls(None, [tcp_tuning.ALLOWED_CC])
    assert "cubic" in tcp_tuning.available_congestion_control()
    try:
        for ns in (CLIENT_NS, SERVER_NS):
            routes = tcp_tuning.set_route_congestion_control(ns, "cubic")
            assert routes and all("congctl cubic" in r for r in routes)
        # An initial window rewrites the routes and keeps their congctl (and the reverse).
        routes = tcp_tuning.set_initial_window(SERVER_NS, 4)
        assert all(tcp_tuning.route_congctl(r["route"]) == "cubic" for r in routes)
        assert tcp_tuning.probe_congestion_control(CLIENT_NS, SERVER_NS, SERVER_IP) == {
            "client": "cubic", "server": "cubic"}
        # nginx's own socket in the middle of sending the 400 KB object: a client with a 4 KB
        # receive buffer asks for it and reads nothing, so nginx's connection stays established
        # with data queued until the client goes (no race with a transfer that may already be
        # over, which is what a rate-limited curl gave: CI sampled ss for the whole of it and
        # saw nothing).
        obj = content.big.embedded[0]
        holder = subprocess.Popen(
            ["ip", "netns", "exec", CLIENT_NS, sys.executable, "-c", _HOLD_REQUEST,
             SERVER_IP, str(HTTP), obj.host, obj.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "sent"
            seen = ""
            deadline = time.monotonic() + 30
            while not seen.strip() and time.monotonic() < deadline:
                seen = netns.run(SERVER_NS, ["ss", "-tinH", "state", "established",
                                             "sport", "=", f":{HTTP}"]).stdout
                time.sleep(0.05)
        finally:
            holder.communicate("", timeout=30)
        assert holder.returncode == 0
        assert " cubic " in f" {seen} ", seen
        # A namespace cannot make it its default: the machine's list is what limits that.
        proc = netns.run(SERVER_NS, ["sysctl", "-w", "net.ipv4.tcp_congestion_control=cubic"],
                         check=False)
        assert proc.returncode != 0
    finally:
        for ns in (CLIENT_NS, SERVER_NS):
            tcp_tuning.set_route_congestion_control(ns, None)
        tcp_tuning.set_initial_window(SERVER_NS, 10)
    assert all(tcp_tuning.route_congctl(r) is None for r in tcp_tuning.routes(SERVER_NS))
    assert tcp_tuning.probe_congestion_control(CLIENT_NS, SERVER_NS, SERVER_IP)["server"] != "cubic"
    assert tcp_tuning.read_sysctls(None, [tcp_tuning.ALLOWED_CC]) == allowed   # machine untouched
    with pytest.raises(ValueError, match="'vegas' is not available on this machine: .* lists reno"):
        tcp_tuning.set_route_congestion_control(SERVER_NS, "vegas")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_nothing_left_behind(content):
    """Own namespaces, servers and a load: afterwards no process, temp dir or namespace remains."""
    token = unique_token()
    c, s = f"p4nw{token}xc", f"p4nw{token}xs"
    make_pair(c, s, f"p4nw{token}x0", f"p4nw{token}y0", "10.232.0.1", "10.232.0.2")
    try:
        web = NginxServer(s, NginxConfig(content.root, http_port=HTTP, https_port=443),
                          content.cert).start()
        spdy = SpdyServer(s, SpdyConfig(content.root, port=8443), content.cert).start()
        groups = [web.proc.pid, spdy.proc.pid]
        dirs = [web.workdir, spdy.workdir]
        workers = subprocess.run(["pgrep", "-g", str(web.proc.pid)], capture_output=True,
                                 text=True).stdout.split()
        assert len(workers) >= 2  # master and worker, both in the group we end
        resolve = {h: "10.232.0.2" for h in content.demo.hosts}
        for proto, scheme, port in (("h2", "https", 443), ("spdy", "https", 8443)):
            report = run_loader(c, proto, content.demo_path, resolve=resolve, scheme=scheme,
                                port=port, ca_file=str(content.cert.ca_cert), timeout_s=30)
            assert report["ok"], report["errors"]
        web.stop()
        spdy.stop()
        assert not any(_group_alive(g) for g in groups)
        assert not any(d.exists() for d in dirs)
    finally:
        delete_pair(c, s)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert c not in listed and s not in listed
