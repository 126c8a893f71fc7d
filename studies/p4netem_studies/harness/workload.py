"""The workload generator: many concurrent scripted web clients (think, load a page, think ...)
and bulk clients sharing one bottleneck for a fixed time, measured from the clients and from the
switch's own counters (E2, the larger-initial-window study).

One run = one condition (web clients, bulk clients, HTTP/1.0 or 1.1 model, server initial
window, possibly different for two halves of the client hosts) for `warmup_s + duration_s`:

- the lab is the topology's (the dumbbell: N client hosts sharing one slot, so one queue per
  direction, and N server hosts; with `access_profile`, every host's own link to its router
  runs that profile: E2's 10 Mbit/s links); every server runs nginx with a pool of objects whose sizes
  follow the plan's heavy-tailed distribution, plus the bulk file;
- clients are spread round-robin over the client hosts; one agent process per client host
  (workload_agent.py) runs them all on one asyncio loop, with the harness's HTTP/1.x loader;
- the server initial window is set per client host (a /32 route with initcwnd on every server),
  so "half at 1, half at 3" is two groups of hosts;
- measured over the window [warmup, warmup + duration]: the page delays of pages started in it
  (median and quartiles, also per IW group), goodput (bytes of completed objects and bulk bytes
  received in the window), and from the switch's counters of the shared slot: bottleneck
  utilisation (bytes out / (rate x duration)), drop rate (queue-full drops / packets in) per
  direction; network power = goodput / median page delay.

Files: runs.csv (one row per run), pages.csv (every page), summary.csv (per condition: medians
over runs, page delays pooled over runs), results.json (metadata, plan, everything).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from p4netem import pipeline as pl
from ..mininet.topology import load_topology
from ..web.netns import NsProcess, run as ns_run
from ..web.nginx import NginxConfig, NginxServer
from ..web.site import FIXED_MTIME
from ..web.tcp_tuning import congctl_args, path_to
from .plan import resolve_profile
from .provenance import loadavg, run_context
from .results import quartiles, write_csv
from .tcp import environment, set_initial_windows, tune_hosts
from .workload_agent import POOL_HOST

BULK_PATH = "/bulk.bin"


# ---- plan ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SizeModel:
    """Object sizes: Pareto (shape = alpha) or lognormal (shape = sigma) with the given median,
    clipped to [minimum, maximum]."""

    distribution: str = "pareto"
    shape: float = 1.2
    median: int = 2920
    minimum: int = 100
    maximum: int = 1_000_000

    def draw(self, rng: random.Random) -> int:
        if self.distribution == "pareto":
            # Pareto(alpha, xm): median = xm * 2^(1/alpha).
            xm = self.median / 2 ** (1 / self.shape)
            v = xm / (1 - rng.random()) ** (1 / self.shape)
        elif self.distribution == "lognormal":
            v = self.median * math.exp(rng.gauss(0, self.shape))
        else:
            raise ValueError(f"size distribution must be pareto or lognormal, not "
                             f"{self.distribution!r}")
        return int(min(max(v, self.minimum), self.maximum))


@dataclass(frozen=True)
class WorkloadCondition:
    web_clients: int
    bulk_clients: int
    http: str                      # "1.0" | "1.1"
    initcwnd: tuple[int, ...]      # one value, or two: first half of the client hosts, second

    def __post_init__(self) -> None:
        if self.http not in ("1.0", "1.1"):
            raise ValueError(f"http must be 1.0 or 1.1, not {self.http!r}")
        if self.web_clients < 0 or self.bulk_clients < 0 or not (self.web_clients
                                                                  or self.bulk_clients):
            raise ValueError("a run needs at least one web or bulk client")
        if not 1 <= len(self.initcwnd) <= 2 or not all(1 <= i <= 1024 for i in self.initcwnd):
            raise ValueError(f"initcwnd {self.initcwnd}: one or two values in 1..1024")

    @property
    def initcwnd_label(self) -> str:
        return "/".join(str(i) for i in self.initcwnd)

    @property
    def key(self) -> str:
        return (f"web{self.web_clients} bulk{self.bulk_clients} http{self.http} "
                f"iw{self.initcwnd_label}")

    def iw_of_host(self, index: int, hosts: int) -> int:
        """Initial window the servers use toward client host `index` (0-based of `hosts`)."""
        if len(self.initcwnd) == 1:
            return self.initcwnd[0]
        return self.initcwnd[0] if index < hosts // 2 else self.initcwnd[1]

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(key=self.key, initcwnd_label=self.initcwnd_label)
        return d


@dataclass
class WorkloadPlan:
    name: str
    conditions: list[WorkloadCondition]
    profile: str
    duration_s: float
    access_profile: str | None = None        # every host's own link (routed topologies)
    warmup_s: float = 10.0
    topology: str = "dumbbell"
    topology_params: dict[str, int] = field(default_factory=dict)
    repetitions: int = 1
    objects_per_page: int = 4
    sizes: SizeModel = SizeModel()
    pool_objects: int = 600
    think_s: tuple[float, float] = (1.0, 5.0)
    bulk_size: int = 1_000_000
    window_clamp: int | None = 11 * 1460     # bytes; None: the kernel's own window
    http11: str = "pipelined"                # pipelined | serial
    grace_s: float = 30.0                     # pages in flight at the end may finish in this
    page_timeout_s: float = 120.0
    congestion_control: str | None = None
    seed: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ValueError("a workload plan needs at least one condition")
        keys = [c.key for c in self.conditions]
        if len(set(keys)) != len(keys):
            raise ValueError(f"conditions repeat: {keys}")
        # `not x > 0` rather than `x <= 0`: nan passes the latter, and inf passed both (a run
        # that measures for ever).
        if (self.repetitions < 1 or not (math.isfinite(self.duration_s) and self.duration_s > 0)
                or not (math.isfinite(self.warmup_s) and self.warmup_s >= 0)):
            raise ValueError("repetitions >= 1, a finite duration > 0 and a finite warmup >= 0 "
                             f"needed, not {self.repetitions}, {self.duration_s}, {self.warmup_s}")
        if self.http11 not in ("pipelined", "serial"):
            raise ValueError(f"http11 must be pipelined or serial, not {self.http11!r}")
        prof = resolve_profile(self.profile)
        if self.access_profile is not None:
            resolve_profile(self.access_profile)
        if not int(prof.downlink.rate):
            raise ValueError(f"profile {self.profile!r} has no downlink rate: a bottleneck "
                             "utilisation needs one")

    @property
    def total_runs(self) -> int:
        return len(self.conditions) * self.repetitions

    def schedule(self) -> list[tuple[WorkloadCondition, int]]:
        """Repetition-major, so slow drifts of a shared machine spread over every condition."""
        return [(c, r) for r in range(self.repetitions) for c in self.conditions]

    def to_json(self) -> dict:
        d = asdict(self)
        d["conditions"] = [c.to_json() for c in self.conditions]
        return d


# ---- content ------------------------------------------------------------------------------------

def make_pool(plan: WorkloadPlan, root: Path) -> list[dict]:
    """The object pool (and the bulk file) under root/<POOL_HOST>/: random bytes, so nothing
    compresses; sizes drawn from the plan's model with its seed."""
    rng = random.Random(f"workload-pool/{plan.seed}")
    d = root / POOL_HOST
    (d / "obj").mkdir(parents=True, exist_ok=True)
    pool = []
    for i in range(plan.pool_objects):
        size = plan.sizes.draw(rng)
        data = rng.randbytes(size)
        path = f"/obj/{i:05d}.bin"
        (d / path.lstrip("/")).write_bytes(data)
        os.utime(d / path.lstrip("/"), (FIXED_MTIME, FIXED_MTIME))
        pool.append({"path": path, "size": size, "sha256": hashlib.sha256(data).hexdigest()})
    (d / BULK_PATH.lstrip("/")).write_bytes(rng.randbytes(plan.bulk_size))
    return pool


