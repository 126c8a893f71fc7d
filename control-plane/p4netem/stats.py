"""Per-profile-direction counters of the pipeline, read in one P4Runtime Read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from . import pipeline as pl
from .p4rt import P4RuntimeClient, build_counter_entry


@dataclass(frozen=True)
class PdCounters:
    """Counts of one pd (profile * 2 + direction), or the sum of several (pd is then the first).

    Packets: profile_in, profile_out, profile_dup, profile_corrupt, drops by reason. Bytes (the
    counters are BOTH): bytes_in, bytes_out, drop_bytes by reason."""

    pd: int
    profile_in: int
    profile_out: int
    profile_dup: int
    profile_corrupt: int
    drops: dict[pl.DropReason, int]
    bytes_in: int = 0
    bytes_out: int = 0
    drop_bytes: dict[pl.DropReason, int] = field(default_factory=dict)
    ecn_marked: int = 0  # packets marked CE instead of dropped, by the AQM or a loss with loss_ecn (they were sent)

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def conservation_gap(self) -> int:
        """in + dup - out - drops: 0 once the switch is idle (else the packets still held)."""
        return self.profile_in + self.profile_dup - self.profile_out - self.dropped

    def __add__(self, other: PdCounters) -> PdCounters:
        reasons = set(self.drops) | set(other.drops)
        byte_reasons = set(self.drop_bytes) | set(other.drop_bytes)
        return PdCounters(
            pd=self.pd,
            profile_in=self.profile_in + other.profile_in,
            profile_out=self.profile_out + other.profile_out,
            profile_dup=self.profile_dup + other.profile_dup,
            profile_corrupt=self.profile_corrupt + other.profile_corrupt,
            drops={r: self.drops.get(r, 0) + other.drops.get(r, 0) for r in sorted(reasons)},
            bytes_in=self.bytes_in + other.bytes_in,
            bytes_out=self.bytes_out + other.bytes_out,
            drop_bytes={r: self.drop_bytes.get(r, 0) + other.drop_bytes.get(r, 0) for r in sorted(byte_reasons)},
            ecn_marked=self.ecn_marked + other.ecn_marked,
        )


PD_COUNTERS = (pl.PROFILE_IN, pl.PROFILE_OUT, pl.PROFILE_DUP, pl.PROFILE_CORRUPT, pl.PROFILE_ECN_MARK)

Cells = dict[tuple[int, int], tuple[int, int]]  # (counter id, index) -> (packets, bytes)


def counter_entities(info, pds: Iterable[int], counters: Iterable[str] = PD_COUNTERS,
                     drops: bool = True) -> list:
    """The CounterEntry filters that read `counters` (and the drops by reason) of every pd."""
    counters = tuple(counters)
    entities = []
    for pd in pds:
        entities += [build_counter_entry(info, name, pd) for name in counters]
        if drops:
            entities += [build_counter_entry(info, pl.DROPS, pl.drop_index(pd, r)) for r in pl.DropReason]
    return entities


def add_cells(cells: Cells, entity) -> bool:
    """Record a counter entity of a Read's answer in `cells`; False if it is not a counter."""
    if not entity.HasField("counter_entry"):
        return False
    c = entity.counter_entry
    cells[(c.counter_id, c.index.index)] = (c.data.packet_count, c.data.byte_count)
    return True


def pd_counters(info, pd: int, cells: Cells) -> PdCounters:
    """The counters of `pd` out of the cells a Read returned (a cell not returned counts 0)."""
    def get(name: str, index: int) -> tuple[int, int]:
        return cells.get((info.counter(name).id, index), (0, 0))

    drops = {r: get(pl.DROPS, pl.drop_index(pd, r)) for r in pl.DropReason}
    pin, pout = get(pl.PROFILE_IN, pd), get(pl.PROFILE_OUT, pd)
    return PdCounters(
        pd=pd, profile_in=pin[0], profile_out=pout[0], profile_dup=get(pl.PROFILE_DUP, pd)[0],
        profile_corrupt=get(pl.PROFILE_CORRUPT, pd)[0], drops={r: v[0] for r, v in drops.items()},
        bytes_in=pin[1], bytes_out=pout[1], drop_bytes={r: v[1] for r, v in drops.items()},
        ecn_marked=get(pl.PROFILE_ECN_MARK, pd)[0],
    )


def read_counters(client: P4RuntimeClient, pds: Iterable[int]) -> dict[int, PdCounters]:
    """Counters of every pd in `pds`, all in one Read (5 counters and the drops by reason per pd)."""
    pds = sorted(set(pds))
    if not pds:
        return {}
    cells: Cells = {}
    for e in client.read(*counter_entities(client.info, pds)):
        add_cells(cells, e)
    return {pd: pd_counters(client.info, pd, cells) for pd in pds}


def read_pd_counters(client: P4RuntimeClient, pd: int) -> PdCounters:
    return read_counters(client, [pd])[pd]


def read_parser_errors(client: P4RuntimeClient) -> dict[pl.ParserError, int]:
    values = client.read_counter(pl.PARSER_ERRORS)
    return {e: values[e].packets if e in values else 0 for e in pl.ParserError}


def parser_errors_entity(info):
    """The filter that reads every parser-error cell (a wildcard over 4 indices)."""
    return build_counter_entry(info, pl.PARSER_ERRORS, None)


def parser_errors_of(info, cells: Cells) -> dict[pl.ParserError, int]:
    cid = info.counter(pl.PARSER_ERRORS).id
    return {e: cells.get((cid, int(e)), (0, 0))[0] for e in pl.ParserError}
