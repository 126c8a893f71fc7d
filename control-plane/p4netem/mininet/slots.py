"""Which impairment profile each slot of a lab runs: the one place labs write profiles to the switch.

A slot is a profile id of the pipeline; its uplink and downlink are two entries of the `profile`
table, written together in one P4Runtime Write so that no packet sees one direction of the old
profile and the other of the new. The entries come from p4netem.profiles.program, as the
controller's (p4netem.control) do; nothing else in the labs touches the profile table.

Radio: the slot's `radio_profile` entry (set_radio) is written in the same Write as its two
`profile` entries. With the radio asked for, it carries the profile's radio model; otherwise it is
model 0 ("no radio"), so a run with the radio off never inherits a wake-up delay from an earlier
profile on the same slot. The record says which (`radio.applied`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc

from ..p4rt import P4RuntimeClient, WriteError
from ..p4rt.entries import update
from ..profiles import Direction, Profile, RadioNone
from ..profiles.program import SLOTS, profile_entries, slot_entry
from ..profiles.units import Duration


@dataclass(frozen=True)
class RadioState:
    model: str                 # none | umts | lte | gprs
    requested: bool
    applied: bool
    note: str = ""
    promotion_s: float | None = None   # the model's idle -> connected promotion delay

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class AppliedProfile:
    slot: int
    profile: Profile
    radio: RadioState
    extra_delay_ns: int = 0    # added per direction (the DNS slot's share of the DNS latency)
    params: dict = field(default_factory=dict)   # direction -> set_impairment params written

    def to_json(self) -> dict:
        return {"slot": self.slot, "profile": self.profile.name, "title": self.profile.title,
                "definition": self.profile.to_dict(), "radio": self.radio.to_json(),
                "extra_delay_ms": self.extra_delay_ns / 1e6, "table_params": self.params}


def promotion_seconds(profile: Profile) -> float | None:
    """The idle-to-connected promotion delay of the profile's radio model (None without one)."""
    radio = profile.radio
    if radio.model == "umts":
        return int(radio.promotion_idle_dch) / 1e9
    if radio.model in ("lte", "gprs"):
        return int(radio.promotion) / 1e9
    return None


def with_extra_delay(profile: Profile, extra_ns: int) -> Profile:
    """The same profile with `extra_ns` more one-way delay in each direction."""
    if not extra_ns:
        return profile
    links = {d: getattr(profile, d).model_copy(
        update={"delay": Duration(int(getattr(profile, d).delay) + extra_ns)})
        for d in ("uplink", "downlink")}
    return profile.model_copy(update=links)


class SlotProfiles:
    def __init__(self, client: P4RuntimeClient, atomicity: str = "DATAPLANE_ATOMIC"):
        self.client = client
        # p4netem-switch applies a batch of table entries atomically; bmv2 cannot (CONTINUE_ON_ERROR).
        self.atomicity = atomicity
        self._written: set[int] = set()
        self.applied: dict[int, AppliedProfile] = {}

    def _radio(self, profile: Profile, radio: bool) -> RadioState:
        """What happens to the profile's radio model on this run."""
        promo = promotion_seconds(profile)
        if not profile.has_radio:
            return RadioState("none", radio, False, "profile has no radio model")
        if not radio:
            return RadioState(profile.radio.model, False, False, "radio off for this run", promo)
        return RadioState(profile.radio.model, True, True, "", promo)

    def apply(self, slot: int, profile: Profile, *, radio: bool = False,
              extra_delay_ns: int = 0) -> AppliedProfile:
        """Program `profile` on `slot` (both directions in one Write) and return the record."""
        if not 0 < slot < 4096:
            raise ValueError(f"slot {slot} out of range 1..4095 (a profile id of the pipeline)")
        state = self._radio(profile, radio)
        effective = with_extra_delay(profile, extra_delay_ns)
        if not state.applied:
            effective = effective.model_copy(update={"radio": RadioNone()})
        params = {d.field: effective.to_table_params(d) for d in Direction}
        entries = profile_entries(self.client.info, effective, slot)  # the one encoding path
        kind = "MODIFY" if slot in self._written else "INSERT"
        try:
            self.client.write([update(kind, e) for e in entries], atomicity=self.atomicity)
        except WriteError as err:
            exists = grpc.StatusCode.ALREADY_EXISTS
            if kind == "INSERT" and (err.code == exists or any(e.code == exists for e in err.errors)):
                self.client.write([update("MODIFY", e) for e in entries],
                                  atomicity=self.atomicity)
            else:
                raise
        self._written.add(slot)
        record = AppliedProfile(slot, profile, state, extra_delay_ns, params)
        self.applied[slot] = record
        return record

    def clear(self, slot: int) -> None:
        """Remove the slot's entries: its packets pass unimpaired (the table's default)."""
        if slot not in self._written:
            return
        self.client.delete(*[slot_entry(self.client.info, s, slot) for s in SLOTS])
        self._written.discard(slot)
        self.applied.pop(slot, None)
