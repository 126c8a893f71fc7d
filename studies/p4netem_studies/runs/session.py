"""What a run is, as data every lab can rebuild: the experiment's definition (as validated,
with --sample/--cc already applied), the options (repetitions, --only), the target and whether
pcaps are kept. A lab gets this `Session` and rebuilds the same plan from it (build_plan is
deterministic), so jobs only name a condition by its key and a repetition.

A job is one load: key "<condition key> #<repetition>", its shard (loads that share a profile and
radio setting: a lab that stays on its shard never switches profiles), its seeds and its CPU weight
(how much of a core its lab keeps busy, for capacity.py).
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import asdict, dataclass
from functools import cached_property

from .store import Job

# Run order inside the plan keeps the harness's: profile by profile, repetition-major.


@dataclass(frozen=True)
class Session:
    definition: dict
    repetitions: int | None = None
    only: dict | None = None
    target: str = "p4netem"
    keep_pcaps: bool = False
    kind: str = "pageload"          # pageload | workload (E2)
    duration_s: float | None = None  # workload: the measured window instead of the definition's

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> "Session":
        return cls(**doc)

    @cached_property
    def experiment(self):
        from ..experiments.definition import validate
        return validate(self.definition, "the run's definition")

    @cached_property
    def built(self):
        """The harness plan (BuiltPlan; a WorkloadPlan for a workload); registers the
        experiment's own profiles in this process."""
        if self.kind == "workload":
            from ..experiments.workload import build_workload_plan
            return build_workload_plan(self.experiment, repetitions=self.repetitions,
                                       only=self.only, duration_s=self.duration_s)
        from ..experiments.pageload import build_plan
        return build_plan(self.experiment, repetitions=self.repetitions, only=self.only)

    @property
    def plan(self):
        return self.built if self.kind == "workload" else self.built.plan

    def condition(self, key: str):
        return self._conditions[key]

    @cached_property
    def _conditions(self) -> dict:
        return {c.key: c for c in self.plan.conditions}

    def jobs(self) -> list[Job]:
        plan = self.plan
        out = []
        for seq, (cond, rep) in enumerate(plan.schedule()):
            key = job_key(cond.key, rep)
            if self.kind == "workload":
                # One shared bottleneck per lab, agents on every client host: a whole core's
                # worth of work, and one shard (the lab is the same for every condition).
                out.append(Job(key, seq, "workload", {"agents": f"{plan.seed}/{rep}"},
                               {"condition": cond.key, "rep": rep, "cpu_weight": 1.0}))
                continue
            out.append(Job(key, seq, shard_of(cond), {"switch": derive_seed(plan.seed, key)},
                           {"condition": cond.key, "rep": rep,
                            "cpu_weight": round(cpu_weight(cond), 3)}))
        return out


def job_key(condition_key: str, rep: int) -> str:
    return f"{condition_key} #{rep}"


def shard_of(cond) -> str:
    return f"{cond.profile}{'+radio' if cond.radio else ''}"


def derive_seed(base: int, key: str) -> int:
    """A 63-bit seed from the plan's seed and the job's key: the same load draws the same
    random numbers whichever lab runs it and whenever."""
    h = hashlib.sha256(f"{base}/{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def cpu_weight(cond) -> float:
    """Fraction of a core a lab keeps busy on this condition, from what dominates it: a slow
    link mostly waits (GPRS, modem: a few %), a fast one keeps the switch and the endpoints busy
    in proportion to its rate, and a browser costs a good part of a core on its own. Measured
    loosely on this 2-core machine with `top` during quick slices; only used to pick how many
    labs to run at once."""
    from ..harness.plan import resolve_profile
    from ..harness.protocols import protocol
    prof = resolve_profile(cond.profile)
    rates = [float(r) for r in (prof.downlink.rate, prof.uplink.rate) if r]
    rtt_ms = (int(prof.uplink.delay) + int(prof.downlink.delay)) / 1e6
    if rates:
        # The loader, the servers and the switch work in proportion to the bytes per second.
        weight = 0.05 + min(0.9, min(rates) / 20e6)
    else:
        # Unshaped: as fast as the CPUs go between round trips; long round trips mean waiting.
        weight = 0.15 + min(0.5, 10.0 / max(rtt_ms, 1.0))
    if protocol(cond.protocol).browser:
        weight += 0.35
    return min(weight, 1.0)


def median_weight(jobs: list[Job]) -> float:
    return statistics.median(j.spec.get("cpu_weight", 0.5) for j in jobs) if jobs else 0.5
