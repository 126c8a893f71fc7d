"""Builders and decoders for P4Runtime entities (table, register, counter entries), by name.

Match values are given per key name, either as a typed match (Exact, Ternary, Lpm, Range, Optional)
or as a shorthand that the key's match kind decides:

    exact     value
    ternary   value (all bits significant) or (value, mask)
    lpm       value (full length), (value, prefix_len) or "10.0.0.0/8"
    range     value (low == high) or (low, high)
    optional  value

A key that matches everything (ternary mask 0, lpm prefix 0, full range, optional None) is left out
of the entry, as P4Runtime requires for "don't care".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from .encoding import Value, decode, encode, mask_of_prefix, to_int
from .errors import P4RuntimeError
from .p4info import ActionInfo, MatchFieldInfo, P4Info, TableInfo
from .proto import p4data_pb2, p4runtime_pb2


@dataclass(frozen=True)
class Exact:
    value: Value


@dataclass(frozen=True)
class Ternary:
    value: Value
    mask: Value


@dataclass(frozen=True)
class Lpm:
    value: Value
    prefix_len: int


@dataclass(frozen=True)
class Range:
    low: Value
    high: Value


@dataclass(frozen=True)
class Optional:
    value: Value | None


Match = Exact | Ternary | Lpm | Range | Optional
MatchSpec = Match | Value | tuple[Value, Value]


def _typed_match(field: MatchFieldInfo, spec: MatchSpec) -> Match:
    """The typed match a shorthand stands for, given the key's match kind."""
    kind = field.kind
    if isinstance(spec, (Exact, Ternary, Lpm, Range, Optional)):
        expected = {"exact": Exact, "ternary": Ternary, "lpm": Lpm, "range": Range, "optional": Optional}[kind]
        if not isinstance(spec, expected):
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"key {field.name!r} is {kind}, got a {type(spec).__name__} match",
            )
        return spec
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"key {field.name!r}: a tuple match has two items")
        first, second = spec
        if kind == "ternary":
            return Ternary(first, second)
        if kind == "range":
            return Range(first, second)
        if kind == "lpm":
            return Lpm(first, int(second))  # type: ignore[arg-type]
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"key {field.name!r} is {kind}: tuple not accepted")
    full = (1 << field.bitwidth) - 1
    if kind == "exact":
        return Exact(spec)
    if kind == "ternary":
        return Ternary(spec, full)
    if kind == "range":
        return Range(spec, spec)
    if kind == "optional":
        return Optional(spec)
    if kind == "lpm":
        if isinstance(spec, str) and "/" in spec:
            net = ipaddress.ip_network(spec, strict=False)
            return Lpm(int(net.network_address), net.prefixlen)
        return Lpm(spec, field.bitwidth)
    raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"key {field.name!r}: match kind {kind} not supported")


def _field_match(field: MatchFieldInfo, spec: MatchSpec) -> p4runtime_pb2.FieldMatch | None:
    """The FieldMatch for one key, or None when the match is a don't-care."""
    match = _typed_match(field, spec)
    width = field.bitwidth
    what = f"key {field.name!r}"
    fm = p4runtime_pb2.FieldMatch(field_id=field.id)
    if isinstance(match, Exact):
        fm.exact.value = encode(match.value, width, what)
    elif isinstance(match, Ternary):
        mask = to_int(match.mask, width, what + " mask")
        if mask == 0:
            return None
        # Bits outside the mask do not take part in the match; P4Runtime requires them to be 0.
        fm.ternary.value = encode(to_int(match.value, width, what) & mask, width, what)
        fm.ternary.mask = encode(mask, width, what + " mask")
    elif isinstance(match, Lpm):
        if match.prefix_len == 0:
            return None
        mask = mask_of_prefix(match.prefix_len, width)
        fm.lpm.value = encode(to_int(match.value, width, what) & mask, width, what)
        fm.lpm.prefix_len = match.prefix_len
    elif isinstance(match, Range):
        low, high = to_int(match.low, width, what), to_int(match.high, width, what)
        if low > high:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{what}: range low {low} > high {high}")
        if low == 0 and high == (1 << width) - 1:
            return None
        fm.range.low = encode(low, width, what)
        fm.range.high = encode(high, width, what)
    else:
        if match.value is None:
            return None
        fm.optional.value = encode(match.value, width, what)
    return fm


