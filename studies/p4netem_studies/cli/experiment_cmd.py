"""`p4netem experiment`: the classic studies of experiments.md (E1-E5), as data in experiments/.

    p4netem experiment list
    p4netem experiment show e3-spdy [--quick]
    p4netem experiment run e1-microscape --quick [--reps N] [--out DIR]
    p4netem experiment run e4-multiplexing --sample 200 --seed 7
    p4netem experiment run e2-initial-window --quick --only http=1.0 --duration 20
    p4netem experiment run e3-spdy --sample 200 --parallel 3
    p4netem experiment run e5-cellular --ray auto            (or --ray HEAD:6379: a cluster)
    p4netem experiment status DIR [--json]
    p4netem experiment resume DIR [--force] [--parallel N] [--ray ADDRESS]
    p4netem experiment analyze results/experiments/e4-multiplexing-full-...
    p4netem experiment report results/experiments/e4-multiplexing-full-...

`run` brings up the experiment's lab, runs its matrix (the quick variant with --quick: a few
minutes on a 2-core machine; the full one reproduces the study's matrix and can take hours),
prints the study's table and writes the harness's files, the analysis CSVs, the comparison plot
and experiment.json into --out (default results/experiments/NAME-quick|full-TIME). `analyze`
runs the analysis again on such a directory (after a change to it, or on a stopped run's files).
Page-load runs are durable: each load is committed to DIR/run.db when it ends, so `status` reads a
running or stopped run and `resume` finishes it (refusing, naming the change, when the definition,
the code or the machine's TCP settings changed; --force accepts). `--parallel N` runs N labs at
once (default: what the machine's cores and memory allow for these conditions); `--ray` runs the
labs as Ray actors, locally ('auto') or on a cluster (docs/experiments.md). `report` writes a
run's self-contained HTML report (DIR/report.html).

Exit codes: 0 every load ok, 1 some failed or the run failed (files still written), 2 bad usage
or an invalid definition, 130 Ctrl-C / 143 SIGTERM (what was done is written, the lab is down).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from p4netem.cli.signals import run_recording

from . import run_options

# The experiment definitions (pydantic models, the profiles) are imported by the commands that use
# them: every `p4netem` command imports this module to build its command line.

app = typer.Typer(help="The studies of experiments.md (E1-E5): list, show, run.",
                  no_args_is_help=True)
console = Console()
if not console.is_terminal:
    console = Console(width=150)
err = Console(stderr=True)


def _only(pairs: list[str]) -> dict[str, list[str]] | None:
    out: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise typer.BadParameter(f"--only takes KEY=VALUE[,VALUE...], not {pair!r}")
        out.setdefault(key, []).extend(v.strip() for v in value.split(","))
    return out or None


def _size(exp) -> str:
    from ..experiments.definition import PageloadExperiment
    from ..experiments.pageload import build_plan
    from ..experiments.workload import build_workload_plan
    if isinstance(exp, PageloadExperiment):
        b = build_plan(exp)
        sampled = f" (sampled from {b.matrix_cells} cells)" if b.sampled else ""
        return (f"{b.conditions} conditions{sampled} x {b.plan.repetitions} = "
                f"{b.plan.total_loads} loads")
    p = build_workload_plan(exp)
    return (f"{len(p.conditions)} conditions x {p.repetitions} runs of "
            f"{p.warmup_s:g}+{p.duration_s:g} s = {p.total_runs * (p.warmup_s + p.duration_s) / 60:.0f}"
            " min of traffic")


@app.command("list")
def list_experiments() -> None:
    """The experiments in experiments/ with the size of their quick and full variants."""
    from ..experiments.definition import ExperimentError, experiment_names, load_experiment

    t = Table("name", "kind", "title", "quick", "full")
    for name in experiment_names():
        try:
            full = load_experiment(name)
            quick = load_experiment(name, quick=True)
            t.add_row(name, full.kind, full.title, _size(quick), _size(full))
        except (ExperimentError, ValueError) as exc:
            t.add_row(name, "?", f"[red]invalid: {exc}[/]", "-", "-")
    console.print(t)


@app.command("show")
def show(name: str = typer.Argument(..., help="Experiment name (or e1..e5) or YAML file."),
         quick: bool = typer.Option(False, "--quick", help="The quick variant.")) -> None:
    """What an experiment reproduces and the conditions it runs."""
    from ..experiments.definition import ExperimentError, PageloadExperiment, load_experiment

    try:
        exp = load_experiment(name, quick=quick)
    except (ExperimentError, ValueError) as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(2)
    console.print(f"[bold]{exp.name}[/] ({'quick' if quick else 'full'}, {exp.kind}): {exp.title}")
    console.print(f"reproduces: {exp.reproduces}")
    if exp.description:
        console.print(exp.description)
    console.print(f"size: {_size(exp)}")
    if isinstance(exp, PageloadExperiment):
        from ..experiments.pageload import build_plan
        b = build_plan(exp)
        t = Table("profile", "page", "client", "protocol", "IW", "TLS", "loader options",
                  title="conditions")
        for c in b.plan.conditions[:200]:
            cell = b.cells[c.key]
            t.add_row(c.profile_label, c.page, cell.client + (f" {cell.mode}" if cell.mode else ""),
                      c.protocol, str(c.initcwnd), "yes" if c.tls else "no",
                      " ".join(c.loader_args) or "-")
        if len(b.plan.conditions) > 200:
            t.caption = f"... and {len(b.plan.conditions) - 200} more"
        console.print(t)
    else:
        from ..experiments.workload import build_workload_plan
        p = build_workload_plan(exp)
        t = Table("web clients", "bulk clients", "HTTP", "IW", title="conditions")
        for c in p.conditions:
            t.add_row(str(c.web_clients), str(c.bulk_clients), c.http, c.initcwnd_label)
        console.print(t)
        console.print(f"profile {p.profile} on the {p.topology} lab; workload: "
                      f"{exp.workload.model_dump()}")


@app.command("run")
def run(
    name: str = typer.Argument(..., help="Experiment name (or e1..e5) or YAML file."),
    quick: bool = typer.Option(False, "--quick", help="The quick variant (a few minutes)."),
    reps: int = typer.Option(None, "--reps", min=1, max=1000, help="Repetitions per condition "
                             "(default: the definition's; 1..1000, the definitions' own range: "
                             "the whole plan is written to the store before the first load)."),
    out: Path = typer.Option(None, "--out", help="Result directory."),
    sample: int = typer.Option(None, "--sample", min=1, help="Run this many cells of the matrix "
                               "(stratified unless the definition says random)."),
    seed: int = typer.Option(None, "--seed", help="Seed of the sample."),
    cc: str = typer.Option(None, "--cc", help="Congestion control of every host instead of "
                           "the definition's (reno, cubic, bbr: any algorithm the kernel has "
                           "loaded; set on every route of the lab, nothing machine-wide)."),
    only: list[str] = typer.Option([], "--only", help="Keep conditions with KEY=VALUE[,...] "
                                   "(page loads: profile, page, client, mode, initcwnd, tls, "
                                   "protocol; workload: web_clients, bulk_clients, http, "
                                   "initcwnd). Repeatable."),
    duration: float = typer.Option(None, "--duration", help="Workload experiments: seconds "
                                   "measured per run (default: the definition's)."),
    keep_pcaps: bool = run_options.KEEP_PCAPS,
    target: str = run_options.TARGET,
    quiet: bool = run_options.QUIET,
    parallel: int = typer.Option(None, "--parallel", min=1, max=64, help="Labs at once "
                                 "(default: from the machine's cores and memory and the "
                                 "conditions' load)."),
    ray: str = typer.Option(None, "--ray", help="Run the labs as Ray actors: 'auto' starts a "
                            "local Ray, HOST:PORT joins a cluster (`ray start --head`)."),
    baseline: Path = run_options.BASELINE,
    save_baseline: bool = run_options.SAVE_BASELINE,
    tolerance: list[str] = run_options.TOLERANCE,
) -> None:
    """Run an experiment: table, CSVs, the comparison plot and experiment.json in --out."""
    from ..experiments.definition import ExperimentError, PageloadExperiment
    from ..experiments.run import prepare, run_experiment
    from ..web.tcp_tuning import check_congestion_control
    try:
        exp = prepare(name, quick=quick, sample=sample, seed=seed, cc=cc)
        if exp.congestion_control:
            try:
                check_congestion_control(exp.congestion_control)
            except ValueError as exc:
                raise ValueError(f"{'--cc' if cc else exp.name + ': congestion_control'}: "
                                 f"{exc}") from None
        from ..harness.baseline import check_options
        check_options(baseline, save_baseline, tolerance)
        run_options.check_target(target)
        filters = _only(only)
        # Validate the whole plan before any lab comes up.
        if isinstance(exp, PageloadExperiment):
            if duration is not None:
                # Was found only once the run began: exit 1, "experiment failed".
                raise ValueError(f"--duration is for workload experiments (E2); {exp.name} "
                                 "loads pages")
            from ..experiments.pageload import build_plan
            build_plan(exp, repetitions=reps, only=filters)
        else:
            from ..experiments.workload import build_workload_plan
            build_workload_plan(exp, repetitions=reps, only=filters, duration_s=duration)
    except (ExperimentError, ValueError, typer.BadParameter) as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(2)
    from ..runs.store import RunStore
    out_dir = out or (Path("results") / "experiments" /
                      f"{exp.name}-{'quick' if quick else 'full'}-{time.strftime('%Y%m%d-%H%M%S')}")
    if RunStore.exists(out_dir):
        err.print(f"[red]error: {escape(str(out_dir))} already holds a run; finish it with "
                  f"`p4netem experiment resume {escape(str(out_dir))}` or pick another --out[/]")
        raise typer.Exit(2)
    try:
        run_options.check_out_dir(out_dir)
    except ValueError as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(2)
    result = _guarded(lambda: run_experiment(
        name, out_dir, quick=quick, reps=reps, sample=sample, seed=seed, cc=cc, only=filters,
        duration_s=duration, console=console, verbose=not quiet, target=target, keep_pcaps=keep_pcaps,
        parallel=parallel, ray=ray), out_dir)
    _print_result(result)
    from ..harness.baseline import report as baseline_report
    if baseline_report(out_dir, baseline, save_baseline, tolerance, console, err):
        raise typer.Exit(1)


def _print_result(result) -> None:
    for table in result.analysis.tables:
        console.print(table)
    for kind, path in result.files.items():
        console.print(f"{kind:14} {path}")
    console.print(f"took {result.duration_s} s")
    if result.failed:
        err.print(f"[red]error: {result.failed} of {result.loads} runs failed[/] (see runs.csv)")
        raise typer.Exit(1)


@app.command("analyze")
def analyze(directory: Path = typer.Argument(..., help="A result directory of `experiment run`.")
            ) -> None:
    """Analyse an experiment's result directory again: tables, CSVs, plot, experiment.json."""
    from ..experiments.definition import ExperimentError
    from ..experiments.run import analyze_directory
    from ..runs.store import StoreError
    try:
        result = analyze_directory(directory)
    except (ExperimentError, StoreError, ValueError, KeyError) as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(1)
    for table in result.tables:
        console.print(table)
    for kind, path in result.files.items():
        console.print(f"{kind:14} {path}")


