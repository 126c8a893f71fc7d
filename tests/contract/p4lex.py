"""Preprocessing and tokenizing of P4-16 source, enough for the contract check.

Handles what p4src/ uses and a C preprocessor would do for it: comments, line continuations,
`#include "file"` (relative to the including file), `#include <core.p4>` / `<v1model.p4>` (recorded,
not read: p4source knows the declarations it needs from them), object-like `#define` / `#undef`,
`#ifdef` / `#ifndef` / `#else` / `#endif`. Anything else (function-like macros, `#if` expressions,
unknown system headers) is rejected with the file and line, so the check never silently reads a
program differently from the compiler.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_HEADERS = ("core.p4", "v1model.p4")

# P4-16 reserved words (language spec, lexical conventions); none may name a declaration.
KEYWORDS = frozenset("""
    abstract action apply bit bool const control default else entries enum error exit extern
    false for header header_union if in inout int key list match_kind out package parser
    priority return select state string struct switch table this transition true tuple type
    typedef varbit void
""".split())

PUNCT = sorted("""
    &&& ... << >> <= >= == != && || .. ++ |+| |-| +: -:
    { } ( ) [ ] ; : , . < > = + - * / % & | ^ ~ ! ? @
""".split(), key=len, reverse=True)

_INT = re.compile(r"(?:(\d+)([ws]))?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[\d_]*)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


class P4SourceError(Exception):
    """The source cannot be read the way p4c would read it."""


@dataclass(frozen=True)
class Token:
    kind: str          # "ident", "int", "string", "punct"
    text: str
    file: str
    line: int
    value: int | None = None     # ints: the value
    width: int | None = None     # ints: explicit width (8w..), if any
    signed: bool = False

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def is_(self, text: str) -> bool:
        return self.kind in ("punct", "ident") and self.text == text


def _int_value(digits: str) -> int:
    digits = digits.replace("_", "")
    if digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if digits[:2] in ("0o", "0O"):
        return int(digits[2:], 8)
    if digits[:2] in ("0d", "0D"):
        return int(digits[2:], 10)
    return int(digits, 10)


def _strip_comments(text: str, file: str) -> str:
    """Replace comments by spaces, keeping newlines (so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if not m:
                raise P4SourceError(f"{file}:{text.count(chr(10), 0, i) + 1}: unterminated string")
            out.append(m.group(0))
            i = m.end()
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise P4SourceError(f"{file}:{text.count(chr(10), 0, i) + 1}: unterminated comment")
            out.append(re.sub(r"[^\n]", " ", text[i:j + 2]))
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokenize_line(line: str, file: str, lineno: int) -> list[Token]:
    toks: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c.isspace():
            i += 1
            continue
        if c == '"':
            m = _STRING.match(line, i)
            if not m:
                raise P4SourceError(f"{file}:{lineno}: unterminated string")
            toks.append(Token("string", m.group(0)[1:-1], file, lineno))
            i = m.end()
            continue
        if c.isdigit():
            m = _INT.match(line, i)
            end = m.end()
            if end < n and (line[end].isalnum() or line[end] == "_"):
                raise P4SourceError(f"{file}:{lineno}: malformed number {line[i:end + 1]!r}")
            width = int(m.group(1)) if m.group(1) else None
            toks.append(Token("int", m.group(0), file, lineno, _int_value(m.group(3)), width,
                              m.group(2) == "s"))
            i = end
            continue
        m = _IDENT.match(line, i)
        if m:
            toks.append(Token("ident", m.group(0), file, lineno))
            i = m.end()
            continue
        for p in PUNCT:
            if line.startswith(p, i):
                toks.append(Token("punct", p, file, lineno))
                i += len(p)
                break
        else:
            raise P4SourceError(f"{file}:{lineno}: unexpected character {c!r}")
    return toks


@dataclass
class Preprocessed:
    tokens: list[Token] = field(default_factory=list)
    system_headers: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    defines: dict[str, list[Token]] = field(default_factory=dict)


class Preprocessor:
    def __init__(self, overrides: dict[str, str] | None = None, defines: dict[str, str] | None = None):
        # overrides: path (as given or resolved) -> replacement text; lets tests mutate a copy in memory.
        self.overrides = {str(Path(k).resolve()): v for k, v in (overrides or {}).items()}
        self.out = Preprocessed()
        # defines: NAME -> value, as p4c's -DNAME=value sets them before the first line.
        for name, value in (defines or {}).items():
            self.out.defines[name] = tokenize_line(str(value), "<command line>", 0)

    def _read(self, path: Path) -> str:
        key = str(path.resolve())
        if key in self.overrides:
            return self.overrides[key]
        try:
            return path.read_text(encoding="utf-8")
        except OSError as e:
            raise P4SourceError(f"cannot read {path}: {e}") from e

    def _expand(self, toks: list[Token], active: frozenset[str] = frozenset()) -> list[Token]:
        out: list[Token] = []
        for t in toks:
            body = self.out.defines.get(t.text) if t.kind == "ident" else None
            if body is not None and t.text not in active:
                # Expanded tokens report the use site, like a compiler does.
                relocated = [Token(b.kind, b.text, t.file, t.line, b.value, b.width, b.signed) for b in body]
                out.extend(self._expand(relocated, active | {t.text}))
            else:
                out.append(t)
        return out

    def run(self, path: Path) -> Preprocessed:
        self._file(path, depth=0)
        return self.out

    def _file(self, path: Path, depth: int) -> None:
        if depth > 32:
            raise P4SourceError(f"{path}: #include nested too deeply")
        self.out.files.append(path)
        text = _strip_comments(self._read(path), str(path))
        lines = text.split("\n")
        # Conditional stack: each entry is (taking, any_branch_taken).
        cond: list[tuple[bool, bool]] = []
        i = 0
        while i < len(lines):
            lineno = i + 1
            line = lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            taking = all(c[0] for c in cond)
            stripped = line.strip()
            if stripped.startswith("#"):
                self._directive(stripped[1:].strip(), path, lineno, cond, taking, depth)
                continue
            if taking and stripped:
                self.out.tokens.extend(self._expand(tokenize_line(line, str(path), lineno)))
        if cond:
            raise P4SourceError(f"{path}: unterminated #if block")

    def _directive(self, d: str, path: Path, lineno: int, cond: list, taking: bool, depth: int) -> None:
        where = f"{path}:{lineno}"
        m = re.match(r"(\w+)\s*(.*)$", d)
        if not m:
            raise P4SourceError(f"{where}: malformed directive #{d}")
        name, rest = m.group(1), m.group(2).strip()
        if name in ("ifdef", "ifndef"):
            defined = rest in self.out.defines
            go = defined if name == "ifdef" else not defined
            cond.append((go, go))
            return
        if name == "else":
            if not cond:
                raise P4SourceError(f"{where}: #else without #if")
            _, taken = cond[-1]
            cond[-1] = (not taken, True)
            return
        if name == "endif":
            if not cond:
                raise P4SourceError(f"{where}: #endif without #if")
            cond.pop()
            return
        if name in ("if", "elif"):
            raise P4SourceError(f"{where}: #{name} expressions are not supported by the contract check")
        if not taking:
            return
        if name == "define":
            dm = re.match(r"([A-Za-z_]\w*)(\(?)\s*(.*)$", rest)
            if not dm:
                raise P4SourceError(f"{where}: malformed #define")
            if dm.group(2):
                raise P4SourceError(f"{where}: function-like macro {dm.group(1)} is not supported")
            self.out.defines[dm.group(1)] = tokenize_line(dm.group(3), str(path), lineno)
        elif name == "undef":
            self.out.defines.pop(rest, None)
        elif name == "include":
            if rest.startswith("<") and rest.endswith(">"):
                header = rest[1:-1]
                if header not in SYSTEM_HEADERS:
                    raise P4SourceError(f"{where}: unknown system header <{header}>")
                if header not in self.out.system_headers:
                    self.out.system_headers.append(header)
            elif rest.startswith('"') and rest.endswith('"'):
                self._file(path.parent / rest[1:-1], depth + 1)
            else:
                raise P4SourceError(f"{where}: malformed #include {rest}")
        elif name in ("pragma", "line", "error", "warning"):
            if name == "error":
                raise P4SourceError(f"{where}: #error {rest}")
        else:
            raise P4SourceError(f"{where}: unknown directive #{name}")
