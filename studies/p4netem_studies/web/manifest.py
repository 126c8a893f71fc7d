"""The manifest of a generated page: every object's URL, host, path, size and type.

Loaders read it instead of trusting what they parse, so they know when a page is complete and can
check that each object arrived whole (size and SHA-256).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Entry:
    url: str            # as written in the HTML (absolute or protocol-relative)
    host: str
    path: str           # request target, starts with '/'
    size: int           # bytes of the identity-encoded body
    type: str           # html | image | script | stylesheet
    content_type: str
    sha256: str


@dataclass(frozen=True)
class Manifest:
    page: str
    description: str
    seed: int
    last_modified: str  # HTTP-date every file carries, so conditional GETs can be built from it
    hosts: tuple[str, ...]
    objects: tuple[Entry, ...]  # the HTML document first, then embedded objects in document order

    @property
    def root(self) -> Entry:
        return self.objects[0]

    @property
    def embedded(self) -> tuple[Entry, ...]:
        return self.objects[1:]

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.objects)

    def by_target(self) -> dict[tuple[str, str], Entry]:
        return {(e.host, e.path): e for e in self.objects}

    def to_json(self) -> dict:
        d = asdict(self)
        d["version"] = MANIFEST_VERSION
        d["hosts"] = list(self.hosts)
        d["total_bytes"] = self.total_bytes
        return d

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def from_json(cls, d: dict) -> "Manifest":
        if d.get("version") != MANIFEST_VERSION:
            raise ValueError(f"manifest version {d.get('version')!r} is not {MANIFEST_VERSION}")
        objects = tuple(Entry(**o) for o in d["objects"])
        if not objects or objects[0].type != "html":
            raise ValueError("manifest must list the HTML document first")
        return cls(d["page"], d.get("description", ""), d["seed"], d["last_modified"],
                   tuple(d["hosts"]), objects)

    @classmethod
    def load(cls, path: str | Path) -> "Manifest":
        try:
            return cls.from_json(json.loads(Path(path).read_text()))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a page manifest ({exc})") from exc