def pool_stats(pool: list[dict], mss: int = 1460) -> dict:
    sizes = sorted(o["size"] for o in pool)
    return {"objects": len(sizes), "median": statistics.median(sizes),
            "mean": round(statistics.fmean(sizes), 1), "max": sizes[-1], "min": sizes[0],
            "median_segments": round(statistics.median(sizes) / mss, 2),
            "share_over_10_segments": round(sum(s > 10 * mss for s in sizes) / len(sizes), 3)}


# ---- results ------------------------------------------------------------------------------------

@dataclass
class WorkloadRun:
    condition: WorkloadCondition
    rep: int
    ok: bool
    errors: list[str]
    metrics: dict
    pages: list[dict]

    def row(self) -> dict:
        c = self.condition
        return {"key": c.key, "web_clients": c.web_clients, "bulk_clients": c.bulk_clients,
                "http": c.http, "initcwnd": c.initcwnd[0], "initcwnd_label": c.initcwnd_label,
                "rep": self.rep, "ok": self.ok, **self.metrics,
                "errors": " | ".join(self.errors)[:1000]}


@dataclass
class WorkloadOutcome:
    plan: WorkloadPlan
    runs: list[WorkloadRun]
    summary: list[dict]
    metadata: dict
    paths: dict[str, Path]


