"""`p4netem experiment recheck DIR`: judge a run's stored loads by today's validity checks.

A check added to the harness after a run stored its loads (the silence check of
harness/metrics.silence_understates came after E4 and E5 had stored thousands) would otherwise only
apply to new loads, and the old rows would keep standing with figures the harness now refuses.
This applies the checks that a stored record alone can decide, with the run's own settings (its
definition's `silence_s`), and, unless `dry_run`, turns each refused ok load into a failed one with
the same error text the runner writes today (RunStore.refail keeps the original record), so that
`experiment status` lists it, `experiment analyze` leaves it out and `experiment resume
--retry-failed` measures it again.

Checks that need the load's packets (the capture's own figures) are not redone here: they are
recomputed only by measuring again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..harness.metrics import silence_understates
from .session import Session
from .store import RunStore


@dataclass
class RecheckResult:
    checked: int                       # ok loads judged
    refused: dict[str, str] = field(default_factory=dict)   # key -> why (newly failed)
    skipped: str | None = None         # why nothing could be judged (a workload run)
    applied: bool = False


def record_problems(record: dict, silence_s: float) -> list[str]:
    """What today's harness refuses in a stored load's record (empty: it stands). One entry per
    check a record can decide, each the runner's own rule."""
    problems = []
    if cut := silence_understates(record.get("plt_ms"), bool(record.get("silence_cut")),
                                  record.get("loader_elapsed_ms"), silence_s):
        problems.append(cut)
    return problems


def recheck(directory: Path, *, dry_run: bool = False) -> RecheckResult:
    store = RunStore.open(directory)
    try:
        session = Session.from_json(store.meta("session"))
        if session.kind != "pageload":
            return RecheckResult(0, skipped=f"a {session.kind} run: its loads have no per-load "
                                            "validity checks to apply again")
        silence_s = session.experiment.silence_s
        ok = [r for r in store.results() if r.ok]
        found = {r.key: record_problems(r.record, silence_s) for r in ok}
        refused = {k: " | ".join(p) for k, p in found.items() if p}
        result = RecheckResult(len(ok), refused)
        if refused and not dry_run:
            by_key = {r.key: r.record for r in ok}
            store.refail({k: {**by_key[k], "ok": False,
                              "errors": list(by_key[k].get("errors") or []) + found[k]}
                          for k in refused}, reason="experiment recheck")
            result.applied = True
        return result
    finally:
        store.close()
