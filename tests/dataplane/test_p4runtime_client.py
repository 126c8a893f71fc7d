"""The Python P4Runtime client against the real switch: pipeline config, reads with wildcards,
batched writes with per-update errors, registers and counters, arbitration, digests, packet I/O."""

from __future__ import annotations

import time

import grpc
import pytest
from wirestats import Capture, send_raw

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.p4rt import P4RuntimeClient, P4RuntimeError, WriteError, update
from p4netem.p4rt.encoding import to_int
from p4netem.p4rt.proto import p4runtime_pb2


def test_pipeline_round_trip(lab: TwoHostLab) -> None:
    info, _, _ = lab.client.get_pipeline()
    assert info is not None
    ours = {t.name: t.id for t in lab.client.info.tables}
    theirs = {t.name: t.id for t in info.tables}
    assert theirs == ours


def test_read_back_lab_entries(lab: TwoHostLab) -> None:
    port_map = lab.client.read_table_entries(pl.PORT_MAP)
    routes = {e.match["standard_metadata.ingress_port"].value: e.params["port"] for e in port_map}
    assert routes == {1: 2, 2: 1}
    assert all(e.action == pl.SET_EGRESS_PORT for e in port_map)
    everything = lab.client.read_table_entries()  # wildcard over all tables
    assert {e.table for e in everything} == {pl.PORT_MAP, pl.CLASSIFIER}
    assert len(everything) == 4
    default = lab.client.read_default_entry(pl.PORT_MAP)
    assert default.action == pl.DROP_PACKET


def test_batched_write_reports_the_failing_update(lab: TwoHostLab) -> None:
    c = lab.client
    good = [
        c.table_entry(pl.L2_FWD, {"hdr.ethernet.dst_addr": f"02:00:00:00:01:{i:02x}"}, pl.SET_EGRESS_PORT, {"port": 2})
        for i in range(3)
    ]
    bad = p4runtime_pb2.TableEntry()
    bad.CopyFrom(good[0])
    bad.table_id = 0x02FFFFFF  # no such table
    updates = [update("INSERT", good[0]), update("INSERT", bad), update("INSERT", good[1]), update("INSERT", good[2])]
    with pytest.raises(WriteError) as err:
        c.write(updates)
    assert [e.index for e in err.value.errors] == [1]
    assert err.value.errors[0].code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)
    assert "0x02ffffff" in err.value.errors[0].message.lower() or "50331647" in err.value.errors[0].message
    assert len(c.read_table_entries(pl.L2_FWD)) == 3  # the others were applied
    with pytest.raises(WriteError) as dup:
        c.insert(good[0])
    assert dup.value.errors[0].code == grpc.StatusCode.ALREADY_EXISTS
    c.delete(*good)
    assert c.read_table_entries(pl.L2_FWD) == []


def test_modify_default_and_impairment_read_back(lab: TwoHostLab) -> None:
    lab.impair(pl.UPLINK, delay_ns=1_000_000, loss_prob=12345)
    (entry,) = [e for e in lab.client.read_table_entries(pl.PROFILE)]
    assert entry.params["delay_ns"] == 1_000_000 and entry.params["loss_prob"] == 12345
    lab.impair(pl.UPLINK, delay_ns=2_000_000)
    (entry,) = lab.client.read_table_entries(pl.PROFILE)
    assert entry.params["delay_ns"] == 2_000_000 and entry.params["loss_prob"] == 0


def test_registers_and_counters(lab: TwoHostLab) -> None:
    c = lab.client
    c.write_register(pl.RNG_SEED, 0, 0xDEADBEEF)
    assert c.read_register(pl.RNG_SEED, 0) == {0: 0xDEADBEEF}
    c.write_register(pl.GE_STATE, 5, 1)
    assert c.read_register(pl.GE_STATE, 5) == {5: 1}
    parser_errors = c.read_counter(pl.PARSER_ERRORS)  # wildcard: every index
    assert sorted(parser_errors) == [0, 1, 2, 3]
    before = lab.counters(pl.UPLINK).profile_in
    lab.h1.ns.run(["ping", "-c", "2", "-i", "0.2", lab.h2.ip])
    after = lab.counters(pl.UPLINK)
    assert after.profile_in - before == 2
    assert c.read_counter(pl.PROFILE_IN, lab.pd(pl.UPLINK))[lab.pd(pl.UPLINK)].bytes >= 2 * 98


