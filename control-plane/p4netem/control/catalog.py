"""The profiles a controller knows by name (the built-ins, those added, those read from files),
and how a profile read back from the switch is compared with the named one it came from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..profiles import Profile, ProfileError, builtin_profiles, load_profile
from ..profiles.errors import Problem
from .tag import name_crc

__all__ = ["ProfileCatalog", "resolve_profile", "profile_differences"]


class ProfileCatalog:
    """Name -> Profile, starting with the built-ins."""

    def __init__(self, profiles: Iterable[Profile] = ()):
        self._known: dict[str, Profile] = dict(builtin_profiles())
        for profile in profiles:
            self.add(profile)

    def add(self, profile: Profile) -> None:
        """Make a profile known by name (to apply it by name and to show it by name). Raises
        ProfileError when it is not valid (one made with model_copy(update=...) is checked here)."""
        if not isinstance(profile, Profile):
            raise ProfileError([Problem("", f"{type(profile).__name__} {profile!r:.80} is not a Profile "
                                        "(Profile.parse({...}) or load_profile(path) make one)")])
        profile = profile.checked()
        self._known[profile.name] = profile

    def remember(self, profile: Profile) -> None:
        """Know `profile` by its name unless that name already means another profile."""
        self._known.setdefault(profile.name, profile)

    def get(self, name: str | None) -> Profile | None:
        return self._known.get(name) if name is not None else None

    def by_crc(self, crc: int) -> Profile | None:
        """The known profile whose name has this CRC (the one an entry tag records)."""
        return next((p for p in self._known.values() if name_crc(p.name) == crc), None)

    @property
    def known(self) -> dict[str, Profile]:
        return dict(self._known)

    def resolve(self, profile: Profile | str | Path) -> Profile:
        """A Profile (checked: see Profile.checked), a known name (built-in or added) or a YAML
        file holding one profile."""
        resolved = resolve_profile(profile, self._known)
        if isinstance(profile, Profile):
            resolved = resolved.checked()
        self.remember(resolved)
        return resolved


def resolve_profile(profile: Profile | str | Path, known: Mapping[str, Profile] | None = None) -> Profile:
    """A Profile as is, a name from `known` (default: the built-ins), or a YAML file with one
    profile. Raises ProfileError naming what was not found."""
    known = builtin_profiles() if known is None else known
    if isinstance(profile, Profile):
        return profile
    name = str(profile)
    if name in known:
        return known[name]
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_profile(path)
    raise ProfileError([Problem("", f"no built-in or known profile {name!r} and no such file; "
                                f"built-ins: {', '.join(builtin_profiles())}")])


def profile_differences(expected: Profile, actual: Profile) -> list[str]:
    """Field paths where `actual` differs from `expected` as the switch would see them, with both
    values: ["downlink.delay: 50ms -> 80ms", ...]."""
    out = []
    for direction in ("uplink", "downlink"):
        if expected.link(direction).to_table_params() == actual.link(direction).to_table_params():
            continue
        a = getattr(expected, direction).model_dump(mode="json")
        b = getattr(actual, direction).model_dump(mode="json")
        out += [f"{direction}.{key}: {_fmt(a[key])} -> {_fmt(b[key])}" for key in a if a[key] != b[key]]
    if expected.radio_table_params() != actual.radio_table_params():
        a = expected.radio.model_dump(mode="json")
        b = actual.radio.model_dump(mode="json")
        # Power figures never reach the switch: only the fields it holds can differ.
        out += [f"radio.{key}: {_fmt(a.get(key, '-'))} -> {_fmt(b.get(key, '-'))}"
                for key in dict.fromkeys([*a, *b]) if not key.startswith("power_") and a.get(key) != b.get(key)]
    return out


def _fmt(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)
