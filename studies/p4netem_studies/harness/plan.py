"""A comparison as data: the conditions to load a page under, and how to run them.

A `Condition` is one cell of the comparison (profile, radio on or off and whether it is woken
just before the load, protocol, TLS, server initial window, page, parallelism, and optionally a
label with extra loader options, as in "HTTP/1.1 pipelined with deflate" or "all objects
requested at once"); a `Plan` is the cells plus what they share (topology,
repetitions, silence threshold, DNS, TCP settings). Conditions are run grouped by profile and, inside
a profile, repetition by repetition over every cell, so slow drifts of a shared machine spread
over all cells instead of landing on one.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..web import pages
from .protocols import PROTOCOLS, protocol

# The profiles are imported where they are used: every `p4netem` command imports this module (for
# `measure --preset`'s help), and the profile models are not needed for that.
if TYPE_CHECKING:
    from p4netem.profiles import Profile

# The generated pages of N objects of S bytes (`uniform-NxS`, E4's): every lab writes the page to
# disk and builds each object in memory, so a typo in N or S must not fill the disk or the memory
# of a shared machine. E4's matrix goes to 512 objects and 1 MB.
UNIFORM_COUNT = (1, 4096)
UNIFORM_SIZE = (46, 64 * 2**20)


def page_model(name: str) -> pages.PageModel:
    """The page named `name` (pages.named), with `uniform-NxS` held to UNIFORM_COUNT and
    UNIFORM_SIZE; ValueError naming the page and the range. The range first: the model of
    uniform-100000000x10 alone is 10^8 objects."""
    if m := re.fullmatch(r"uniform-([0-9]+)x([0-9]+)", name.lower()):
        n, size = int(m[1]), int(m[2])
        if not UNIFORM_COUNT[0] <= n <= UNIFORM_COUNT[1]:
            raise ValueError(f"page {name!r}: object count {n} out of range "
                             f"{UNIFORM_COUNT[0]}..{UNIFORM_COUNT[1]}")
        if not UNIFORM_SIZE[0] <= size <= UNIFORM_SIZE[1]:
            raise ValueError(f"page {name!r}: object size {size} B out of range "
                             f"{UNIFORM_SIZE[0]} B..{UNIFORM_SIZE[1] // 2**20} MiB")
    return pages.named(name)


@dataclass(frozen=True)
class Condition:
    profile: str
    protocol: str
    initcwnd: int = 10
    tls: bool = True
    radio: bool = False
    page: str = "demo"
    conns_per_host: int | None = None     # None: the protocol's default
    prewake: bool = False                 # radio woken by a small exchange just before the load
    # A client configuration beyond the protocol (experiments: "pipelined+deflate", "reval"):
    # `label` names it in tables instead of the protocol; `loader_args` are extra options of
    # p4netem_studies.web.load (--revalidate, --accept-encoding identity, --discover at-once).
    label: str = ""
    loader_args: tuple[str, ...] = ()
    # Server output buffering for pipelining (E1's servers): HTTP/1.x from Apache, which writes
    # the responses to pipelined requests out only when its buffer fills or no request is
    # waiting, instead of nginx, which writes each as it is done (web/apache.py).
    server_buffering: bool = False

    def __post_init__(self) -> None:
        if self.prewake and not self.radio:
            raise ValueError(f"{self.profile}: pre-waking the radio needs the radio on")
        proto = protocol(self.protocol)
        object.__setattr__(self, "loader_args", tuple(self.loader_args))
        if self.label and (" iw" in self.label or "|" in self.label or not self.label.strip()):
            raise ValueError(f"label {self.label!r} must not contain ' iw' or '|'")
        if not self.tls and proto.plain_port is None:
            raise ValueError(f"{self.protocol} needs TLS")
        if not 1 <= self.initcwnd <= 1024:
            raise ValueError(f"initcwnd {self.initcwnd} out of range 1..1024")
        if self.server_buffering and (self.tls or not proto.loader.startswith("h1")
                                      or proto.browser):
            raise ValueError(f"server_buffering: the buffering server speaks plain HTTP/1.x; "
                             f"not {self.protocol}{' over TLS' if self.tls else ''}")
        if self.conns_per_host is not None and not 1 <= self.conns_per_host <= 64:
            raise ValueError(f"conns_per_host {self.conns_per_host} out of range 1..64")
        page_model(self.page)   # raises for an unknown page or one out of range

    @property
    def profile_label(self) -> str:
        """'hspa', 'hspa+radio' (idled before each load) or 'hspa+prewoken' (idled, then woken)."""
        if self.prewake:
            return f"{self.profile}+prewoken"
        return f"{self.profile}+radio" if self.radio else self.profile

    @property
    def variant(self) -> str:
        """The cell within a profile, e.g. 'h2 iw10', 'h1.1x6 iw3 plain' or (labelled)
        'pipelined+deflate iw10 plain'."""
        buffered = " buffered" if self.server_buffering else ""
        if self.label:
            return f"{self.label} iw{self.initcwnd}" + ("" if self.tls else " plain") + buffered
        proto = self.protocol
        if self.conns_per_host and self.conns_per_host != protocol(self.protocol).conns_per_host:
            proto += f"x{self.conns_per_host}"
        return f"{proto} iw{self.initcwnd}" + ("" if self.tls else " plain") + buffered

    @property
    def key(self) -> str:
        return f"{self.profile_label} | {self.variant} | {self.page}"

    def to_json(self) -> dict:
        d = asdict(self)
        d["loader_args"] = list(self.loader_args)
        d.update(key=self.key, profile_label=self.profile_label, variant=self.variant)
        return d


# Profiles defined by an experiment (its own YAML, or generated channel grids), by name, so that
# conditions, tables and result files name them like built-ins (register_profile).
_REGISTERED: dict[str, Profile] = {}


def register_profile(profile: Profile) -> None:
    """Make `profile` resolvable by its name. A built-in name cannot be taken; registering the
    same name again must give the same definition."""
    from p4netem.profiles.library import builtin_profiles

    if profile.name in builtin_profiles():
        raise ValueError(f"profile {profile.name!r} is a built-in; give yours another name")
    old = _REGISTERED.get(profile.name)
    if old is not None and old.to_dict() != profile.to_dict():
        raise ValueError(f"profile {profile.name!r} is already defined differently")
    _REGISTERED[profile.name] = profile


def resolve_profile(name: str) -> Profile:
    """A built-in profile by name, a registered one, or a profile YAML file."""
    from p4netem.profiles.library import builtin_profile, builtin_profiles
    from p4netem.profiles.yaml_files import load_profile

    if name in builtin_profiles():
        return builtin_profile(name)
    if name in _REGISTERED:
        return _REGISTERED[name]
    if not Path(name).is_file():
        raise ValueError(f"no built-in profile or file {name!r}; built-ins: "
                         f"{', '.join(builtin_profiles())}")
    return load_profile(name)


@dataclass
class Plan:
    name: str
    conditions: list[Condition]
    topology: str = "inline"
    topology_params: dict[str, int] = field(default_factory=dict)
    repetitions: int = 5
    silence_s: float = 10.0
    timeout_s: float = 120.0
    dns: bool = False                     # resolve through dnsmasq instead of a host map
    dns_latency_ms: float = 0.0
    congestion_control: str | None = None   # None: the kernel's default for new namespaces
    client_rmem: str | None = None        # tcp_rmem of the clients ("min default max")
    gzip: bool = False                    # servers deflate HTML/CSS/JS for clients that accept it
    revalidate: bool = False              # conditional GETs answered 304 (E1's second test)
    seed: int = 1
    client: str | None = None             # client host (default: the topology's first client)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ValueError("a plan needs at least one condition")
        if self.repetitions < 1:
            raise ValueError(f"repetitions must be >= 1, not {self.repetitions}")
        # inf passed `> 0` and reached the servers' configuration as int(inf); nan passed nothing.
        for name in ("silence_s", "timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive, finite number of seconds, "
                                 f"not {value}")
        keys = [c.key for c in self.conditions]
        dup = {k for k in keys if keys.count(k) > 1}
        if dup:
            raise ValueError(f"conditions repeat: {sorted(dup)}")
        for c in self.conditions:
            resolve_profile(c.profile)
            if ((self.revalidate or "--revalidate" in c.loader_args)
                    and protocol(c.protocol).browser):
                raise ValueError(f"{c.protocol}: the browser loads with its cache off; "
                                 "revalidation needs a scripted loader")

    @property
    def pages(self) -> list[str]:
        return list(dict.fromkeys(c.page for c in self.conditions))

    @property
    def total_loads(self) -> int:
        return len(self.conditions) * self.repetitions

    def schedule(self) -> list[tuple[Condition, int]]:
        """(condition, repetition) in run order: profile by profile, then repetition-major."""
        order = list(dict.fromkeys((c.profile, c.radio) for c in self.conditions))
        out = []
        for prof in order:
            cells = [c for c in self.conditions if (c.profile, c.radio) == prof]
            for rep in range(self.repetitions):
                out += [(c, rep) for c in cells]
        return out

    def to_json(self) -> dict:
        d = asdict(self)
        d["conditions"] = [c.to_json() for c in self.conditions]
        return d


def matrix(profiles: list[str], protocols: list[str], initcwnds: list[int], *,
           radio_profiles: tuple[str, ...] = (), tls: bool = True, page: str = "demo",
           conns_per_host: int | None = None, prewake: bool = False,
           server_buffering: bool = False) -> list[Condition]:
    """Every combination, profiles outermost (radio on for the profiles in radio_profiles, and
    woken before each load with prewake; server_buffering for the plain HTTP/1.x protocols, the
    only ones the buffering server speaks)."""
    for p in protocols:
        protocol(p)

    def h1(proto: str) -> bool:
        return PROTOCOLS[proto].loader.startswith("h1") and not PROTOCOLS[proto].browser

    return [Condition(prof, proto, iw, tls, prof in radio_profiles, page,
                      conns_per_host if PROTOCOLS[proto].loader.startswith("h1") else None,
                      prewake and prof in radio_profiles,
                      server_buffering=server_buffering and h1(proto))
            for prof, iw, proto in itertools.product(profiles, initcwnds, protocols)]


def make_run_plan(repetitions: int = 3) -> Plan:
    """`make run`: the demo page (30 objects over 2 host names) over HTTP/1.1 with 6 connections
    per host, HTTP/2 and SPDY/3.1 (all over TLS), server initial window 3 and 10, under LAN, LTE,
    HSPA with the radio on, and GPRS."""
    conds = matrix(["lan", "lte", "hspa", "gprs"], ["h1.1", "h2", "spdy"], [3, 10],
                   radio_profiles=("hspa",), conns_per_host=6)
    return Plan("make-run", conds, repetitions=repetitions, silence_s=10.0, timeout_s=180.0,
                description=make_run_plan.__doc__.split("\n")[0] + " ...")


PRESETS = {"make-run": make_run_plan}


def with_repetitions(plan: Plan, n: int) -> Plan:
    return replace(plan, repetitions=n)
