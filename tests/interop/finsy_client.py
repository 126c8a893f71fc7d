"""Drives p4netem-switch with finsy, a third-party asyncio P4Runtime client library.

Runs under .venv-finsy's interpreter (finsy needs protobuf<7, .venv has 7), started as a subprocess
by test_finsy.py, once per STEP, which asserts on the lines printed here and sends traffic through
the switch between steps. Written the way finsy's README and examples do it: `fy.Switch` as an async
context manager with `fy.SwitchOptions(p4info=..., p4blob=...)`, entities built with
`fy.P4TableEntry`/`fy.Match`/`fy.Action` and written with `insert`/`modify`/`delete`/`write`, reads
with `async for ... in switch.read(...)`, `delete_all()`.

With a p4blob, finsy is "authoritative": on connect it reads the pipeline cookie
(GetForwardingPipelineConfig COOKIE_ONLY) and sends SetForwardingPipelineConfig(VERIFY_AND_COMMIT)
with the P4Info, the blob and its own cookie (a hash of both) only when the cookie differs. p4netem's
pipeline is fixed, so the blob is empty. Every step connects anew: the first commits (p4force),
`counters` brings no P4Info and takes the switch's, the last two find the cookie and leave the
running pipeline (and the entries) alone.

usage: finsy_client.py GRPC_ADDR DEVICE_ID P4INFO_TXTPB STEP
STEP: program | counters | drop | clear
"""
import logging
import sys
from pathlib import Path

import finsy as fy

PROFILE = 7  # the profile the hosts' IPv4 traffic is classified into
DROP_PROFILE = 9  # the classifier's default rule points here in the `drop` step
UPLINK, DOWNLINK = 0, 1
DELAY_NS = 20_000_000  # uplink delay after the MODIFY; the test measures it on the wire
USER_DIST_CELL = 3 * 4096 + 7  # a cell of dist_table's user table (unused while jitter_dist != 5)
PROB_ALWAYS = 0xFFFFFFFF  # bit<32> probabilities: 0xFFFFFFFF is "always" (pipeline contract)


def pd_index(profile_id: int, direction: int) -> int:
    # Index of the per-profile-direction counters (docs/pipeline-contract.md).
    return profile_id * 2 + direction


def impairment(sw: fy.Switch, **given: int) -> fy.Action:
    """set_impairment with every parameter: finsy refuses an action with a parameter missing
    (P4Runtime has no "unset" parameter), and this one has about 60; off is 0 for all of them."""
    names = [p.name for p in sw.p4info.actions["set_impairment"].params]
    unknown = set(given) - set(names)
    assert not unknown, f"no such set_impairment parameters: {sorted(unknown)}"
    return fy.Action("set_impairment", **(dict.fromkeys(names, 0) | given))


def port_map(in_port: int, out_port: int) -> fy.P4TableEntry:
    return fy.P4TableEntry("port_map", match=fy.Match(ingress_port=in_port),
                           action=fy.Action("set_egress_port", port=out_port))


def classify_ipv4(in_port: int, direction: int) -> fy.P4TableEntry:
    # Ternary fields in finsy's own notations: VALUE/&MASK, and an exact value (all-ones mask).
    return fy.P4TableEntry(
        "classifier",
        match=fy.Match(ingress_port=f"{in_port}/&0x1ff", ether_type=0x0800,
                       ipv4_dst="10.0.0.0/&255.255.255.0"),
        action=fy.Action("set_profile", profile_id=PROFILE, direction=direction, ue_id=0),
        priority=10,
    )


def entries(sw: fy.Switch) -> list[fy.P4TableEntry]:
    return [
        port_map(1, 2),
        port_map(2, 1),
        classify_ipv4(1, UPLINK),
        classify_ipv4(2, DOWNLINK),
        # Ranges and an IPv4 ternary too (no test traffic matches: UDP 5000..5999 from 10.0.9.1).
        fy.P4TableEntry(
            "classifier",
            match=fy.Match(ether_type=0x0800, ipv4_src="10.0.9.1", ip_proto=17,
                           l4_dst_port="5000...5999", dscp="46/&0x3f"),
            action=fy.Action("set_profile", profile_id=8, direction=UPLINK, ue_id=3),
            priority=20,
        ),
        fy.P4TableEntry("profile", match=fy.Match(profile_id=PROFILE, direction=UPLINK),
                        action=impairment(sw, delay_ns=1_000_000)),
        fy.P4TableEntry("profile", match=fy.Match(profile_id=PROFILE, direction=DOWNLINK),
                        action=impairment(sw)),
    ]


