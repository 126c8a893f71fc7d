"""Reads the control-plane API out of a P4-16 v1model program, the way p4c's P4Runtime serializer does.

`load(path)` preprocesses (`p4lex`), parses the declarations (types, constants, controls with their
actions, tables and extern instances, the `main` package) and `Program.model()` returns the same
normalized model `p4info_model.from_p4info` makes from a P4Info, so the two can be diffed.

What it reproduces from p4c (control-plane/p4RuntimeSerializer.cpp, p4RuntimeSymbolTable.cpp,
p4RuntimeArchStandard.cpp, frontends/p4/inlining.cpp):
  - names: objects of a top-level control are `<ControlType>.<name>`; objects of a sub-control
    instance are `<parent>.<instance>.<name>`; `@name("x")` replaces the last component and a
    leading dot makes the name absolute; global actions (NoAction) keep their bare name;
  - ids: `@id(n)` gets the resource-type prefix in its top byte (a wrong prefix is an error);
    anything without `@id` gets p4c's hash id (Jenkins one-at-a-time of the name, low 24 bits,
    linear probing in name order); v1model digests never read `@id`;
  - aliases: the shortest unique dot-suffix among all symbol names;
  - key fields named by their expression text, match field / param / header field ids in order
    unless `@id` says otherwise; widths resolved through typedefs, headers, structs and v1model's
    standard_metadata_t;
  - tables that are never applied and actions no table or apply block uses are dropped, extern
    instances are kept (p4c's RemoveUnusedDeclarations); default size 1024 (v1model);
  - `default_action` gives `initial_default_action`, `const default_action` also
    `const_default_action_id`; `@defaultonly` / `@tableonly` give the action-ref scope.
It also rejects constructs p4c-bm2-ss refuses that are easy to miss by eye: a reserved word used
as a name, a table or sub-control applied from more than one place, a `digest` without an explicit
struct type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import p4info_model
from p4lex import KEYWORDS, P4SourceError, Preprocessor, Token

PREFIX = {"action": 0x01, "table": 0x02, "controller_header": 0x04, "counter": 0x12,
          "direct_counter": 0x13, "meter": 0x14, "direct_meter": 0x15, "register": 0x16, "digest": 0x17}
V1MODEL_DEFAULT_TABLE_SIZE = 1024
MATCH_KINDS = {"exact": "EXACT", "ternary": "TERNARY", "lpm": "LPM", "range": "RANGE",
               "optional": "OPTIONAL", "selector": None}
COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}

# v1model.p4's standard_metadata_t (field widths; `parser_error` is of type error).
STANDARD_METADATA = {
    "ingress_port": 9, "egress_spec": 9, "egress_port": 9, "instance_type": 32, "packet_length": 32,
    "enq_timestamp": 32, "enq_qdepth": 19, "deq_timedelta": 32, "deq_qdepth": 19,
    "ingress_global_timestamp": 48, "egress_global_timestamp": 48, "mcast_grp": 16, "egress_rid": 16,
    "checksum_error": 1, "priority": 3,
}


# --------------------------------------------------------------------------------------------
# declarations
# --------------------------------------------------------------------------------------------

@dataclass
class Annotation:
    name: str
    body: list[Token]
    where: str

    def string(self) -> str:
        if len(self.body) != 1 or self.body[0].kind != "string":
            raise P4SourceError(f"{self.where}: @{self.name} takes one string literal")
        return self.body[0].text

    def p4info(self) -> str:
        """As p4c writes it into a P4Info preamble (annotations with one string literal)."""
        return f'@{self.name}("{self.string()}")'

    def integer(self) -> int:
        if len(self.body) != 1 or self.body[0].kind != "int":
            raise P4SourceError(f"{self.where}: @{self.name} takes one integer literal")
        return self.body[0].value


class Annotated:
    annotations: list[Annotation]

    def ann(self, name: str) -> Annotation | None:
        found = [a for a in self.annotations if a.name == name]
        if len(found) > 1:
            raise P4SourceError(f"{found[1].where}: @{name} given twice")
        return found[0] if found else None


@dataclass
class TypeRef:
    name: str                       # "bit", "int", "varbit", "bool", "error", or a declared name
    width: int | None = None
    args: list["TypeRef"] = field(default_factory=list)
    where: str = ""


@dataclass
class Field_(Annotated):
    name: str
    type: TypeRef
    annotations: list[Annotation]
    where: str


@dataclass
class TypeDecl(Annotated):
    kind: str                      # header, header_union, struct, typedef, type, enum
    name: str
    fields: list[Field_]
    aliased: TypeRef | None
    annotations: list[Annotation]
    where: str


@dataclass
class Param(Annotated):
    direction: str | None
    type: TypeRef
    name: str
    annotations: list[Annotation]


@dataclass
class Action(Annotated):
    name: str
    params: list[Param]
    body: list[Token]
    annotations: list[Annotation]
    where: str
    control: "Control | None" = None


@dataclass
class KeyElement(Annotated):
    expr: list[Token]
    match: str
    annotations: list[Annotation]
    where: str


@dataclass
class ActionRef(Annotated):
    name: str
    annotations: list[Annotation]
    where: str


@dataclass
class Table(Annotated):
    name: str
    keys: list[KeyElement]
    actions: list[ActionRef]
    default: tuple[str, list[list[Token]], bool] | None      # (action, argument exprs, const)
    size: list[Token] | None
    const_entries: bool
    annotations: list[Annotation]
    where: str


@dataclass
class Instance(Annotated):
    type: TypeRef
    args: list[list[Token]]
    name: str
    annotations: list[Annotation]
    where: str


@dataclass
class Control(Annotated):
    name: str
    params: list[Param]
    actions: dict[str, Action]
    tables: dict[str, Table]
    instances: dict[str, Instance]
    apply: list[Token]
    annotations: list[Annotation]
    where: str


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------

class Parser:
    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.i = 0
        self.types: dict[str, TypeDecl] = {}
        self.constants: dict[str, int] = {}
        self.controls: dict[str, Control] = {}
        self.parsers: set[str] = set()
        self.global_actions: dict[str, Action] = {}
        self.functions: set[str] = set()
        self.main: Instance | None = None

    # -- token helpers --
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def where(self) -> str:
        t = self.peek() or (self.toks[-1] if self.toks else None)
        return t.where() if t else "<end>"

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.is_(text)

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise P4SourceError("unexpected end of program")
        self.i += 1
        return t

    def expect(self, text: str) -> Token:
        t = self.peek()
        if t is None or not t.is_(text):
            # `>>` closes two type-argument lists: split it.
            if text == ">" and t is not None and t.is_(">>"):
                self.toks[self.i] = Token("punct", ">", t.file, t.line)
                self.toks.insert(self.i + 1, Token("punct", ">", t.file, t.line))
                return self.next()
            raise P4SourceError(f"{self.where()}: expected {text!r}, found {t.text if t else 'end'!r}")
        return self.next()

    def ident(self, what: str = "identifier") -> Token:
        t = self.next()
        if t.kind != "ident":
            raise P4SourceError(f"{t.where()}: expected {what}, found {t.text!r}")
        if t.text in KEYWORDS:
            raise P4SourceError(f"{t.where()}: reserved word {t.text!r} used as {what}")
        return t

    def balanced(self, open_: str, close: str) -> list[Token]:
        """Consume `open ... close` (nested), return the inner tokens."""
        self.expect(open_)
        depth, start = 1, self.i
        while True:
            t = self.next()
            if t.is_(open_):
                depth += 1
            elif t.is_(close):
                depth -= 1
                if depth == 0:
                    return self.toks[start:self.i - 1]

    def until(self, *stops: str) -> list[Token]:
        """Tokens up to (not including) the first stop at bracket depth 0."""
        depth, start = 0, self.i
        while True:
            t = self.peek()
            if t is None:
                raise P4SourceError(f"unexpected end looking for {stops}")
            if depth == 0 and any(t.is_(s) for s in stops):
                return self.toks[start:self.i]
            if t.text in ("(", "[", "{") and t.kind == "punct":
                depth += 1
            elif t.text in (")", "]", "}") and t.kind == "punct":
                depth -= 1
            self.i += 1

    def split_args(self, toks: list[Token]) -> list[list[Token]]:
        args, cur, depth = [], [], 0
        for t in toks:
            if t.kind == "punct" and t.text in "([{":
                depth += 1
            elif t.kind == "punct" and t.text in ")]}":
                depth -= 1
            if depth == 0 and t.is_(","):
                args.append(cur)
                cur = []
            else:
                cur.append(t)
        if cur or args:
            args.append(cur)
        return args

    # -- pieces --
    def annotations(self) -> list[Annotation]:
        out = []
        while self.at("@"):
            at = self.next()
            name = self.next()
            if name.kind != "ident":
                raise P4SourceError(f"{name.where()}: annotation name expected")
            body: list[Token] = []
            if self.at("("):
                body = self.balanced("(", ")")
            elif self.at("["):
                body = self.balanced("[", "]")
            out.append(Annotation(name.text, body, at.where()))
        return out

    def type_ref(self) -> TypeRef:
        t = self.next()
        where = t.where()
        if t.text in ("bit", "int", "varbit"):
            width = None
            if self.at("<"):
                self.next()
                if self.at("("):
                    width = self.eval(self.balanced("(", ")"))
                else:
                    w = self.next()
                    if w.kind != "int":
                        raise P4SourceError(f"{w.where()}: width must be a literal or (expression)")
                    width = w.value
                self.expect(">")
            elif t.text == "bit":
                width = 1
            else:
                raise P4SourceError(f"{where}: {t.text} needs a width")
            return TypeRef(t.text, width, where=where)
        if t.text in ("bool", "error", "string", "void"):
            return TypeRef(t.text, 1 if t.text == "bool" else None, where=where)
        if t.kind != "ident" or t.text in KEYWORDS:
            raise P4SourceError(f"{where}: type expected, found {t.text!r}")
        ref = TypeRef(t.text, where=where)
        if self.at("<"):
            self.next()
            while True:
                ref.args.append(self.type_ref())
                if self.at(","):
                    self.next()
                    continue
                self.expect(">")
                break
        if self.at("["):
            raise P4SourceError(f"{where}: header stacks are not supported by the contract check")
        return ref

    def params(self) -> list[Param]:
        inner = self.balanced("(", ")")
        out = []
        for arg in self.split_args(inner):
            sub = Parser(arg)
            sub.types, sub.constants = self.types, self.constants
            anns = sub.annotations()
            direction = None
            if sub.peek() and sub.peek().text in ("in", "out", "inout"):
                direction = sub.next().text
            ty = sub.type_ref()
            name = sub.ident("parameter name")
            out.append(Param(direction, ty, name.text, anns))
        return out

    def eval(self, toks: list[Token]) -> int:
        return ConstEval(toks, self.constants).value()

    # -- top level --
    def program(self) -> None:
        while self.peek() is not None:
            self.top_decl()

    def top_decl(self) -> None:
        anns = self.annotations()
        t = self.peek()
        where = t.where()
        if t.is_(";"):
            self.next()
        elif t.is_("const"):
            self.next()
            self.type_ref()
            name = self.ident("constant name")
            self.expect("=")
            self.constants[name.text] = self.eval(self.until(";"))
            self.expect(";")
        elif t.is_("typedef") or t.is_("type"):
            self.next()
            aliased = self.type_ref()
            name = self.ident("type name")
            self.expect(";")
            self.types[name.text] = TypeDecl("typedef" if t.text == "typedef" else "type", name.text,
                                             [], aliased, anns, where)
        elif t.text in ("header", "struct", "header_union"):
            self.next()
            name = self.ident(f"{t.text} name")
            fields = []
            body = Parser(self.balanced("{", "}"))
            body.types, body.constants = self.types, self.constants
            while body.peek() is not None:
                fanns = body.annotations()
                fty = body.type_ref()
                fname = body.ident("field name")
                body.expect(";")
                fields.append(Field_(fname.text, fty, fanns, fname.where()))
            self.types[name.text] = TypeDecl(t.text, name.text, fields, None, anns, where)
        elif t.is_("enum"):
            self.next()
            if self.at("bit") or self.at("int"):
                self.type_ref()
            name = self.ident("enum name")
            self.balanced("{", "}")
            self.types[name.text] = TypeDecl("enum", name.text, [], None, anns, where)
        elif t.is_("error") or t.is_("match_kind"):
            self.next()
            self.balanced("{", "}")
        elif t.is_("extern"):
            self.next()
            self.until("{", ";")
            if self.at("{"):
                self.balanced("{", "}")
            else:
                self.expect(";")
        elif t.is_("package"):
            self.next()
            self.until(";")
            self.expect(";")
        elif t.is_("parser"):
            self.next()
            name = self.ident("parser name")
            self.until("{", ";")
            if self.at("{"):
                self.balanced("{", "}")
                self.parsers.add(name.text)
            else:
                self.expect(";")
        elif t.is_("control"):
            self.control(anns)
        elif t.is_("action"):
            act = self.action(anns)
            self.global_actions[act.name] = act
        else:
            # Function, instantiation (main) or variable.
            ty = self.type_ref()
            if self.at("("):
                args = self.split_args(self.balanced("(", ")"))
                name = self.ident("instance name")
                self.expect(";")
                inst = Instance(ty, args, name.text, anns, where)
                if name.text == "main":
                    self.main = inst
                return
            name = self.ident("declaration name")
            if self.at("("):
                self.balanced("(", ")")
                self.balanced("{", "}")
                self.functions.add(name.text)
            else:
                raise P4SourceError(f"{where}: unexpected top-level declaration {name.text}")

    def action(self, anns: list[Annotation]) -> Action:
        self.expect("action")
        name = self.ident("action name")
        params = self.params()
        body = self.balanced("{", "}")
        return Action(name.text, params, body, anns, name.where())

    def control(self, anns: list[Annotation]) -> None:
        self.expect("control")
        name = self.ident("control name")
        if self.at("<"):
            self.until("(")
        params = self.params()
        if self.at("("):
            ctor = self.params()
            if ctor:
                raise P4SourceError(f"{name.where()}: control constructor parameters are not supported")
        if self.at(";"):
            self.next()
            return
        body = Parser(self.balanced("{", "}"))
        body.types, body.constants = self.types, self.constants
        ctl = Control(name.text, params, {}, {}, {}, [], anns, name.where())
        while body.peek() is not None:
            lanns = body.annotations()
            t = body.peek()
            if t.is_("apply"):
                body.next()
                ctl.apply = body.balanced("{", "}")
            elif t.is_("action"):
                act = body.action(lanns)
                act.control = ctl
                body.unique(ctl, act.name, act.where)
                ctl.actions[act.name] = act
            elif t.is_("table"):
                tbl = body.table(lanns)
                body.unique(ctl, tbl.name, tbl.where)
                ctl.tables[tbl.name] = tbl
            elif t.is_("const"):
                body.next()
                body.type_ref()
                cname = body.ident("constant name")
                body.expect("=")
                self.constants[cname.text] = body.eval(body.until(";"))
                body.expect(";")
            else:
                where = t.where()
                ty = body.type_ref()
                if body.at("("):
                    args = body.split_args(body.balanced("(", ")"))
                    iname = body.ident("instance name")
                    body.expect(";")
                    body.unique(ctl, iname.text, where)
                    ctl.instances[iname.text] = Instance(ty, args, iname.text, lanns, where)
                else:
                    body.ident("variable name")
                    body.until(";")
                    body.expect(";")
        if self.at(";"):
            raise P4SourceError(f"{self.where()}: stray ';' after control {name.text}")
        self.controls[name.text] = ctl

    @staticmethod
    def unique(ctl: Control, name: str, where: str) -> None:
        if name in ctl.actions or name in ctl.tables or name in ctl.instances:
            raise P4SourceError(f"{where}: {name} declared twice in control {ctl.name}")

    def table(self, anns: list[Annotation]) -> Table:
        self.expect("table")
        name = self.ident("table name")
        body = Parser(self.balanced("{", "}"))
        body.types, body.constants = self.types, self.constants
        tbl = Table(name.text, [], [], None, None, False, anns, name.where())
        seen: set[str] = set()
        while body.peek() is not None:
            body.annotations()
            const = False
            if body.at("const"):
                body.next()
                const = True
            prop = body.next()
            if prop.kind != "ident":
                raise P4SourceError(f"{prop.where()}: table property expected")
            if prop.text in seen:
                raise P4SourceError(f"{prop.where()}: table {name.text} sets {prop.text} twice")
            seen.add(prop.text)
            body.expect("=")
            if prop.text == "key":
                keys = Parser(body.balanced("{", "}"))
                while keys.peek() is not None:
                    expr = keys.until(":")
                    keys.expect(":")
                    kind = keys.ident("match kind")
                    kanns = keys.annotations()
                    keys.expect(";")
                    if kind.text not in MATCH_KINDS:
                        raise P4SourceError(f"{kind.where()}: unknown match kind {kind.text}")
                    tbl.keys.append(KeyElement(expr, kind.text, kanns, kind.where()))
            elif prop.text == "actions":
                acts = Parser(body.balanced("{", "}"))
                while acts.peek() is not None:
                    aanns = acts.annotations()
                    aname = acts.ident("action name")
                    if acts.at("("):
                        if acts.balanced("(", ")"):
                            raise P4SourceError(f"{aname.where()}: action list entries take no arguments")
                    acts.expect(";")
                    tbl.actions.append(ActionRef(aname.text, aanns, aname.where()))
            elif prop.text == "default_action":
                aname = body.ident("action name")
                args: list[list[Token]] = []
                if body.at("("):
                    args = body.split_args(body.balanced("(", ")"))
                body.expect(";")
                tbl.default = (aname.text, args, const)
            elif prop.text == "size":
                tbl.size = body.until(";")
                body.expect(";")
            elif prop.text == "entries":
                body.balanced("{", "}")
                tbl.const_entries = const
                if body.at(";"):
                    body.next()
            else:
                body.until(";")
                body.expect(";")
        return tbl


class ConstEval:
    """Compile-time integer expressions: literals, constants, ( ), unary - ~, binary ops."""

    BINARY = [("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%")]

    def __init__(self, toks: list[Token], constants: dict[str, int]):
        self.toks, self.i, self.constants = toks, 0, constants
        self.where = toks[0].where() if toks else "<empty expression>"

    def value(self) -> int:
        if not self.toks:
            raise P4SourceError(f"{self.where}: empty expression")
        v = self.binary(0)
        if self.i != len(self.toks):
            raise P4SourceError(f"{self.toks[self.i].where()}: not a constant expression near {self.toks[self.i].text!r}")
        return v

    def binary(self, level: int) -> int:
        if level == len(self.BINARY):
            return self.unary()
        v = self.binary(level + 1)
        while self.i < len(self.toks) and self.toks[self.i].kind == "punct" and self.toks[self.i].text in self.BINARY[level]:
            op = self.toks[self.i].text
            self.i += 1
            r = self.binary(level + 1)
            v = {"|": v | r, "^": v ^ r, "&": v & r, "<<": v << r, ">>": v >> r, "+": v + r, "-": v - r,
                 "*": v * r, "/": v // r if r else self.fail("division by zero"), "%": v % r if r else self.fail("modulo by zero")}[op]
        return v

    def fail(self, msg: str) -> int:
        raise P4SourceError(f"{self.where}: {msg}")

    def unary(self) -> int:
        if self.i >= len(self.toks):
            self.fail("expression ends early")
        t = self.toks[self.i]
        self.i += 1
        if t.is_("-"):
            return -self.unary()
        if t.is_("~"):
            return ~self.unary()
        if t.is_("("):
            v = self.binary(0)
            if self.i >= len(self.toks) or not self.toks[self.i].is_(")"):
                self.fail("missing ')'")
            self.i += 1
            return v
        if t.kind == "int":
            return t.value
        if t.kind == "ident" and t.text in self.constants:
            return self.constants[t.text]
        raise P4SourceError(f"{t.where()}: {t.text!r} is not a compile-time constant")


# --------------------------------------------------------------------------------------------
# p4c rules: names, ids, aliases
# --------------------------------------------------------------------------------------------

def jenkins_one_at_a_time(name: str) -> int:
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def shortest_unique_suffix(name: str, all_names: set[str]) -> str:
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        suffix = ".".join(parts[-n:])
        holders = [o for o in all_names if o == suffix or o.endswith("." + suffix)]
        if len(holders) < 2:
            return suffix
    return name


@dataclass
class Symbol:
    kind: str
    name: str
    user_id: int | None
    where: str


class SymbolTable:
    def __init__(self):
        self.symbols: dict[tuple[str, str], Symbol] = {}

    def add(self, kind: str, name: str, user_id: int | None, where: str) -> None:
        key = (kind, name)
        if key in self.symbols:
            return  # p4c: a duplicate of the same kind and name is the same object
        if user_id is not None:
            prefix = PREFIX[kind] << 24
            if user_id >> 24 not in (0, PREFIX[kind]):
                raise P4SourceError(f"{where}: @id {user_id:#x} has the wrong 8-bit prefix for a {kind}")
            user_id |= prefix
        self.symbols[key] = Symbol(kind, name, user_id, where)

    def assign(self) -> dict[tuple[str, str], int]:
        ids: dict[tuple[str, str], int] = {}
        taken: dict[int, str] = {}
        for key, sym in self.symbols.items():
            if sym.user_id is not None:
                if sym.user_id in taken:
                    raise P4SourceError(f"{sym.where}: @id {sym.user_id:#x} is assigned to multiple declarations "
                                        f"({taken[sym.user_id]} and {sym.name})")
                taken[sym.user_id] = sym.name
                ids[key] = sym.user_id
        for kind in sorted({k for k, _ in self.symbols}):
            for name in sorted(n for k, n in self.symbols if k == kind and (k, n) not in ids):
                base = jenkins_one_at_a_time(name)
                probe = base
                while True:
                    candidate = (PREFIX[kind] << 24) | (probe & 0xFFFFFF)
                    if candidate not in taken:
                        break
                    probe = (probe + 1) & 0xFFFFFFFF
                    if probe == base:
                        raise P4SourceError(f"no id left for {name}")
                taken[candidate] = name
                ids[(kind, name)] = candidate
        return ids

    def names(self) -> set[str]:
        return {n for _, n in self.symbols}


# --------------------------------------------------------------------------------------------
# the program
# --------------------------------------------------------------------------------------------

NOACTION = Action("NoAction", [], [], [Annotation("noWarn", [], "core.p4")], "core.p4")


@dataclass
class PlacedControl:
    """A control as instantiated: its declaration and the name prefix of its objects."""
    control: Control
    prefix: str


class Program:
    def __init__(self, parser: Parser, system_headers: list[str], defines: dict | None = None):
        self.p = parser
        self.system_headers = system_headers
        self.defines = defines or {}
        if "core.p4" not in system_headers:
            raise P4SourceError("the program does not include <core.p4>")
        self.p.global_actions.setdefault("NoAction", NOACTION)

    # -- types --
    def resolve(self, ref: TypeRef) -> TypeRef | TypeDecl:
        seen = set()
        while ref.name in self.p.types and self.p.types[ref.name].kind in ("typedef", "type"):
            if ref.name in seen:
                raise P4SourceError(f"{ref.where}: typedef cycle at {ref.name}")
            seen.add(ref.name)
            ref = self.p.types[ref.name].aliased
        if ref.name in ("bit", "int", "varbit", "bool", "error", "string"):
            return ref
        if ref.name == "standard_metadata_t":
            return ref
        decl = self.p.types.get(ref.name)
        if decl is None:
            raise P4SourceError(f"{ref.where}: unknown type {ref.name}")
        return decl

    def bits(self, ref: TypeRef) -> tuple[str, int]:
        r = self.resolve(ref)
        if isinstance(r, TypeRef) and r.name in ("bit", "int", "bool"):
            return ("bool" if r.name == "bool" else r.name, r.width)
        raise P4SourceError(f"{ref.where}: {ref.name} is not a bit<W>/int<W>/bool type")

    def path_type(self, ref: TypeRef, members: list[Token]) -> TypeRef:
        """Type of `x.m1.m2...` where x has type ref."""
        for m in members:
            r = self.resolve(ref)
            if isinstance(r, TypeRef) and r.name == "standard_metadata_t":
                if m.text not in STANDARD_METADATA:
                    raise P4SourceError(f"{m.where()}: standard_metadata_t has no field {m.text}")
                ref = TypeRef("bit", STANDARD_METADATA[m.text], where=m.where())
                continue
            if not isinstance(r, TypeDecl) or r.kind not in ("header", "struct", "header_union"):
                raise P4SourceError(f"{m.where()}: .{m.text} applied to non-struct type {ref.name}")
            fld = next((f for f in r.fields if f.name == m.text), None)
            if fld is None:
                raise P4SourceError(f"{m.where()}: {r.name} has no field {m.text}")
            ref = fld.type
        return ref

    # -- keys --
    def key_field(self, ctl: Control, key: KeyElement) -> tuple[str, int]:
        toks = key.expr
        if not toks:
            raise P4SourceError(f"{key.where}: empty key expression")
        cast: TypeRef | None = None
        if toks[0].is_("("):
            sub = Parser(toks)
            sub.types, sub.constants = self.p.types, self.p.constants
            sub.next()
            cast = sub.type_ref()
            sub.expect(")")
            toks = toks[sub.i:]
        # path ( . ident )* ( [hi:lo] | .isValid() )?
        if not toks or toks[0].kind != "ident":
            raise P4SourceError(f"{key.where}: unsupported key expression")
        root = next((p for p in ctl.params if p.name == toks[0].text), None)
        if root is None:
            raise P4SourceError(f"{toks[0].where()}: key root {toks[0].text} is not a parameter of {ctl.name}")
        members: list[Token] = []
        j = 1
        while j + 1 < len(toks) and toks[j].is_(".") and toks[j + 1].kind == "ident":
            if toks[j + 1].text == "isValid":
                break
            members.append(toks[j + 1])
            j += 2
        rest = toks[j:]
        if rest and rest[0].is_(".") and len(rest) == 4 and rest[1].text == "isValid" and rest[2].is_("(") and rest[3].is_(")"):
            width = 1
        elif rest and rest[0].is_("["):
            if len(rest) != 5 or not rest[2].is_(":") or not rest[4].is_("]"):
                raise P4SourceError(f"{rest[0].where()}: unsupported slice in key")
            hi, lo = ConstEval([rest[1]], self.p.constants).value(), ConstEval([rest[3]], self.p.constants).value()
            width = hi - lo + 1
        elif rest:
            raise P4SourceError(f"{rest[0].where()}: unsupported key expression")
        else:
            width = self.bits(self.path_type(root.type, members))[1]
        if cast is not None:
            width = self.bits(cast)[1]
        text = "".join(t.text for t in key.expr)
        name_ann = key.ann("name")
        return (name_ann.string() if name_ann else text, width)

    # -- naming --
    @staticmethod
    def cp_name(obj: Annotated, ident: str, prefix: str) -> str:
        ann = obj.ann("name")
        name = ann.string() if ann else ident
        if name.startswith("."):
            return name[1:]
        return f"{prefix}.{name}" if prefix else name

    def top_controls(self) -> list[PlacedControl]:
        main = self.p.main
        if main is None:
            raise P4SourceError("no `main` package instantiation")
        out = []
        for arg in main.args:
            if len(arg) >= 3 and arg[0].kind == "ident" and arg[1].is_("(") and arg[-1].is_(")"):
                name = arg[0].text
                if name in self.p.controls:
                    out.append(PlacedControl(self.p.controls[name], name))
                elif name not in self.p.parsers:
                    raise P4SourceError(f"{arg[0].where()}: {name} is neither a control nor a parser")
            else:
                raise P4SourceError(f"{main.where}: main arguments must be constructor calls")
        return out

    @staticmethod
    def applied(body: list[Token], name: str) -> int:
        return sum(1 for k in range(len(body) - 3)
                   if body[k].kind == "ident" and body[k].text == name and body[k + 1].is_(".")
                   and body[k + 2].text == "apply" and body[k + 3].is_("("))

    def placed(self) -> list[PlacedControl]:
        """Every control as instantiated, top-level ones and applied sub-control instances."""
        out: list[PlacedControl] = []

        def walk(pc: PlacedControl, depth: int) -> None:
            if depth > 16:
                raise P4SourceError(f"{pc.control.where}: control nesting too deep")
            out.append(pc)
            for inst in pc.control.instances.values():
                if inst.type.name in self.p.controls:
                    uses = self.applied(pc.control.apply, inst.name)
                    if uses > 1:
                        raise P4SourceError(f"{inst.where}: control instance {inst.name} is applied from {uses} "
                                            "places; p4c supports one invocation per instance")
                    if uses == 1:
                        walk(PlacedControl(self.p.controls[inst.type.name],
                                           self.cp_name(inst, inst.name, pc.prefix)), depth + 1)
        for top in self.top_controls():
            walk(top, 0)
        return out

    def find_action(self, ctl: Control, name: str, where: str) -> tuple[Action, str | None]:
        if name in ctl.actions:
            return ctl.actions[name], None
        if name in self.p.global_actions:
            return self.p.global_actions[name], ""
        raise P4SourceError(f"{where}: unknown action {name}")

    # -- digests --
    @staticmethod
    def digest_types(body: list[Token]) -> list[tuple[str, str]]:
        out = []
        for k, t in enumerate(body):
            if t.kind == "ident" and t.text == "digest" and k + 1 < len(body):
                if not body[k + 1].is_("<"):
                    raise P4SourceError(f"{t.where()}: digest without an explicit struct type argument "
                                        "(the P4Info digest name comes from it)")
                if k + 3 >= len(body) or body[k + 2].kind != "ident" or not body[k + 3].is_(">"):
                    raise P4SourceError(f"{t.where()}: digest type argument must be a named struct")
                out.append((body[k + 2].text, t.where()))
        return out

    # -- the model --
    def model(self) -> dict[str, Any]:
        m = p4info_model.empty_model()
        m["arch"] = "v1model" if "v1model.p4" in self.system_headers and self.p.main and \
            self.p.main.type.name == "V1Switch" else None
        symbols = SymbolTable()
        tables: list[tuple[str, Table, Control, str]] = []
        actions: dict[str, tuple[Action, str]] = {}
        counters: list[tuple[str, Instance]] = []
        registers: list[tuple[str, Instance]] = []
        digests: dict[str, str] = {}

        def use_action(act: Action, prefix: str | None, ctl_prefix: str) -> str:
            name = self.cp_name(act, act.name, ctl_prefix if prefix is None else prefix)
            if name in actions and actions[name][0] is not act and actions[name][0].params != act.params:
                raise P4SourceError(f"{act.where}: two different actions are both named {name}")
            actions[name] = (act, name)
            symbols.add("action", name, self.user_id(act), act.where)
            for struct, where in self.digest_types(act.body):
                digests[struct] = where
            return name

        for pc in self.placed():
            ctl = pc.control
            for tbl in ctl.tables.values():
                uses = self.applied(ctl.apply, tbl.name)
                if uses > 1:
                    raise P4SourceError(f"{tbl.where}: table {tbl.name} is applied from {uses} places; "
                                        "p4c-bm2-ss requires a single call site")
                if uses == 0:
                    continue    # p4c removes tables that are never applied
                name = self.cp_name(tbl, tbl.name, pc.prefix)
                symbols.add("table", name, self.user_id(tbl), tbl.where)
                tables.append((name, tbl, ctl, pc.prefix))
            for act in ctl.actions.values():
                # Actions called directly from the apply block are kept (and exposed) by p4c too.
                if any(t.kind == "ident" and t.text == act.name and k + 1 < len(ctl.apply) and ctl.apply[k + 1].is_("(")
                       for k, t in enumerate(ctl.apply)):
                    use_action(act, None, pc.prefix)
            for inst in ctl.instances.values():
                kind = inst.type.name
                if kind in self.p.controls:
                    continue
                name = self.cp_name(inst, inst.name, pc.prefix)
                if kind == "counter":
                    symbols.add("counter", name, self.user_id(inst), inst.where)
                    counters.append((name, inst))
                elif kind == "register":
                    symbols.add("register", name, self.user_id(inst), inst.where)
                    registers.append((name, inst))
                elif kind in ("direct_counter", "meter", "direct_meter", "action_profile", "action_selector"):
                    raise P4SourceError(f"{inst.where}: {kind} instances are not modelled by the contract check")
                else:
                    raise P4SourceError(f"{inst.where}: unknown extern or control type {kind}")
            for struct, where in self.digest_types(ctl.apply):
                digests[struct] = where

        table_refs: dict[str, list[tuple[str, str]]] = {}
        table_defaults: dict[str, tuple[str, Action, list[list[Token]], bool] | None] = {}
        for name, tbl, ctl, prefix in tables:
            refs = []
            for ref in tbl.actions:
                act, pfx = self.find_action(ctl, ref.name, ref.where)
                aname = use_action(act, pfx, prefix)
                only_t, only_d = ref.ann("tableonly"), ref.ann("defaultonly")
                if only_t and only_d:
                    raise P4SourceError(f"{ref.where}: action {ref.name} is both @tableonly and @defaultonly")
                refs.append((aname, "TABLE_ONLY" if only_t else "DEFAULT_ONLY" if only_d else "TABLE_AND_DEFAULT"))
            table_refs[name] = refs
            if tbl.default is not None:
                dname, dargs, const = tbl.default
                if dname not in [r.name for r in tbl.actions]:
                    raise P4SourceError(f"{tbl.where}: default action {dname} is not in the actions list")
                act, pfx = self.find_action(ctl, dname, tbl.where)
                if only := next((r for r in tbl.actions if r.name == dname and r.ann("tableonly")), None):
                    raise P4SourceError(f"{only.where}: @tableonly action {dname} used as default action")
                table_defaults[name] = (use_action(act, pfx, prefix), act, dargs, const)
            else:
                table_defaults[name] = None

        for struct, where in digests.items():
            decl = self.p.types.get(struct)
            if decl is None or decl.kind != "struct":
                raise P4SourceError(f"{where}: digest type {struct} is not a struct")
            # v1model digests are named by the struct; p4c gives them no way to carry an @id.
            symbols.add("digest", self.cp_name(decl, struct, ""), None, where)

        ctrl_headers = [d for d in self.p.types.values() if d.kind == "header" and d.ann("controller_header")]
        for d in ctrl_headers:
            symbols.add("controller_header", self.cp_name(d, d.name, ""), self.user_id(d), d.where)

        ids = symbols.assign()
        all_names = symbols.names()

        def alias(name: str) -> str:
            return shortest_unique_suffix(name, all_names)

        for name, tbl, ctl, prefix in tables:
            default = table_defaults[name]
            keys = []
            key_ids = self.field_ids(tbl.keys, [k.where for k in tbl.keys])
            for kid, key in zip(key_ids, tbl.keys):
                kind = MATCH_KINDS[key.match]
                if kind is None:
                    continue    # selector keys are not part of P4Info
                kname, bits = self.key_field(ctl, key)
                keys.append({"id": kid, "name": kname, "match": kind, "bits": bits})
            entry: dict[str, Any] = {
                "id": ids[("table", name)],
                "alias": alias(name),
                "size": ConstEval(tbl.size, self.p.constants).value() if tbl.size else V1MODEL_DEFAULT_TABLE_SIZE,
                "keys": keys,
                "actions": dict(table_refs[name]),
                "const_default": None,
                "default": None,
                "is_const_table": tbl.const_entries,
                "implementation_id": 0,
                "direct_resource_ids": [],
            }
            if default is not None:
                dname, act, dargs, const = default
                if len(dargs) != len(act.params):
                    raise P4SourceError(f"{tbl.where}: default action {act.name} takes {len(act.params)} "
                                        f"arguments, {len(dargs)} given")
                args = {}
                for prm, expr in zip(act.params, dargs):
                    value = ConstEval(expr, self.p.constants).value()
                    kind, bits = self.bits(prm.type)
                    if kind != "int" and not 0 <= value < (1 << bits):
                        raise P4SourceError(f"{tbl.where}: default argument {value} does not fit {prm.name} ({bits} bits)")
                    args[self.local_name(prm, prm.name)] = value % (1 << bits)
                entry["default"] = {"action": dname, "args": args}
                entry["const_default"] = dname if const else None
            m["tables"][name] = entry

        for name, (act, _) in actions.items():
            pids = self.field_ids(act.params, [act.where] * len(act.params))
            m["actions"][name] = {
                "id": ids[("action", name)],
                "alias": alias(name),
                "params": [{"id": pid, "name": self.local_name(prm, prm.name), "bits": self.bits(prm.type)[1]}
                           for pid, prm in zip(pids, act.params)],
            }

        for name, inst in counters:
            if len(inst.args) != 2:
                raise P4SourceError(f"{inst.where}: counter(size, CounterType.x) takes two arguments")
            unit = inst.args[1]
            if len(unit) != 3 or unit[0].text != "CounterType" or not unit[1].is_(".") or unit[2].text not in COUNTER_UNITS:
                raise P4SourceError(f"{inst.where}: counter type must be CounterType.packets|bytes|packets_and_bytes")
            m["counters"][name] = {"id": ids[("counter", name)], "alias": alias(name),
                                   "unit": COUNTER_UNITS[unit[2].text],
                                   "size": ConstEval(inst.args[0], self.p.constants).value(),
                                   "annotations": [a.p4info() for a in inst.annotations
                                                   if a.name not in ("id", "name")]}

        for name, inst in registers:
            if len(inst.type.args) not in (1, 2) or len(inst.args) != 1:
                raise P4SourceError(f"{inst.where}: register<T>(size) expected")
            m["registers"][name] = {"id": ids[("register", name)], "alias": alias(name),
                                    "type": self.bits(inst.type.args[0]),
                                    "size": ConstEval(inst.args[0], self.p.constants).value()}

        for struct in digests:
            decl = self.p.types[struct]
            name = self.cp_name(decl, struct, "")
            fields = []
            for f in decl.fields:
                fields.append({"name": self.local_name(f, f.name), "type": self.bits(f.type)})
            m["digests"][name] = {"id": ids[("digest", name)], "alias": alias(name), "fields": fields}

        for d in ctrl_headers:
            sym = self.cp_name(d, d.name, "")
            pname = d.ann("controller_header").string()
            fids = self.field_ids(d.fields, [f.where for f in d.fields])
            m["controller_headers"][pname] = {
                "id": ids[("controller_header", sym)],
                "alias": pname,
                "fields": [{"id": fid, "name": self.local_name(f, f.name), "bits": self.bits(f.type)[1]}
                           for fid, f in zip(fids, d.fields)],
            }
        return m

    @staticmethod
    def local_name(obj: Annotated, ident: str) -> str:
        """Control-plane name of a parameter or field: its @name, else its identifier."""
        ann = obj.ann("name")
        return ann.string() if ann else ident

    @staticmethod
    def user_id(obj: Annotated) -> int | None:
        ann = obj.ann("id")
        return ann.integer() if ann else None

    @staticmethod
    def field_ids(items: list[Annotated], wheres: list[str]) -> list[int]:
        """p4c's FieldIdAllocator: @id where given, else 1, 2, ... skipping ids already taken."""
        given = [Program.user_id(x) for x in items]
        taken: set[int] = set()
        for gid, where in zip(given, wheres):
            if gid is None:
                continue
            if gid == 0:
                raise P4SourceError(f"{where}: 0 is not a valid @id value")
            if gid in taken:
                raise P4SourceError(f"{where}: @id {gid} is used multiple times")
            taken.add(gid)
        out, index = [], 1
        for gid in given:
            if gid is not None:
                out.append(gid)
                index += 1
                continue
            while index in taken:
                index += 1
            out.append(index)
            taken.add(index)
        return out


def load(path: str | Path, overrides: dict[str, str] | None = None, defines: dict[str, str] | None = None) -> Program:
    """Read the program at `path`. `overrides` maps file paths to replacement source text;
    `defines` are command-line defines (p4c -DNAME=value)."""
    pre = Preprocessor(overrides, defines).run(Path(path))
    parser = Parser(pre.tokens)
    parser.program()
    return Program(parser, pre.system_headers, pre.defines)
