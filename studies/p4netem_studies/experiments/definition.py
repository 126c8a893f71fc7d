"""Experiment definitions: `experiments/NAME.yaml`, validated with pydantic.

Two kinds:

- `pageload` (E1, E3, E4, E5): a page is loaded under a matrix of conditions by the harness's
  loaders. The matrix is a list of blocks; each block is the product of its axes
  (profiles or a channel grid) x (pages or an object grid) x clients x modes x initcwnd x tls.
  A *client* is a named configuration of a harness protocol (connections per host, what it asks
  to be compressed, whether it revalidates, when it requests objects); a *mode* is a named set
  of options layered on every client of the block (E1's "revalidate", E5's "prewoken").
- `workload` (E2): many scripted web and bulk clients share a bottleneck for a fixed time
  (p4netem_studies.harness.workload); the matrix is web clients x bulk clients x HTTP model x IW.

`quick:` holds top-level keys that replace the full definition's for the quick variant (a run
of a few minutes); both variants are validated when the file is loaded, so a broken quick block
fails as early as a broken matrix. Errors name the file, the variant and the field.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from p4netem import safe_yaml
from p4netem.paths import REPO_ROOT
from p4netem.profiles import Profile, ProfileError, builtin_profiles
from p4netem.profiles.units import ByteSize, Duration, Percent, Rate, UnitError
from p4netem.safe_yaml import YamlInputError

from ..harness.plan import UNIFORM_COUNT, UNIFORM_SIZE, page_model
from ..harness.protocols import PROTOCOLS

_NAME = re.compile(r"^[a-z0-9][a-z0-9.+\-]{0,39}$")


class ExperimentError(ValueError):
    """A definition is wrong: the message names the file, the variant and the field."""


def experiments_dir() -> Path:
    import os
    return Path(os.environ.get("P4NETEM_EXPERIMENTS", REPO_ROOT / "experiments"))


class _Model(BaseModel):
    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# ---- clients and modes ------------------------------------------------------------------------

class LoaderOptions(_Model):
    """Options of p4netem_studies.web.load a client or mode sets (None: the loader's default)."""

    conns_per_host: int | None = Field(None, ge=1, le=64)
    accept_encoding: str | None = None     # "identity": ask for nothing compressed
    revalidate: bool | None = None         # conditional GETs, answered 304
    discover: Literal["stream", "after-html", "at-once"] | None = None
    prewake: bool | None = None            # radio idled, then woken just before the load
                                           # (the harness's Condition.prewake; radio profiles)
    flush_bytes: int | None = Field(None, ge=1, le=65536)   # pipelining flush policy
    flush_ms: float | None = Field(None, ge=0, le=10000)
    server_buffering: bool | None = None   # plain HTTP/1.x from the server that buffers responses
                                           # to pipelined requests (Condition.server_buffering)

    def merged(self, over: "LoaderOptions") -> dict:
        mine = self.model_dump()
        mine.update({k: v for k, v in over.model_dump().items() if v is not None})
        return mine


class ClientSpec(LoaderOptions):
    protocol: str

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, v: str) -> str:
        if v not in PROTOCOLS:
            raise ValueError(f"unknown protocol {v!r}; known: {', '.join(PROTOCOLS)}")
        return v


def loader_args(options: dict) -> tuple[str, ...]:
    """Command-line options of p4netem_studies.web.load for merged client/mode options (without
    conns_per_host, which the harness passes itself, and prewake, which is the harness's:
    Condition.prewake, nor server_buffering, a server option: Condition.server_buffering)."""
    args: list[str] = []
    if options.get("accept_encoding") is not None:
        args += ["--accept-encoding", options["accept_encoding"]]
    if options.get("revalidate"):
        args.append("--revalidate")
    if options.get("discover") is not None:
        args += ["--discover", options["discover"]]
    if options.get("flush_bytes") is not None:
        args += ["--flush-bytes", str(options["flush_bytes"])]
    if options.get("flush_ms") is not None:
        args += ["--flush-ms", str(options["flush_ms"])]
    return tuple(args)


# ---- generated profiles and pages -------------------------------------------------------------

