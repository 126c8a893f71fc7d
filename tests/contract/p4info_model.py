"""A normalized, comparable view of a pipeline's control-plane API, and a diff between two.

Both sides of a contract check are reduced to this model: a P4Info message (checked-in file or the
running target's) through `from_p4info`, the P4 source through `p4source.Program.model`. The model
keeps everything a P4Runtime client depends on (names, ids, aliases, key fields and match kinds,
bit widths, sizes, action scopes, default actions, counter units, register types, digest and
controller-header layouts) and drops what is presentation only (object order, annotations other
than action scopes, documentation, byte-string padding of default-action arguments).
"""
from __future__ import annotations

from typing import Any

import p4runtime_types as pt

Model = dict[str, Any]

MATCH_TYPE = "p4.config.v1.MatchField.MatchType"
SCOPE = "p4.config.v1.ActionRef.Scope"
COUNTER_UNIT = "p4.config.v1.CounterSpec.Unit"

# Kinds of objects a v1model program without them must not list at all.
UNUSED_KINDS = ("action_profiles", "direct_counters", "meters", "direct_meters", "value_sets")


def empty_model() -> Model:
    return {
        "arch": None,
        "tables": {},
        "actions": {},
        "counters": {},
        "registers": {},
        "digests": {},
        "controller_headers": {},
        **{kind: [] for kind in UNUSED_KINDS},
        "externs": [],
    }


def _type_spec(spec) -> tuple:
    """A P4DataTypeSpec as ('bit'|'int'|'varbit', width) or ('struct', name) etc."""
    which = spec.WhichOneof("type_spec")
    if which == "bitstring":
        inner = spec.bitstring.WhichOneof("type_spec")
        return (inner, getattr(spec.bitstring, inner).bitwidth if inner == "bit" or inner == "int"
                else spec.bitstring.varbit.max_bitwidth)
    if which == "bool":
        return ("bool", 1)
    if which == "struct":
        return ("struct", spec.struct.name)
    if which == "header":
        return ("header", spec.header.name)
    return (which or "unset",)


def from_p4info(info) -> Model:
    m = empty_model()
    m["arch"] = info.pkg_info.arch
    action_names = {a.preamble.id: a.preamble.name for a in info.actions}
    params_by_action = {a.preamble.id: {p.id: p.name for p in a.params} for a in info.actions}

    def action_name(action_id: int) -> str:
        return action_names.get(action_id, f"<unknown action id {action_id}>")

    for t in info.tables:
        default = None
        if t.HasField("initial_default_action"):
            call = t.initial_default_action
            params = params_by_action.get(call.action_id, {})
            default = {
                "action": action_name(call.action_id),
                "args": {params.get(a.param_id, f"<param id {a.param_id}>"): int.from_bytes(a.value, "big")
                         for a in call.arguments},
            }
        m["tables"][t.preamble.name] = {
            "id": t.preamble.id,
            "alias": t.preamble.alias,
            "size": t.size,
            "keys": [{"id": f.id, "name": f.name, "match": pt.enum_name(MATCH_TYPE, f.match_type)
                      if f.WhichOneof("match") == "match_type" else f.other_match_type,
                      "bits": f.bitwidth} for f in t.match_fields],
            "actions": {action_name(r.id): pt.enum_name(SCOPE, r.scope) for r in t.action_refs},
            "const_default": action_name(t.const_default_action_id) if t.const_default_action_id else None,
            "default": default,
            "is_const_table": t.is_const_table,
            "implementation_id": t.implementation_id,
            "direct_resource_ids": list(t.direct_resource_ids),
        }
    for a in info.actions:
        m["actions"][a.preamble.name] = {
            "id": a.preamble.id,
            "alias": a.preamble.alias,
            "params": [{"id": p.id, "name": p.name, "bits": p.bitwidth} for p in a.params],
        }
    for c in info.counters:
        m["counters"][c.preamble.name] = {
            "id": c.preamble.id,
            "alias": c.preamble.alias,
            "unit": pt.enum_name(COUNTER_UNIT, c.spec.unit),
            "size": c.size,
            # Not presentation: the drops counter's annotation is the list of drop reasons.
            "annotations": list(c.preamble.annotations),
        }
    for r in info.registers:
        m["registers"][r.preamble.name] = {
            "id": r.preamble.id,
            "alias": r.preamble.alias,
            "type": _type_spec(r.type_spec),
            "size": r.size,
        }
    for d in info.digests:
        spec = _type_spec(d.type_spec)
        fields: Any = f"<type {spec}>"
        if spec[0] == "struct":
            if spec[1] in info.type_info.structs:
                fields = [{"name": mbr.name, "type": _type_spec(mbr.type_spec)}
                          for mbr in info.type_info.structs[spec[1]].members]
            else:
                fields = f"<struct {spec[1]} missing from type_info>"
        m["digests"][d.preamble.name] = {"id": d.preamble.id, "alias": d.preamble.alias, "fields": fields}
    for c in info.controller_packet_metadata:
        m["controller_headers"][c.preamble.name] = {
            "id": c.preamble.id,
            "alias": c.preamble.alias,
            "fields": [{"id": f.id, "name": f.name, "bits": f.bitwidth} for f in c.metadata],
        }
    for kind in UNUSED_KINDS:
        m[kind] = sorted(x.preamble.name for x in getattr(info, kind))
    m["externs"] = sorted(e.extern_type_name for e in info.externs)
    return m


def diff(left: Any, right: Any, left_name: str = "left", right_name: str = "right", path: str = "") -> list[str]:
    """Every place where two models differ, as readable lines. Empty when they agree."""
    out: list[str] = []
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            where = f"{path}[{key!r}]" if path else str(key)
            if key not in right:
                out.append(f"{where}: only in {left_name}")
            elif key not in left:
                out.append(f"{where}: only in {right_name}")
            else:
                out.extend(diff(left[key], right[key], left_name, right_name, where))
        return out
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            out.append(f"{path}: {len(left)} entries in {left_name}, {len(right)} in {right_name}: "
                       f"{left!r} vs {right!r}")
            return out
        for i, (a, b) in enumerate(zip(left, right)):
            out.extend(diff(a, b, left_name, right_name, f"{path}[{i}]"))
        return out
    if left != right:
        out.append(f"{path}: {left_name} {left!r} != {right_name} {right!r}")
    return out


def _load_text(path: str):
    from google.protobuf import text_format
    with open(path, encoding="utf-8") as f:
        return text_format.Parse(f.read(), pt.P4Info())


if __name__ == "__main__":
    # Compare two P4Info text files, e.g. the one p4c-bm2-ss just wrote and the checked-in one
    # (their object order may differ; the model does not care).
    import sys
    if len(sys.argv) != 3:
        sys.exit("usage: p4info_model.py A.p4info.txtpb B.p4info.txtpb")
    problems = diff(from_p4info(_load_text(sys.argv[1])), from_p4info(_load_text(sys.argv[2])),
                    sys.argv[1], sys.argv[2])
    print("\n".join(problems) if problems else "same control-plane API")
    sys.exit(1 if problems else 0)
