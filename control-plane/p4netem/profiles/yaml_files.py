"""Profiles in YAML files: one profile per file, or a file with a `profiles:` list.

Loading is pure: it reads the file and returns immutable Profile objects, or raises one
ProfileError that names the file and lists every problem with its field path. Duplicate keys,
which plain YAML loaders silently resolve to the last one, are problems too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import yaml

from ..safe_yaml import SafeLoader, YamlInputError, load_with, read_text
from .errors import Problem, ProfileError
from .profile import Profile

__all__ = ["load_profile", "load_profiles", "load_profile_library", "load_profile_document", "loads_profiles",
           "dump", "dumps"]

PathLike = str | os.PathLike
Completion = Callable[[dict], Any]  # see load_profile_library


class _DuplicateKeys:
    """A loader mixin that records duplicate mapping keys instead of keeping the last one."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: list[Problem] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    line = key_node.start_mark.line + 1
                    self.duplicates.append(Problem(f"line {line}", f"duplicate key {key!r}"))
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _StrictLoader(_DuplicateKeys, SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of keeping the last one."""


# The built-in profiles (package data, known to parse) are read with libyaml's parser: the same
# documents (tests/unit/test_profiles_builtin_yaml.py), 4-8 ms for the 14 files where PyYAML's
# pure-Python parser took 29-34 ms (loaded 2-core machine), paid by every command that knows the
# profiles by name. Users' files keep the pure-Python parser, whose error messages the docs and
# tests quote.
if getattr(yaml, "__with_libyaml__", False):
    class _BuiltinLoader(_DuplicateKeys, yaml.CSafeLoader):
        """libyaml's SafeLoader that records duplicate mapping keys."""
else:
    _BuiltinLoader = _StrictLoader  # type: ignore[misc]


def _parse_yaml(text: str, source: str, loader_class: type = _StrictLoader) -> Any:
    """The document of `text`, within safe_yaml's bounds (size, alias expansion, nesting)."""
    try:
        data, loader = load_with(text, source, loader_class)
    except YamlInputError as exc:
        raise ProfileError([Problem(exc.where, exc.message)], source) from None
    if loader.duplicates:
        raise ProfileError(loader.duplicates, source)
    return data


def _documents(data: Any) -> tuple[list[tuple[str, Any]], list[Problem]]:
    """(path prefix, profile document) pairs of a file, and the problems of its outer shape."""
    if data is None:
        return [], [Problem("", "empty file; expected a profile or a `profiles:` list")]
    if isinstance(data, dict) and "profiles" in data:
        extra = sorted(str(k) for k in data if k != "profiles")
        problems = [Problem(key, "unknown top-level key next to `profiles:`") for key in extra]
        items = data["profiles"]
        if not isinstance(items, list) or not items:
            return [], problems + [Problem("profiles", "must be a non-empty list of profiles")]
        return [(f"profiles[{i}]", item) for i, item in enumerate(items)], problems
    if isinstance(data, dict):
        return [("", data)], []
    return [], [Problem("", "expected a profile mapping or a `profiles:` list, "
                            f"got {type(data).__name__}")]


def _prefixed(prefix: str, problems: Iterable[Problem]) -> list[Problem]:
    return ProfileError(list(problems)).prefixed(prefix)


def loads_profiles(text: str, source: str = "<string>") -> list[Profile]:
    """Every profile of a YAML text; ProfileError (naming `source`) lists every problem."""
    return _loads(text, source, None)[0]


def loads_builtin_profiles(text: str, source: str) -> list[Profile]:
    """loads_profiles for the built-in profile files (parsed by libyaml)."""
    return _loads(text, source, None, _BuiltinLoader)[0]


def _loads(text: str, source: str, complete: Completion | None,
           loader: type = _StrictLoader) -> tuple[list[Profile], dict[str, dict]]:
    """loads_profiles; with `complete`, see load_profile_library."""
    docs, problems = _documents(_parse_yaml(text, source, loader))
    profiles: list[Profile] = []
    partial: dict[str, dict] = {}
    first_seen: dict[str, str] = {}
    for prefix, doc in docs:
        try:
            profile = Profile.parse(doc)
        except ProfileError as exc:
            if complete is None or not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
                problems += _prefixed(prefix, exc.problems)
                continue
            try:
                complete(doc)
            except ProfileError as completed:  # the document's problems as its caller would use it
                problems += _prefixed(prefix, completed.problems)
                continue
            name = doc["name"]
            partial[name] = dict(doc)
        else:
            name = profile.name
            profiles.append(profile)
        if name in first_seen:
            problems.append(Problem(_join(prefix, "name"), f"duplicate profile name "
                                    f"{name!r} (first at {first_seen[name]})"))
        first_seen.setdefault(name, prefix or "top")
    if problems:
        raise ProfileError(problems, source)
    return profiles, partial


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _read(path: PathLike) -> str:
    try:
        return read_text(path)
    except YamlInputError as exc:
        raise ProfileError([Problem(exc.where, exc.message)], str(path)) from None
    except OSError as exc:
        raise ProfileError([Problem("", f"cannot read: {exc.strerror or exc}")], str(path)) from None
    except UnicodeDecodeError as exc:
        raise ProfileError([Problem("", f"not UTF-8 text: {exc.reason}")], str(path)) from None


def load_profiles(path: PathLike) -> list[Profile]:
    """All profiles of a file, or of every *.yaml/*.yml file of a directory (names must be
    unique across the directory)."""
    return _load(path, None)[0]


def load_profile_library(path: PathLike, complete: Completion) -> tuple[list[Profile], dict[str, dict]]:
    """load_profiles for a caller that completes profile documents before Profile.parse, as
    load_profile_document's (`p4netem trace load` sets each traced direction's `trace`, without
    which a base of a queue limit or an AQM and no rate is not a whole link): a document that is no
    whole profile alone is checked as `complete(doc)` (a ProfileError, its problems named by the
    document's place in the file) and returned as read, by name, next to the profiles."""
    return _load(path, complete)


def _load(path: PathLike, complete: Completion | None) -> tuple[list[Profile], dict[str, dict]]:
    path = Path(path)
    if not path.is_dir():
        return _loads(_read(path), str(path), complete)
    files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    profiles: list[Profile] = []
    partial: dict[str, dict] = {}
    problems: list[Problem] = []
    origin: dict[str, str] = {}
    for file in files:
        try:
            loaded, docs = _loads(_read(file), str(file), complete)
        except ProfileError as exc:
            problems += [Problem(f"{file.name}: {p.path}" if p.path else file.name, p.message)
                         for p in exc.problems]
            continue
        for name in [p.name for p in loaded] + list(docs):
            if name in origin:
                problems.append(Problem(file.name, f"duplicate profile name {name!r} "
                                        f"(also in {origin[name]})"))
            origin.setdefault(name, file.name)
        profiles += loaded
        partial.update(docs)
    if problems:
        raise ProfileError(problems, str(path))
    return profiles, partial


def load_profile(path: PathLike) -> Profile:
    """The one profile of a file (a file with several is an error: use load_profiles)."""
    profiles = load_profiles(path)
    if len(profiles) != 1:
        names = ", ".join(p.name for p in profiles)
        raise ProfileError([Problem("", f"holds {len(profiles)} profiles ({names}); "
                                        "use load_profiles")], str(path))
    return profiles[0]


def load_profile_document(path: PathLike) -> dict:
    """The one profile document of a file, read but not validated: for a caller that completes it
    before Profile.parse (`p4netem trace load` sets each traced direction's `trace`, without which
    a base of a queue limit or an AQM and no rate is not a whole link)."""
    docs, problems = _documents(_parse_yaml(_read(path), str(path)))
    if not problems and len(docs) != 1:
        problems = [Problem("", f"holds {len(docs)} profiles; give a file with one")]
    if problems:
        raise ProfileError(problems, str(path))
    return dict(docs[0][1])


def dumps(profiles: Profile | Sequence[Profile]) -> str:
    """YAML text: a single profile as a mapping, several under `profiles:`."""
    if isinstance(profiles, Profile):
        doc: Any = profiles.to_dict()
    else:
        doc = {"profiles": [p.to_dict() for p in profiles]}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False,
                          width=10**6)


def dump(profiles: Profile | Sequence[Profile], path: PathLike | None = None) -> str:
    """dumps(), also written to `path` when given; returns the text."""
    text = dumps(profiles)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
