"""Name -> id resolution over a P4Info message.

Everything is resolved from the P4Info the helper is given (the one the switch runs), never from
hard-coded ids. Names may be fully qualified ("P4netemIngress.port_map") or the P4Info alias
("port_map") when that alias is unique.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import grpc
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from .errors import P4RuntimeError
from .p4info_text import parse_file
from .proto import p4info_pb2

MATCH_KINDS = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}
# Match kinds that make a table need an entry priority (P4Runtime spec: "priority" field).
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str  # exact, lpm, ternary, range, optional


@dataclass(frozen=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    params: dict[str, ParamInfo]
    params_by_id: dict[int, ParamInfo]


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    size: int
    match_fields: dict[str, MatchFieldInfo]
    match_fields_by_id: dict[int, MatchFieldInfo]
    action_ids: frozenset[int]
    const_default_action_id: int

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in PRIORITY_KINDS for f in self.match_fields.values())


@dataclass(frozen=True)
class RegisterInfo:
    id: int
    name: str
    bitwidth: int
    size: int


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    unit: str  # BYTES, PACKETS, BOTH
    size: int


@dataclass(frozen=True)
class DigestInfo:
    id: int
    name: str
    fields: tuple[tuple[str, int], ...]  # (member name, bitwidth) in order


@dataclass(frozen=True)
class ControllerHeaderInfo:
    id: int
    name: str
    metadata: dict[str, ParamInfo]
    metadata_by_id: dict[int, ParamInfo]


T = TypeVar("T")


@dataclass
class _Index(Generic[T]):
    """Objects of one kind, reachable by full name, unique alias, and id."""

    kind: str
    by_name: dict[str, T] = field(default_factory=dict)
    by_alias: dict[str, list[T]] = field(default_factory=dict)
    by_id: dict[int, T] = field(default_factory=dict)

    def add(self, obj_id: int, name: str, alias: str, obj: T) -> None:
        self.by_name[name] = obj
        self.by_id[obj_id] = obj
        for short in {alias, name.rsplit(".", 1)[-1]} - {""}:
            self.by_alias.setdefault(short, []).append(obj)

    def get(self, name: str) -> T:
        if name in self.by_name:
            return self.by_name[name]
        matches = self.by_alias.get(name, [])
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"{self.kind} name {name!r} is ambiguous; use the full name")
        known = ", ".join(sorted(self.by_name)) or "none"
        raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"no {self.kind} named {name!r} in the P4Info (known: {known})")

    def get_id(self, obj_id: int) -> T:
        try:
            return self.by_id[obj_id]
        except KeyError:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"no {self.kind} with id {obj_id:#x} in the P4Info") from None


class P4Info:
    """Read-only view of a P4Info message with lookups by name and id."""

    def __init__(self, message: p4info_pb2.P4Info):
        self.message = message
        self._tables: _Index[TableInfo] = _Index("table")
        self._actions: _Index[ActionInfo] = _Index("action")
        self._registers: _Index[RegisterInfo] = _Index("register")
        self._counters: _Index[CounterInfo] = _Index("counter")
        self._digests: _Index[DigestInfo] = _Index("digest")
        self._headers: _Index[ControllerHeaderInfo] = _Index("controller packet metadata")
        self._index()

    @classmethod
    def load(cls, path: str | Path) -> P4Info:
        """Read a P4Info file: text format (.txt, .txtpb, .pb.txt) or binary otherwise."""
        path = Path(path)
        try:
            if path.suffix in (".txt", ".txtpb", ".textproto") or path.name.endswith(".pb.txt"):
                message = parse_file(path)  # once per process (the schema reads the contract too)
            else:
                message = p4info_pb2.P4Info()
                message.ParseFromString(path.read_bytes())
        except (text_format.ParseError, DecodeError, UnicodeDecodeError) as err:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"cannot parse P4Info {path}: {err}") from err
        return cls(message)

    def _index(self) -> None:
        m = self.message
        for a in m.actions:
            params = {p.name: ParamInfo(p.id, p.name, p.bitwidth) for p in a.params}
            info = ActionInfo(a.preamble.id, a.preamble.name, params, {p.id: p for p in params.values()})
            self._actions.add(a.preamble.id, a.preamble.name, a.preamble.alias, info)
        for t in m.tables:
            fields = {
                f.name: MatchFieldInfo(f.id, f.name, f.bitwidth, MATCH_KINDS.get(f.match_type, "unspecified"))
                for f in t.match_fields
            }
            info = TableInfo(
                t.preamble.id,
                t.preamble.name,
                t.size,
                fields,
                {f.id: f for f in fields.values()},
                frozenset(ref.id for ref in t.action_refs),
                t.const_default_action_id,
            )
            self._tables.add(t.preamble.id, t.preamble.name, t.preamble.alias, info)
        for r in m.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            info_r = RegisterInfo(r.preamble.id, r.preamble.name, width, r.size)
            self._registers.add(r.preamble.id, r.preamble.name, r.preamble.alias, info_r)
        for c in m.counters:
            unit = p4info_pb2.CounterSpec.Unit.Name(c.spec.unit)
            info_c = CounterInfo(c.preamble.id, c.preamble.name, unit, c.size)
            self._counters.add(c.preamble.id, c.preamble.name, c.preamble.alias, info_c)
        for d in m.digests:
            info_d = DigestInfo(d.preamble.id, d.preamble.name, self._struct_fields(d.type_spec))
            self._digests.add(d.preamble.id, d.preamble.name, d.preamble.alias, info_d)
        for h in m.controller_packet_metadata:
            md = {x.name: ParamInfo(x.id, x.name, x.bitwidth) for x in h.metadata}
            info_h = ControllerHeaderInfo(h.preamble.id, h.preamble.name, md, {x.id: x for x in md.values()})
            self._headers.add(h.preamble.id, h.preamble.name, h.preamble.alias, info_h)

    def _struct_fields(self, type_spec: object) -> tuple[tuple[str, int], ...]:
        """(name, bitwidth) of the members of a digest's struct type (empty if not a struct of bits)."""
        struct_name = type_spec.struct.name  # type: ignore[attr-defined]
        struct = self.message.type_info.structs.get(struct_name)
        if struct is None:
            return ()
        return tuple((mem.name, mem.type_spec.bitstring.bit.bitwidth) for mem in struct.members)

    # Lookups by name (full or unique alias); each raises P4RuntimeError(NOT_FOUND) when unknown.
    def table(self, name: str) -> TableInfo:
        return self._tables.get(name)

    def action(self, name: str) -> ActionInfo:
        return self._actions.get(name)

    def register(self, name: str) -> RegisterInfo:
        return self._registers.get(name)

    def counter(self, name: str) -> CounterInfo:
        return self._counters.get(name)

    def digest(self, name: str) -> DigestInfo:
        return self._digests.get(name)

    def controller_header(self, name: str) -> ControllerHeaderInfo:
        return self._headers.get(name)

    def has_table(self, name: str) -> bool:
        """Whether the P4Info has a table of this full name (optional stages: e.g. the radio)."""
        return name in self._tables.by_name

    def has_register(self, name: str) -> bool:
        return name in self._registers.by_name

    # Lookups by id, for decoding what the switch sends back.
    def table_by_id(self, table_id: int) -> TableInfo:
        return self._tables.get_id(table_id)

    def action_by_id(self, action_id: int) -> ActionInfo:
        return self._actions.get_id(action_id)

    def register_by_id(self, register_id: int) -> RegisterInfo:
        return self._registers.get_id(register_id)

    def counter_by_id(self, counter_id: int) -> CounterInfo:
        return self._counters.get_id(counter_id)

    def digest_by_id(self, digest_id: int) -> DigestInfo:
        return self._digests.get_id(digest_id)

    def controller_header_by_id(self, header_id: int) -> ControllerHeaderInfo:
        return self._headers.get_id(header_id)

    @property
    def tables(self) -> list[TableInfo]:
        return list(self._tables.by_name.values())

    @property
    def actions(self) -> list[ActionInfo]:
        return list(self._actions.by_name.values())

    @property
    def registers(self) -> list[RegisterInfo]:
        return list(self._registers.by_name.values())

    @property
    def counters(self) -> list[CounterInfo]:
        return list(self._counters.by_name.values())

    @property
    def digests(self) -> list[DigestInfo]:
        return list(self._digests.by_name.values())