def _compact(value: str) -> str:
    """'10Mbit' -> '10m', '0.5%' -> '0p5', '20ms' -> '20ms': for generated profile names."""
    v = value.strip().lower().replace("bit/s", "").replace("bit", "").replace("%", "")
    v = v.replace(" ", "").replace(".", "p")
    return re.sub(r"[^a-z0-9p]", "", v)


class ChannelGrid(_Model):
    """Profiles for every combination of rate x RTT x loss (E3, E4): RTT split equally over the
    two directions, loss on both, a drop-tail queue of `queue` packets each way ("bdp": the
    bandwidth-delay product of the slower direction, at least `queue_min`)."""

    prefix: str = Field(pattern=r"^[a-z][a-z0-9]{0,9}$")
    rate: list[str] = Field(min_length=1)   # "10Mbit/1Mbit" (down/up) or "1Mbit" (both)
    rtt: list[str] = Field(min_length=1)
    loss: list[str] = Field(default_factory=lambda: ["0%"], min_length=1)
    queue: int | Literal["bdp"] = 50
    queue_min: int = Field(32, ge=1, le=100000)

    @field_validator("rate")
    @classmethod
    def _rates(cls, v: list[str]) -> list[str]:
        for r in v:
            for part in r.split("/"):
                if Rate.parse(part) == 0:
                    raise ValueError(f"{r!r}: a channel needs a finite rate")
            if r.count("/") > 1:
                raise ValueError(f"{r!r}: give DOWN/UP or one rate for both directions")
        return v

    @field_validator("rtt")
    @classmethod
    def _rtts(cls, v: list[str]) -> list[str]:
        for r in v:
            Duration.parse(r)
        return v

    @field_validator("loss")
    @classmethod
    def _losses(cls, v: list[str]) -> list[str]:
        for r in v:
            Percent.parse(r)
        return v

    def combinations(self) -> list[dict]:
        out = []
        for rate in self.rate:
            down, _, up = rate.partition("/")
            up = up or down
            for rtt in self.rtt:
                for loss in self.loss:
                    out.append({"down": down, "up": up, "rtt": rtt, "loss": loss})
        return out

    def name(self, c: dict) -> str:
        rate = _compact(c["down"]) + ("" if c["up"] == c["down"] else "-" + _compact(c["up"]))
        return f"{self.prefix}-{rate}-rtt{_compact(c['rtt'])}-loss{_compact(c['loss'])}"

    def queue_packets(self, c: dict) -> int:
        if self.queue != "bdp":
            return int(self.queue)
        slow = min(Rate.parse(c["down"]), Rate.parse(c["up"]))
        bdp_bytes = float(slow) / 8 * int(Duration.parse(c["rtt"])) / 1e9
        return max(self.queue_min, math.ceil(bdp_bytes / 1500))

    def profiles(self) -> list[Profile]:
        out = []
        for c in self.combinations():
            half = Duration(int(Duration.parse(c["rtt"])) // 2)
            link = {"delay": str(half), "queue": {"packets": self.queue_packets(c)}}
            if Percent.parse(c["loss"]) > 0:
                link["loss"] = c["loss"]
            out.append(Profile.parse({
                "name": self.name(c),
                "title": f"{c['down']}/{c['up']} RTT {c['rtt']} loss {c['loss']}",
                "description": (f"generated channel: {c['down']} down, {c['up']} up, RTT "
                                f"{c['rtt']} split equally, loss {c['loss']} each way, "
                                f"{self.queue_packets(c)}-packet queues"),
                "both": link,
                "downlink": {"rate": c["down"]},
                "uplink": {"rate": c["up"]},
            }, f"channel grid {self.prefix}"))
        return out

    def factors(self) -> dict[str, dict]:
        """Profile name -> its factor values (for analysis: rate, RTT, loss as numbers)."""
        return {self.name(c): {"down_mbit": float(Rate.parse(c["down"])) / 1e6,
                               "up_mbit": float(Rate.parse(c["up"])) / 1e6,
                               "rtt_ms": int(Duration.parse(c["rtt"])) / 1e6,
                               "loss_pct": float(Percent.parse(c["loss"])),
                               "queue_pkts": self.queue_packets(c)}
                for c in self.combinations()}


class ObjectGrid(_Model):
    """Pages of N objects of S bytes (`uniform-NxS`) for every count x size (E4)."""

    count: list[int] = Field(min_length=1)
    size: list[int | str] = Field(min_length=1)

    @field_validator("count")
    @classmethod
    def _count(cls, v: list[int]) -> list[int]:
        lo, hi = UNIFORM_COUNT
        for n in v:
            if not lo <= n <= hi:
                raise ValueError(f"object count {n} out of range {lo}..{hi}")
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: list[int | str]) -> list[int]:
        out = []
        for s in v:
            b = int(ByteSize.parse(s))
            if not UNIFORM_SIZE[0] <= b <= UNIFORM_SIZE[1]:
                raise ValueError(f"object size {s!r} out of range {UNIFORM_SIZE[0]} B.."
                                 f"{UNIFORM_SIZE[1] // 2**20} MiB")
            out.append(b)
        return out

    def pages(self) -> list[str]:
        return [f"uniform-{n}x{s}" for n in self.count for s in self.size]