def _run_errors():
    from ..runs.cluster import ClusterError
    from ..runs.driver import RunFailed
    from ..runs.execute import ResumeRefused, RunInProgress
    from ..runs.store import StoreError
    return {ClusterError: 2, StoreError: 2, ResumeRefused: 2, RunInProgress: 2, RunFailed: 1}


def _guarded(fn, out_dir):
    """One-line errors (exit 2 for bad input, 1 for a failed run) for what the user can fix; the
    rest (Ctrl-C, SIGTERM) as every p4netem command handles it (cli.signals)."""
    known = _run_errors()
    try:
        return run_recording("experiment", out_dir, fn)
    except tuple(known) as exc:
        code = next(c for t, c in known.items() if isinstance(exc, t))
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(code)


@app.command("resume")
def resume(directory: Path = typer.Argument(..., help="The --out of a stopped `experiment run`."),
           force: bool = typer.Option(False, "--force", help="Resume although the definition, "
                                      "the code or the machine's TCP settings changed."),
           parallel: int = typer.Option(None, "--parallel", min=1, max=64, help="Labs at once."),
           ray: str = typer.Option(None, "--ray", help="'auto' or HOST:PORT of a Ray cluster."),
           quiet: bool = run_options.QUIET,
           retry_failed: bool = typer.Option(False, "--retry-failed", help="Run the loads "
                                             "stored as failed again too (their records are "
                                             "kept in the store).")) -> None:
    """Finish a stopped run: skip the loads stored, run the rest with the same plan and seeds."""
    from ..experiments.run import resume_experiment
    result = _guarded(lambda: resume_experiment(directory, force=force, parallel=parallel, ray=ray,
                                                console=console, verbose=not quiet,
                                                retry_failed=retry_failed), directory)
    _print_result(result)


