"""Idle a UE's radio: put it back in IDLE, so that its next packet, in either direction, pays the
whole promotion (IDLE -> DCH, CONNECTED or READY) as a fresh UE's first packet does, without
waiting out the model's inactivity timers (14 s for the built-in HSPA, 44 s for GPRS).

What it writes, per UE, after one Read of its registers (S = radio_state, since =
radio_state_since_ns, last = radio_last_activity_ns, done = radio_promo_done_ns):

    radio_state[ue]                   = IDLE
    radio_state_since_ns[ue]          = T
    radio_state_time_ns[ue * 16 + S] += T - since

    with T = max(since, last), the end of the UE's last activity (done while it is PROMOTING).

Nothing else: the promotion counters (`radio_promotions`), the time already spent in each state,
`radio_last_activity_ns`, `radio_promo_done_ns`, `radio_promo_pkts`, `radio_drx_ref_ns` and the
FACH clocks stay as they are.

Why this is a demotion: when an inactivity timer fires at time t, the data plane changes exactly
these three cells (dataplane/src/stage/radio.rs `change()`: the time since `since` is added to the
state left, then state and since are set) and nothing else. Idling is that change with
t = T: the demotion the model would make if its inactivity timers were zero, firing when the UE
went quiet. No other transition can fall between `since` and T (so none is skipped): UMTS and
GPRS timers count from max(since, last) = T, LTE's DRX and tail timers from `last` and end after
it; a promotion completes at `done`, which is where a PROMOTING UE is idled. The next packet then
finds IDLE: its promotion starts at max(now, T) = now, its time in IDLE (from T) is added when it
leaves IDLE, and it counts one more promotion, all as after a timer demotion. So the time per
state still adds up to the UE's life (the sum of radio_state_time_ns is the time from its first
promotion to its last state change) and the energy estimate stays meaningful: it counts no tail
after T, as for a model without tail.

Left as they are, and why that is safe: the FACH clocks are at most `last` (a FACH packet's ready
time is its clock), `radio_drx_ref_ns` is rewritten when DRX is next entered, `done` and
`radio_promo_pkts` are only read in PROMOTING, which the next promotion rewrites. A UE in IDLE
already (or never seen) is left untouched; a UE still promoting is idled at the promotion's
completion (its waiting packets still leave then; the next packet pays a new promotion from then).

Limits: the switch sends no digest for it (digests come from packets), so a radio watcher sees
the UE's next event start in IDLE rather than in the state the previous one ended in. The Read and
the Write are not one transaction: idle a UE while it has no traffic (a packet between them
would be overwritten). No clock is involved, so it works whatever clock the target keeps
(p4netem-switch's CLOCK_MONOTONIC, bmv2's ingress timestamps).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import pipeline as pl
from ..p4rt import P4RuntimeClient, update
from ..p4rt.entries import build_register_entry
from ..p4rt.proto import p4runtime_pb2
from ..pipeline import RadioState
from .reader import UeRadio, read_ues

__all__ = ["IdledUe", "plan_idle", "idle_ues"]


@dataclass(frozen=True)
class IdledUe:
    """What idling did to one UE."""

    ue_id: int
    was: RadioState | int  # the state the registers held
    at_ns: int  # T: when the demotion takes effect (the switch's clock); 0: nothing written
    added_ns: int  # added to the time of `was`

    @property
    def changed(self) -> bool:
        return self.at_ns != 0

    def to_json(self) -> dict:
        was = self.was.name if isinstance(self.was, RadioState) else self.was
        return {"ue": self.ue_id, "was": was, "at_ns": self.at_ns, "added_ms": round(self.added_ns / 1e6, 3)}


def demotion_time(ue: UeRadio) -> int:
    """T: when the UE's last activity ended (its promotion's completion while it is PROMOTING)."""
    if ue.state == RadioState.PROMOTING:
        return max(ue.since_ns, ue.promotion_done_ns)
    return max(ue.since_ns, ue.last_activity_ns)


def plan_idle(client: P4RuntimeClient, ues: Iterable[int]) -> tuple[list[IdledUe], list[p4runtime_pb2.Update]]:
    """Read the UEs' registers (one Read) and return what idling them does and the register
    updates that do it (none for a UE already IDLE or never seen)."""
    info = client.info
    records, updates = [], []
    for ue in read_ues(client, ues).values():
        if ue.state == RadioState.IDLE or ue.since_ns == 0:
            records.append(IdledUe(ue.ue_id, ue.state, 0, 0))
            continue
        at = demotion_time(ue)
        added = at - ue.since_ns
        cell = pl.state_time_index(ue.ue_id, int(ue.state) & (pl.RADIO_STATE_STRIDE - 1))
        updates += [
            update("MODIFY", build_register_entry(info, pl.RADIO_STATE, ue.ue_id, int(RadioState.IDLE))),
            update("MODIFY", build_register_entry(info, pl.RADIO_STATE_SINCE_NS, ue.ue_id, at)),
            update("MODIFY", build_register_entry(info, pl.RADIO_STATE_TIME_NS, cell,
                                                  ue.time_in_state_ns.get(ue.state, 0) + added)),
        ]
        records.append(IdledUe(ue.ue_id, ue.state, at, added))
    return records, updates


def idle_ues(client: P4RuntimeClient, ues: Iterable[int], atomicity: str = "ROLLBACK_ON_ERROR") -> list[IdledUe]:
    """Idle the radio of each UE in `ues` (one Read, one Write; see the module docs).
    Controller.idle_radio() does the same with the controller's error handling."""
    records, updates = plan_idle(client, ues)
    client.write(updates, atomicity=atomicity)
    return records
