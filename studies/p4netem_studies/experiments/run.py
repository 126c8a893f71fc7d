"""Run one experiment (quick or full variant) and write everything into one directory.

Page-load experiments (E1, E3, E4, E5) run through the durable store (p4netem_studies.runs):
`run.db` holds the plan before the first load and each load's result the moment it ends, so a run
killed at any moment loses only the loads in flight; `resume_experiment` finishes it and every
file below is written from the store (`finish`), also for a run that was stopped.

    run.db                                the store (runs/store.py)

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
from .pageload import Cell
from ..runs.execute import ResumeRefused, check_resume, create, execute, run_lock, session_spans
from ..runs.session import Session
from ..runs.store import RunStore


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
        if sample is None and exp.sample is None:
            # The seed of a sample that is not there: it made one of size 1 (E1 --seed 7 ran
            # one cell of 18 conditions without a word).
            raise ValueError(f"--seed seeds the sample of --sample N; {exp.name} "
                             f"({'quick' if quick else 'full'}) samples nothing: give --sample N "
                             "too, or leave --seed out")
        base = exp.sample or Sample(size=sample)
        exp = exp.model_copy(update={"sample": Sample(size=sample or base.size,
                                                      seed=seed if seed is not None else base.seed,
                                                      method=base.method)})
    return exp


def run_experiment(name: str, out: Path, *, quick: bool = False, reps: int | None = None,
                   sample: int | None = None, seed: int | None = None, cc: str | None = None,
                   only: dict[str, list[str]] | None = None, duration_s: float | None = None,
                   console: Console | None = None, verbose: bool = True,
                   target: str = "p4netem", keep_pcaps: bool = False,
                   parallel: int | None = None, ray: str | None = None) -> ExperimentRun:
    console = console or Console()
    exp = prepare(name, quick=quick, sample=sample, seed=seed, cc=cc)
    out = Path(out)
    source = str(Path(name).resolve()) if Path(name).is_file() else name
    doc: dict = {"format": "p4netem-experiment/1", "experiment": exp.name, "title": exp.title,
                 "source": source,
                 "reproduces": exp.reproduces, "variant": "quick" if quick else "full",
                 "command": " ".join(shlex.quote(a) for a in sys.argv),
                 "overrides": {"reps": reps, "sample": sample, "seed": seed, "only": only,
                               "duration_s": duration_s, "congestion_control": cc},
                 "definition": exp.model_dump(mode="json"),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if isinstance(exp, PageloadExperiment):
        if duration_s is not None:
            raise ValueError("--duration is for workload experiments (E2)")
        session = Session(definition=exp.model_dump(mode="json"), repetitions=reps, only=only,
                          target=target, keep_pcaps=keep_pcaps)
        built = session.built
        plan = built.plan
        doc["plan"] = {"conditions": built.conditions, "loads": plan.total_loads,
                       "matrix_cells": built.matrix_cells, "sampled": built.sampled,
                       "timeout_s": plan.timeout_s}
        doc["cells"] = {k: c.to_json() for k, c in built.cells.items()}
        console.print(f"[bold]{exp.name}[/] ({'quick' if quick else 'full'}): {exp.title}\n"
                      f"{built.conditions} conditions x {plan.repetitions} loads = "
                      f"{plan.total_loads} loads on the {plan.topology} lab -> {out}")
    else:
        # A workload run (E2) is a whole lab's traffic for a while: runs go to labs as loads do.
        session = Session(definition=exp.model_dump(mode="json"), repetitions=reps, only=only,
                          target=target, kind="workload", duration_s=duration_s)
        plan = session.plan
        doc["plan"] = {"conditions": len(plan.conditions), "runs": plan.total_runs,
                       "duration_s": plan.duration_s, "warmup_s": plan.warmup_s}
        console.print(f"[bold]{exp.name}[/] ({'quick' if quick else 'full'}): {exp.title}\n"
                      f"{len(plan.conditions)} conditions x {plan.repetitions} runs of "
                      f"{plan.warmup_s:g}+{plan.duration_s:g} s on the {plan.topology} lab -> "
                      f"{out}")
    if ray:       # a bad address fails here, before the run directory is made
        from ..runs.cluster import connect
        connect(ray)
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        create(out, session, doc).close()
        # A new run's first write (an --out with a run in it is refused): the captures an earlier
        # run (`measure`, a removed run.db) left in OUT/pcaps go, as its other files are written
        # over, so that OUT/pcaps holds only this run's (the store's `files`).
        from ..harness.results import drop_other_pcaps
        drop_other_pcaps(out)
        return _execute_and_finish(out, console=console, verbose=verbose, parallel=parallel,
                                   ray=ray, kind="run")


def resume_experiment(out: Path, *, force: bool = False, parallel: int | None = None,
                      ray: str | None = None, console: Console | None = None,
                      verbose: bool = True, retry_failed: bool = False) -> ExperimentRun:
    """Finish a stopped run: the loads already stored are kept, the rest run with the same plan
    and seeds. Refuses (ResumeRefused) when the definition, the code or the machine's TCP
    settings changed, unless `force`. `retry_failed`: the loads stored as failed run again too
    (their records are kept aside in the store)."""
    console = console or Console()
    out = Path(out)
    RunStore.open(out).close()      # "no run store here" before run.lock is made in `out`
    with run_lock(out):             # RunInProgress while the run's own driver still runs
        return _resume_locked(out, force=force, parallel=parallel, ray=ray, console=console,
                              verbose=verbose, retry_failed=retry_failed)


def _resume_locked(out: Path, *, force: bool, parallel: int | None, ray: str | None, console,
                   verbose: bool, retry_failed: bool) -> ExperimentRun:
    store = RunStore.open(out)
    try:
        doc = store.meta("experiment") or {}
        over = doc.get("overrides") or {}
        try:
            current = prepare(doc["source"], quick=doc.get("variant") == "quick",
                              sample=over.get("sample"), seed=over.get("seed"),
                              cc=over.get("congestion_control")).model_dump(mode="json")
        except (ExperimentError, ValueError, KeyError) as exc:
            if not force:
                raise ResumeRefused([f"definition: cannot be read again ({exc})"]) from None
            current = None
        diffs = check_resume(store, force, current)
        retried = store.set_aside_failed() if retry_failed else []
    finally:
        store.close()
    if retried:
        console.print(f"running again {len(retried)} load(s) stored as failed (--retry-failed)")
    if diffs:
        console.print("[yellow]resuming although the setup changed (--force):[/]\n  " +
                      "\n  ".join(diffs))
    return _execute_and_finish(out, console=console, verbose=verbose, parallel=parallel, ray=ray,
                               kind="resume")


def _execute_and_finish(out: Path, *, console, verbose, parallel, ray, kind) -> ExperimentRun:
    try:
        execute(out, kind=kind, parallel=parallel, ray=ray, console=console, verbose=verbose)
    except (KeyboardInterrupt, SystemExit):
        # Stopped: every finished load is in the store; write the files from what is there.
        try:
            finish(out)
            console.print(f"[yellow]stopped: the labs are down; what was done is in {out} "
                          f"(`p4netem experiment resume {out}` finishes it)[/]")
        except Exception as exc:      # nothing stored yet, or the analysis needs more rows
            console.print(f"[yellow]stopped before the analysis could run: {exc}[/]")
        raise
    return finish(out)


def finish(out: Path) -> ExperimentRun:
    """Every output file from the store: runs.csv, summary.csv, results.json, the analysis and
    experiment.json. Works on a stopped run (the analysis of what is stored)."""
    from ..harness import results
    out = Path(out)
    store = RunStore.open(out)
    try:
        session = Session.from_json(store.meta("session"))
        doc = store.meta("experiment") or {}
        stored = store.results()
        labs = store.labs()
        sessions = session_spans(store)     # a killed session ends where it died
        total = len(store.jobs())
        files = store.files()
    finally:
        store.close()
    if not stored:
        raise ExperimentError(f"{out}: no load is stored yet")
    exp = session.experiment
    if session.kind == "workload":
        return _finish_workload(out, session, doc, stored, labs, sessions, total)
    built = session.built
    plan = built.plan
    records = [results.StoredRecord({**r.record, **({"pcap": files[r.key]["pcap"]}
                                                     if r.key in files else {})},
                                    session.condition(r.key.rsplit(" #", 1)[0]))
               for r in stored]
    metadata = merged_metadata(labs, sessions)
    metadata["run"] = {"loads_planned": total, "loads_stored": len(records),
                       "complete": len(records) == total}
    summary = results.summarize(plan, records)
    paths = results.write(out, plan, records, metadata, summary)
    analysis = analyzer(exp.analysis)(exp, built, records, metadata, out)
    return _experiment_run(out, exp, doc, analysis, paths, records, total, labs, sessions)


def _finish_workload(out: Path, session: Session, doc: dict, stored, labs, sessions,
                     total: int) -> ExperimentRun:
    from ..harness.workload import WorkloadOutcome, WorkloadRun, summarize, write
    exp, plan = session.experiment, session.plan
    conds = {c.key: c for c in plan.conditions}
    runs = []
    for r in stored:
        rec = r.record
        cond = conds[r.key.rsplit(" #", 1)[0]]
        errors = rec.get("errors") or []
        runs.append(WorkloadRun(cond, int(rec.get("rep", r.key.rsplit(" #", 1)[1])), r.ok,
                                errors if isinstance(errors, list) else [errors],
                                rec.get("metrics") or {}, rec.get("pages") or []))
    metadata = merged_metadata(labs, sessions)
    metadata["run"] = {"runs_planned": total, "runs_stored": len(runs),
                       "complete": len(runs) == total}
    summary = summarize(plan, runs)
    paths = write(out, plan, runs, metadata, summary)
    analysis = analyzer(exp.analysis)(exp, WorkloadOutcome(plan, runs, summary, metadata, paths), out)
    return _experiment_run(out, exp, doc, analysis, paths, runs, total, labs, sessions)


def _experiment_run(out: Path, exp, doc: dict, analysis, paths: dict, records: list, total: int,
                    labs: list[dict], sessions: list[dict]) -> ExperimentRun:
    """The run's result and experiment.json, for page-load and workload runs alike."""
    duration = _duration(sessions)
    run = ExperimentRun(exp, doc.get("variant") == "quick", out, analysis, loads=len(records),
                        failed=sum(1 for r in records if not r.ok), files=dict(paths),
                        duration_s=duration)
    run.files.update(analysis.files)
    run.files["experiment"] = out / "experiment.json"
    doc.update(duration_s=duration, findings=analysis.findings,
               loads={"planned": total, "stored": len(records), "failed": run.failed},
               sessions=[{k: s[k] for k in ("kind", "t_start", "t_end", "outcome", "labs",
                                            "command")} for s in sessions],
               labs=[{"id": l["id"], "node": l["node"]} for l in labs],
               files={k: str(v) for k, v in run.files.items()},
               analyzed=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    (out / "experiment.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return run


def _duration(sessions: list[dict]) -> float:
    """Seconds the run's sessions took together (a session still going counts until now)."""
    return round(sum((s["t_end"] or time.time()) - s["t_start"] for s in sessions), 1)


def merged_metadata(labs: list[dict], sessions: list[dict]) -> dict:
    """One metadata document for the run from its labs': the first lab's (software, topology,
    TCP per host) with every lab's profiles as applied and TCP state per initial window, and
    the labs and sessions themselves. Labs of one run share the definition, so what differs
    between them is where they ran."""
    metas = [l["metadata"] for l in labs if l.get("metadata")]
    if not metas:
        return {"labs": []}
    base = json.loads(json.dumps(metas[0]))
    profiles: list = []
    tcp: dict = {}
    for m in metas:
        for p in m.get("profiles_applied") or []:
            if p not in profiles:
                profiles.append(p)
        for iw, env in (m.get("tcp_environment_by_initcwnd") or {}).items():
            tcp.setdefault(str(iw), env)
    base["profiles_applied"] = profiles
    base["tcp_environment_by_initcwnd"] = {int(k) if str(k).isdigit() else k: v
                                           for k, v in tcp.items()}
    base["labs"] = [{"id": l["id"], "node": l["node"], "session": l["session"]} for l in labs]
    base["duration_s"] = _duration(sessions)
    return base


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
    if RunStore.exists(out):
        return finish(out).analysis
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
