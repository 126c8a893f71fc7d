"""Per-profile-direction counters of the pipeline, read in one P4Runtime Read."""

from __future__ import annotations

from dataclasses import dataclass

from . import pipeline as pl
from .p4rt import P4RuntimeClient, build_counter_entry


@dataclass(frozen=True)
class PdCounters:
    """Packet counts of one pd (profile * 2 + direction)."""

    pd: int
    profile_in: int
    profile_out: int
    profile_dup: int
    profile_corrupt: int
    drops: dict[pl.DropReason, int]

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def conservation_gap(self) -> int:
        """in + dup - out - drops: 0 once the switch is idle (else the packets still held)."""
        return self.profile_in + self.profile_dup - self.profile_out - self.dropped


def read_pd_counters(client: P4RuntimeClient, pd: int) -> PdCounters:
    info = client.info
    entities = [
        build_counter_entry(info, pl.PROFILE_IN, pd),
        build_counter_entry(info, pl.PROFILE_OUT, pd),
        build_counter_entry(info, pl.PROFILE_DUP, pd),
        build_counter_entry(info, pl.PROFILE_CORRUPT, pd),
    ] + [build_counter_entry(info, pl.DROPS, pl.drop_index(pd, r)) for r in pl.DropReason]
    packets: dict[tuple[int, int], int] = {}
    for e in client.read(*entities):
        c = e.counter_entry
        packets[(c.counter_id, c.index.index)] = c.data.packet_count

    def get(name: str, index: int) -> int:
        return packets.get((info.counter(name).id, index), 0)

    return PdCounters(
        pd=pd,
        profile_in=get(pl.PROFILE_IN, pd),
        profile_out=get(pl.PROFILE_OUT, pd),
        profile_dup=get(pl.PROFILE_DUP, pd),
        profile_corrupt=get(pl.PROFILE_CORRUPT, pd),
        drops={r: get(pl.DROPS, pl.drop_index(pd, r)) for r in pl.DropReason},
    )


def read_parser_errors(client: P4RuntimeClient) -> dict[pl.ParserError, int]:
    values = client.read_counter(pl.PARSER_ERRORS)
    return {e: values[e].packets if e in values else 0 for e in pl.ParserError}
