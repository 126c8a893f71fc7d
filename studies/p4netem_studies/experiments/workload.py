"""A workload experiment (E2) as the harness's WorkloadPlan: every combination of its matrix
blocks' web clients x bulk clients x HTTP model x initial window."""

from __future__ import annotations

import itertools
import math

from ..harness.plan import register_profile
from ..harness.workload import SizeModel, WorkloadCondition, WorkloadPlan
from .definition import WorkloadExperiment

# A day: E2's full variant measures 360 s per run.
MAX_DURATION_S = 86400.0


def _iw(value: int | str) -> tuple[int, ...]:
    return (value,) if isinstance(value, int) else tuple(int(v) for v in str(value).split("/"))


def build_workload_plan(exp: WorkloadExperiment, *, repetitions: int | None = None,
                        only: dict[str, list[str]] | None = None,
                        duration_s: float | None = None) -> WorkloadPlan:
    for p in exp.local_profiles():
        register_profile(p)
    known = {"web_clients", "bulk_clients", "http", "initcwnd"}
    if only and set(only) - known:
        raise ValueError(f"--only takes {', '.join(sorted(known))} for a workload experiment, "
                         f"not {', '.join(sorted(set(only) - known))}")
    conds: list[WorkloadCondition] = []
    seen: dict[str, set[str]] = {k: set() for k in known}   # every value --only could keep
    for block in exp.matrix:
        for web, bulk, http, iw in itertools.product(block.web_clients, block.bulk_clients,
                                                     block.http, block.initcwnd):
            cond = WorkloadCondition(web, bulk, http, _iw(iw))
            values = {"web_clients": str(web), "bulk_clients": str(bulk), "http": http,
                      "initcwnd": cond.initcwnd_label}
            for k, v in values.items():
                seen[k].add(v)
            if only and any(values[k] not in v for k, v in only.items()):
                continue
            if cond not in conds:
                conds.append(cond)
    for k, wanted in (only or {}).items():
        # A value no condition has was dropped without a word (pageload.build_plan too).
        if missing := [v for v in wanted if v not in seen[k]]:
            raise ValueError(("no condition left to run: " if missing == wanted else "")
                             + f"--only {k}={','.join(missing)}: no condition of this run has "
                             f"{'it' if len(missing) == 1 else 'them'}; {k} is one of "
                             f"{', '.join(sorted(seen[k]))}")
    if not conds:
        raise ValueError("no condition left to run" + (f" (--only {only})" if only else ""))
    w = exp.workload
    if duration_s is not None and not (math.isfinite(duration_s)
                                       and 0 < duration_s <= MAX_DURATION_S):
        # inf and nan passed `<= 0`: the run measured for ever.
        raise ValueError(f"--duration must be a number of seconds above 0 and at most "
                         f"{MAX_DURATION_S:g}, not {duration_s}")
    return WorkloadPlan(
        exp.name, conds, exp.profile, access_profile=exp.access_profile,
        duration_s=duration_s or exp.duration_s,
        warmup_s=exp.warmup_s, topology=exp.topology, topology_params=dict(exp.topology_params),
        repetitions=repetitions or exp.repetitions, objects_per_page=w.objects_per_page,
        sizes=SizeModel(w.size_distribution, w.size_shape, w.size_median, w.size_min,
                        w.size_max),
        pool_objects=w.pool_objects, think_s=tuple(w.think_s), bulk_size=w.bulk_size,
        window_clamp=(w.window_clamp_segments * w.mss if w.window_clamp_segments else None),
        http11=w.http11, congestion_control=exp.congestion_control, seed=exp.seed,
        description=exp.title)