# ---- the matrix -------------------------------------------------------------------------------

class Block(_Model):
    profiles: list[str] = []        # NAME or NAME+radio
    channels: ChannelGrid | None = None
    pages: list[str] = []
    objects: ObjectGrid | None = None
    clients: list[str] = Field(min_length=1)
    modes: list[str] = Field(default_factory=lambda: [""], min_length=1)   # "": none
    initcwnd: list[int] = Field(default_factory=lambda: [10], min_length=1)
    tls: list[bool] = Field(default_factory=lambda: [True], min_length=1)

    @model_validator(mode="after")
    def _axes(self) -> "Block":
        if bool(self.profiles) == (self.channels is not None):
            raise ValueError("give exactly one of `profiles` and `channels`")
        if bool(self.pages) == (self.objects is not None):
            raise ValueError("give exactly one of `pages` and `objects`")
        for iw in self.initcwnd:
            if not 1 <= iw <= 1024:
                raise ValueError(f"initcwnd {iw} out of range 1..1024")
        for p in self.pages:
            page_model(p)     # uniform-NxS held to the object grid's ranges
        return self

    def profile_names(self) -> list[str]:
        if self.channels is not None:
            return [p.name for p in self.channels.profiles()]
        return list(self.profiles)

    def page_names(self) -> list[str]:
        return self.objects.pages() if self.objects is not None else list(self.pages)


class Sample(_Model):
    """Run a subset of a large matrix's cells (each with every client of its block)."""

    size: int = Field(ge=1)
    seed: int = 1
    method: Literal["stratified", "random"] = "stratified"


class _Common(_Model):
    name: str
    title: str
    reproduces: str                 # the original study
    description: str = ""
    analysis: Literal["e1", "e2", "e3", "e4", "e5"]
    topology: str = "inline"
    topology_params: dict[str, int] = {}
    repetitions: int = Field(ge=1, le=1000)
    profiles: list[dict] = []       # experiment-local profiles (profile YAML schema)
    congestion_control: str | None = None
    seed: int = 1
    options: dict[str, Any] = {}    # the analysis's own options (baseline, ...)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r}: lowercase letters, digits, '.', '+', '-', at most 40")
        return v

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, v: list[dict]) -> list[dict]:
        names = set()
        for doc in v:
            try:
                p = Profile.parse(doc, "experiment profile")
            except ProfileError as exc:
                raise ValueError(str(exc)) from None
            if p.name in builtin_profiles():
                raise ValueError(f"profile {p.name!r} is a built-in; give yours another name")
            if p.name in names:
                raise ValueError(f"profile {p.name!r} defined twice")
            names.add(p.name)
        return v

    def local_profiles(self) -> list[Profile]:
        return [Profile.parse(d, f"experiment {self.name}") for d in self.profiles]

    def _known_profiles(self) -> set[str]:
        return set(builtin_profiles()) | {p["name"] for p in self.profiles}


