"""The study commands of `p4netem`: lab (Mininet labs), measure (page loads; docs/labs.md) and
experiment (the studies E1-E5; docs/experiments.md). `register` is the entry point the control
plane's CLI calls (group `p4netem.commands`), so that `p4netem` stays one command while the
control plane does not depend on this package."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from . import experiment_cmd, lab_cmd, measure_cmd
    app.add_typer(lab_cmd.app, name="lab")
    app.command("measure")(measure_cmd.measure)
    app.add_typer(experiment_cmd.app, name="experiment")