def _q(values: list[float]) -> tuple[float | None, float | None, float | None]:
    q = quartiles([v for v in values if v is not None])
    return (None, None, None) if q is None else tuple(round(v, 3) for v in q)


def run_metrics(cond: WorkloadCondition, plan: WorkloadPlan, rate_bps: dict[str, float],
                start: float, agents: list[dict], c0: dict, c1: dict,
                host_iw: dict[str, int]) -> tuple[dict, list[dict]]:
    """Metrics of one run from the agents' outputs and the counter snapshots of the shared
    bottleneck at the window's start (c0) and end (c1): direction -> PdCounters (as
    MininetLab.counters gives them). `rate_bps`: the profile's rate per direction ("down",
    "up")."""
    w0 = start + plan.warmup_s
    w1 = w0 + plan.duration_s
    pages = []
    for a in agents:
        for p in a["pages"]:
            p = dict(p, host=a["host"], iw=host_iw[a["host"]])
            p["in_window"] = w0 <= p["t_start"] < w1
            pages.append(p)
    counted = [p for p in pages if p["in_window"]]
    done = [p for p in counted if p["ok"]]
    delays = [p["delay_ms"] for p in done]
    m: dict = {}
    m["pages_started"] = len(counted)
    m["pages_ok"] = len(done)
    m["pages_failed"] = sum(1 for p in counted if p["ok"] is False)
    m["pages_unfinished"] = sum(1 for p in counted if p["ok"] is None)
    m["page_delay_q1_ms"], m["page_delay_median_ms"], m["page_delay_q3_ms"] = _q(delays)
    for iw in sorted(set(host_iw.values())):
        if len(set(host_iw.values())) > 1:
            d = [p["delay_ms"] for p in done if p["iw"] == iw]
            m[f"page_delay_median_ms_iw{iw}"] = _q(d)[1]
            m[f"pages_ok_iw{iw}"] = len(d)
    # Goodput: bytes of web objects completed in the window (a page's bytes at its end) and the
    # bulk bytes received in it.
    web_bytes = sum(p["bytes"] for p in pages if p["ok"] and p["t_end"] and w0 <= p["t_end"] < w1)
    bulk_bytes = 0
    for a in agents:
        bin_s = a.get("bulk_bin_s", 0.1)
        for b, n in a["bulk_bins"].items():
            t = start + int(b) * bin_s
            if w0 <= t < w1:
                bulk_bytes += n
    dur = plan.duration_s
    m["goodput_web_kbit"] = round(web_bytes * 8 / dur / 1000, 3)
    m["goodput_bulk_kbit"] = round(bulk_bytes * 8 / dur / 1000, 3)
    m["goodput_kbit"] = round((web_bytes + bulk_bytes) * 8 / dur / 1000, 3)
    m["bulk_files"] = sum(a.get("bulk_files", 0) for a in agents)
    for name, direction in (("down", pl.DOWNLINK), ("up", pl.UPLINK)):
        a, b = c0[direction], c1[direction]
        pkts_in = b.profile_in - a.profile_in
        out_bytes = b.bytes_out - a.bytes_out
        qdrops = b.drops.get(pl.DropReason.QUEUE_FULL, 0) - a.drops.get(pl.DropReason.QUEUE_FULL, 0)
        alldrops = b.dropped - a.dropped
        m[f"packets_in_{name}"] = pkts_in
        m[f"queue_drops_{name}"] = qdrops
        m[f"other_drops_{name}"] = alldrops - qdrops
        m[f"drop_rate_{name}_pct"] = round(100.0 * qdrops / pkts_in, 4) if pkts_in else None
        m[f"utilisation_{name}"] = round(out_bytes * 8 / (rate_bps[name] * dur), 4) \
            if rate_bps[name] else None
    med = m["page_delay_median_ms"]
    m["power_kbit_per_s2"] = round(m["goodput_kbit"] / (med / 1000.0), 3) if med else None
    m["agent_errors"] = sum(len(a.get("errors", [])) for a in agents)
    return m, pages