class PageloadExperiment(_Common):
    kind: Literal["pageload"]
    clients: dict[str, ClientSpec] = Field(min_length=1)
    modes: dict[str, LoaderOptions] = {}
    matrix: list[Block] = Field(min_length=1)
    sample: Sample | None = None
    gzip: bool = False
    dns: bool = False
    dns_latency_ms: float = Field(0.0, ge=0, le=10000)
    silence_s: float = Field(10.0, gt=0, le=600)
    timeout_s: float = Field(180.0, gt=0, le=36000)
    client_rmem: str | None = None

    @model_validator(mode="after")
    def _references(self) -> "PageloadExperiment":
        known = self._known_profiles()
        for i, block in enumerate(self.matrix):
            for name in block.clients:
                if name not in self.clients:
                    raise ValueError(f"matrix[{i}]: client {name!r} is not defined in `clients` "
                                     f"({', '.join(self.clients)})")
            for mode in block.modes:
                if mode and mode not in self.modes:
                    raise ValueError(f"matrix[{i}]: mode {mode!r} is not defined in `modes` "
                                     f"({', '.join(self.modes) or 'none'})")
            for prof in block.profiles:
                base = prof[: -len("+radio")] if prof.endswith("+radio") else prof
                if base not in known:
                    raise ValueError(f"matrix[{i}]: profile {base!r} is neither built-in nor "
                                     "defined in `profiles`")
            for name in block.clients:
                c = self.clients[name]
                for tls in block.tls:
                    if not tls and PROTOCOLS[c.protocol].plain_port is None:
                        raise ValueError(f"matrix[{i}]: client {name!r} ({c.protocol}) needs TLS")
                for mode in block.modes:
                    opts = c.merged(self.modes[mode]) if mode else c.model_dump()
                    if opts.get("prewake") and (block.channels is not None or not all(
                            p.endswith("+radio") for p in block.profiles)):
                        raise ValueError(f"matrix[{i}]: mode {mode!r} pre-wakes the radio: "
                                         "every profile of the block needs NAME+radio")
                    if opts.get("revalidate") and PROTOCOLS[c.protocol].browser:
                        raise ValueError(f"matrix[{i}]: client {name!r}: the browser cannot "
                                         "revalidate (its cache is off)")
        return self


class WorkloadSpec(_Model):
    """E2's web and bulk clients (p4netem_studies.harness.workload)."""

    objects_per_page: int = Field(4, ge=1, le=64)     # 1 primary + embedded
    size_distribution: Literal["pareto", "lognormal"] = "pareto"
    size_shape: float = Field(1.2, gt=0, le=10)        # pareto alpha or lognormal sigma
    size_median: int | str = 2920                      # bytes (2 segments of 1460 B)
    size_min: int | str = 100
    size_max: int | str = 1_000_000
    pool_objects: int = Field(600, ge=10, le=100000)   # distinct object files per server
    think_s: tuple[float, float] = (1.0, 5.0)
    bulk_size: int | str = 1_000_000
    window_clamp_segments: int | None = Field(11, ge=1, le=10000)
    mss: int = Field(1460, ge=536, le=9000)
    http11: Literal["pipelined", "serial"] = "pipelined"

    @field_validator("size_median", "size_min", "size_max", "bulk_size")
    @classmethod
    def _bytes(cls, v: int | str) -> int:
        return int(ByteSize.parse(v))

    @model_validator(mode="after")
    def _ranges(self) -> "WorkloadSpec":
        if not self.size_min <= self.size_median <= self.size_max:
            raise ValueError("sizes need size_min <= size_median <= size_max")
        lo, hi = self.think_s
        if not 0 <= lo <= hi <= 600:
            raise ValueError(f"think_s {self.think_s}: need 0 <= low <= high <= 600")
        return self


