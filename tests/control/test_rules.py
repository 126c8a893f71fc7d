"""Rules (no switch): validation messages, the command-line form, classifier entries built with the
checked-in P4Info, read-back inversion, and the controller's entry cookie."""

from __future__ import annotations

import ipaddress
import random

import pytest

from p4netem.control import Rule, RuleError, load_rules, parse_rule_option
from p4netem.control.rules import PortRange
from p4netem.control.tag import EntryTag, name_crc
from p4netem.p4rt import Range, Ternary, build_table_entry, decode_table_entry
from p4netem import pipeline as pl


def problems(text: str) -> list[str]:
    with pytest.raises(RuleError) as info:
        parse_rule_option(text)
    return [str(p) for p in info.value.problems]


def test_command_line_rule_expands_to_both_directions():
    rule = parse_rule_option("client=10.0.0.0/24, server.ip=203.0.113.7 server.ports=443,protocol=tcp,dscp=af41,ue=7")
    assert rule.ue == 7 and rule.protocol == 6 and rule.dscp == 34
    up, down = rule.direction_matches(pl.UPLINK), rule.direction_matches(pl.DOWNLINK)
    net = int(ipaddress.ip_address("10.0.0.0"))
    server = int(ipaddress.ip_address("203.0.113.7"))
    assert up == {
        "meta.ipv4_src": Ternary(net, 0xFFFFFF00), "meta.ipv4_dst": Ternary(server, 0xFFFFFFFF),
        "meta.ip_proto": Ternary(6, 0xFF), "meta.l4_dst_port": Range(443, 443), "meta.dscp": Ternary(34, 0x3F),
    }
    # Downlink is the mirror image: server -> client.
    assert down == {
        "meta.ipv4_src": Ternary(server, 0xFFFFFFFF), "meta.ipv4_dst": Ternary(net, 0xFFFFFF00),
        "meta.ip_proto": Ternary(6, 0xFF), "meta.l4_src_port": Range(443, 443), "meta.dscp": Ternary(34, 0x3F),
    }


def test_default_rule_is_by_ingress_port():
    rule = Rule.between_ports(1, 2)
    assert rule.direction_matches(pl.UPLINK) == {"standard_metadata.ingress_port": Ternary(1, 0x1FF)}
    assert rule.direction_matches(pl.DOWNLINK) == {"standard_metadata.ingress_port": Ternary(2, 0x1FF)}
    assert rule.describe() == "client any port 1 <-> server any port 2"


def test_ipv6_and_ip_version():
    rule = Rule.parse({"client": "2001:db8::/32", "ip_version": 6, "server": {"ports": "8000-8080"}})
    up = rule.direction_matches(pl.UPLINK)
    assert up["meta.ether_type"] == Ternary(0x86DD, 0xFFFF)
    assert up["meta.ipv6_src"].mask == ((1 << 32) - 1) << 96
    assert up["meta.l4_dst_port"] == Range(8000, 8080)


@pytest.mark.parametrize("text,expected", [
    ("dscp=99", "dscp: 99 out of range 0..63"),
    ("ue=4294967296", "ue: 4294967296 out of range 0..4294967295"),
    ("client=10.0.0.1/8", 'client.ip: "10.0.0.1/8" has host bits set; the prefix is 10.0.0.0/8'),
    ("client=10.0.0.300", "client.ip: \"10.0.0.300\" is not an IP address or prefix"),
    ("server.ports=80-70,client=1.2.3.4", "server.ports: \"80-70\": low port 80 is above high port 70"),
    ("server.ports=70000,client=1.2.3.4", "server.ports: \"70000\" out of range 0..65535"),
    ("protocol=tcpp", 'protocol: "tcpp" is not an IP protocol; allowed icmp'),
    ("client.switch_port=512", "client.switch_port: 512 out of range 0..511"),
    ("priority=0,client=1.2.3.4", "priority: 0 out of range 1..2147483647"),
    ("cleint=1.2.3.4", "cleint: unknown field; did you mean 'client'?"),
    ("client", '"client" is not key=value'),
    ("client=10.0.0.1,server=2001:db8::1", "server.ip: 2001:db8::1 is IPv6 but client.ip 10.0.0.1 is IPv4"),
    ("protocol=icmp,client=1.2.3.4,server.ports=80", "protocol: icmp has no ports"),
    ("client.switch_port=3,server.switch_port=3", "uplink and downlink traffic of this rule look the same"),
    ("protocol=udp", "uplink and downlink traffic of this rule look the same"),
    ("client=10.0.0.1,ip_version=6", "ip_version: 6 contradicts client.ip 10.0.0.1"),
])
def test_bad_rules_name_the_field(text, expected):
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_is_reported_at_once():
    found = problems("dscp=70,ue=-1,client=nonsense")
    assert len(found) == 3, found