def link_metrics(c0: dict[str, dict], c1: dict[str, dict], rate_bps: float,
                 duration_s: float) -> dict:
    """The hosts' own access links over the window, from the switch's counters at its start
    (c0) and end (c1), host -> direction -> PdCounters: the busiest link's utilisation toward
    its host and from it (bytes out / (rate x window); a link's uplink is what its host sends,
    client or server) and all their queue-full drops. Empty without links."""
    if not c0 or not rate_bps:
        return {}
    m: dict = {}
    for name, direction in (("to_host", pl.DOWNLINK), ("from_host", pl.UPLINK)):
        util, drops = [], 0
        for host in c0:
            a, b = c0[host][direction], c1[host][direction]
            util.append((b.bytes_out - a.bytes_out) * 8 / (rate_bps * duration_s))
            drops += (b.drops.get(pl.DropReason.QUEUE_FULL, 0)
                      - a.drops.get(pl.DropReason.QUEUE_FULL, 0))
        m[f"access_max_utilisation_{name}"] = round(max(util), 4)
        m[f"access_queue_drops_{name}"] = drops
    m["access_links"] = len(c0)
    return m


def summarize(plan: WorkloadPlan, runs: list[WorkloadRun]) -> list[dict]:
    out = []
    for cond in plan.conditions:
        rs = [r for r in runs if r.condition == cond and r.ok]
        if not rs:
            continue
        row = {"key": cond.key, "web_clients": cond.web_clients,
               "bulk_clients": cond.bulk_clients, "http": cond.http,
               "initcwnd": cond.initcwnd[0], "initcwnd_label": cond.initcwnd_label,
               "runs": len([r for r in runs if r.condition == cond]), "ok": len(rs)}
        delays = [p["delay_ms"] for r in rs for p in r.pages if p["in_window"] and p["ok"]]
        row["pages_ok"] = len(delays)
        row["page_delay_q1_ms"], row["page_delay_median_ms"], row["page_delay_q3_ms"] = _q(delays)
        iws = sorted({p["iw"] for r in rs for p in r.pages})
        if len(iws) > 1:
            for iw in iws:
                row[f"page_delay_median_ms_iw{iw}"] = _q(
                    [p["delay_ms"] for r in rs for p in r.pages
                     if p["in_window"] and p["ok"] and p["iw"] == iw])[1]
        for name in ("utilisation_down", "utilisation_up", "drop_rate_down_pct",
                     "drop_rate_up_pct", "goodput_kbit", "goodput_web_kbit",
                     "goodput_bulk_kbit", "queue_drops_down", "packets_in_down",
                     "pages_unfinished", "pages_failed", "access_max_utilisation_to_host",
                     "access_max_utilisation_from_host", "access_queue_drops_to_host",
                     "access_queue_drops_from_host"):
            vals = [r.metrics.get(name) for r in rs if r.metrics.get(name) is not None]
            row[name] = statistics.median(vals) if vals else None
        med = row["page_delay_median_ms"]
        row["power_kbit_per_s2"] = (round(row["goodput_kbit"] / (med / 1000.0), 3)
                                    if med and row["goodput_kbit"] is not None else None)
        out.append(row)
    return out


# ---- the runner ---------------------------------------------------------------------------------

Event = Callable[[str, dict], None]


