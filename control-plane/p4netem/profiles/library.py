"""The built-in profile library: p4netem/profiles/builtin/*.yaml, shipped as package data."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from .errors import Problem, ProfileError
from .profile import Profile
from .yaml_files import loads_builtin_profiles

__all__ = ["BUILTIN_NAMES", "builtin_profiles", "builtin_profile"]

# Display order (docs, listings): cellular generations, then wired and other links.
BUILTIN_NAMES = (
    "gprs", "edge", "hspa", "hspa-plus", "lte", "lte-200ms",
    "modem-28k8", "t1", "cable-10-1", "cable-20-2", "lan", "wan-90ms",
    "geo-satellite", "wifi-lossy",
)


@lru_cache(maxsize=1)
def _load() -> tuple[Profile, ...]:
    folder = resources.files(__package__).joinpath("builtin")
    loaded: dict[str, Profile] = {}
    problems: list[Problem] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        try:
            for profile in loads_builtin_profiles(entry.read_text(encoding="utf-8"),
                                                  f"builtin/{entry.name}"):
                if profile.name in loaded:
                    problems.append(Problem(entry.name, f"duplicate name {profile.name!r}"))
                loaded[profile.name] = profile
        except ProfileError as exc:
            problems += [Problem(f"{entry.name}: {p.path}", p.message) for p in exc.problems]
    if problems:
        raise ProfileError(problems, "built-in profiles")
    order = {name: i for i, name in enumerate(BUILTIN_NAMES)}
    return tuple(sorted(loaded.values(), key=lambda p: (order.get(p.name, len(order)), p.name)))


def builtin_profiles() -> dict[str, Profile]:
    """Every built-in profile by name, in display order."""
    return {profile.name: profile for profile in _load()}


def builtin_profile(name: str) -> Profile:
    profiles = builtin_profiles()
    if name not in profiles:
        raise KeyError(f"no built-in profile {name!r}; known: {', '.join(profiles)}")
    return profiles[name]