def test_out_of_range_index_is_rejected_locally(lab: TwoHostLab) -> None:
    with pytest.raises(P4RuntimeError) as err:
        lab.client.read_register(pl.RNG_SEED, 1)
    assert err.value.code == grpc.StatusCode.OUT_OF_RANGE


def test_arbitration(lab: TwoHostLab) -> None:
    """A client with a lower election id is a backup and may not write; a higher one takes over."""
    addr, dev = lab.switch.grpc_addr, lab.switch.device_id
    entry = lab.client.table_entry(
        pl.L2_FWD, {"hdr.ethernet.dst_addr": "02:00:00:00:02:01"}, pl.SET_EGRESS_PORT, {"port": 2}
    )
    with P4RuntimeClient(addr, dev, election_id=0, p4info=lab.client.info).connect() as backup:
        assert not backup.is_primary
        with pytest.raises(WriteError) as err:
            backup.insert(entry)
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert len(backup.read_table_entries(pl.PORT_MAP)) == 2  # backups may read
    with P4RuntimeClient(addr, dev, election_id=10, p4info=lab.client.info).connect() as usurper:
        assert usurper.is_primary
        usurper.insert(entry)
        deadline = time.monotonic() + 2
        while lab.client.is_primary and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lab.client.is_primary
        with pytest.raises(WriteError):
            lab.client.delete(entry)
        usurper.delete(entry)


def test_wrong_device_id_fails_with_a_status(lab: TwoHostLab) -> None:
    with pytest.raises(P4RuntimeError) as err:
        P4RuntimeClient(lab.switch.grpc_addr, device_id=lab.switch.device_id + 41, timeout=5).connect()
    assert err.value.code != grpc.StatusCode.OK


def test_learning_digest(lab: TwoHostLab) -> None:
    """With l2_learn's default set to learn, a frame from h1 produces a digest naming h1's MAC and port."""
    c = lab.client
    c.configure_digest(pl.MAC_LEARN_DIGEST, max_timeout_ns=0, max_list_size=1)
    c.set_default_action(pl.L2_LEARN, pl.LEARN)
    lab.h1.ns.run(["ping", "-c", "1", "-W", "1", lab.h2.ip], check=False)
    deadline = time.monotonic() + 5
    seen = []
    while time.monotonic() < deadline:
        digest = c.get_digest(timeout=max(0.1, deadline - time.monotonic()))
        seen.extend(digest.data)
        if {"src_addr": to_int(lab.h1.mac), "ingress_port": 1} in seen:
            break
    assert {"src_addr": to_int(lab.h1.mac), "ingress_port": 1} in seen, seen


def test_packet_out(lab: TwoHostLab) -> None:
    """A PacketOut leaves unchanged on the port its metadata names."""
    frame = (
        to_int(lab.h2.mac).to_bytes(6, "big") + bytes.fromhex("020000000099") + b"\x88\xb5" + b"p4netem packet-out"
    )
    capture = Capture(lab.h2.ns, lab.h2.iface, seconds=1.5, ethertype=0x88B5)
    lab.client.send_packet_out(frame, egress_port=2)
    frames = capture.frames()
    assert frames and frames[0][: len(frame)] == frame, frames


def test_packet_in(lab: TwoHostLab) -> None:
    """send_to_cpu on port 1 delivers h1's frames as PacketIns carrying ingress_port 1."""
    lab.client.modify_table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SEND_TO_CPU)
    frame = to_int(lab.h2.mac).to_bytes(6, "big") + to_int(lab.h1.mac).to_bytes(6, "big") + b"\x88\xb5" + b"to cpu"
    send_raw(lab.h1.ns, lab.h1.iface, frame)
    deadline = time.monotonic() + 5
    while True:
        pkt = lab.client.get_packet_in(timeout=max(0.1, deadline - time.monotonic()))
        if pkt.payload[: len(frame)] == frame:
            break
    assert pkt.metadata["ingress_port"] == 1
