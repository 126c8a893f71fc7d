"""The jitter distribution tables of `dist_table`: load the user table, read any of the four."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from .. import pipeline as pl
from ..p4rt import P4RuntimeError, update
from ..p4rt.encoding import decode
from ..p4rt.entries import build_register_entry
from ..profiles import ProfileError
from ..profiles.distribution import TABLE_LEN, DistTable, check_table
from ..profiles.errors import Problem
from ..profiles.link import JitterDistribution
from .session import Session

__all__ = ["Distributions", "TABLES", "table_distribution"]


TABLES = tuple(d.value for d in JitterDistribution if d.code >= pl.JitterDist.NORMAL)  # normal .. user


def table_distribution(which: str | JitterDistribution, where: str = "distribution") -> JitterDistribution:
    """The distribution of one table of dist_table (`normal`, `pareto`, `paretonormal`, `user`;
    any case). ProfileError at `where` naming the allowed tables otherwise (`none` and `uniform`
    are distributions without a table)."""
    try:
        dist = JitterDistribution.parse(which)
    except ValueError:
        dist = None
    if dist is None or dist.code < pl.JitterDist.NORMAL:
        shown = which.value if isinstance(which, JitterDistribution) else which
        raise ProfileError([Problem(where, f"{shown!r} is not a distribution table; allowed {', '.join(TABLES)}"
                                    + (" (it has no table)" if dist is not None else ""))])
    return dist


class Distributions:
    def __init__(self, session: Session):
        self.session = session

    def load(self, table: DistTable | Sequence[int]) -> DistTable:
        """Write the user table of dist_table: what `jitter_distribution: user` draws from (a
        DistTable from load_dist/load_samples, or TABLE_LEN int16 cells in sigma/8192 units).
        Checked first (ProfileError, nothing written); then one Write of every cell with
        ROLLBACK_ON_ERROR, so a refused load leaves the old table whole. Primary only. A profile
        already using the user table draws from the new cells from then on (a packet in the
        middle of the write may get an old or a new cell). `reset --hard` (push_pipeline with
        keep_state=False) or a switch restart puts the zeros back."""
        if not isinstance(table, DistTable):
            values = check_table(table)
            table = DistTable(values=values, source="distribution table", entries=TABLE_LEN)
        else:
            check_table(table.values, table.source)
        self.session.ensure_connected()
        info = self.session.info
        base = self._base(JitterDistribution.USER)
        # Two's complement in the bit<16> cells (docs/pipeline-contract.md).
        updates = [update("MODIFY", build_register_entry(info, pl.DIST_TABLE, base + i, v & 0xFFFF))
                   for i, v in enumerate(table.values)]
        self.session.write(updates, "load the user distribution table", atomic=False, rollback=True)
        return table

    def read(self, which: str | JitterDistribution = JitterDistribution.USER) -> tuple[int, ...]:
        """The TABLE_LEN signed cells of one table of dist_table as the switch holds them: `user`
        (default; all zero until loaded), or the built-in `normal`, `pareto`, `paretonormal`."""
        dist = table_distribution(which)
        self.session.ensure_connected()
        base = self._base(dist)
        info = self.session.info
        client = self.session.client

        def read() -> tuple[int, ...]:
            cells = dict.fromkeys(range(base, base + TABLE_LEN), None)
            entries = [build_register_entry(info, pl.DIST_TABLE, i) for i in cells]
            for e in client.read(*entries):
                r = e.register_entry
                cells[r.index.index] = decode(r.data.bitstring)
            missing = [i for i, v in cells.items() if v is None]
            if missing:
                raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"the switch returned no value for "
                                     f"{len(missing)} cells of {pl.DIST_TABLE} (first: index {missing[0]})")
            return tuple(v - 0x10000 if v >= 0x8000 else v for v in cells.values())

        return self.session.read(read)

    def _base(self, dist: JitterDistribution) -> int:
        """First dist_table index of a table distribution's slot ((dist - 2) * TABLE_LEN)."""
        if dist.code < pl.JitterDist.NORMAL:
            raise ProfileError([Problem("distribution", f"{dist.value} has no table; allowed normal, pareto, "
                                        "paretonormal, user")])
        base = (dist.code - pl.JitterDist.NORMAL) * TABLE_LEN
        size = self.session.info.register(pl.DIST_TABLE).size
        if base + TABLE_LEN > size:
            raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"the switch's {pl.DIST_TABLE} has {size} cells, "
                                 f"too few for the {dist.value} table at {base}..{base + TABLE_LEN - 1}")
        return base