def build_action(p4info: P4Info, action: str, params: Mapping[str, Value] | None = None) -> p4runtime_pb2.Action:
    """An Action with every parameter of `action` set (all are required)."""
    info = p4info.action(action)
    params = dict(params or {})
    unknown = set(params) - set(info.params)
    if unknown:
        raise P4RuntimeError(
            grpc.StatusCode.NOT_FOUND,
            f"action {info.name} has no parameter {', '.join(sorted(unknown))} (has: {', '.join(info.params) or 'none'})",
        )
    missing = [name for name in info.params if name not in params]
    if missing:
        raise P4RuntimeError(
            grpc.StatusCode.INVALID_ARGUMENT, f"action {info.name}: missing parameter(s) {', '.join(missing)}"
        )
    msg = p4runtime_pb2.Action(action_id=info.id)
    for name, p in info.params.items():
        msg.params.add(param_id=p.id, value=encode(params[name], p.bitwidth, f"{info.name} param {name!r}"))
    return msg


def build_table_entry(
    p4info: P4Info,
    table: str,
    match: Mapping[str, MatchSpec] | None = None,
    action: str | None = None,
    params: Mapping[str, Value] | None = None,
    priority: int = 0,
    is_default: bool = False,
    controller_metadata: int = 0,
) -> p4runtime_pb2.TableEntry:
    """A TableEntry by names. `is_default=True` builds the table's default entry (no match, MODIFY
    it to change the default action). With `action=None` the entry has no action (for DELETE/reads).
    `controller_metadata` is an opaque 64-bit cookie the switch stores and reads back with the entry."""
    info = p4info.table(table)
    entry = p4runtime_pb2.TableEntry(table_id=info.id)
    if controller_metadata:
        if not 0 <= controller_metadata < 1 << 64:
            raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{info.name}: controller_metadata is 64 bits")
        entry.controller_metadata = controller_metadata
    if is_default:
        if match:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{info.name}: a default entry has no match")
        entry.is_default_action = True
    else:
        for name, spec in (match or {}).items():
            field = _match_field(info, name)
            fm = _field_match(field, spec)
            if fm is not None:
                entry.match.append(fm)
        # The spec wants fields in any order, but sorting makes entries comparable byte for byte.
        entry.match.sort(key=lambda f: f.field_id)
        if info.needs_priority and priority <= 0:
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT, f"{info.name} has ternary/range/optional keys: priority must be > 0"
            )
        if not info.needs_priority and priority:
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT, f"{info.name} has only exact/lpm keys: priority must be 0"
            )
        entry.priority = priority
    if action is not None:
        act = build_action(p4info, action, params)
        if act.action_id not in info.action_ids:
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT, f"action {p4info.action_by_id(act.action_id).name} is not an action of {info.name}"
            )
        entry.action.action.CopyFrom(act)
    elif params:
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{info.name}: params given without an action")
    return entry


def _match_field(info: TableInfo, name: str) -> MatchFieldInfo:
    if name in info.match_fields:
        return info.match_fields[name]
    short = [f for f in info.match_fields.values() if f.name.rsplit(".", 1)[-1] == name]
    if len(short) == 1:
        return short[0]
    raise P4RuntimeError(
        grpc.StatusCode.NOT_FOUND,
        f"table {info.name} has no key {name!r} (keys: {', '.join(info.match_fields)})",
    )


@dataclass(frozen=True)
class TableEntryView:
    """A decoded table entry: names instead of ids, ints instead of byte strings."""

    table: str
    match: dict[str, Match]
    action: str | None
    params: dict[str, int]
    priority: int
    is_default: bool
    packets: int | None = None
    bytes: int | None = None
    controller_metadata: int = 0


