"""What a report is made of, read from a run directory as `experiment run` / `experiment
analyze` leave it: experiment.json (the definition as run, the plan, what each condition means,
the headline numbers), results.json's metadata (host, build, software versions, the TCP
environment per initial window), every CSV (the harness's runs/summary/pages and the analysis'
eN-*.csv, typed back from text), the plots (eN.png) and text outputs (e4-tree.txt).

`read_run_directory` is the only place that knows the file layout: a report takes a `RunData`,
so another source of the same rows (a result store) needs only another reader.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..experiments.definition import ExperimentError

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?|-?inf|nan")
# Columns whose text is a label even when it looks like a number ("1.0" is HTTP/1.0, not 1).
TEXT_COLUMNS = {"http", "initcwnd_label", "key", "page", "profile", "profile_label", "client",
                "mode", "network", "label", "tls_versions", "alpn", "kernel", "errors",
                "tls_label"}


def typed(column: str, text: str):
    """A CSV cell back as the value the analysis wrote: '' -> None, True/False, int, float,
    else the text."""
    if text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    if text in ("True", "False"):
        return text == "True"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as f:
            return [{k: typed(k, v) for k, v in row.items() if k is not None}
                    for row in csv.DictReader(f)]
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{path}: unreadable ({exc})") from None


# The per-load (E2: per-run and per-page) rows each study's report is computed from.
ROW_TABLES = {"e1": ["e1-runs"], "e2": ["runs", "pages"], "e3": ["e3-runs"], "e4": ["e4-runs"],
              "e5": ["e5-runs"]}


@dataclass
class RunData:
    """One run: its documents, its tables by file stem ("runs", "e3-table", "pages" ...), its
    plots and text outputs by file stem."""

    directory: Path
    experiment: dict
    metadata: dict
    tables: dict[str, list[dict]] = field(default_factory=dict)
    plots: dict[str, Path] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def analysis(self) -> str:
        """e1 .. e5: which study's analysis (and claims) the run is."""
        return (self.experiment.get("definition") or {}).get("analysis", "")

    @property
    def name(self) -> str:
        return self.experiment.get("experiment", self.directory.name)

    def rows(self, name: str) -> list[dict]:
        return self.tables.get(name, [])


def read_run_directory(directory: Path) -> RunData:
    """A run directory's files as RunData; ExperimentError when it is not one."""
    directory = Path(directory)
    try:
        experiment = json.loads((directory / "experiment.json").read_text())
    except FileNotFoundError:
        if (directory / "run.db").exists():
            # A run killed outright writes no files, only its store.
            raise ExperimentError(f"{directory}: no experiment.json yet (the run stopped before "
                                  f"writing its files); `p4netem experiment analyze {directory}` "
                                  "writes them from its store") from None
        raise ExperimentError(f"{directory}: not an experiment's result directory "
                              "(experiment.json missing)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ExperimentError(f"{directory / 'experiment.json'}: unreadable ({exc})") from None
    metadata: dict = {}
    results = directory / "results.json"
    if results.exists():
        try:
            metadata = json.loads(results.read_text()).get("metadata") or {}
        except (OSError, json.JSONDecodeError) as exc:
            raise ExperimentError(f"{results}: unreadable ({exc})") from None
    data = RunData(directory, experiment, metadata)
    for path in sorted(directory.glob("*.csv")):
        data.tables[path.stem] = read_csv(path) if path.stat().st_size else []
    for path in sorted(directory.glob("*.png")):
        data.plots[path.stem] = path
    for path in sorted(directory.glob("e*-*.txt")):
        data.texts[path.stem] = path.read_text()
    if not data.analysis:
        raise ExperimentError(f"{directory / 'experiment.json'}: no definition.analysis "
                              "(which study's run is this?)")
    missing = [f"{n}.csv" for n in ROW_TABLES.get(data.analysis, []) if n not in data.tables]
    if missing:
        raise ExperimentError(f"{directory}: no {', '.join(missing)} (run `p4netem experiment "
                              f"analyze {directory}` first)")
    return data
