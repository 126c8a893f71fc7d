"""The other topologies do what their data says.

- multi-origin: a page's host names spread over K servers, resolved through dnsmasq on server1
  with the DNS latency the lab adds in the switch; every server serves its share.
- cellular: each UE has its own slot: two UEs on two profiles see their own RTTs, and the
  switch counts each UE's packets in its own slot.
- dumbbell: the clients share one slot, so two downloads share the bottleneck's rate; and every
  host has its own access link through its router, whose rate holds for that host alone.
"""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from p4netem import pipeline as pl
from p4netem_studies.harness.endpoints import Endpoints, SiteContent
from p4netem_studies.harness.tcp import set_initial_windows, tune_hosts
from p4netem_studies.mininet import load_topology
from p4netem.profiles import Profile
from p4netem_studies.web.load import run_loader

from lab_env import BIG, delay_profile


@pytest.fixture
def make_lab(switch_bin, tmp_path):
    from p4netem_studies.mininet.lab import MininetLab
    labs = []

    def make(name: str, **params):
        lab = MininetLab(load_topology(name).expand(params), binary=switch_bin,
                         log_dir=tmp_path / f"{name}-logs").start()
        labs.append(lab)
        tune_hosts(lab)
        return lab

    yield make
    for lab in labs:
        lab.close()


def _ping_rtts(lab, host: str, dst: str, n: int = 5) -> list[float]:
    out = lab.run(host, ["ping", "-n", "-c", str(n), "-i", "0.2", "-W", "3", dst]).stdout
    return [float(line.split("time=")[1].split()[0]) for line in out.splitlines() if "time=" in line]


def test_multi_origin_with_dns_latency(make_lab, tmp_path):
    lab = make_lab("multi-origin", servers=2)
    rtt_ms, dns_ms = 50.0, 300.0
    lab.set_dns_latency(int(dns_ms * 1e6))
    lab.apply_profile(delay_profile(rtt_ms))
    content = SiteContent.generate(["e3-b-4s"], tmp_path / "content")
    manifest = content.manifests["e3-b-4s"]
    with Endpoints(lab, content, dns=True, workdir=tmp_path / "ep") as ep:
        report = run_loader(lab.ns("client"), "h2", content.paths["e3-b-4s"], resolve={},
                            dns=True, scheme="https", ca_file=str(content.cert.ca_cert),
                            timeout_s=60)
        assert report["ok"], report["errors"]
        # Four host names, each looked up once through dnsmasq, each lookup one access RTT plus
        # the DNS latency (and never much more: no retries, no other resolver).
        assert set(report["dns"]) == set(manifest.hosts)
        for host, d in report["dns"].items():
            took = d["t_done"] - d["t_start"]
            assert rtt_ms + dns_ms <= took <= rtt_ms + dns_ms + 150, (host, took)
            assert d["address"] == ep.resolve_map("e3-b-4s")[host]
        queried = {line.split()[-3] for line in ep.dns.queries()}
        assert set(manifest.hosts) <= queried
        # The names were spread over both servers, and each served exactly its names' objects.
        time.sleep(0.3)
        by_server = {h: {r["host"] for r in srv.requests()} for h, srv in ep.nginx.items()}
        resolve = ep.resolve_map("e3-b-4s")
        for server, hosts in by_server.items():
            assert hosts == {n for n, ip in resolve.items() if ip == lab.ip(server)}
        assert all(by_server.values())


def test_cellular_ues_have_their_own_links(make_lab):
    lab = make_lab("cellular", ues=2)
    lab.apply_profile(delay_profile(40, "ue-a"), hosts=["ue1"])
    lab.apply_profile(delay_profile(160, "ue-b"), hosts=["ue2"])
    before = {ue: lab.counters(ue)[pl.UPLINK].profile_in for ue in ("ue1", "ue2")}
    a = statistics.median(_ping_rtts(lab, "ue1", lab.ip("server")))
    after_a = {ue: lab.counters(ue)[pl.UPLINK].profile_in for ue in ("ue1", "ue2")}
    b = statistics.median(_ping_rtts(lab, "ue2", lab.ip("server")))
    assert a == pytest.approx(40, abs=8) and b == pytest.approx(160, abs=8)
    after = {ue: lab.counters(ue)[pl.UPLINK].profile_in for ue in ("ue1", "ue2")}
    # Each UE's pings counted on its own link, and only there.
    assert after_a["ue1"] - before["ue1"] >= 5 and after_a["ue2"] == before["ue2"]
    assert after["ue2"] - after_a["ue2"] >= 5 and after["ue1"] == after_a["ue1"]
    assert lab.profiles()[1].profile.name == "ue-a" and lab.profiles()[2].profile.name == "ue-b"


