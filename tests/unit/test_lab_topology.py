"""Topologies as data: every file in topologies/ expands to a lab the switch can be programmed
for, parameters change the host count, and mistakes are refused with the field named."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4netem_studies.mininet.slots import slot_rules
from p4netem_studies.mininet.topology import MAX_SLOT, TopologyError, TopologySpec, load_topology, topology_names


def test_every_topology_file_expands():
    names = topology_names()
    assert {"inline", "multi-origin", "dumbbell", "cellular"} <= set(names)
    for name in names:
        topo = load_topology(name).expand()
        ports = [h.port for h in topo.hosts]
        assert ports == list(range(1, len(ports) + 1))          # one switch port per host
        assert len({h.mac for h in topo.hosts}) == len(topo.hosts)
        nets = {ipaddress.IPv4Interface(f"{h.ip}/{topo.prefix_len}").network for h in topo.hosts}
        assert len(nets) == 1                                    # one L2 segment
        assert all(1 <= c.slot <= MAX_SLOT for c in topo.clients)
        rules = slot_rules(topo)                                 # valid controller rules
        assert sorted(rules) == sorted(topo.slots + topo.links)
        for slot in topo.slots:
            r = rules[slot]
            assert r.dns.priority > r.access.priority and r.dns.server.ports.low == 53
        assert all(rules[link].dns is None for link in topo.links)   # a host's link: no lookups


def test_inline_is_one_client_one_server():
    topo = load_topology("inline").expand()
    assert [(h.name, h.role, h.slot, h.ue) for h in topo.hosts] == [
        ("client", "client", 1, 1), ("server", "server", None, None)]


def test_multi_origin_servers_parameter():
    topo = load_topology("multi-origin").expand({"servers": 4})
    assert [h.name for h in topo.servers] == ["server1", "server2", "server3", "server4"]
    assert [h.ip for h in topo.servers] == ["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"]


def test_dumbbell_clients_share_one_slot_without_radio():
    topo = load_topology("dumbbell").expand({"pairs": 3})
    assert len(topo.clients) == 3 and len(topo.servers) == 3
    assert {c.slot for c in topo.clients} == {1} and {c.ue for c in topo.clients} == {0}
    left, right = topo.host("left"), topo.host("right")
    assert [h.name for h in topo.routers] == ["left", "right"]
    # One rule for the group, on the hop between the routers: packets entering from the
    # clients' router with a source in 10.0.0.1-3 (10.0.0.0/30) are the uplink, packets
    # entering from the servers' router toward that block the downlink.
    access = slot_rules(topo)[1].access
    assert access.client.ip == ipaddress.ip_network("10.0.0.0/30")
    assert (access.client.switch_port, access.server.switch_port) == (left.port, right.port)
    assert access.ue == 0


def test_dumbbell_hosts_have_their_own_links_through_their_router():
    topo = load_topology("dumbbell").expand({"pairs": 2})
    rules = slot_rules(topo)
    hosts = topo.clients + topo.servers
    assert sorted(h.link for h in hosts) == topo.links and len(set(topo.links)) == 4
    assert not set(topo.links) & set(topo.slots)
    for h in hosts:
        link = rules[h.link].access
        # Uplink: what the host sends, entering on its port; downlink: what its router sends it.
        assert (link.client.switch_port, str(link.client.ip), link.server.switch_port) == (
            h.port, f"{h.ip}/32", topo.host(h.router).port)
    assert {h.router for h in topo.clients} == {"left"} and {h.router for h in topo.servers} == {"right"}
    # Hosts send the other side's block via their router; each router the far block via the other.
    routes = topo.routes()
    assert routes["client1"] == [("10.0.1.0/30", "10.0.2.1")]
    assert routes["server2"] == [("10.0.0.0/30", "10.0.2.2")]
    assert routes["left"] == [("10.0.1.0/30", "10.0.2.2")]
    assert routes["right"] == [("10.0.0.0/30", "10.0.2.1")]
    # A lab moved to its own subnet (parallel runs) routes within it.
    moved = topo.relocated(1)
    assert moved.routes()["client1"] == [("10.1.1.0/30", "10.1.2.1")]
    assert moved.routes()["right"] == [("10.1.0.0/30", "10.1.2.1")]
    # Unrouted topologies have no links and no routes.
    inline = load_topology("inline").expand()
    assert inline.links == [] and inline.routes() == {}


def test_routed_topologies_are_refused_when_inconsistent():
    base = [{"name": "c", "role": "client", "count": 2, "ip": "10.0.0.1", "access": "shared",
             "router": "a"},
            {"name": "s", "role": "server", "ip": "10.0.1.1", "router": "b"},
            {"name": "a", "role": "router", "ip": "10.0.2.1"},
            {"name": "b", "role": "router", "ip": "10.0.2.2"}]
    TopologySpec.model_validate({"name": "t", "hosts": base}).expand()
    bad = [dict(base[0], router="nope")] + base[1:]
    with pytest.raises(ValueError, match="router 'nope' is not a router group; routers: a, b"):
        TopologySpec.model_validate({"name": "t", "hosts": bad})
    bad = [dict(base[0], access="own")] + base[1:]
    with pytest.raises(ValueError, match="a routed client group shares one bottleneck"):
        TopologySpec.model_validate({"name": "t", "hosts": bad})
    bad = [base[0], dict(base[1], router="a")] + base[2:]
    with pytest.raises(ValueError, match="routed servers sit behind one router, not the clients'"):
        TopologySpec.model_validate({"name": "t", "hosts": bad})
    bad = base[:2] + [dict(base[2], count=2)] + base[3:]
    with pytest.raises(ValueError, match="router 'a': one host"):
        TopologySpec.model_validate({"name": "t", "hosts": bad})


def test_a_shared_slot_needs_an_address_block_of_its_own():
    doc = {"name": "t", "hosts": [{"name": "c", "role": "client", "count": 4, "ip": "10.0.0.2",
                                   "access": "shared"},
                                  {"name": "s", "role": "server", "ip": "10.0.0.6"}]}
    with pytest.raises(TopologyError, match=r"clients sharing slot 1 need an address block of their own, "
                                            r"but 10.0.0.0/29 holds s too"):
        TopologySpec.model_validate(doc).expand()
    doc["hosts"][1]["ip"] = "10.0.0.9"
    assert TopologySpec.model_validate(doc).expand().address_block(1) == ipaddress.ip_network("10.0.0.0/29")


def test_cellular_ues_have_their_own_slot_and_ue_id():
    topo = load_topology("cellular").expand({"ues": 5})
    assert [(c.slot, c.ue) for c in topo.clients] == [(i, i) for i in range(1, 6)]
    assert topo.slots == [1, 2, 3, 4, 5]
    rules = slot_rules(topo)
    assert [(r.access.client.switch_port, str(r.access.client.ip), r.access.ue) for r in rules.values()] == [
        (i, f"10.0.0.{i}/32", i) for i in range(1, 6)]


def test_unknown_parameter_and_range_are_refused():
    with pytest.raises(TopologyError, match="no parameter 'clients'.*parameters: pairs"):
        load_topology("dumbbell").expand({"clients": 2})
    with pytest.raises(TopologyError, match="out of range 1..1023"):
        load_topology("cellular").expand({"ues": 0})
    with pytest.raises(TopologyError, match="no topology 'nope'"):
        load_topology("nope")


def test_bad_topology_documents_name_the_field():
    base = {"name": "t", "hosts": [{"name": "c", "role": "client", "ip": "10.0.0.1"},
                                   {"name": "s", "role": "server", "ip": "10.0.0.2"}]}
    TopologySpec.model_validate(base).expand()
    with pytest.raises(Exception, match="role"):
        TopologySpec.model_validate({**base, "hosts": [{**base["hosts"][0], "role": "router"},
                                                       base["hosts"][1]]})
    with pytest.raises(Exception, match="at least one client group and one server group"):
        TopologySpec.model_validate({**base, "hosts": base["hosts"][:1]})
    overlap = {**base, "hosts": [base["hosts"][0], {**base["hosts"][1], "ip": "10.0.0.1"}]}
    with pytest.raises(TopologyError, match="addresses repeat"):
        TopologySpec.model_validate(overlap).expand()
    outside = {**base, "prefix_len": 24,
               "hosts": [base["hosts"][0], {**base["hosts"][1], "ip": "10.0.1.2"}]}
    with pytest.raises(TopologyError, match="not a host address"):
        TopologySpec.model_validate(outside).expand()


def test_lab_show_errors_use_the_common_error_line():
    """`p4netem lab show` (no namespaces needed) prints its errors as every command does: on
    stderr, the first line starting with `error:` (docs/cli.md), exit 1; the table on success."""
    p4netem = str(Path(sys.executable).with_name("p4netem"))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([p4netem, "lab", "show", "dumbbell", "-p", "clients=2"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr.startswith("error: topology 'dumbbell' has no parameter 'clients'; parameters: pairs"), r.stderr
    r = subprocess.run([p4netem, "lab", "show", "no-such-topology"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error: no topology 'no-such-topology'"), r.stderr
    r = subprocess.run([p4netem, "lab", "show", "dumbbell", "-p", "pairs=2"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0 and r.stderr == "" and "client2" in r.stdout and "…" not in r.stdout, r
