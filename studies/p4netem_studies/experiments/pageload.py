"""A page-load experiment as the harness's own Plan.

Every block of the matrix is expanded into cells (profile, page, initial window, TLS, mode),
optionally sampled (E4), and every cell is run with every client of its block: one harness
`Condition` per (cell, client), labelled with the client's name (and the mode's), carrying the
client's loader options. The experiment's own profiles and generated channels are registered
with the harness first, so conditions and result files name them like built-ins.

`Cell` keeps what a condition means for the analysis (client, mode, the factors as numbers:
RTT, rates, loss, object count and size), keyed by the condition's key.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

from p4netem.profiles import Profile

from ..harness.plan import Condition, Plan, register_profile, resolve_profile
from ..web import pages as page_models
from .definition import Block, PageloadExperiment, loader_args
from .sampling import random_cells, stratified_cells


@dataclass(frozen=True)
class Cell:
    key: str               # the harness condition's key
    client: str
    mode: str
    protocol: str
    profile: str           # as given (NAME or NAME+radio)
    page: str
    initcwnd: int
    tls: bool
    block: int
    factors: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class BuiltPlan:
    plan: Plan
    cells: dict[str, Cell]          # condition key -> what it means
    matrix_cells: int               # cells before sampling (x clients = conditions)
    sampled: bool

    @property
    def conditions(self) -> int:
        return len(self.plan.conditions)


def profile_factors(profile: Profile) -> dict:
    """A profile as numbers: RTT, rates, loss (what E4's decision tree splits on)."""
    up, down = profile.uplink, profile.downlink
    return {"rtt_ms": (int(up.delay) + int(down.delay)) / 1e6,
            "down_mbit": float(down.rate) / 1e6 if down.rate else None,
            "up_mbit": float(up.rate) / 1e6 if up.rate else None,
            "loss_pct": float(down.loss),
            "queue_pkts": int(down.queue.packets) or None,
            "radio_model": profile.radio.model}


def page_factors(name: str) -> dict:
    model = page_models.named(name)
    sizes = [o.size for o in model.objects]
    return {"objects": model.object_count, "embedded_objects": len(model.objects),
            "page_bytes": model.total_bytes,
            "domains": len(model.hosts),
            "object_size": (sizes[0] if sizes and len(set(sizes)) == 1 else None)}


def _block_cells(exp: PageloadExperiment, i: int, block: Block) -> tuple[list[dict], int]:
    """(cells to run, cells in the whole block)."""
    if block.channels is not None:
        grid = block.channels
        # Stratified over each channel factor on its own, not over their combinations.
        levels: dict[str, list] = {"rate": [r if "/" in r else f"{r}/{r}" for r in grid.rate],
                                   "rtt": list(grid.rtt), "loss": list(grid.loss)}
    else:
        levels = {"profile": list(block.profiles)}
    if block.objects is not None:
        levels.update(count=list(block.objects.count), size=list(block.objects.size))
    else:
        levels["page"] = list(block.pages)
    levels.update(initcwnd=list(block.initcwnd), tls=list(block.tls), mode=list(block.modes))
    total = 1
    for v in levels.values():
        total *= len(v)
    if exp.sample is None or exp.sample.size >= total:
        combos = [dict(zip(levels, c)) for c in itertools.product(*levels.values())]
    elif exp.sample.method == "random":
        every = [dict(zip(levels, c)) for c in itertools.product(*levels.values())]
        combos = random_cells(every, exp.sample.size, exp.sample.seed + i)
    else:
        combos = stratified_cells(levels, exp.sample.size, exp.sample.seed + i)
    cells = []
    for c in combos:
        if block.channels is not None:
            down, _, up = c["rate"].partition("/")
            profile = block.channels.name({"down": down, "up": up, "rtt": c["rtt"],
                                           "loss": c["loss"]})
        else:
            profile = c["profile"]
        page = (f"uniform-{c['count']}x{c['size']}" if block.objects is not None else c["page"])
        cells.append({"profile": profile, "page": page, "initcwnd": c["initcwnd"],
                      "tls": c["tls"], "mode": c["mode"]})
    return cells, total


def register_profiles(exp: PageloadExperiment) -> list[Profile]:
    """The experiment's own and generated profiles, registered with the harness."""
    profiles = exp.local_profiles()
    for block in exp.matrix:
        if block.channels is not None:
            profiles += block.channels.profiles()
    seen = {}
    for p in profiles:
        if p.name not in seen:
            register_profile(p)
            seen[p.name] = p
    return list(seen.values())


def _timeout(exp: PageloadExperiment, conditions: list[Condition]) -> float:
    """The definition's timeout, raised for conditions whose page cannot arrive in it: three
    times the page's bytes at the downlink rate, plus a minute (E4's 512 x 1 MB pages)."""
    worst = exp.timeout_s
    for c in conditions:
        prof = resolve_profile(c.profile)
        rate = float(prof.downlink.rate)
        if rate:
            need = 3 * page_models.named(c.page).total_bytes * 8 / rate + 60
            worst = max(worst, need)
    return round(worst, 1)


def build_plan(exp: PageloadExperiment, *, repetitions: int | None = None,
               only: dict[str, list[str]] | None = None) -> BuiltPlan:
    """The harness plan of `exp`. `only` keeps the conditions whose profile, page, client, mode,
    initcwnd or tls is among the given values (e.g. {"profile": ["lan-10mbit"]})."""
    register_profiles(exp)
    known = ("profile", "page", "client", "mode", "initcwnd", "tls", "protocol")
    if only and set(only) - set(known):
        raise ValueError(f"--only takes {', '.join(sorted(known))}, not "
                         f"{', '.join(sorted(set(only) - set(known)))}")
    conditions: list[Condition] = []
    cells: dict[str, Cell] = {}
    total_cells = 0
    seen: dict[str, set[str]] = {k: set() for k in known}   # every value --only could keep
    for i, block in enumerate(exp.matrix):
        block_cells, total = _block_cells(exp, i, block)
        total_cells += total
        for cell in block_cells:
            prof_name = cell["profile"]
            radio = prof_name.endswith("+radio")
            base = prof_name[: -len("+radio")] if radio else prof_name
            for client in block.clients:
                spec = exp.clients[client]
                mode = cell["mode"]
                opts = spec.merged(exp.modes[mode]) if mode else spec.model_dump()
                args = loader_args(opts)
                prewake = bool(opts.get("prewake"))
                # A mode that only pre-wakes the radio shows in the profile label
                # ('hspa+prewoken'); one that changes the loader's options names the client.
                label = client + (f" {mode}" if mode and args != loader_args(spec.model_dump())
                                  else "")
                values = {"profile": prof_name, "page": cell["page"], "client": client,
                          "mode": mode, "initcwnd": str(cell["initcwnd"]),
                          "tls": str(cell["tls"]).lower(), "protocol": spec.protocol}
                # Pre-woken conditions show (and are stored) as 'hspa+prewoken', so --only takes
                # that name too, for them alone; 'hspa+radio' keeps naming both kinds. The name
                # was refused, the command in docs/experiments.md with it too.
                aliases = {"profile": f"{base}+prewoken"} if prewake else {}
                for k, v in values.items():
                    seen[k].add(v)
                seen["profile"].update(aliases.values())
                if only and any(values.get(k) not in v and aliases.get(k) not in v
                                for k, v in only.items()):
                    continue
                cond = Condition(base, spec.protocol, initcwnd=cell["initcwnd"],
                                 tls=cell["tls"], radio=radio, page=cell["page"],
                                 conns_per_host=opts.get("conns_per_host"), prewake=prewake,
                                 label=label, loader_args=args,
                                 server_buffering=bool(opts.get("server_buffering")))
                if cond.key in cells:
                    continue      # two blocks asked for the same condition: run it once
                conditions.append(cond)
                factors = {**profile_factors(resolve_profile(base)), **page_factors(cell["page"])}
                cells[cond.key] = Cell(cond.key, client, mode, spec.protocol, prof_name,
                                       cell["page"], cell["initcwnd"], cell["tls"], i, factors)
    for k, wanted in (only or {}).items():
        # A value no condition has (a typo, an IW of the full variant asked of the quick one)
        # was dropped without a word, and the run went on with the other values.
        if missing := [v for v in wanted if v not in seen[k]]:
            have = ", ".join(sorted(repr(v) if v == "" else v for v in seen[k]))
            raise ValueError(("no condition left to run: " if missing == wanted else "")
                             + f"--only {k}={','.join(missing)}: no condition of this run has "
                             f"{'it' if len(missing) == 1 else 'them'}; {k} is one of {have}")
    if not conditions:
        raise ValueError("no condition left to run" + (f" (--only {only})" if only else ""))
    plan = Plan(exp.name, conditions, topology=exp.topology,
                topology_params=dict(exp.topology_params),
                repetitions=repetitions or exp.repetitions, silence_s=exp.silence_s,
                timeout_s=_timeout(exp, conditions), dns=exp.dns,
                dns_latency_ms=exp.dns_latency_ms, congestion_control=exp.congestion_control,
                client_rmem=exp.client_rmem, gzip=exp.gzip, seed=exp.seed,
                description=exp.title)
    return BuiltPlan(plan, cells, total_cells, exp.sample is not None)
