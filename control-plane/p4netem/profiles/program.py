"""A profile as switch table entries: the one place that turns a Profile into what a switch holds
for a profile id. Everything that programs profiles (the controller's atomic switch, the labs'
`apply_profile`, the benchmarks) builds its entries here.

A profile id owns three entries (its "slots"): `profile` (set_impairment) for the uplink and for
the downlink, and `radio_profile` (set_radio). The radio entry is always written (model 0 for a
profile without radio: "no radio"), so a profile replaces the previous one's radio too, and the
three go in one P4Runtime Write: p4netem-switch publishes a Write's table updates as one snapshot,
so a packet sees the whole old profile or the whole new one, radio included.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import pipeline as pl
from ..p4rt import P4Info, P4RuntimeClient
from ..p4rt.entries import build_table_entry, update
from ..p4rt.proto import p4runtime_pb2
from .profile import Profile

__all__ = ["SLOTS", "Slot", "slot_entry", "profile_params", "profile_entries", "write_profile"]

# (table, direction) of each entry a profile id owns; direction None: the radio, shared by both.
Slot = tuple[str, int | None]
SLOTS: tuple[Slot, ...] = ((pl.PROFILE, pl.UPLINK), (pl.PROFILE, pl.DOWNLINK), (pl.RADIO_PROFILE, None))
_ACTIONS = {pl.PROFILE: pl.SET_IMPAIRMENT, pl.RADIO_PROFILE: pl.SET_RADIO}


def slot_entry(info: P4Info, slot: Slot, profile_id: int,
               params: Mapping[str, int] | None = None) -> p4runtime_pb2.TableEntry:
    """The entry of one slot of `profile_id` with these action params; without params only its
    key (for DELETE and Read)."""
    table, direction = slot
    match = {"meta.profile_id": profile_id}
    if direction is not None:
        match["meta.direction"] = direction
    if params is None:
        return build_table_entry(info, table, match)
    return build_table_entry(info, table, match, _ACTIONS[table], params)


def profile_params(profile: Profile) -> list[dict[str, int]]:
    """The action params of each slot, in SLOTS order."""
    return [profile.to_table_params(pl.UPLINK), profile.to_table_params(pl.DOWNLINK),
            profile.radio_table_params()]


def profile_entries(info: P4Info, profile: Profile, profile_id: int) -> list[p4runtime_pb2.TableEntry]:
    """[uplink set_impairment, downlink set_impairment, set_radio] of `profile` as `profile_id`."""
    return [slot_entry(info, slot, profile_id, params) for slot, params in zip(SLOTS, profile_params(profile))]


def write_profile(client: P4RuntimeClient, profile: Profile, profile_id: int) -> None:
    """Program `profile` as profile `profile_id` in one Write (ROLLBACK_ON_ERROR), each entry
    INSERTed or MODIFYed as it is new or already there. For a profile id that classifier entries
    already point at, packets switch to it at once, whole; the controller (p4netem.control)
    instead writes a spare id and flips the classifier, which also resets the shaping state.
    Raises WriteError (with the failed updates) if the switch refuses any of them."""
    info = client.info
    entries = profile_entries(info, profile, profile_id)
    # One Read of the three keys; a missing entry is simply absent from the answer.
    found = [e.table_entry for e in client.read(*(slot_entry(info, slot, profile_id) for slot in SLOTS))]
    exists = [any(f.table_id == e.table_id and f.match == e.match for f in found) for e in entries]
    client.write([update("MODIFY" if there else "INSERT", e) for e, there in zip(entries, exists)],
                 atomicity="ROLLBACK_ON_ERROR")
