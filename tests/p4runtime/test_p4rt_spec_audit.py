"""P4Runtime specification audit of p4netem-switch, as an outside client author would run it.

One bare switch (no ports: P4Runtime only) serves the module. Each test sends raw protobuf
requests and checks the status or the read-back against the rule of the specification (v1.3 to
1.5, sections named in the tests) it exercises. Where the spec leaves a choice, the behaviour of
bmv2's PI server is the reference, as docs/p4runtime.md says.

- `TableEntry.metadata` (the opaque bytes cookie): "it must be returned by the server along with
  the rest of the entry"; it was refused with UNIMPLEMENTED.
- the default entry's `controller_metadata` and `metadata`: "the default entry is treated like a
  regular entry" and a reset resets them; they were refused with UNIMPLEMENTED (PI stores them).
- the rest of the audit (arbitration with an unset election id, bytestrings, match validity,
  default entries, atomicity, wildcard reads, pipeline actions, stream errors): statuses the
  switch already gave right, kept here so that they stay right.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from p4netem.lab import SwitchProcess
from p4netem.p4rt.proto import p4data_pb2, p4runtime_pb2 as pb

from test_p4rt_conformance import (
    Client, Names, action, code_name, details, exact, failure, one_error, rng, ternary, uint128, update,
)

TE = pb.TableEntry
Set = pb.SetForwardingPipelineConfigRequest


@pytest.fixture(scope="module")
def audit(switch_bin: str, tmp_path_factory) -> Iterator[tuple[SwitchProcess, Names, Client]]:
    """A bare switch, the ids of the P4Info it serves, and its primary (election id 100)."""
    log = tmp_path_factory.mktemp("spec-audit") / "switch.log"
    switch = SwitchProcess({}, binary=switch_bin, log_path=log, extra_args=["--rt-priority", "0"]).start()
    clients: list[Client] = []
    try:
        c = Client(switch.grpc_addr, switch.device_id)
        clients.append(c)
        info = c.stub.GetForwardingPipelineConfig(
            pb.GetForwardingPipelineConfigRequest(device_id=switch.device_id), timeout=10).config.p4info
        c.arbitrate(100)
        assert c.arbitration().status.code == grpc.StatusCode.OK.value[0]
        yield switch, Names(info), c
    finally:
        for cl in clients:
            cl.close()
        switch.stop()


def read_one(c: Client, te: pb.TableEntry) -> list[pb.TableEntry]:
    return [e.table_entry for e in c.read(pb.Entity(table_entry=te))]


def test_table_entry_metadata_is_stored_and_read_back(audit):
    """Spec "TableEntry": `metadata`, "an arbitrary bytes value which is opaque to the target ...
    must be returned by the server along with the rest of the entry"; "Wildcard Reads": a
    non-empty `metadata` filters on it; "Write RPC": MODIFY assigns the entity's full new state
    (an unset action keeps the action, spec "Action Specification")."""
    _, n, c = audit
    pm = n.table("port_map")
    key = [exact(1, 0x1F0)]
    entry = TE(table_id=pm, match=key, action=action(n.action("drop_packet")),
               controller_metadata=3, metadata=b"\x00opaque\xff")
    c.write(update("INSERT", table_entry=entry))
    try:
        assert read_one(c, TE(table_id=pm, match=key)) == [entry]
        assert entry in read_one(c, TE())  # all tables
        assert read_one(c, TE(table_id=pm, metadata=b"\x00opaque\xff")) == [entry]
        assert read_one(c, TE(table_id=pm, metadata=b"other")) == []
        modified = TE(table_id=pm, match=key, controller_metadata=3, metadata=b"v2")
        c.write(update("MODIFY", table_entry=modified))
        modified.action.CopyFrom(entry.action)
        assert read_one(c, TE(table_id=pm, match=key)) == [modified]
    finally:
        # DELETE looks at the key only: a different metadata does not matter.
        c.write(update("DELETE", table_entry=TE(table_id=pm, match=key, metadata=b"ignored")))
    assert read_one(c, TE(table_id=pm, match=key)) == []


def test_default_entry_keeps_the_controller_cookies(audit):
    """Spec "Default Entry": apart from INSERT/DELETE and the match/priority rules, "the default
    entry is treated like a regular entry"; a MODIFY without an action resets it, and "its
    controller_metadata and metadata value ... will be reset to their defaults". PI stores the
    default entry's controller_metadata. A VERIFY_AND_COMMIT clears the forwarding state, cookies
    included."""
    switch, n, c = audit
    cls = n.table("classifier")
    query = TE(table_id=cls, is_default_action=True)
    default = TE(table_id=cls, is_default_action=True, controller_metadata=0xC0FFEE, metadata=b"why",
                 action=action(n.action("set_profile"), {1: 2, 2: 0, 3: 0}))
    initial = read_one(c, query)
    assert len(initial) == 1 and not initial[0].controller_metadata and not initial[0].metadata
    c.write(update("MODIFY", table_entry=default))
    assert read_one(c, query) == [default]
    assert read_one(c, TE(table_id=cls, is_default_action=True, controller_metadata=0xC0FFEE)) == [default]
    assert read_one(c, TE(table_id=cls, is_default_action=True, controller_metadata=1)) == []
    assert read_one(c, TE(table_id=cls, is_default_action=True, metadata=b"other")) == []
    # A reset brings back the program's default action and no cookies.
    c.write(update("MODIFY", table_entry=TE(table_id=cls, is_default_action=True, controller_metadata=5)))
    assert read_one(c, query) == initial
    # The l2_fwd default is const: still PERMISSION_DENIED, cookie or not.
    const = TE(table_id=n.table("l2_fwd"), is_default_action=True, controller_metadata=1,
               action=action(n.action("send_to_cpu")))
    assert code_name(one_error(failure(c.write, update("MODIFY", table_entry=const)))) == "PERMISSION_DENIED"

    c.write(update("MODIFY", table_entry=default))
    req = Set(device_id=switch.device_id, action=Set.VERIFY_AND_COMMIT)
    req.election_id.CopyFrom(uint128(100))
    req.config.p4info.CopyFrom(n.info)
    c.stub.SetForwardingPipelineConfig(req, timeout=10)
    assert read_one(c, query) == initial


def test_rollback_on_error_is_all_or_none_with_a_bad_default_entry(audit):
    """Spec "Batch Atomicity", ROLLBACK_ON_ERROR: on an error the target "must roll back the
    operations such that both software and data plane state is consistent with the state before
    the batch". A default entry whose action is out of range (a profile id past --profiles) failed
    only when applied, after the batch's table entries and register writes: they stayed applied,
    reported OK, while the status said "none applied"."""
    _, n, c = audit
    pm, cls = n.table("port_map"), n.table("classifier")
    nfs = n.register("next_free_ns").preamble.id
    cell = pb.Entity(register_entry=pb.RegisterEntry(register_id=nfs, index=pb.Index(index=1)))
    before = c.read(cell)
    entry = TE(table_id=pm, match=[exact(1, 0x1F3)], action=action(n.action("drop_packet")))
    bad_default = TE(table_id=cls, is_default_action=True,
                     action=action(n.action("set_profile"), {1: 60000, 2: 0, 3: 0}))
    batch = [update("INSERT", table_entry=entry),
             update("MODIFY", register_entry=pb.RegisterEntry(register_id=nfs, index=pb.Index(index=1),
                                                               data=p4data_pb2.P4Data(bitstring=b"\x07"))),
             update("MODIFY", table_entry=bad_default)]
    err = failure(c.write, *batch, atomicity=pb.WriteRequest.ROLLBACK_ON_ERROR)
    assert [code_name(e) for e in details(err)] == ["ABORTED", "ABORTED", "OUT_OF_RANGE"], details(err)
    assert "ROLLBACK_ON_ERROR: none applied" in err.details()
    assert read_one(c, TE(table_id=pm, match=entry.match)) == []
    assert c.read(cell) == before
    # CONTINUE_ON_ERROR applies the good ones.
    err = failure(c.write, *batch)
    assert [code_name(e) for e in details(err)] == ["OK", "OK", "OUT_OF_RANGE"]
    assert read_one(c, TE(table_id=pm, match=entry.match)) == [entry]
    c.write(update("DELETE", table_entry=entry))


def test_audited_statuses(audit):
    """What the audit found already right, one request per rule (spec section in each label)."""
    switch, n, c = audit
    pm, cls, profile = n.table("port_map"), n.table("classifier"), n.table("profile")
    drop = action(n.action("drop_packet"))
    sp = action(n.action("set_profile"), {1: 1, 2: 0, 3: 0})
    seed = n.register("rng_seed").preamble.id
    drops = n.counter("drops").preamble.id
    digest = n.digests["mac_learn_digest_t"].preamble.id

    def ternary_raw(value: bytes, mask: bytes) -> pb.FieldMatch:
        return pb.FieldMatch(field_id=3, ternary=pb.FieldMatch.Ternary(value=value, mask=mask))

    bad_writes = {
        "Bytestrings: empty string": ("OUT_OF_RANGE", update("INSERT", table_entry=TE(
            table_id=pm, match=[pb.FieldMatch(field_id=1, exact=pb.FieldMatch.Exact(value=b""))], action=drop))),
        "Bytestrings: 10 bits in bit<9>": ("OUT_OF_RANGE", update("INSERT", table_entry=TE(
            table_id=pm, match=[exact(1, 0x200)], action=drop))),
        "Match Format: ternary mask 0 is don't care": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, priority=3, action=sp, match=[ternary(3, 0, 0)]))),
        "Match Format: value bits outside the mask": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, priority=3, action=sp, match=[ternary_raw(b"\x0a\x00\x00\x01", b"\xff\x00\x00\x00")]))),
        "Match Format: range low > high": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, priority=3, action=sp, match=[rng(8, 10, 9)]))),
        "Match Format: full range is don't care": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, priority=3, action=sp, match=[rng(8, 0, 0xFFFF)]))),
        "Match Format: optional on a ternary key": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, priority=3, action=sp,
            match=[pb.FieldMatch(field_id=3, optional=pb.FieldMatch.Optional(value=b"\x01"))]))),
        "Match Format: exact key omitted": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=profile, match=[exact(1, 3)], action=action(n.action("set_impairment"))))),
        "TableEntry: ternary table needs a priority": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=cls, action=sp, match=[ternary(3, 0x0A000000, 0xFF000000)]))),
        "TableEntry: exact table takes priority 0": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, priority=1, match=[exact(1, 7)], action=drop))),
        "TableEntry: is_const in a write": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, match=[exact(1, 7)], action=drop, is_const=True))),
        "Action Specification: missing parameter": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, match=[exact(1, 7)], action=action(n.action("set_egress_port"))))),
        "Default Entry: INSERT": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, is_default_action=True, action=drop))),
        "Default Entry: DELETE": ("INVALID_ARGUMENT", update("DELETE", table_entry=TE(
            table_id=pm, is_default_action=True))),
        "Default Entry: a match": ("INVALID_ARGUMENT", update("MODIFY", table_entry=TE(
            table_id=pm, is_default_action=True, match=[exact(1, 7)], action=drop))),
        "Idle-timeout: table without support": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, match=[exact(1, 7)], action=drop, idle_timeout_ns=1_000_000))),
        "Idle-timeout: time_since_last_hit in a write": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            table_id=pm, match=[exact(1, 7)], action=drop, time_since_last_hit=TE.IdleTimeout()))),
        "Idle-timeout: default entry": ("INVALID_ARGUMENT", update("MODIFY", table_entry=TE(
            table_id=pm, is_default_action=True, idle_timeout_ns=5))),
        "Default-valued fields: table id 0 in a write": ("INVALID_ARGUMENT", update("INSERT", table_entry=TE(
            match=[exact(1, 7)], action=drop))),
        "Write: UNSPECIFIED update type": ("INVALID_ARGUMENT", pb.Update(type=0, entity=pb.Entity(
            table_entry=TE(table_id=pm, match=[exact(1, 7)], action=drop)))),
        "Write: MODIFY of a missing entry": ("NOT_FOUND", update("MODIFY", table_entry=TE(
            table_id=pm, match=[exact(1, 7)], action=drop))),
        "CounterEntry: INSERT": ("INVALID_ARGUMENT", update("INSERT", counter_entry=pb.CounterEntry(
            counter_id=drops, index=pb.Index(index=0)))),
        "CounterEntry: negative index": ("INVALID_ARGUMENT", update("MODIFY", counter_entry=pb.CounterEntry(
            counter_id=drops, index=pb.Index(index=-1)))),
        "RegisterEntry: data of another type": ("INVALID_ARGUMENT", update("MODIFY", register_entry=pb.RegisterEntry(
            register_id=seed, index=pb.Index(index=0), data=p4data_pb2.P4Data(bool=True)))),
        "DirectCounterEntry: INSERT": ("INVALID_ARGUMENT", update("INSERT", direct_counter_entry=pb.DirectCounterEntry(
            table_entry=TE(table_id=pm, match=[exact(1, 7)])))),
        "DigestEntry: MODIFY before INSERT": ("NOT_FOUND", update("MODIFY", digest_entry=pb.DigestEntry(
            digest_id=digest, config=pb.DigestEntry.Config(max_list_size=1)))),
        "ActionProfileMember: unsupported": ("UNIMPLEMENTED", update("INSERT", action_profile_member=(
            pb.ActionProfileMember(action_profile_id=1, member_id=1)))),
    }
    for label, (code, u) in bad_writes.items():
        e = one_error(failure(c.write, u))
        assert code_name(e) == code, (label, e)

    bad_reads = {
        "Wildcard Reads: table_id 0 takes no other filter": TE(is_default_action=True),
        "Wildcard Reads: match must be a valid key": TE(table_id=profile, match=[exact(1, 3)]),
        "Default Entry: read with a priority": TE(table_id=pm, is_default_action=True, priority=1),
        "Idle-timeout: time_since_last_hit on a table without": TE(table_id=pm, time_since_last_hit=TE.IdleTimeout()),
    }
    for label, te in bad_reads.items():
        e = one_error(failure(c.read, pb.Entity(table_entry=te)))
        assert code_name(e) == "INVALID_ARGUMENT", (label, e)
    e = one_error(failure(c.read, pb.Entity()))
    assert code_name(e) == "INVALID_ARGUMENT", "Read: the entity oneof must be set"

    # Batch error: one p4.v1.Error per update, in order, OK ones with the code alone.
    good = TE(table_id=pm, match=[exact(1, 0x1F1)], action=drop)
    err = failure(c.write, update("INSERT", table_entry=good), update("INSERT", table_entry=good))
    assert [(code_name(x), x.message) for x in details(err)][0] == ("OK", "")
    assert [code_name(x) for x in details(err)] == ["OK", "ALREADY_EXISTS"]
    # ROLLBACK_ON_ERROR: all or none; DATAPLANE_ATOMIC of a batch it cannot make atomic: UNIMPLEMENTED.
    other = TE(table_id=pm, match=[exact(1, 0x1F2)], action=drop)
    err = failure(c.write, update("INSERT", table_entry=other), update("INSERT", table_entry=good),
                  atomicity=pb.WriteRequest.ROLLBACK_ON_ERROR)
    assert [code_name(x) for x in details(err)] == ["ABORTED", "ALREADY_EXISTS"]
    assert read_one(c, TE(table_id=pm, match=other.match)) == []
    err = failure(c.write, update("MODIFY", register_entry=pb.RegisterEntry(
        register_id=seed, index=pb.Index(index=0), data=p4data_pb2.P4Data(bitstring=b"\x01"))),
        atomicity=pb.WriteRequest.DATAPLANE_ATOMIC)
    assert err.code() == grpc.StatusCode.UNIMPLEMENTED
    c.write(update("DELETE", table_entry=good))
    c.write()  # an empty batch is fine

    # Write checks, in the spec's order: device, then primary. An unset election id is never the
    # primary's ("Unset Election ID").
    err = failure(c.stub.Write, pb.WriteRequest(device_id=switch.device_id, updates=[
        update("INSERT", table_entry=good)]), timeout=10)
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = failure(c.write, update("INSERT", table_entry=good), device_id=switch.device_id + 1, election_id=1)
    assert err.code() == grpc.StatusCode.NOT_FOUND

    # SetForwardingPipelineConfig actions.
    def set_config(action_value: int, with_config: bool = True) -> None:
        req = Set(device_id=switch.device_id, action=action_value)
        req.election_id.CopyFrom(uint128(100))
        if with_config:
            req.config.p4info.CopyFrom(n.info)
        c.stub.SetForwardingPipelineConfig(req, timeout=10)

    for act, with_config, code in ((Set.VERIFY, False, "INVALID_ARGUMENT"), (Set.COMMIT, False, "NOT_FOUND"),
                                   (Set.COMMIT, True, "INVALID_ARGUMENT"), (Set.UNSPECIFIED, True, "INVALID_ARGUMENT")):
        assert failure(set_config, act, with_config).code().name == code, (act, with_config)
    # GetForwardingPipelineConfig response types select the fields.
    Get = pb.GetForwardingPipelineConfigRequest
    got = {rt: c.stub.GetForwardingPipelineConfig(Get(device_id=switch.device_id, response_type=rt), timeout=10).config
           for rt in (Get.ALL, Get.COOKIE_ONLY, Get.P4INFO_AND_COOKIE, Get.DEVICE_CONFIG_AND_COOKIE)}
    assert [got[rt].HasField("p4info") for rt in sorted(got)] == [True, False, True, False]
    # Capabilities: a full semantic version.
    version = c.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5).p4runtime_api_version
    assert version.count(".") == 2 and all(part.isdigit() for part in version.split("-")[0].split(".")), version


def test_audited_arbitration_and_stream_errors(audit):
    """Spec "Unset Election ID": a controller without an election id is a backup and never primary,
    and two of them are no duplicate; {0, 0} is an election id. "Rules for Handling
    MasterArbitrationUpdate": a live stream that changes device is terminated FAILED_PRECONDITION.
    "Stream Error Reporting": a DigestListAck with an unknown digest id is INVALID_ARGUMENT with the
    digest_list_ack details; a PacketOut from a non-primary is PERMISSION_DENIED."""
    switch, n, c = audit
    clients: list[Client] = []

    def client() -> Client:
        clients.append(Client(switch.grpc_addr, switch.device_id))
        return clients[-1]

    try:
        a, b = client(), client()
        a.arbitrate(None)
        b.arbitrate(None)
        for x in (a, b):
            upd = x.arbitration()
            assert upd.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0], upd
            assert (upd.election_id.high, upd.election_id.low) == (0, 100), upd
        b.send(packet=pb.PacketOut(payload=bytes(60)))
        assert b.next("error").error.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
        a.arbitrate(50)
        assert a.arbitration().status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
        a.arbitrate(51, device_id=switch.device_id + 1)
        end = a.next("end")
        assert isinstance(end, grpc.RpcError) and end.code() == grpc.StatusCode.FAILED_PRECONDITION, end
        c.send(digest_ack=pb.DigestListAck(digest_id=12345, list_id=1))
        e = c.next("error").error
        assert e.canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and e.HasField("digest_list_ack"), e
        assert c.queues["end"].empty(), "stream errors keep the primary's stream open"
    finally:
        for x in clients:
            x.close()