class WorkloadLab:
    """One lab for a workload plan, run one (condition, repetition) at a time: `start()` brings
    up the lab, its servers and TCP settings, `run(cond, rep)` runs the workload once and
    returns its WorkloadRun, `close()` tears it down. The serial `WorkloadRunner` and the durable
    experiment runner (p4netem_studies.runs) share it."""

    def __init__(self, plan: WorkloadPlan, out_dir: str | Path, *, target: str = "p4netem",
                 on_event: Event | None = None, mininet_log: str = "warning",
                 log_dir: str | Path | None = None, index: int = 0,
                 switch_args: tuple[str, ...] = ()):
        """`index` and `switch_args` as for PageloadLab: labs side by side on one machine each
        get a subnet of their own and switches that do not busy-poll."""
        self.plan = plan
        self.lab_index = index
        self.switch_args = switch_args
        self.out_dir = Path(out_dir)
        self.target = target
        self.on_event = on_event or (lambda kind, data: None)
        self.mininet_log = mininet_log
        self.log_dir = Path(log_dir) if log_dir else self.out_dir / "logs"
        self.metadata: dict = {}
        self.lab = None
        self._stack: ExitStack | None = None
        self._work: Path | None = None
        self._t_start = 0.0
        self._index = 0

    def start(self) -> "WorkloadLab":
        plan = self.plan
        self._t_start = time.time()
        self._work = work = Path(tempfile.mkdtemp(prefix="p4n-workload-"))
        self._stack = ExitStack()
        try:
            self.on_event("stage", {"text": "generating the object pool"})
            self.pool = make_pool(plan, work / "content")
            topo = load_topology(plan.topology).expand(plan.topology_params).relocated(
                self.lab_index)
            slots = topo.slots
            if len(slots) != 1:
                raise ValueError(f"topology {topo.name!r} has {len(slots)} client slots; the "
                                 "workload measures one shared bottleneck (e.g. the dumbbell)")
            from ..mininet.lab import MininetLab
            self.on_event("stage", {"text": f"starting the {topo.name} lab"})
            self.lab = lab = self._stack.enter_context(MininetLab(
                topo, target=self.target, log_dir=self.log_dir, seed=plan.seed,
                mininet_log=self.mininet_log, switch_args=self.switch_args))
            self.on_event("lab", {"lab": lab})
            self.profile = profile = resolve_profile(plan.profile)
            applied = lab.apply_profile(profile)[0]
            links = (lab.apply_link_profile(resolve_profile(plan.access_profile))
                     if plan.access_profile else [])
            servers = []
            self._stack.callback(lambda: [srv.stop() for srv in servers])
            for h in topo.servers:
                d = work / "nginx" / h.name
                d.mkdir(parents=True)
                cfg = NginxConfig(work / "content", http_port=80)
                servers.append(NginxServer(lab.ns(h.name), cfg, workdir=d).start())
            self.metadata = self._metadata(lab, self.pool, applied, servers)
            self.metadata["access_links"] = {
                h.name: a.to_json() for a in links for h in topo.hosts if h.link == a.slot}
            self.metadata["tcp_sysctls_set"] = tune_hosts(lab, plan.congestion_control)
            self.metadata["tcp_environment_by_initcwnd"] = {}
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        try:
            if self._stack is not None:
                self._stack.close()
        finally:
            self._stack = None
            self.metadata["duration_s"] = round(time.time() - self._t_start, 1)
            if self._work is not None:
                shutil.rmtree(self._work, ignore_errors=True)
                self._work = None

    def _set_windows(self, lab, cond: WorkloadCondition) -> dict[str, int]:
        """initcwnd per client host, as /32 routes on every server; returns host -> IW."""
        clients = lab.topology.clients
        set_initial_windows(lab, cond.initcwnd[0])
        host_iw = {}
        for i, c in enumerate(clients):
            iw = cond.iw_of_host(i, len(clients))
            host_iw[c.name] = iw
            for s in lab.topology.servers:
                # The way the server's routes already take to the client (via its router in a
                # routed topology), with the client's IW.
                ns_run(lab.ns(s.name), ["ip", "route", "replace", f"{c.ip}/32",
                                        *path_to(lab.ns(s.name), c.ip),
                                        "initcwnd", str(iw), "initrwnd", str(iw),
                                        *congctl_args(self.plan.congestion_control)])
        return host_iw

    def run(self, cond: WorkloadCondition, rep: int) -> "WorkloadRun":
        """The workload once under `cond` (repetition `rep`); its seeds depend only on the
        plan's seed, the repetition and the host, so a rerun draws the same workload."""
        plan, lab, pool = self.plan, self.lab, self.pool
        assert lab is not None and self._work is not None, "start() the lab first"
        work = self._work
        index = self._index
        profile = self.profile
        rate = {"down": float(profile.downlink.rate), "up": float(profile.uplink.rate)}
        clients = lab.topology.clients
        # Every client shares the one slot: any client's access counters are the bottleneck's.
        bottleneck = clients[0].name
        servers = [lab.ip(s.name) for s in lab.topology.servers]
        # Hosts with a link of their own that runs the access profile (routed topologies).
        linked = [h.name for h in lab.topology.hosts if h.link is not None] \
            if plan.access_profile else []
        access_bps = float(resolve_profile(plan.access_profile).downlink.rate) \
            if plan.access_profile else 0.0
        host_iw = self._set_windows(lab, cond)
        if cond.initcwnd_label not in self.metadata["tcp_environment_by_initcwnd"]:
            self.metadata["tcp_environment_by_initcwnd"][cond.initcwnd_label] = \
                environment(lab)
        lab.wait_quiet(1.0, timeout_s=60)
        start = time.time() + 2.0      # agents start together on the wall clock
        agents = []
        for i, c in enumerate(clients):
            web = [w for w in range(cond.web_clients) if w % len(clients) == i]
            bulk = [b for b in range(cond.bulk_clients) if b % len(clients) == i]
            # The same random numbers (pages, objects, think times) for every condition
            # of a repetition: conditions are compared on the same workload.
            cfg = {"host": c.name, "seed": f"{plan.seed}/{rep}/{c.name}",
                   "pool": pool, "servers": servers, "start_at": start,
                   "warmup_s": plan.warmup_s, "duration_s": plan.duration_s,
                   "grace_s": plan.grace_s, "web_clients": web, "bulk_clients": bulk,
                   "objects_per_page": plan.objects_per_page,
                   "think_s": list(plan.think_s), "http": cond.http,
                   "http11": plan.http11, "window_clamp": plan.window_clamp,
                   "page_timeout_s": plan.page_timeout_s, "bulk_path": BULK_PATH,
                   "last_modified": "Wed, 01 Jan 2020 00:00:00 GMT",
                   "out": str(work / f"agent-{index}-{c.name}.json")}
            path = work / f"agent-{index}-{c.name}.config.json"
            path.write_text(json.dumps(cfg))
            agents.append((c.name, cfg, _start_agent(lab.ns(c.name), path,
                                                     work / f"agent-{index}-{c.name}.log")))
        errors: list[str] = []
        try:
            _sleep_until(start + plan.warmup_s)
            c0 = lab.counters(bottleneck)
            l0 = {h: lab.link_counters(h) for h in linked}
            _sleep_until(start + plan.warmup_s + plan.duration_s)
            c1 = lab.counters(bottleneck)
            l1 = {h: lab.link_counters(h) for h in linked}
            outputs = []
            deadline = start + plan.warmup_s + plan.duration_s + plan.grace_s + 30
            for host, cfg, proc in agents:
                while proc.alive() and time.time() < deadline:
                    time.sleep(0.2)
                if proc.alive():
                    errors.append(f"agent on {host} did not finish; stopped")
                proc.stop()
                out = Path(cfg["out"])
                if out.exists():
                    outputs.append(json.loads(out.read_text()))
                else:
                    errors.append(f"agent on {host} wrote nothing: {proc.log_text()[-1500:]}")
        except BaseException:
            for _, _, proc in agents:
                proc.stop()
            raise
        if len(outputs) == len(agents):
            metrics, pages = run_metrics(cond, plan, rate, start, outputs, c0, c1, host_iw)
            metrics.update(link_metrics(l0, l1, access_bps, plan.duration_s))
            if metrics["pages_ok"] == 0 and cond.web_clients:
                errors.append("no page completed in the window")
        else:
            metrics, pages = {}, []
        for o in outputs:
            errors += [f"{o.get('host')}: {e}" for e in o.get("errors", [])[:5]]
        ok = not any("agent" in e for e in errors) and bool(metrics) and \
            (metrics.get("pages_ok", 0) > 0 or not cond.web_clients)
        run = WorkloadRun(cond, rep, ok, errors, metrics, pages)
        self._index += 1
        return run

    def _metadata(self, lab, pool, applied, servers) -> dict:
        return {
            **run_context(self.plan.to_json(), self.target, lab),
            "software": {"nginx": servers[0].version_info() if servers else None},
            "pool": pool_stats(pool),
            "profiles_applied": [applied.to_json()],
            "tls": None,
        }


