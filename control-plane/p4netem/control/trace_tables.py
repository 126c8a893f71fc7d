"""Exact trace delivery's tables: a Mahimahi trace loaded into the switch's trace registers.

`trace_opportunity_ms` holds every loaded trace's timestamps and `trace_first_at` their per-ms
index (for each millisecond m of the period, the first opportunity at or after m); a profile
direction plays a trace when its set_impairment names the cells (LinkParams.trace, a
TracePlacement). Where the free cells are is read from the switch itself (the placements that
profile entries name), so any controller finds the same free space and nothing is kept on the side.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import pipeline as pl
from ..p4rt import update
from ..p4rt.entries import build_register_entry
from ..profiles import ProfileError
from ..profiles.errors import Problem
from ..profiles.link import TracePlacement
from .session import Session

if TYPE_CHECKING:  # a trace is parsed by its caller: a controller imports no timeline code to start
    from .trace import MahimahiTrace

__all__ = ["TraceTables", "first_at_index"]


def first_at_index(trace: MahimahiTrace) -> list[int]:
    """For each ms m in 0..period: the index of the first opportunity at or after m."""
    ms = trace.opportunities_ms
    return [bisect_left(ms, m) for m in range(trace.period_ms + 1)]


def _free(used: list[tuple[int, int]], need: int, size: int, what: str) -> int:
    """The first start of `need` cells in [0, size) that no used (start, length) overlaps."""
    at = 0
    for start, length in sorted(used):
        if start >= at + need:
            break
        at = max(at, start + length)
    if at + need > size:
        raise ProfileError([Problem("trace", f"needs {need} free cells of {what} ({size} cells, "
                                    f"{size - sum(n for _, n in used)} free): remove a trace from a rule first")])
    return at


class TraceTables:
    def __init__(self, session: Session):
        self.session = session

    def load(self, trace: MahimahiTrace, reserved: Sequence[TracePlacement] = ()) -> TracePlacement:
        """Write a trace into free cells of the trace registers (found from the placements the
        switch's profile entries name, and `reserved`: placements loaded but not applied yet) and
        return its placement, for LinkParams.trace. One Write with ROLLBACK_ON_ERROR: a refused load
        leaves nothing half written. Primary only."""
        self.session.ensure_connected()
        info = self.session.info
        state = self.session.state()
        used_cells, used_index = [], []
        for params in state.profiles.values():
            if params.get("trace_len"):
                used_cells.append((params["trace_base"], params["trace_len"]))
                used_index.append((params["trace_ms_base"], params["trace_period_ms"] + 1))
        used_cells += [(int(p.cells), int(p.opportunities)) for p in reserved]
        used_index += [(int(p.index_cells), int(p.period) + 1) for p in reserved]
        index = first_at_index(trace)
        base = _free(used_cells, len(trace.opportunities_ms), info.register(pl.TRACE_OPPORTUNITY_MS).size,
                     pl.TRACE_OPPORTUNITY_MS)
        ms_base = _free(used_index, len(index), info.register(pl.TRACE_FIRST_AT).size, pl.TRACE_FIRST_AT)
        updates = [update("MODIFY", build_register_entry(info, pl.TRACE_OPPORTUNITY_MS, base + i, v))
                   for i, v in enumerate(trace.opportunities_ms)]
        updates += [update("MODIFY", build_register_entry(info, pl.TRACE_FIRST_AT, ms_base + m, i))
                    for m, i in enumerate(index)]
        self.session.write(updates, f"load the trace {trace.source}", atomic=False, rollback=True)
        return TracePlacement(opportunities=len(trace.opportunities_ms), period=trace.period_ms, cells=base,
                              index_cells=ms_base)
