"""ROLLBACK_ON_ERROR done by the controller, for targets whose Write has only CONTINUE_ON_ERROR
(bmv2's P4Runtime server, PI): a batch that must be all or nothing is preceded by one Read of
what each of its updates touches (the table entry with that key, the register or counter cell);
if any update fails, the updates the switch did apply are reverted from that record, so a failed
`apply` leaves the switch as it was instead of half-written (issue 13, defect 7).

Reverting: an INSERT is deleted, a MODIFY gets the entry (or cell) back as it was read, a
DELETE re-inserts what was read. Wildcard updates (a register or counter write without an
index, used only by `reset`) cannot be recorded cheaply and are not reverted; neither can the
switch's data plane be stopped between the write and its revert (a packet may see the partial
state for the few milliseconds in between, which is why targets with real atomicity use it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import grpc

from ..p4rt import P4RuntimeError, WriteError
from ..p4rt.proto import p4runtime_pb2

log = logging.getLogger(__name__)

__all__ = ["Recorded", "record", "revert_updates"]

Update = p4runtime_pb2.Update


def _key(entity: p4runtime_pb2.Entity) -> tuple | None:
    """What identifies the thing an entity writes: a table entry's table, match and priority
    (default entries by table), a register or counter cell. None: not recordable."""
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        te = entity.table_entry
        if te.is_default_action:
            return ("default", te.table_id)
        match = tuple(sorted(m.SerializeToString(deterministic=True) for m in te.match))
        return ("table", te.table_id, match, te.priority)
    if kind == "register_entry" and entity.register_entry.HasField("index"):
        return ("register", entity.register_entry.register_id, entity.register_entry.index.index)
    if kind == "counter_entry" and entity.counter_entry.HasField("index"):
        return ("counter", entity.counter_entry.counter_id, entity.counter_entry.index.index)
    return None


def _query(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """The Read filter for one entity: its key without the values being written."""
    q = p4runtime_pb2.Entity()
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        te = entity.table_entry
        q.table_entry.table_id = te.table_id
        q.table_entry.is_default_action = te.is_default_action
        if not te.is_default_action:
            q.table_entry.match.extend(te.match)
            q.table_entry.priority = te.priority
    elif kind == "register_entry":
        q.register_entry.register_id = entity.register_entry.register_id
        q.register_entry.index.CopyFrom(entity.register_entry.index)
    else:
        q.counter_entry.counter_id = entity.counter_entry.counter_id
        q.counter_entry.index.CopyFrom(entity.counter_entry.index)
    return q


class Recorded:
    """What a batch's updates touch, as read before the batch: key -> entity (absent: no entry)."""

    def __init__(self, updates: Sequence[Update], before: dict[tuple, p4runtime_pb2.Entity]):
        self.updates = list(updates)
        self.before = before

    def undo(self, applied: Sequence[int]) -> list[Update]:
        """Updates that revert the ones at the positions `applied`, last first."""
        out = []
        for i in sorted(applied, reverse=True):
            u = self.updates[i]
            key = _key(u.entity)
            if key is None:
                continue
            prior = self.before.get(key)
            if u.type == Update.INSERT:
                out.append(Update(type=Update.DELETE, entity=u.entity))
            elif u.type == Update.DELETE and prior is not None:
                out.append(Update(type=Update.INSERT, entity=prior))
            elif u.type == Update.MODIFY and prior is not None:
                out.append(Update(type=Update.MODIFY, entity=prior))
        return out


def record(read: Callable[..., object], updates: Sequence[Update]) -> Recorded:
    """One Read of everything `updates` touch (`read` is P4RuntimeClient.read)."""
    queries = {}
    for u in updates:
        key = _key(u.entity)
        if key is not None and key not in queries:
            queries[key] = _query(u.entity)
    before = {}
    if queries:
        try:
            found = list(read(*queries.values()))
        except P4RuntimeError as err:
            if err.code != grpc.StatusCode.UNIMPLEMENTED:
                raise
            # A target that cannot read registers over P4Runtime (PI on bmv2): record the rest;
            # the register cells of such a batch (pd state reset to 0) are not reverted.
            rest = [q for k, q in queries.items() if k[0] != "register"]
            found = list(read(*rest)) if rest else []
        for e in found:
            key = _key(e)
            if key in queries:
                before[key] = e
    return Recorded(updates, before)


def revert_updates(write: Callable[[list[Update]], None], recorded: Recorded, err: WriteError) -> None:
    """After `err` (a CONTINUE_ON_ERROR batch that failed), revert the updates it applied. Raises
    a P4RuntimeError naming what could not be reverted, if anything."""
    failed = {e.index for e in err.errors}
    if not err.errors and err.code != grpc.StatusCode.UNKNOWN:
        return  # the whole request was refused (not primary, bad device): nothing was applied
    applied = [i for i in range(len(recorded.updates)) if i not in failed]
    undo = recorded.undo(applied)
    if not undo:
        return
    log.info("reverting %d applied update(s) of a failed batch", len(undo))
    try:
        write(undo)
    except WriteError as again:
        raise P4RuntimeError(again.code, f"{err.message}; reverting the {len(undo)} update(s) it applied "
                             f"failed too, the switch may hold part of the batch: {again.message}") from None