class WorkloadRunner:
    """A workload plan's runs one after the other in one lab."""

    def __init__(self, plan: WorkloadPlan, out_dir: str | Path, *, target: str = "p4netem",
                 on_event: Event | None = None, mininet_log: str = "warning"):
        self.plan = plan
        self.out_dir = Path(out_dir)
        self.on_event = on_event or (lambda kind, data: None)
        self.runs: list[WorkloadRun] = []
        self.session = WorkloadLab(plan, out_dir, target=target, on_event=self.on_event,
                                   mininet_log=mininet_log)

    @property
    def metadata(self) -> dict:
        return self.session.metadata

    def run(self) -> list[WorkloadRun]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.session.start()
            for index, (cond, rep) in enumerate(self.plan.schedule()):
                self.on_event("run", {"index": index, "condition": cond, "rep": rep})
                run = self.session.run(cond, rep)
                self.runs.append(run)
                self.on_event("done", {"index": index, "run": run})
        finally:
            self.session.close()
        return self.runs


def _start_agent(ns: str, config: Path, log: Path) -> NsProcess:
    pkg_root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(pkg_root),
                                                       os.environ.get("PYTHONPATH")]))}
    return NsProcess(ns, [sys.executable, "-m", "p4netem_studies.harness.workload_agent", str(config)],
                     log, env=env)