def test_rules_file_reports_each_rule_and_duplicates():
    text = """
rules:
  - {client: 10.0.0.1, ue: 1}
  - {client: 10.0.0.2, dscp: 64}
  - {client: 10.0.0.1, ue: 9}
"""
    with pytest.raises(RuleError) as info:
        load_rules(text, "rules.yaml")
    msgs = [str(p) for p in info.value.problems]
    assert "rules[1].dscp: 64 out of range 0..63" in msgs
    assert "rules[2]: selects the same traffic as rules[0]" in msgs
    assert str(info.value).startswith("rules.yaml: 2 problems")
    assert [r.ue for r in load_rules("- {client: 10.0.0.1, ue: 1}\n- {client: 10.0.0.2, ue: 2}\n")] == [1, 2]


def test_traffic_key_ignores_ue_and_auto_priority():
    a = parse_rule_option("client=10.0.0.1,ue=1")
    b = parse_rule_option("client=10.0.0.1/32,ue=2")
    c = parse_rule_option("client=10.0.0.2")
    assert a.traffic_key() == b.traffic_key() != c.traffic_key()


def test_to_dict_round_trips():
    for text in ("client=10.0.0.1,ue=3", "client.switch_port=1,server.switch_port=2",
                 "client=2001:db8::/48,server.ports=443,protocol=tcp,dscp=ef,priority=7"):
        rule = parse_rule_option(text)
        assert Rule.parse(rule.to_dict()) == rule


def test_entries_read_back_into_the_same_rule(p4info):
    rng = random.Random(7)
    for _ in range(200):
        doc: dict = {"ue": rng.randrange(2**32)}
        for side in ("client", "server"):
            end: dict = {}
            if rng.random() < 0.5:
                end["switch_port"] = rng.randrange(512)
            if rng.random() < 0.6:
                prefix = rng.randrange(1, 33)
                end["ip"] = str(ipaddress.ip_network((rng.randrange(2**32) >> (32 - prefix) << (32 - prefix), prefix)))
            if rng.random() < 0.3:
                low = rng.randrange(65536)
                end["ports"] = f"{low}-{rng.randrange(low, 65536)}"
            doc[side] = end
        if rng.random() < 0.5:
            doc["protocol"] = rng.choice(["tcp", "udp"])
        if rng.random() < 0.3:
            doc["dscp"] = rng.randrange(64)
        try:
            rule = Rule.parse(doc)
        except RuleError:
            continue  # e.g. both directions identical
        views = []
        for d in (pl.UPLINK, pl.DOWNLINK):
            entry = build_table_entry(p4info, pl.CLASSIFIER, rule.direction_matches(d), pl.SET_PROFILE,
                                      {"profile_id": 5, "direction": d, "ue_id": rule.ue}, priority=9)
            views.append(decode_table_entry(p4info, entry))
        back = Rule.from_matches(views[0].match, views[1].match, ue=rule.ue, priority=9)
        assert back.traffic_key() == rule.traffic_key()
        assert back.ue == rule.ue and back.priority == 9


