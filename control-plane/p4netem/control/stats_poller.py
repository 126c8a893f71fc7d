"""Stats read again and again (the dashboard's live stream, Prometheus scrapes) at a small cost
per refresh, the same SwitchStats as Controller.stats() gives.

stats() reads every table and every counter cell of every rule: with 1000 rules that is 5000
table entries decoded into rules and profiles and 84 000 counter cells, seconds of Python CPU on
the machine the switch forwards on. A poller reads per refresh only what can have changed:

- the layout (rows, their pds, the applied rules) is kept until the rules change: the owner calls
  invalidate() after its own writes, and every `layout_check_s` the raw classifier, profile and
  radio tables ride along in the refresh's Read and are compared byte for byte with the ones the
  layout was made of (another controller's writes), decoded again only when they differ;
- of the counters, one Read per refresh asks for profile_in (packets and bytes) of every pd and
  all the cells of the rows that are *busy*; a row is idle when every pd of it held nothing at
  its last full read (in + dup - out - drops = 0) and its profile_in has not moved since: nothing
  can then have changed in its other cells, since every count of a pd (out, drops, duplicates,
  corruption, ECN marks) is of a packet that entered it (p4src ingress.p4: profile_in is counted
  at classification, before any drop) and is either still held or has left. Rows whose
  profile_in moved though they were idle are read in full in a second, small Read in the same
  refresh (the first packets of a new flow), and are busy from then on until they hold nothing.

So an idle switch with 1000 rules costs a Read of 4000 cells per refresh instead of 84 000, and
a busy rule adds its own 84. Counters reset or written by another controller move profile_in
(or the held count) and are read in full like any change.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from .. import pipeline as pl
from ..p4rt.entries import as_entity
from ..p4rt.proto import p4runtime_pb2
from ..stats import Cells, PdCounters, add_cells, counter_entities, parser_errors_entity, parser_errors_of, pd_counters
from .radio_view import DEFAULT_LIMIT
from .readback import LinkStats, Readback, StatsLayout, SwitchStats
from .session import Session
from .state import state_of, state_wildcards

__all__ = ["StatsPoller"]

# Counter filters per Read when every cell of every row is read (a new layout).
_FULL_READ_CHUNK = 8400

# The tables a layout is made of: compared at each layout check.
_LAYOUT_TABLES = (pl.CLASSIFIER, pl.PROFILE, pl.RADIO_PROFILE)


class StatsPoller:
    """Successive stats of one switch, each read as cheaply as the module docstring says. Not
    thread-safe: one caller at a time (the web session holds its reader's lock)."""

    def __init__(self, session: Session, readback: Readback, *, layout_check_s: float = 5.0,
                 radio_limit: int = DEFAULT_LIMIT):
        self.session = session
        self.readback = readback
        self.layout_check_s = layout_check_s
        self.radio_limit = radio_limit
        self.layout: StatsLayout | None = None
        self._tables: tuple[bytes, ...] = ()       # the raw entries the layout was made of
        self._checked = 0.0                         # monotonic time of the last layout check
        self._in_filters: list = []                 # profile_in of every pd: each refresh
        self._full_filters: dict[int, list] = {}    # row index -> every cell of its pds
        self._counters: dict[int, PdCounters] = {}  # pd -> its counters at its last full read
        self._rows: list[LinkStats] = []
        self._busy: set[int] = set()                # rows read in full at the next refresh
        self._previous_in: dict[int, int] = {}      # pd -> profile_in at the previous refresh
        # What the last refreshes cost, for benchmarks and the web server's own metrics.
        self.cells_read = 0
        self.layout_reads = 0

    def invalidate(self) -> None:
        """The rules may have changed (a write of our own): rebuild the layout at the next poll."""
        self.layout = None

    # ---- one refresh ------------------------------------------------------------------------------

    def poll(self) -> SwitchStats:
        return self.session.read(self._poll)

    def _poll(self) -> SwitchStats:
        self.session.ensure_connected()
        info = self.session.client.info
        if self.layout is None:
            self._new_layout(self._read_tables())
        check = time.monotonic() - self._checked >= self.layout_check_s
        filters = list(self._in_filters)
        for row in sorted(self._busy):
            filters += self._full_filters[row]
        filters.append(as_entity(parser_errors_entity(info)))
        if check:
            filters += [as_entity(p4runtime_pb2.TableEntry(table_id=info.table(t).id)) for t in _LAYOUT_TABLES]
        cells: Cells = {}
        tables = []
        for entity in self.session.client.read(*filters):
            if not add_cells(cells, entity):
                tables.append(entity)
        self.cells_read = len(cells)
        if check:
            self._checked = time.monotonic()
            if self._raw(tables) != self._layout_tables():
                # Another controller changed rules or profiles: read everything afresh.
                self._new_layout(self._read_tables())
                return self._poll()
        self._update(cells)
        return SwitchStats(time_ns=time.monotonic_ns(), rows=list(self._rows), parser_errors=parser_errors_of(info, cells),
                           radio=self.readback.radio_of(self.layout, self.radio_limit))

    def _update(self, cells: Cells) -> None:
        info = self.session.client.info
        in_id = info.counter(pl.PROFILE_IN).id
        layout = self.layout
        assert layout is not None
        moved = []
        for i, row in enumerate(layout.rows):
            if i in self._busy:
                continue
            if any(cells.get((in_id, pd), (0, 0)) != (self._counters[pd].profile_in, self._counters[pd].bytes_in)
                   for pd in row.pds):
                moved.append(i)
        if moved:
            # First packets on rows that were idle: their other cells, in one more small Read.
            more: Cells = {}
            for entity in self.session.client.read(*[f for i in moved for f in self._full_filters[i]]):
                add_cells(more, entity)
            self.cells_read += len(more)
            for key, value in more.items():
                cells.setdefault(key, value)
        for i in sorted(self._busy | set(moved)):
            row = layout.rows[i]
            for pd in row.pds:
                self._counters[pd] = pd_counters(info, pd, cells)
            self._rows[i] = layout.row_stats(row, self._counters)
            held = any(self._counters[pd].conservation_gap() != 0 for pd in row.pds)
            moved_now = i in moved or any(self._counters[pd].profile_in != self._previous_in.get(pd) for pd in row.pds)
            if held or moved_now:
                self._busy.add(i)
            else:
                self._busy.discard(i)
        self._previous_in = {pd: c.profile_in for pd, c in self._counters.items()}

    # ---- the layout -------------------------------------------------------------------------------

    def _read_tables(self) -> list:
        info = self.session.client.info
        return [e for e in self.session.client.read(*state_wildcards(info))]

    def _layout_tables(self) -> tuple[bytes, ...]:
        return self._tables

    def _raw(self, entities: Iterable) -> tuple[bytes, ...]:
        """The layout tables' entries as bytes, in a stable order (the switch answers a wildcard
        in its own order, which a modification may change)."""
        info = self.session.client.info
        ids = {info.table(t).id for t in _LAYOUT_TABLES}
        return tuple(sorted(e.table_entry.SerializeToString(deterministic=True) for e in entities
                            if e.HasField("table_entry") and e.table_entry.table_id in ids))

    def _new_layout(self, entities: list) -> None:
        """Decode the tables into rules, and read every counter of every row once. The poller's
        state changes only once every read has succeeded (a failed read leaves the old layout,
        or none, to be tried again at the next poll)."""
        info = self.session.client.info
        layout = self.readback.layout(state_of(info, [e.table_entry for e in entities]))
        # Built once per layout, as Entities (a Read of thousands of filters otherwise spends
        # more time building them than the switch spends answering).
        in_filters = [as_entity(f) for f in counter_entities(info, layout.pds, (pl.PROFILE_IN,), drops=False)]
        full_filters = {i: [as_entity(f) for f in counter_entities(info, row.pds)]
                        for i, row in enumerate(layout.rows)}
        everything = [f for fs in full_filters.values() for f in fs]
        cells: Cells = {}
        # In Reads of a bounded size: 84 000 cells for 1000 rules in one Read can outlast the
        # client's deadline on a loaded machine.
        for start in range(0, len(everything), _FULL_READ_CHUNK):
            for entity in self.session.client.read(*everything[start:start + _FULL_READ_CHUNK]):
                add_cells(cells, entity)
        counters = {pd: pd_counters(info, pd, cells) for pd in layout.pds}
        self.layout = layout
        self.layout_reads += 1
        self._tables = self._raw(entities)
        self._checked = time.monotonic()
        self._in_filters, self._full_filters = in_filters, full_filters
        self._counters = counters
        self._previous_in = {pd: c.profile_in for pd, c in counters.items()}
        self._rows = [layout.row_stats(row, counters) for row in layout.rows]
        self._busy = {i for i, row in enumerate(layout.rows)
                      if any(counters[pd].conservation_gap() != 0 for pd in row.pds)}