class WorkloadBlock(_Model):
    web_clients: list[int] = Field(min_length=1)
    bulk_clients: list[int] = Field(default_factory=lambda: [0], min_length=1)
    http: list[Literal["1.0", "1.1"]] = Field(min_length=1)
    # A number, or "A/B": the first half of the client hosts get A, the other half B.
    initcwnd: list[int | str] = Field(min_length=1)

    @field_validator("web_clients", "bulk_clients")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        for n in v:
            if not 0 <= n <= 1024:
                raise ValueError(f"{n} clients out of range 0..1024")
        return v

    @field_validator("initcwnd")
    @classmethod
    def _iw(cls, v: list[int | str]) -> list[int | str]:
        for iw in v:
            parts = [iw] if isinstance(iw, int) else str(iw).split("/")
            try:
                vals = [int(p) for p in parts]
            except ValueError:
                raise ValueError(f"initcwnd {iw!r}: a number or 'A/B'") from None
            if len(vals) > 2 or not all(1 <= x <= 1024 for x in vals):
                raise ValueError(f"initcwnd {iw!r}: a number or 'A/B', each 1..1024")
        return v


class WorkloadExperiment(_Common):
    kind: Literal["workload"]
    profile: str
    access_profile: str | None = None    # every host's own link (routed topologies: dumbbell)
    duration_s: float = Field(gt=0, le=36000)
    warmup_s: float = Field(10.0, ge=0, le=3600)
    workload: WorkloadSpec = WorkloadSpec()
    matrix: list[WorkloadBlock] = Field(min_length=1)

    @model_validator(mode="after")
    def _profile_known(self) -> "WorkloadExperiment":
        for field, name in (("profile", self.profile), ("access_profile", self.access_profile)):
            if name is not None and name not in self._known_profiles():
                raise ValueError(f"{field} {name!r} is neither built-in nor defined in "
                                 "`profiles`")
        return self


Experiment = Annotated[Union[PageloadExperiment, WorkloadExperiment], Field(discriminator="kind")]


class _Doc(BaseModel):
    model_config = ConfigDict(defer_build=True)

    experiment: Experiment


def experiment_names(directory: Path | None = None) -> list[str]:
    d = directory or experiments_dir()
    return sorted(p.stem for p in d.glob("*.yaml"))


def _path(name_or_path: str | Path, directory: Path | None) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return path
    d = directory or experiments_dir()
    cand = d / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    # Short names: "e1" finds e1-microscape.yaml.
    matches = [p for p in d.glob(f"{name_or_path}-*.yaml")]
    if len(matches) == 1:
        return matches[0]
    raise ExperimentError(f"no experiment {str(name_or_path)!r}; known: "
                          f"{', '.join(experiment_names(d)) or 'none'}")


def load_raw(name_or_path: str | Path, directory: Path | None = None) -> tuple[Path, dict]:
    path = _path(name_or_path, directory)
    try:
        data = safe_yaml.load_file(path)
    except YamlInputError as exc:
        raise ExperimentError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: an experiment is a mapping")
    return path, data


def variant_data(data: dict, quick: bool) -> dict:
    """The full definition, or with the `quick:` block's keys replacing its own."""
    out = {k: v for k, v in data.items() if k != "quick"}
    if quick:
        q = data.get("quick")
        if not isinstance(q, dict):
            raise ExperimentError(f"experiment {data.get('name')!r} has no `quick:` block")
        out.update(q)
    return out


def validate(data: dict, source: str) -> PageloadExperiment | WorkloadExperiment:
    try:
        return _Doc.model_validate({"experiment": data}).experiment
    except ValidationError as exc:
        lines = []
        for e in exc.errors():
            loc = [str(p) for p in e["loc"][1:]
                   if str(p) not in ("pageload", "workload")]
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{'.'.join(loc) or '(top)'}: {msg}")
        raise ExperimentError(f"{source}: invalid experiment:\n  " + "\n  ".join(lines)) from None
    except (UnitError, ProfileError) as exc:
        raise ExperimentError(f"{source}: {exc}") from None


def load_experiment(name_or_path: str | Path, *, quick: bool = False,
                    directory: Path | None = None) -> PageloadExperiment | WorkloadExperiment:
    """The full (or quick) variant of an experiment; both variants must validate."""
    path, data = load_raw(name_or_path, directory)
    full = validate(variant_data(data, False), f"{path} (full)")
    if "quick" not in data:
        raise ExperimentError(f"{path}: every experiment needs a `quick:` variant")
    fast = validate(variant_data(data, True), f"{path} (quick)")
    return fast if quick else full
