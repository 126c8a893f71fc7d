"""Bounded YAML input: every profile, rule, timeline, topology and experiment file is read here.

A YAML file can be small and still expand without bound: aliases of aliases ("billion laughs")
make a 300-byte document describe 10^9 nodes, and any code that walks the parsed value (a
validator, an error message quoting it) pays for every one of them. PyYAML's SafeLoader shares
the aliased objects, so parsing itself is cheap; the expansion is what is bounded here, on the
composed node graph, before any Python object is built:

- the text is at most MAX_BYTES (files are checked by size before they are read);
- aliases may add at most MAX_ALIAS_NODES nodes beyond the ones written out (the expanded size
  counts an aliased subtree once per use); ordinary anchors for a shared block are far below it;
- a recursive alias (a node containing itself) and nesting deeper than the parser's recursion
  allows are refused.

Errors are YamlInputError (a ValueError) carrying where (line/column, or "") and a one-line,
bounded message. Callers wrap it in their own error type.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_BYTES", "MAX_ALIAS_NODES", "YamlInputError", "SafeLoader", "load", "read_text", "load_file"]

MAX_BYTES = 16 << 20
MAX_ALIAS_NODES = 10_000


class YamlInputError(ValueError):
    def __init__(self, where: str, message: str, source: str | None = None) -> None:
        self.where = where
        self.message = message
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}{where + ': ' if where else ''}{message}")


class SafeLoader(yaml.SafeLoader):
    """SafeLoader; subclasses (duplicate-key checks) keep the bounds by going through load()."""


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(nodes written out, nodes after expanding every alias), without recursion. Raises on a
    node that contains itself."""
    distinct: set[int] = set()
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlInputError(_where(node), "a recursive alias (a node that contains itself) is not allowed")
        distinct.add(key)
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise YamlInputError(_where(child), "a recursive alias (a node that contains itself) is not allowed")
            if id(child) not in size:
                stack.append((child, False))
    return len(distinct), size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _where(node: yaml.Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def load(text: str, source: str | None = None, loader: type[yaml.SafeLoader] = SafeLoader) -> Any:
    """The single document of `text`, built with `loader` (a SafeLoader subclass), within the
    bounds above."""
    return load_with(text, source, loader)[0]


def load_with(text: str, source: str | None = None,
              loader: type[yaml.SafeLoader] = SafeLoader) -> tuple[Any, yaml.SafeLoader]:
    """load(), also returning the loader instance (for loaders that collect findings)."""
    if len(text) > MAX_BYTES:
        raise YamlInputError("", f"{len(text)} characters; at most {MAX_BYTES} are read", source)
    instance = loader(text)
    try:
        node = instance.get_single_node()
        if node is None:
            return None, instance
        written, expanded = _expanded_size(node)
        if expanded - written > MAX_ALIAS_NODES:
            raise YamlInputError("", f"aliases expand to {expanded - written} more nodes than are written out; "
                                     f"at most {MAX_ALIAS_NODES} are allowed", source)
        return instance.construct_document(node), instance
    except YamlInputError as exc:
        exc.source = exc.source or source
        raise YamlInputError(exc.where, exc.message, source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YamlInputError(where, f"not valid YAML: {_short(exc.problem)}", source) from None
    except yaml.YAMLError as exc:
        raise YamlInputError("", f"not valid YAML: {_short(exc)}", source) from None
    except RecursionError:
        raise YamlInputError("", "nested too deeply", source) from None
    except ValueError as exc:  # a value PyYAML cannot build, e.g. an integer of 5000 digits
        raise YamlInputError("", f"a value cannot be read: {_short(exc)}", source) from None
    finally:
        instance.dispose()


def read_text(path: str | os.PathLike) -> str:
    """A file's text, refusing files over MAX_BYTES before reading them. OSError and
    UnicodeDecodeError pass through for the caller to word."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise YamlInputError("", f"{size} bytes; at most {MAX_BYTES} are read", str(path))
    with path.open(encoding="utf-8") as f:
        text = f.read(MAX_BYTES + 1)  # a file that grew since stat() is still bounded
    if len(text) > MAX_BYTES:
        raise YamlInputError("", f"more than {MAX_BYTES} characters; at most {MAX_BYTES} are read", str(path))
    return text


def load_file(path: str | os.PathLike) -> Any:
    """read_text() then load(), naming the file in errors."""
    return load(read_text(path), str(path))


def _short(problem: object, limit: int = 200) -> str:
    text = " ".join(str(problem).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