def test_port_range_forms():
    assert PortRange.parse("443") == (443, 443) and str(PortRange.parse(" 1 - 2 ")) == "1-2"
    assert PortRange.parse("any") is None and PortRange.parse(80) == (80, 80)


def test_entry_tag_round_trip_and_foreign_cookies():
    tag = EntryTag(rule=4095, spare_id=4095, profile_crc=name_crc("hspa"))
    assert EntryTag.decode(tag.encode()) == tag
    assert EntryTag.decode(0) is None and EntryTag.decode(7) is None  # other controllers' cookies
    with pytest.raises(ValueError):
        EntryTag(rule=0, spare_id=1, profile_crc=0).encode()


# ---- UE ids ---------------------------------------------------------------------------------------


def test_ue_by_address_takes_the_mask_from_the_client_prefix():
    rule = parse_rule_option("client=10.0.0.0/24,server.ports=443,protocol=tcp,ue=by-address,ue_base=1000")
    assert rule.ue == "by-address" and rule.ue_mask == 0xFF and rule.ue_range == range(1000, 1256)
    assert rule.ue_label() == "1000..1255 by address"
    # Uplink reads the client's address as the source, downlink as the destination.
    assert rule.classifier_action(pl.UPLINK, 5) == (pl.SET_PROFILE_UE_BY_ADDR, {
        "profile_id": 5, "direction": 0, "ue_base": 1000, "ue_mask": 0xFF, "ue_from_dst": 0})
    assert rule.classifier_action(pl.DOWNLINK, 5)[1]["ue_from_dst"] == 1
    assert Rule.parse(rule.to_dict()) == rule
    # Without ue_base the first UE is 0 (one canonical form).
    assert parse_rule_option("client=10.0.0.0/30,ue=by-address").ue_range == range(0, 4)
    one = parse_rule_option("client=10.0.0.1,ue=7")
    assert one.classifier_action(pl.DOWNLINK, 5) == (pl.SET_PROFILE, {"profile_id": 5, "direction": 1, "ue_id": 7})
    assert one.ue_range == range(7, 8) and one.ue_label() == "7"


@pytest.mark.parametrize("text,expected", [
    ("ue=by-address", "ue: by-address takes the UE id from the client's IPv4 address: give client.ip"),
    ("client.switch_port=1,server.switch_port=2,ue=by-address", "ue: by-address takes the UE id"),
    ("client=2001:db8::/64,ue=by-address", "ue: by-address needs an IPv4 client.ip"),
    ("client=10.0.0.1,ue=3,ue_base=4", "ue_base: only with ue: by-address"),
    ("client=10.0.0.1,ue=nobody", 'ue: "nobody" is not a UE id; allowed 0..4294967295 or by-address'),
    ("client=10.0.0.0/8,ue=by-address,ue_base=4294967000",
     "ue_base: 4294967000 + 16777215 (client.ip 10.0.0.0/8: 16777216 addresses) exceeds the largest UE id"),
    ("client=10.0.0.0/24,ue=by-address,ue_base=-1", "ue_base: -1 out of range 0..4294967295"),
])
def test_bad_ue_settings_name_the_field(text, expected):
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found


def test_by_address_entries_read_back(p4info):
    from p4netem.control.state import _rule_of

    rule = parse_rule_option("client=10.1.0.0/16,server=203.0.113.0/24,ue=by-address,ue_base=70000,priority=3")
    views = [decode_table_entry(p4info, build_table_entry(
        p4info, pl.CLASSIFIER, rule.direction_matches(d), *rule.classifier_action(d, 9), priority=3))
        for d in (pl.UPLINK, pl.DOWNLINK)]
    assert _rule_of(*views) == rule
    # Entries this package would not write (a mask that is not the prefix's) form no rule.
    views[0].params["ue_mask"] = 0xFF
    assert _rule_of(*views) is None