def _sleep_until(t: float) -> None:
    while True:
        d = t - time.time()
        if d <= 0:
            return
        time.sleep(min(d, 0.5))


def write(out_dir: Path, plan: WorkloadPlan, runs: list[WorkloadRun], metadata: dict,
          summary: list[dict]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"runs": out_dir / "runs.csv", "pages": out_dir / "pages.csv",
             "summary": out_dir / "summary.csv", "json": out_dir / "results.json"}
    # Environment columns: the TCP state read when each IW setting was first applied.
    write_csv(paths["runs"], [r.row() for r in runs], metadata)
    page_rows = [{"key": r.condition.key, "rep": r.rep, **p} for r in runs for p in r.pages]
    write_csv(paths["pages"], page_rows)
    write_csv(paths["summary"], summary, metadata)
    doc = {"format": "p4netem-workload/1", "metadata": metadata, "plan": plan.to_json(),
           "summary": summary,
           "runs": [{**r.row(), "condition": r.condition.to_json(), "errors": r.errors}
                    for r in runs]}
    paths["json"].write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return paths


def run_workload(plan: WorkloadPlan, out_dir: str | Path, *, console=None,
                 target: str = "p4netem", verbose: bool = True) -> WorkloadOutcome:
    """Run a workload plan with progress on the terminal and write its files."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    console = console or Console()
    out = Path(out_dir)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console)
    task = progress.add_task("starting", total=plan.total_runs)

    def on_event(kind: str, data: dict) -> None:
        if kind == "stage":
            progress.update(task, description=data["text"])
        elif kind == "lab":
            lab = data["lab"]
            progress.console.print(f"lab {lab.topology.name} up: "
                                   f"{' '.join(lab.ns(h.name) for h in lab.topology.hosts)}")
        elif kind == "run":
            c = data["condition"]
            progress.update(task, description=f"{c.key} #{data['rep'] + 1}")
        elif kind == "done":
            progress.advance(task)
            r = data["run"]
            if verbose:
                m = r.metrics
                med = m.get("page_delay_median_ms")
                progress.console.print(
                    f"{r.condition.key:>32} #{r.rep + 1}: "
                    f"{m.get('pages_ok', 0):>4} pages, median delay "
                    f"{'-' if med is None else f'{med / 1000:.2f} s'}, util "
                    f"{m.get('utilisation_down', 0) or 0:.2f}, drops "
                    f"{m.get('drop_rate_down_pct') or 0:.2f}%, goodput "
                    f"{m.get('goodput_kbit', 0):.0f} kbit/s "
                    + ("[green]ok[/]" if r.ok else f"[red]FAILED[/] {'; '.join(r.errors)[:150]}"))

    runner = WorkloadRunner(plan, out, target=target, on_event=on_event)
    stop: BaseException | None = None
    try:
        with progress:
            runner.run()
    except (KeyboardInterrupt, SystemExit) as exc:
        stop = exc
        console.print("[yellow]stopped: the lab is down; writing the runs done so far[/]")
    runner.metadata.setdefault("host", {})["loadavg_end"] = loadavg()
    summary = summarize(plan, runner.runs)
    paths = write(out, plan, runner.runs, runner.metadata, summary) if runner.runs else {}
    if stop is not None:
        raise stop
    return WorkloadOutcome(plan, runner.runs, summary, runner.metadata, paths)