@app.command("status")
def status_cmd(directory: Path = typer.Argument(..., help="A run directory."),
               as_json: bool = typer.Option(False, "--json", help="Machine-readable.")) -> None:
    """Done / total, failed loads and why, elapsed time and an estimate of what is left."""
    import json as _json

    from ..runs.execute import format_duration, status
    from ..runs.store import StoreError
    try:
        st = status(directory)
    except StoreError as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(2)
    if as_json:
        print(_json.dumps(st.to_json(), indent=1, default=str))
        return
    exp = st.experiment
    last = st.sessions[-1] if st.sessions else {}
    state = ("complete" if st.done == st.total else
             ("running" if st.driver_alive else "killed (resume it)" if st.driver_alive is False
              else "running or killed") if last and last.get("t_end") is None else
             f"stopped ({last.get('outcome')})" if last else "not started")
    console.print(f"[bold]{exp.get('experiment', '?')}[/] ({exp.get('variant', '?')}): "
                  f"{st.done}/{st.total} loads stored, {st.ok} ok, {len(st.failed)} failed; {state}")
    console.print(f"elapsed {format_duration(st.elapsed_s)} over {len(st.sessions)} session(s); "
                  f"left: about {format_duration(st.left_s)}"
                  + (f" on {st.labs_running} lab(s)" if st.labs_running else "")
                  + (" (resume without --parallel)" if st.labs_running and st.labs_of == "resume"
                     and st.done < st.total else ""))
    for key, why in st.failed[:50]:
        console.print(f"  [red]failed[/] {escape(key)}: {escape(why[:200])}")
    if len(st.failed) > 50:
        console.print(f"  ... and {len(st.failed) - 50} more (--json)")


