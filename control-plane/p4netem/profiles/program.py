"""A profile as switch table entries: its two `profile` entries (set_impairment, one per
direction) and its `radio_profile` entry (set_radio), written in ONE P4Runtime Write.

p4netem-switch publishes a Write's table updates as one snapshot, so a packet sees the whole old
profile or the whole new one, radio included. The radio entry is always written (model 0 for a
profile without radio: "no radio"), so re-applying another profile replaces the radio too.
"""

from __future__ import annotations

from .. import pipeline as pl
from ..p4rt import P4RuntimeClient
from ..p4rt.entries import update
from ..p4rt.proto import p4runtime_pb2
from .profile import Profile
from .table import Direction

__all__ = ["profile_entries", "write_profile"]


def profile_entries(client: P4RuntimeClient, profile: Profile,
                    profile_id: int) -> list[p4runtime_pb2.TableEntry]:
    """[uplink set_impairment, downlink set_impairment, set_radio] for `profile_id`."""
    entries = [
        client.table_entry(pl.PROFILE, {"meta.profile_id": profile_id, "meta.direction": int(d)},
                           pl.SET_IMPAIRMENT, profile.to_table_params(d))
        for d in (Direction.UPLINK, Direction.DOWNLINK)
    ]
    entries.append(client.table_entry(pl.RADIO_PROFILE, {"meta.profile_id": profile_id},
                                      pl.SET_RADIO, profile.radio_table_params()))
    return entries


def _exists(client: P4RuntimeClient, entry: p4runtime_pb2.TableEntry) -> bool:
    query = p4runtime_pb2.TableEntry(table_id=entry.table_id, match=entry.match)
    return any(True for _ in client.read(query))


def write_profile(client: P4RuntimeClient, profile: Profile, profile_id: int) -> None:
    """Program `profile` as profile `profile_id`: one Write, each entry INSERTed or MODIFYed as
    it is new or already there. Raises WriteError (with the failed updates) if the switch
    refuses any of them."""
    entries = profile_entries(client, profile, profile_id)
    kinds = ["MODIFY" if _exists(client, e) else "INSERT" for e in entries]
    client.write([update(k, e) for k, e in zip(kinds, entries)],
                 atomicity="ROLLBACK_ON_ERROR")
