"""Reads the tables of docs/pipeline-contract.md into the p4info_model shape.

The document is what people implement from (the Rust target, the Python control plane), so it is
checked too: `model(text)` returns what its tables state, and `project(source_model)` cuts a full
model down to the facts the document states, so the two can be diffed.

Cell formats (as written in the document):
  keys:     "1: standard_metadata.ingress_port exact 9; 2: ..."
  actions:  "set_egress_port, send_to_cpu, @defaultonly NoAction"   (short names)
  default:  "const NoAction (why)" / "set_profile(0, 0, 0)" / "drop_packet (why)"
  params:   "1: port 9; 2: ..." ; set_impairment's come from the table with a `bits` column
  fields:   "src_addr 48, ingress_port 9" (digests) / "1: ingress_port 9; 2: _pad 7" (CPU headers)
"""
from __future__ import annotations

import re
from typing import Any


class ContractDocError(Exception):
    pass


def _int(text: str) -> int:
    text = text.strip()
    try:
        return int(text, 0)
    except ValueError:
        raise ContractDocError(f"not a number: {text!r}") from None


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Markdown tables as (header cells, rows of cells)."""
    out, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            if len(block) < 2 or not all(set(c) <= set("-: ") for c in block[1]):
                raise ContractDocError(f"malformed table starting {block[0]}")
            out.append((block[0], block[2:]))
            block = []
    return out


def _numbered(cell: str, pattern: str) -> list[re.Match]:
    items = [c.strip() for c in cell.split(";") if c.strip()]
    matches = []
    for item in items:
        m = re.fullmatch(pattern, item)
        if not m:
            raise ContractDocError(f"cannot read {item!r} (expected {pattern})")
        matches.append(m)
    return matches


def model(text: str) -> dict[str, Any]:
    # Tables are found by their columns; the Digests and CPU-header tables share theirs.
    by_header: dict[tuple[str, ...], list[list[str]]] = {}
    for header, body in _tables(text):
        key = tuple(h.split(" (")[0] for h in header)
        for r in body:
            if len(r) != len(key):
                raise ContractDocError(f"row {r} does not have the {len(key)} columns of {key}")
        by_header.setdefault(key, []).extend(body)

    def rows(*header: str) -> list[list[str]]:
        if header not in by_header:
            raise ContractDocError(f"no table with columns {header}")
        return by_header[header]

    impairment_params = [{"id": _int(r[0]), "name": r[1], "bits": _int(r[2])}
                         for r in rows("id", "name", "bits", "meaning")]

    actions: dict[str, Any] = {}
    for r in rows("id", "name", "params"):
        name, cell = r[1], r[2]
        if cell == "see below":
            params = impairment_params
        elif cell == "" or cell.startswith("("):
            params = []
        else:
            params = [{"id": int(m[1]), "name": m[2], "bits": int(m[3])}
                      for m in _numbered(cell, r"(\d+): (\w+) (\d+)")]
        actions[name] = {"id": _int(r[0]), "params": params}
    full_action = {n.split(".")[-1]: n for n in actions}

    def action_name(short: str) -> str:
        if short not in full_action:
            raise ContractDocError(f"action {short} is not in the Actions table")
        return full_action[short]

    tables: dict[str, Any] = {}
    for r in rows("id", "name", "keys", "actions", "size", "default"):
        keys = [{"id": int(m[1]), "name": m[2], "match": m[3].upper(), "bits": int(m[4])}
                for m in _numbered(r[2], r"(\d+): (\S+) (exact|ternary|lpm|range|optional) (\d+)")]
        refs = {}
        for item in (a.strip() for a in r[3].split(",")):
            scope = "TABLE_AND_DEFAULT"
            for ann, sc in (("@defaultonly ", "DEFAULT_ONLY"), ("@tableonly ", "TABLE_ONLY")):
                if item.startswith(ann):
                    item, scope = item[len(ann):], sc
            refs[action_name(item)] = scope
        m = re.match(r"(const )?(\w+)(?:\(([^)]*)\))?(?: \(.*\))?$", r[5])
        if not m:
            raise ContractDocError(f"cannot read default action {r[5]!r}")
        dname = action_name(m[2])
        values = [_int(v) for v in m[3].split(",")] if m[3] else []
        params = actions[dname]["params"]
        if len(values) != len(params):
            raise ContractDocError(f"default {r[5]!r}: {len(params)} parameters, {len(values)} values")
        tables[r[1]] = {
            "id": _int(r[0]),
            "size": _int(r[4]),
            "keys": keys,
            "actions": refs,
            "const_default": dname if m[1] else None,
            "default": {"action": dname, "args": {p["name"]: v for p, v in zip(params, values)}},
        }

    registers = {r[1]: {"id": _int(r[0]), "type": ("bit", _int(r[2])), "size": _int(r[3])}
                 for r in rows("id", "name", "width", "size", "meaning")}
    counters = {r[1]: {"id": _int(r[0]), "unit": r[2], "size": _int(r[3].split(" ")[0])}
                for r in rows("id", "name", "unit", "size")}
    digests, headers = {}, {}
    for r in rows("id", "name", "fields"):
        if r[1].startswith("packet_"):
            headers[r[1]] = {"id": _int(r[0]), "fields": [
                {"id": int(m[1]), "name": m[2], "bits": int(m[3])} for m in _numbered(r[2], r"(\d+): (\w+) (\d+)")]}
        else:
            fields = []
            for item in (f.strip() for f in r[2].split(",")):
                m = re.fullmatch(r"(\w+) (\d+)", item)
                if not m:
                    raise ContractDocError(f"cannot read digest field {item!r}")
                fields.append({"name": m[1], "type": ("bit", int(m[2]))})
            digests[r[1]] = {"id": _int(r[0]), "fields": fields}
    return {"tables": tables, "actions": actions, "registers": registers, "counters": counters,
            "digests": digests, "controller_headers": headers}


def project(full: dict[str, Any]) -> dict[str, Any]:
    """The facts of a full model that the contract document states."""
    def keep(obj: dict, fields: tuple[str, ...]) -> dict:
        return {k: obj[k] for k in fields}

    return {
        "tables": {n: keep(t, ("id", "size", "keys", "actions", "const_default", "default"))
                   for n, t in full["tables"].items()},
        "actions": {n: keep(a, ("id", "params")) for n, a in full["actions"].items()},
        "registers": {n: keep(r, ("id", "type", "size")) for n, r in full["registers"].items()},
        "counters": {n: keep(c, ("id", "unit", "size")) for n, c in full["counters"].items()},
        "digests": {n: keep(d, ("id", "fields")) for n, d in full["digests"].items()},
        "controller_headers": {n: keep(h, ("id", "fields")) for n, h in full["controller_headers"].items()},
    }