def decode_table_entry(p4info: P4Info, entry: p4runtime_pb2.TableEntry) -> TableEntryView:
    info = p4info.table_by_id(entry.table_id)
    match: dict[str, Match] = {}
    for fm in entry.match:
        field = info.match_fields_by_id.get(fm.field_id)
        name = field.name if field else f"#{fm.field_id}"
        which = fm.WhichOneof("field_match_type")
        if which == "exact":
            match[name] = Exact(decode(fm.exact.value))
        elif which == "ternary":
            match[name] = Ternary(decode(fm.ternary.value), decode(fm.ternary.mask))
        elif which == "lpm":
            match[name] = Lpm(decode(fm.lpm.value), fm.lpm.prefix_len)
        elif which == "range":
            match[name] = Range(decode(fm.range.low), decode(fm.range.high))
        elif which == "optional":
            match[name] = Optional(decode(fm.optional.value))
    action_name: str | None = None
    params: dict[str, int] = {}
    if entry.action.WhichOneof("type") == "action":
        ainfo: ActionInfo = p4info.action_by_id(entry.action.action.action_id)
        action_name = ainfo.name
        for p in entry.action.action.params:
            pinfo = ainfo.params_by_id.get(p.param_id)
            params[pinfo.name if pinfo else f"#{p.param_id}"] = decode(p.value)
    has_counter = entry.HasField("counter_data")
    return TableEntryView(
        table=info.name,
        match=match,
        action=action_name,
        params=params,
        priority=entry.priority,
        is_default=entry.is_default_action,
        packets=entry.counter_data.packet_count if has_counter else None,
        bytes=entry.counter_data.byte_count if has_counter else None,
        controller_metadata=entry.controller_metadata,
    )


def build_register_entry(
    p4info: P4Info, register: str, index: int | None = None, value: Value | None = None
) -> p4runtime_pb2.RegisterEntry:
    """A RegisterEntry; index None means every index (reads only), value None leaves data unset."""
    info = p4info.register(register)
    entry = p4runtime_pb2.RegisterEntry(register_id=info.id)
    if index is not None:
        _check_index(info.name, index, info.size)
        entry.index.index = index
    if value is not None:
        entry.data.CopyFrom(p4data_pb2.P4Data(bitstring=encode(value, info.bitwidth, f"register {info.name}")))
    return entry


def build_counter_entry(
    p4info: P4Info, counter: str, index: int | None = None, packets: int | None = None, byte_count: int | None = None
) -> p4runtime_pb2.CounterEntry:
    """A CounterEntry; index None means every index (reads only)."""
    info = p4info.counter(counter)
    entry = p4runtime_pb2.CounterEntry(counter_id=info.id)
    if index is not None:
        _check_index(info.name, index, info.size)
        entry.index.index = index
    if packets is not None or byte_count is not None:
        entry.data.packet_count = packets or 0
        entry.data.byte_count = byte_count or 0
    return entry


def _check_index(name: str, index: int, size: int) -> None:
    if not 0 <= index < size:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{name}: index {index} outside 0..{size - 1}")


def update(kind: str, entity: object) -> p4runtime_pb2.Update:
    """An Update of type INSERT, MODIFY or DELETE for a table/register/counter/... entry."""
    try:
        update_type = p4runtime_pb2.Update.Type.Value(kind.upper())
    except ValueError:
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown update type {kind!r}") from None
    msg = p4runtime_pb2.Update(type=update_type)
    msg.entity.CopyFrom(as_entity(entity))
    return msg


_ENTITY_FIELDS = {
    "TableEntry": "table_entry",
    "RegisterEntry": "register_entry",
    "CounterEntry": "counter_entry",
    "DirectCounterEntry": "direct_counter_entry",
    "MeterEntry": "meter_entry",
    "PacketReplicationEngineEntry": "packet_replication_engine_entry",
    "DigestEntry": "digest_entry",
    "ValueSetEntry": "value_set_entry",
    "ExternEntry": "extern_entry",
    "ActionProfileMember": "action_profile_member",
    "ActionProfileGroup": "action_profile_group",
}


def as_entity(entity: object) -> p4runtime_pb2.Entity:
    """Wrap an entry message in an Entity (an Entity is returned as is)."""
    if isinstance(entity, p4runtime_pb2.Entity):
        return entity
    name = type(entity).DESCRIPTOR.name  # type: ignore[attr-defined]
    field = _ENTITY_FIELDS.get(name)
    if field is None:
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{name} is not a P4Runtime entity")
    wrapped = p4runtime_pb2.Entity()
    getattr(wrapped, field).CopyFrom(entity)
    return wrapped
