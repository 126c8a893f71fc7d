"""Run one experiment (quick or full variant) and write everything into one directory:

    runs.csv, summary.csv, results.json   the harness's files (page-load experiments), or
                                          the workload's (E2): runs.csv, pages.csv, summary.csv,
                                          results.json
    eN-*.csv, eN.png                      the study's analysis and its main comparison
    experiment.json                       the definition as run (variant, overrides), what each
                                          condition means, the headline numbers, the files

Every CSV carries the TCP environment columns (kernel, congestion control, sysctls, the IW the
routes carried); results.json holds the full metadata (software versions, profiles as applied,
per-host sysctls and routes per initial window).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from .analysis import Analysis, analyzer
from .definition import (ExperimentError, PageloadExperiment, Sample, WorkloadExperiment,
                         load_experiment, validate)
from .pageload import Cell, build_plan


@dataclass
class ExperimentRun:
    experiment: PageloadExperiment | WorkloadExperiment
    quick: bool
    out: Path
    analysis: Analysis
    loads: int = 0
    failed: int = 0
    files: dict[str, Path] = field(default_factory=dict)
    duration_s: float = 0.0


def prepare(name: str, *, quick: bool, sample: int | None = None, seed: int | None = None,
            cc: str | None = None):
    exp = load_experiment(name, quick=quick)
    if cc is not None:
        exp = exp.model_copy(update={"congestion_control": cc})
    if sample is not None or seed is not None:
        if not isinstance(exp, PageloadExperiment):
            raise ValueError(f"{exp.name} is a workload experiment: it has no matrix to sample")
        base = exp.sample or Sample(size=sample or 1)
        exp = exp.model_copy(update={"sample": Sample(size=sample or base.size,
                                                      seed=seed if seed is not None else base.seed,
                                                      method=base.method)})
    return exp


def run_experiment(name: str, out: Path, *, quick: bool = False, reps: int | None = None,
                   sample: int | None = None, seed: int | None = None, cc: str | None = None,
                   only: dict[str, list[str]] | None = None, duration_s: float | None = None,
                   console: Console | None = None, verbose: bool = True,
                   target: str = "p4netem", keep_pcaps: bool = False) -> ExperimentRun:
    console = console or Console()
    exp = prepare(name, quick=quick, sample=sample, seed=seed, cc=cc)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    doc: dict = {"format": "p4netem-experiment/1", "experiment": exp.name, "title": exp.title,
                 "reproduces": exp.reproduces, "variant": "quick" if quick else "full",
                 "command": " ".join(shlex.quote(a) for a in sys.argv),
                 "overrides": {"reps": reps, "sample": sample, "seed": seed, "only": only,
                               "duration_s": duration_s, "congestion_control": cc},
                 "definition": exp.model_dump(mode="json"),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if isinstance(exp, PageloadExperiment):
        if duration_s is not None:
            raise ValueError("--duration is for workload experiments (E2)")
        run = _run_pageload(exp, out, doc, quick=quick, reps=reps, only=only, console=console,
                            verbose=verbose, target=target, keep_pcaps=keep_pcaps)
    else:
        run = _run_workload(exp, out, doc, quick=quick, reps=reps, only=only,
                            duration_s=duration_s, console=console, verbose=verbose,
                            target=target)
    run.duration_s = round(time.time() - t0, 1)
    doc["duration_s"] = run.duration_s
    doc["findings"] = run.analysis.findings
    run.files.update(run.analysis.files)
    run.files["experiment"] = out / "experiment.json"
    doc["files"] = {k: str(v) for k, v in run.files.items()}
    (out / "experiment.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return run


def _run_pageload(exp: PageloadExperiment, out: Path, doc: dict, *, quick, reps, only, console,
                  verbose, target, keep_pcaps) -> ExperimentRun:
    from ..harness.measure import run_plan
    built = build_plan(exp, repetitions=reps, only=only)
    plan = built.plan
    doc["plan"] = {"conditions": built.conditions, "loads": plan.total_loads,
                   "matrix_cells": built.matrix_cells, "sampled": built.sampled,
                   "timeout_s": plan.timeout_s}
    doc["cells"] = {k: c.to_json() for k, c in built.cells.items()}
    console.print(f"[bold]{exp.name}[/] ({'quick' if quick else 'full'}): {exp.title}\n"
                  f"{built.conditions} conditions x {plan.repetitions} loads = "
                  f"{plan.total_loads} loads on the {plan.topology} lab -> {out}")
    outcome = run_plan(plan, out, console=console, target=target, keep_pcaps=keep_pcaps,
                       verbose=verbose, make_plot=False)
    analysis = analyzer(exp.analysis)(exp, built, outcome.records, outcome.metadata, out)
    run = ExperimentRun(exp, quick, out, analysis, loads=len(outcome.records),
                        failed=sum(1 for r in outcome.records if not r.ok),
                        files=dict(outcome.paths))
    return run


def _run_workload(exp: WorkloadExperiment, out: Path, doc: dict, *, quick, reps, only,
                  duration_s, console, verbose, target) -> ExperimentRun:
    from ..harness.workload import run_workload
    from .workload import build_workload_plan
    plan = build_workload_plan(exp, repetitions=reps, only=only, duration_s=duration_s)
    doc["plan"] = {"conditions": len(plan.conditions), "runs": plan.total_runs,
                   "duration_s": plan.duration_s, "warmup_s": plan.warmup_s}
    console.print(f"[bold]{exp.name}[/] ({'quick' if quick else 'full'}): {exp.title}\n"
                  f"{len(plan.conditions)} conditions x {plan.repetitions} runs of "
                  f"{plan.warmup_s:g}+{plan.duration_s:g} s on the {plan.topology} lab -> {out}")
    outcome = run_workload(plan, out, console=console, target=target, verbose=verbose)
    analysis = analyzer(exp.analysis)(exp, outcome, out)
    return ExperimentRun(exp, quick, out, analysis, loads=len(outcome.runs),
                         failed=sum(1 for r in outcome.runs if not r.ok),
                         files=dict(outcome.paths))


# ---- analysing a result directory again ---------------------------------------------------------

class StoredRun:
    """A load as results.json holds it, with what the analyses use of a RunRecord: ok, row()
    and condition.key."""

    def __init__(self, doc: dict):
        self._doc = doc
        self.ok = bool(doc.get("ok"))
        self.condition = _Key(doc["key"])

    def row(self) -> dict:
        row = {k: v for k, v in self._doc.items() if k not in ("condition", "wire", "radio")}
        if isinstance(row.get("errors"), list):
            row["errors"] = " | ".join(row["errors"])[:2000]
        return row


@dataclass(frozen=True)
class _Key:
    key: str


@dataclass
class _StoredBuilt:
    cells: dict


@dataclass
class _StoredWorkload:
    summary: list
    metadata: dict
    runs: list


def analyze_directory(out: Path) -> Analysis:
    """Run the experiment's analysis again on the files of an earlier run (after a change to
    the analysis, or on a full run's partial results): the tables, CSVs and plot are rewritten,
    experiment.json gets the new headline numbers."""
    out = Path(out)
    try:
        doc = json.loads((out / "experiment.json").read_text())
        results = json.loads((out / "results.json").read_text())
    except FileNotFoundError as exc:
        raise ExperimentError(f"{out}: not an experiment's result directory ({exc.filename} "
                              "missing)") from None
    exp = validate(doc["definition"], f"{out / 'experiment.json'}")
    if isinstance(exp, PageloadExperiment):
        built = _StoredBuilt({k: Cell(**v) for k, v in doc.get("cells", {}).items()})
        analysis = analyzer(exp.analysis)(exp, built, [StoredRun(r) for r in results["runs"]],
                                          results["metadata"], out)
    else:
        outcome = _StoredWorkload(results["summary"], results["metadata"], results["runs"])
        analysis = analyzer(exp.analysis)(exp, outcome, out)
    doc["findings"] = analysis.findings
    doc.setdefault("files", {}).update({k: str(v) for k, v in analysis.files.items()})
    doc["reanalyzed"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (out / "experiment.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return analysis