@app.command("recheck")
def recheck_cmd(directory: Path = typer.Argument(..., help="A run directory."),
                dry_run: bool = typer.Option(False, "--dry-run", help="List what today's checks "
                                             "refuse; change nothing.")) -> None:
    """Judge the stored loads by today's validity checks: an ok load they refuse becomes failed
    (its record is kept in the store), so that `resume --retry-failed` measures it again."""
    from ..experiments.definition import ExperimentError
    from ..runs.recheck import recheck
    from ..runs.store import StoreError
    try:
        res = recheck(directory, dry_run=dry_run)
    except (StoreError, ExperimentError) as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]")
        raise typer.Exit(2)
    if res.skipped:
        console.print(f"nothing to recheck: {escape(res.skipped)}")
        return
    for key, why in res.refused.items():
        console.print(f"  [red]refused[/] {escape(key)}: {escape(why)}")
    verb = "would become" if dry_run else "now"
    console.print(f"{len(res.refused)} of {res.checked} ok loads {verb} failed"
                  + (f"; `p4netem experiment resume {directory} --retry-failed` measures them "
                     "again, `experiment analyze` leaves them out" if res.refused and not dry_run
                     else ""))


@app.command("report")
def report(
    directory: Path = typer.Argument(..., help="A result directory of `experiment run` (or "
                                     "`analyze`)."),
    out: Path = typer.Option(None, "--out", help="The page to write (default DIR/report.html)."),
    resamples: int = typer.Option(2000, "--resamples", min=200, max=100_000,
                                  help="Bootstrap resamples per interval."),
    confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999,
                                     help="Confidence of the intervals."),
    seed: int = typer.Option(1, "--seed", min=0, help="Seed of the bootstrap."),
) -> None:
    """Write the run's report: one self-contained HTML page (the study's tables and plots,
    bootstrap intervals on its medians and gains, the environment, and the original study's
    conclusions checked on the rows), viewable offline."""
    from ..experiments.definition import ExperimentError
    from ..report import read_run_directory
    from ..report.html import incomplete, write_report
    if out is not None and (out.is_dir() or not out.absolute().parent.is_dir()):
        # Was "[Errno 20] Not a directory: ..." after the whole report was computed.
        err.print(f"[red]error: --out {escape(str(out))}: "
                  + ("is a directory; name the page to write" if out.is_dir() else
                     f"{escape(str(out.absolute().parent))} is not a directory") + "[/]",
                  soft_wrap=True)
        raise typer.Exit(2)
    try:
        data = read_run_directory(directory)
        path, claims = write_report(data, out, seed=seed, resamples=resamples,
                                    confidence=confidence)
    except (ExperimentError, ValueError, KeyError, OSError) as exc:
        err.print(f"[red]error: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(1)
    t = Table("verdict", "claim of the original study", "subjects",
              title=f"{data.name}: the original's conclusions on this run", title_justify="left")
    for c in claims:
        t.add_row(c.verdict, escape(c.claim), escape(c.summary))
    console.print(t)
    console.print(f"{'report':14} {path}")
    if part := incomplete(data.experiment):
        err.print(f"[yellow]warning:[/] an incomplete run: {part[0]} of {part[1]} loads stored; "
                  f"the verdicts are those loads' (`p4netem experiment resume "
                  f"{escape(str(directory))}` runs the rest)", soft_wrap=True)
    from ..report.claims import NOT_MEASURED
    from ..report.reader import ROW_TABLES
    if claims and all(c.verdict == NOT_MEASURED for c in claims):
        # A quick slice leaves some claims unmeasured, never all: either the tables are empty or
        # cut short, or the run was cut to conditions no claim compares (`--only initcwnd=10` of
        # E3, whose claims compare IW 3 with IW 10: that was blamed on the CSVs too).
        if any(not data.rows(n) for n in ROW_TABLES.get(data.analysis, [])):
            err.print(f"[yellow]warning:[/] no claim could be checked: {escape(str(directory))}'s result "
                      "tables hold no rows for them (empty or truncated CSVs?); `p4netem experiment analyze "
                      f"{escape(str(directory))}` writes them again from the run's store", soft_wrap=True)
        else:
            only = (data.experiment.get("overrides") or {}).get("only") or {}
            cut = " ".join(f"--only {k}={','.join(v)}" for k, v in only.items())
            err.print("[yellow]warning:[/] no claim could be checked: none of the run's conditions is "
                      "one the claims compare" + (f" (it ran {escape(cut)})" if cut else "")
                      + f"; `p4netem experiment show {escape(data.name)}` lists the study's conditions",
                      soft_wrap=True)