def canonical(sw: fy.Switch, entry: fy.P4TableEntry) -> bytes:
    """The P4Runtime encoding finsy makes of an entry: what was written and what was read compare
    equal when the switch returned the same entry, whatever notation the writer used."""
    return entry.encode(sw.p4info).SerializeToString(deterministic=True)


async def read_entries(sw: fy.Switch) -> list[fy.P4TableEntry]:
    return [e async for e in sw.read(fy.P4TableEntry())]


async def read_default(sw: fy.Switch, table: str) -> str:
    async for e in sw.read(fy.P4TableEntry(table, is_default_action=True)):
        return e.action_str(sw.p4info)
    return "none"


async def counter(sw: fy.Switch, name: str, index: int) -> fy.P4CounterEntry:
    async for c in sw.read(fy.P4CounterEntry(name, index=index)):
        return c
    raise AssertionError(f"no {name}[{index}] read back")


def say(*words: object) -> None:
    print(*words, flush=True)


async def verify(sw: fy.Switch, config) -> str:
    # finsy itself only ever sends VERIFY_AND_COMMIT; its public P4ConfigAction enum has VERIFY,
    # but the request method that takes it is Switch's private _set_pipeline_config_request.
    try:
        await sw._set_pipeline_config_request(action=fy.P4ConfigAction.VERIFY, config=config)
        return "OK"
    except fy.P4ClientError as ex:
        return f"{ex.code.name} {ex.message}"


async def program(sw: fy.Switch, _p4info: Path) -> None:
    # The test's lab had programmed the switch before: finsy's commit must have cleared that.
    say("ENTRIES_AFTER_COMMIT", len(await read_entries(sw)))
    written = entries(sw)
    await sw.insert(written)

    # VERIFY of finsy's own config (our P4Info, an empty device config), then of a P4Info that
    # does not describe this pipeline (classifier's meta.ipv4_src narrowed from 32 to 16 bits).
    # VERIFY only checks: the entries just written must survive it (READBACK below).
    config = sw.p4info.get_pipeline_config()
    say("VERIFY", await verify(sw, config))
    table = next(t for t in config.p4info.tables if t.preamble.name == "P4netemIngress.classifier")
    next(m for m in table.match_fields if m.name == "meta.ipv4_src").bitwidth = 16
    say("VERIFY_BAD", await verify(sw, config))

    got = await read_entries(sw)
    for e in got:
        say("ENTRY", e.table_id, e.match_str(sw.p4info), "priority", e.priority,
            "action", e.action.name if e.action else None)
    same = sorted(canonical(sw, e) for e in got) == sorted(canonical(sw, e) for e in written)
    say("READBACK", len(got), "equal" if same else "different")

    try:
        await sw.insert([port_map(1, 2)])
        say("DUPLICATE accepted")
    except fy.P4ClientError as ex:
        # The batch error: UNKNOWN outside, one p4.v1.Error per update inside (finsy's `details`).
        say("DUPLICATE", ex.code.name, *(d.canonical_code.name for d in ex.details.values()))

    # MODIFY through finsy's `~` update operator and `write`, then read the one entry back.
    key = fy.Match(profile_id=PROFILE, direction=UPLINK)
    await sw.write([~fy.P4TableEntry("profile", match=key, action=impairment(sw, delay_ns=DELAY_NS))])
    async for e in sw.read(fy.P4TableEntry("profile", match=key)):
        say("MODIFIED delay_ns", e.action.args["delay_ns"])

    # A register cell: MODIFY and read back (registers and counters accept MODIFY only).
    await sw.modify([fy.P4RegisterEntry("dist_table", index=USER_DIST_CELL, data=0x1234)])
    async for r in sw.read(fy.P4RegisterEntry("dist_table", index=USER_DIST_CELL)):
        say("REGISTER dist_table", r.index, r.data)

    # Clear the counters the test looks at, so that they count only its traffic.
    await sw.modify([fy.P4CounterEntry("profile_in", index=pd_index(p, d), data=fy.P4CounterData())
                     for p, d in ((PROFILE, UPLINK), (PROFILE, DOWNLINK), (DROP_PROFILE, UPLINK))])
    say("PROGRAMMED")


