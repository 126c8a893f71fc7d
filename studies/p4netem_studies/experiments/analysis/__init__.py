"""One analysis per study: the tables, CSVs and the plot of its main comparison.

Page-load studies (e1, e3, e4, e5): `analyze(exp, built, records, metadata, out) -> Analysis`
with the harness's run records and what each condition means (pageload.BuiltPlan).
The workload study (e2): `analyze(exp, outcome, out) -> Analysis`.
"""

from __future__ import annotations

import importlib

from .common import Analysis


def analyzer(name: str):
    if name not in ("e1", "e2", "e3", "e4", "e5"):
        raise ValueError(f"no analysis {name!r}")
    return importlib.import_module(f"{__name__}.{name}").analyze


__all__ = ["Analysis", "analyzer"]
