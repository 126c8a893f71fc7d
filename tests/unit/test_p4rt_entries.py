"""Entry builders against the checked-in P4Info: ids resolved by name, match kinds, don't-care
omission, priorities, action parameters, and decoding back."""

from __future__ import annotations

import grpc
import pytest

from p4netem import pipeline as pl
from p4netem.p4rt import (
    Exact,
    Lpm,
    P4Info,
    P4RuntimeError,
    Range,
    Ternary,
    build_counter_entry,
    build_register_entry,
    build_table_entry,
    decode_table_entry,
    update,
)
from p4netem.p4rt.proto import p4runtime_pb2


def test_names_resolve_to_the_p4info_ids(p4info: P4Info) -> None:
    msg = p4info.message
    by_name = {t.preamble.name: t.preamble.id for t in msg.tables}
    assert p4info.table(pl.PORT_MAP).id == by_name[pl.PORT_MAP]
    assert p4info.table("port_map").id == by_name[pl.PORT_MAP]  # unique alias
    assert p4info.action(pl.SET_IMPAIRMENT).params["ns_per_byte_q16"].bitwidth == 48
    assert p4info.register(pl.DIST_TABLE).bitwidth == 16
    assert p4info.counter(pl.DROPS).size == 131072  # 8192 pds x 16 drop-reason cells
    assert p4info.digest(pl.MAC_LEARN_DIGEST).fields == (("src_addr", 48), ("ingress_port", 9))
    assert set(p4info.controller_header("packet_in").metadata) >= {"ingress_port"}
    assert p4info.table_by_id(by_name[pl.CLASSIFIER]).name == pl.CLASSIFIER


def test_radio_names_and_index_arithmetic_match_the_p4info(p4info: P4Info) -> None:
    assert p4info.table(pl.RADIO_PROFILE).size == 4096
    assert tuple(p4info.action(pl.SET_RADIO).params) == pl.RADIO_PARAMS
    assert p4info.action(pl.SET_PROFILE_UE_BY_ADDR).params["ue_mask"].bitwidth == 32
    ues = p4info.register(pl.RADIO_STATE).size
    for name in (pl.RADIO_LAST_ACTIVITY_NS, pl.RADIO_PROMO_DONE_NS, pl.RADIO_DRX_REF_NS,
                 pl.RADIO_STATE_SINCE_NS, pl.RADIO_PROMO_PKTS):
        assert p4info.register(name).size == ues
    assert p4info.register(pl.RADIO_FACH_FREE_NS).size == 2 * ues
    assert p4info.register(pl.RADIO_STATE_TIME_NS).size == pl.state_time_index(ues, 0)
    assert p4info.counter(pl.RADIO_PROMOTIONS).size == pl.promotion_index(ues, 0)
    assert max(pl.RadioState) < pl.RADIO_STATE_STRIDE and max(pl.PromotionKind) < pl.RADIO_PROMO_KINDS
    assert p4info.digest(pl.RADIO_STATE_DIGEST).fields == (
        ("ue_id", 32), ("old_state", 8), ("new_state", 8), ("timestamp_ns", 64))


def test_unknown_names_are_not_found(p4info: P4Info) -> None:
    for lookup in (p4info.table, p4info.action, p4info.register, p4info.counter, p4info.digest):
        with pytest.raises(P4RuntimeError) as err:
            lookup("no_such_thing")
        assert err.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(P4RuntimeError) as key:
        build_table_entry(p4info, pl.PORT_MAP, {"nope": 1}, pl.SET_EGRESS_PORT, {"port": 1})
    assert key.value.code == grpc.StatusCode.NOT_FOUND and "standard_metadata.ingress_port" in key.value.message


def test_exact_entry(p4info: P4Info) -> None:
    e = build_table_entry(p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT, {"port": 2})
    assert e.table_id == p4info.table(pl.PORT_MAP).id
    assert [(m.field_id, m.exact.value) for m in e.match] == [(1, b"\x01")]
    assert e.action.action.action_id == p4info.action(pl.SET_EGRESS_PORT).id
    assert [(p.param_id, p.value) for p in e.action.action.params] == [(1, b"\x02")]
    assert e.priority == 0


def test_ternary_range_and_dont_care(p4info: P4Info) -> None:
    e = build_table_entry(
        p4info,
        pl.CLASSIFIER,
        {
            "meta.ipv4_src": ("10.1.2.3", "255.255.0.0"),  # value bits outside the mask are cleared
            "meta.ipv4_dst": Ternary(0, 0),  # don't care: left out
            "meta.l4_dst_port": (80, 443),
            "meta.l4_src_port": Range(0, 0xFFFF),  # full range: don't care, left out
            "ip_proto": 17,  # short key name; plain value = all bits significant
        },
        pl.SET_PROFILE,
        {"profile_id": 3, "direction": 1, "ue_id": 7},
        priority=5,
    )
    fields = {p4info.table(pl.CLASSIFIER).match_fields_by_id[m.field_id].name: m for m in e.match}
    assert set(fields) == {"meta.ipv4_src", "meta.l4_dst_port", "meta.ip_proto"}
    assert fields["meta.ipv4_src"].ternary.value == bytes([10, 1, 0, 0])
    assert fields["meta.ipv4_src"].ternary.mask == b"\xff\xff\x00\x00"
    assert (fields["meta.l4_dst_port"].range.low, fields["meta.l4_dst_port"].range.high) == (b"\x50", b"\x01\xbb")
    assert fields["meta.ip_proto"].ternary.mask == b"\xff"
    assert e.priority == 5
    view = decode_table_entry(p4info, e)
    assert view.match["meta.ipv4_src"] == Ternary(0x0A010000, 0xFFFF0000)
    assert view.match["meta.l4_dst_port"] == Range(80, 443)
    assert view.params == {"profile_id": 3, "direction": 1, "ue_id": 7}
    assert view.action == pl.SET_PROFILE


