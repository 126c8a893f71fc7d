"""Run a plan with progress on the terminal, then write the result files, the table and the plot."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from . import results
from .plan import Plan
from .plot import plot
from .runner import RunRecord, Runner, pcap_name


# How often a run writes its files while it goes (at most; a load that takes longer writes them
# when it ends): a run killed outright keeps what it measured, and files of an earlier run into
# the same --out are not left beside the new one's as if they were its.
CHECKPOINT_S = 5.0


@dataclass
class Outcome:
    """What a finished run_plan produced. An interrupted one returns none: it writes the runs done
    so far (metadata["interrupted"]) and raises the stop again."""

    records: list[RunRecord]
    summary: list[results.ConditionSummary]
    paths: dict[str, Path]
    metadata: dict


def _line(rec: RunRecord, show_page: bool = False) -> str:
    c = rec.condition
    plt = "-" if rec.plt_ms is None else f"{rec.plt_ms / 1000:.3f} s"
    status = "[green]ok[/]" if rec.ok else f"[red]FAILED[/] {rec.errors[0][:120] if rec.errors else ''}"
    page = f" {c.page}" if show_page else ""
    return (f"{c.profile_label:>12} {c.variant:<16}{page} #{rec.rep + 1}: {plt:>9}  "
            f"{rec.wire.connections_opened:>2} conns  {rec.wire.packets_down:>4} pkts down  "
            f"{status}")


def run_plan(plan: Plan, out_dir: str | Path, *, console: Console | None = None,
             target: str = "p4netem", keep_pcaps: bool = False, verbose: bool = True,
             mininet_log: str = "warning", make_plot: bool = True) -> Outcome:
    """`make_plot=False` skips the per-profile plot (an experiment draws its own)."""
    console = console or Console()
    out_dir = Path(out_dir)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                        console=console, transient=False)
    task = progress.add_task("starting", total=plan.total_loads)

    def on_event(kind: str, data: dict) -> None:
        if kind == "stage":
            progress.update(task, description=data["text"])
        elif kind == "lab":
            lab = data["lab"]
            names = " ".join(lab.ns(h.name) for h in lab.topology.hosts)
            progress.console.print(f"lab {lab.topology.name} up: namespaces {names}; switch "
                                   f"gRPC {lab.switch.grpc_addr}")
        elif kind == "profile":
            a = data["applied"]
            note = ""
            if a.radio.requested and not a.radio.applied:
                note = f" [yellow]({a.radio.note})[/]"
            progress.console.print(f"[bold]profile {a.profile.name}[/]: {a.profile.description}{note}")
        elif kind == "load":
            c = data["condition"]
            progress.update(task, description=f"{c.profile_label} {c.variant} #{data['rep'] + 1}")
        elif kind == "done":
            progress.advance(task)
            if verbose:
                progress.console.print(_line(data["record"], len(plan.pages) > 1))
            if time.monotonic() - last_checkpoint[0] >= CHECKPOINT_S or not last_checkpoint[1]:
                checkpoint()

    def checkpoint() -> None:
        """The files of the loads done so far, marked incomplete (results.json's metadata.run);
        the first one removes an earlier run's plot, drawn only at the end, and its pcaps."""
        metadata = runner.finish_metadata()
        metadata["run"] = {"loads_planned": plan.total_loads, "loads_done": len(runner.records),
                           "complete": False}
        results.write(out_dir, plan, runner.records, metadata,
                      results.summarize(plan, runner.records))
        results.drop_other_pcaps(out_dir, kept(len(runner.records)))
        if not last_checkpoint[1] and make_plot:
            (out_dir / "plot.png").unlink(missing_ok=True)
        last_checkpoint[:] = [time.monotonic(), True]

    def kept(done: int) -> set[str]:
        """This run's captures in OUT/pcaps: those of its loads done (the loads run in order)."""
        return {pcap_name(i) for i in range(done)} if keep_pcaps else set()

    last_checkpoint: list = [time.monotonic(), False]    # when, and whether one was written
    runner = Runner(plan, out_dir, target=target, keep_pcaps=keep_pcaps, on_event=on_event,
                    mininet_log=mininet_log)
    stop: BaseException | None = None
    try:
        with progress:
            runner.run()
    except (KeyboardInterrupt, SystemExit) as exc:   # Ctrl-C, or SIGTERM (cli.signals)
        stop = exc
        console.print("[yellow]stopped: the lab is down; writing the runs done so far[/]")
    metadata = runner.finish_metadata()
    metadata["run"] = {"loads_planned": plan.total_loads, "loads_done": len(runner.records),
                       "complete": stop is None and len(runner.records) == plan.total_loads}
    summary = results.summarize(plan, runner.records)
    paths: dict[str, Path] = {}
    if runner.records:
        paths = results.write(out_dir, plan, runner.records, metadata, summary)
        results.drop_other_pcaps(out_dir, kept(len(runner.records)))
        if make_plot and any(s.plt for s in summary):
            paths["plot"] = plot(summary, out_dir / "plot.png",
                                 title=f"{plan.name}: page '{plan.pages[0]}' on the "
                                       f"{plan.topology} lab, page-load time (first SYN to last "
                                       "server packet)")
        elif make_plot:
            # No load gave a time: no plot, and none of an earlier run into the same --out
            # left beside these files to disagree with them.
            (out_dir / "plot.png").unlink(missing_ok=True)
    if stop is not None:
        raise stop
    return Outcome(runner.records, summary, paths, metadata)