def test_dumbbell_clients_share_the_bottleneck(make_lab, tmp_path):
    lab = make_lab("dumbbell", pairs=2)
    rate_mbit = 4
    lab.apply_profile(Profile.parse({"name": "bottleneck", "both": {
        "delay": "10ms", "rate": f"{rate_mbit}Mbit", "queue": {"packets": 100}}}))
    set_initial_windows(lab, 10)
    content = SiteContent.generate([BIG], tmp_path / "content")
    obj = content.manifests[BIG].embedded[0]             # about 300 KB
    with Endpoints(lab, content, spdy=False, workdir=tmp_path / "ep"):

        def fetch(i: int, out: dict) -> None:
            t0 = time.monotonic()
            p = lab.run(f"client{i}", ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                       "--resolve", f"{obj.host}:80:{lab.ip(f'server{i}')}",
                                       f"http://{obj.host}{obj.path}"])
            out[i] = (time.monotonic() - t0, int(p.stdout))

        alone: dict = {}
        fetch(1, alone)
        both: dict = {}
        threads = [threading.Thread(target=fetch, args=(i, both)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert alone[1][1] == obj.size and both[1][1] == both[2][1] == obj.size
    one = obj.size * 8 / (rate_mbit * 1e6)                # seconds for one object at full rate
    assert alone[1][0] >= one * 0.9
    # Sharing one queue, the pair needs the time of both objects: each finishes late.
    assert min(both[1][0], both[2][0]) >= 1.5 * one
    assert max(both[1][0], both[2][0]) >= 1.9 * one
    assert alone[1][0] < 0.75 * max(both[1][0], both[2][0])


def test_dumbbell_hosts_each_have_their_own_access_link(make_lab, tmp_path):
    """Each host reaches the other side through its router (two router hops: TTL 62) and its
    own link: with 2 Mbit/s access links and a bottleneck ten times faster, one download takes
    at least the object's time at 2 Mbit/s, two downloads by two client/server pairs at once
    take about that time too (separate links), and the switch counts each pair's bytes on its
    own links only."""
    lab = make_lab("dumbbell", pairs=2)
    access_mbit = 2
    lab.apply_profile(Profile.parse({"name": "fast-bottleneck", "both": {
        "delay": "5ms", "rate": "20Mbit", "queue": {"packets": 100}}}))
    links = lab.apply_link_profile(Profile.parse({"name": "access", "both": {
        "rate": f"{access_mbit}Mbit", "queue": {"packets": 50}}}))
    assert sorted(a.slot for a in links) == lab.topology.links and len(links) == 4
    set_initial_windows(lab, 10)
    ping = lab.run("client1", ["ping", "-n", "-c", "3", "-i", "0.2", lab.ip("server1")]).stdout
    assert "ttl=62" in ping, ping                           # left and right forwarded it
    assert min(_ping_rtts(lab, "client1", lab.ip("server1"))) >= 10.0      # the bottleneck's
    content = SiteContent.generate([BIG], tmp_path / "content")
    obj = content.manifests[BIG].embedded[0]             # about 300 KB
    with Endpoints(lab, content, spdy=False, workdir=tmp_path / "ep"):

        def fetch(i: int, out: dict) -> None:
            t0 = time.monotonic()
            p = lab.run(f"client{i}", ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                       "--resolve", f"{obj.host}:80:{lab.ip(f'server{i}')}",
                                       f"http://{obj.host}{obj.path}"])
            out[i] = (time.monotonic() - t0, int(p.stdout))

        before = {h: lab.link_counters(h) for h in ("client1", "client2", "server1", "server2")}
        alone: dict = {}
        fetch(1, alone)
        mid = {h: lab.link_counters(h) for h in ("client2", "server2")}
        both: dict = {}
        threads = [threading.Thread(target=fetch, args=(i, both)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = {h: lab.link_counters(h) for h in ("client1", "client2", "server1", "server2")}
    assert alone[1][1] == obj.size and both[1][1] == both[2][1] == obj.size
    one = obj.size * 8 / (access_mbit * 1e6)             # the object at the access link's rate
    # The access link's rate holds: no download beats it.
    assert min(alone[1][0], both[1][0], both[2][0]) >= one * 0.9
    # Two pairs on their own links: each still at about its link's rate (one shared 2 Mbit/s
    # link would need twice the time for both).
    assert max(both[1][0], both[2][0]) < 1.6 * alone[1][0]
    # The first download alone moved nothing on the second pair's links; every pair's object
    # crossed its server's link (uplink: from the server) and its client's (downlink: to it).
    assert mid["client2"][pl.DOWNLINK].bytes_out == before["client2"][pl.DOWNLINK].bytes_out
    assert mid["server2"][pl.UPLINK].bytes_out == before["server2"][pl.UPLINK].bytes_out
    for c, srv, n in (("client1", "server1", 2), ("client2", "server2", 1)):
        down = after[c][pl.DOWNLINK].bytes_out - before[c][pl.DOWNLINK].bytes_out
        up = after[srv][pl.UPLINK].bytes_out - before[srv][pl.UPLINK].bytes_out
        assert n * obj.size <= down <= n * obj.size * 1.1 and n * obj.size <= up <= n * obj.size * 1.1