async def counters(sw: fy.Switch, p4info: Path) -> None:
    # This session brought no P4Info: finsy took the switch's (GetForwardingPipelineConfig
    # P4INFO_AND_COOKIE), which must be the one `program` committed, byte for byte.
    same = sw.p4info.has_p4info(fy.P4Schema(p4info).p4info)
    say("P4INFO_FROM_SWITCH", "same" if same else "different")
    # Still the entries of `program`: reading set nothing.
    say("ENTRIES", len(await read_entries(sw)))
    for direction in (UPLINK, DOWNLINK):
        c = await counter(sw, "profile_in", pd_index(PROFILE, direction))
        say("COUNTER profile_in", c.index, "packets", c.packet_count, "bytes", c.byte_count)


async def drop(sw: fy.Switch, _p4info: Path) -> None:
    # Take the hosts' traffic out of the classifier: it falls to the default rule, which now puts
    # it in a profile that loses every packet.
    await sw.delete([classify_ipv4(1, UPLINK), classify_ipv4(2, DOWNLINK)])
    await sw.insert([fy.P4TableEntry("profile", match=fy.Match(profile_id=DROP_PROFILE, direction=UPLINK),
                                     action=impairment(sw, loss_prob=PROB_ALWAYS))])
    await sw.modify([fy.P4TableEntry("classifier", is_default_action=True,
                                     action=fy.Action("set_profile", profile_id=DROP_PROFILE,
                                                      direction=UPLINK, ue_id=0))])
    say("DEFAULT classifier", await read_default(sw, "classifier"))


async def clear(sw: fy.Switch, _p4info: Path) -> None:
    c = await counter(sw, "profile_in", pd_index(DROP_PROFILE, UPLINK))
    say("COUNTER profile_in", c.index, "packets", c.packet_count, "bytes", c.byte_count)
    # delete_all: a wildcard read of every entity type, DELETE of what came back, a MODIFY without
    # an action of every default entry (reset to the P4 program's default), a DELETE of every
    # digest config (not found ones tolerated).
    await sw.delete_all()
    say("AFTER_DELETE_ALL", len(await read_entries(sw)))
    say("DEFAULT classifier", await read_default(sw, "classifier"))
    # Forwarding again, with no profile: if the default rule still pointed at the dropping
    # profile, nothing would pass.
    await sw.insert([port_map(1, 2), port_map(2, 1)])
    say("FORWARDING")


STEPS = {"program": program, "counters": counters, "drop": drop, "clear": clear}


async def main(addr: str, device_id: str, p4info: str, step: str) -> None:
    if step == "counters":
        # An observer, as the README's first examples: no P4Info of its own.
        opts = fy.SwitchOptions(device_id=int(device_id))
    else:
        # `program` commits whatever the switch runs (p4force, as finsy's basic example); `drop`
        # and `clear` rely on the cookie check, which must find the pipeline of `program` in place
        # (a second commit would clear the entries that `drop` deletes, and its DELETE would fail).
        opts = fy.SwitchOptions(p4info=Path(p4info), p4blob=b"", p4force=step == "program",
                                device_id=int(device_id))
    async with fy.Switch("p4netem", addr, opts) as sw:
        say("PRIMARY", sw.is_primary, "P4RUNTIME", sw.p4runtime_version)
        await STEPS[step](sw, Path(p4info))


if __name__ == "__main__":
    # finsy logs to the `finsy` logger; warnings (e.g. "gNMI is not implemented": p4netem-switch
    # serves no gNMI, finsy then goes on without ports) go to stderr for the test's failure output.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(sys.argv) != 5 or sys.argv[4] not in STEPS:
        sys.exit(f"usage: {sys.argv[0]} GRPC_ADDR DEVICE_ID P4INFO_TXTPB {{{'|'.join(STEPS)}}}")
    fy.run(main(*sys.argv[1:5]))