def test_priority_rules(p4info: P4Info) -> None:
    with pytest.raises(P4RuntimeError, match="priority must be > 0"):
        build_table_entry(p4info, pl.CLASSIFIER, {"ip_proto": 6}, pl.SET_PROFILE, {"profile_id": 1, "direction": 0, "ue_id": 0})
    with pytest.raises(P4RuntimeError, match="priority must be 0"):
        build_table_entry(p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.DROP_PACKET, priority=3)


def test_action_parameters_checked(p4info: P4Info) -> None:
    with pytest.raises(P4RuntimeError, match="missing parameter"):
        build_table_entry(p4info, pl.PROFILE, {"meta.profile_id": 1, "meta.direction": 0}, pl.SET_IMPAIRMENT, {"delay_ns": 1})
    with pytest.raises(P4RuntimeError) as unknown:
        build_table_entry(
            p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT, {"port": 1, "speed": 2}
        )
    assert unknown.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(P4RuntimeError) as wide:
        build_table_entry(p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT, {"port": 512})
    assert wide.value.code == grpc.StatusCode.OUT_OF_RANGE
    with pytest.raises(P4RuntimeError, match="not an action of"):
        build_table_entry(p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_PROFILE,
                          {"profile_id": 1, "direction": 0, "ue_id": 0})


def test_impairment_entry_has_all_params(p4info: P4Info) -> None:
    e = build_table_entry(
        p4info,
        pl.PROFILE,
        {"meta.profile_id": 1, "meta.direction": 0},
        pl.SET_IMPAIRMENT,
        pl.impairment_params(delay_ns=20_000_000, loss_prob=0xFFFFFFFF),
    )
    view = decode_table_entry(p4info, e)
    assert len(view.params) == len(pl.IMPAIRMENT_PARAMS) == 63
    assert view.params["delay_ns"] == 20_000_000 and view.params["loss_prob"] == 0xFFFFFFFF
    assert view.params["jitter_ns"] == 0
    with pytest.raises(ValueError, match="delay"):
        pl.impairment_params(delay=1)


def test_default_entry_and_lpm_shorthand(p4info: P4Info) -> None:
    e = build_table_entry(p4info, pl.L2_LEARN, action=pl.LEARN, is_default=True)
    assert e.is_default_action and not e.match
    view = decode_table_entry(p4info, e)
    assert view.is_default and view.action == pl.LEARN
    with pytest.raises(P4RuntimeError):
        build_table_entry(p4info, pl.L2_LEARN, {"hdr.ethernet.src_addr": 1}, pl.LEARN, is_default=True)


def test_match_kind_mismatch(p4info: P4Info) -> None:
    with pytest.raises(P4RuntimeError, match="is exact"):
        build_table_entry(p4info, pl.PORT_MAP, {"standard_metadata.ingress_port": Lpm(1, 9)}, pl.DROP_PACKET)
    with pytest.raises(P4RuntimeError, match="range low"):
        build_table_entry(p4info, pl.CLASSIFIER, {"meta.l4_dst_port": Range(10, 5)}, pl.SET_PROFILE,
                          {"profile_id": 1, "direction": 0, "ue_id": 0}, priority=1)
    assert Exact(1) != Exact(2)


def test_register_counter_entries_and_updates(p4info: P4Info) -> None:
    r = build_register_entry(p4info, pl.RNG_SEED, 0, 12345)
    assert r.register_id == p4info.register(pl.RNG_SEED).id and r.index.index == 0
    assert r.data.bitstring == (12345).to_bytes(2, "big")
    wildcard = build_register_entry(p4info, pl.GE_STATE)
    assert not wildcard.HasField("index")
    with pytest.raises(P4RuntimeError) as idx:
        build_counter_entry(p4info, pl.PARSER_ERRORS, 4)
    assert idx.value.code == grpc.StatusCode.OUT_OF_RANGE
    u = update("insert", build_counter_entry(p4info, pl.PROFILE_IN, 2))
    assert u.type == p4runtime_pb2.Update.INSERT and u.entity.counter_entry.index.index == 2
    with pytest.raises(P4RuntimeError):
        update("upsert", r)


def test_pd_and_drop_indices() -> None:
    assert pl.pd_index(1, pl.DOWNLINK) == 3
    assert pl.drop_index(3, pl.DropReason.QUEUE_FULL) == 50  # 3 * 16 + 2
    with pytest.raises(ValueError):
        pl.pd_index(1, 2)
