"""The radio of the UEs the rules cover, as `p4netem stats` and `p4netem radio show` present it:
each UE's registers and promotion counters (p4netem.radio.read_ues), the rule and profile whose
radio model it runs, and that model's energy estimate.

Reading per-UE state costs one P4Runtime cell per register and counter: about 28 cells, 0.1 ms,
per UE on p4netem-switch. So only the UEs the rules cover are read, and a bounded number:
- a rule with one UE id (`ue: 7`): that UE, always (a UE never seen shows as IDLE);
- a by-address rule (`ue: by-address`, up to 2^32 UEs): first one register per UE
  (`radio_state_since_ns`, which is 0 for a UE never seen) over at most `scan` ids of its range
  (default 4096, about 9 ms), then only the UEs found active, in full;
- at most `limit` UEs in all (default 16); the report says how many more it found.

The registers hold the state as of each UE's last packet (timers are replayed when the next one
arrives). The view adds one certain step: a promotion whose completion time has passed is shown
as its target state (DCH, CONNECTED, READY) since that time, as the digests already reported it.
Inactivity timers are not replayed here: a UE shown in DCH whose last activity is long past has
in fact fallen back already, and its `idle` time says so. Times since an event need the switch's clock, CLOCK_MONOTONIC of its
host: they are given when the switch's address is a loopback address (same host), else omitted.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..pipeline import RadioState

# The client, the models and the readers are imported where they are used: the CLI imports this
# module for DEFAULT_LIMIT when it starts (p4netem.cli.common says why that must stay light).
if TYPE_CHECKING:
    from ..p4rt import P4RuntimeClient
    from ..profiles.radio import Radio
    from ..radio import EnergyEstimate, UeRadio

__all__ = ["UeRadioView", "RadioReport", "radio_report", "switch_clock_ns", "DEFAULT_LIMIT", "SCAN_LIMIT"]

# The state a promotion of each model leads to.
_PROMOTED = {"umts": RadioState.DCH, "lte": RadioState.CONNECTED, "gprs": RadioState.READY}
DEFAULT_LIMIT = 16  # UEs read in full per report
SCAN_LIMIT = 4096  # UE ids of one by-address rule checked for activity per report


def switch_clock_ns(address: str) -> int | None:
    """The switch's clock now (CLOCK_MONOTONIC ns) when it runs on this host, else None."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return time.monotonic_ns()
    try:
        return time.monotonic_ns() if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


def _name(state: RadioState | int) -> str | int:
    return state.name if isinstance(state, RadioState) else state


@dataclass(frozen=True)
class UeRadioView:
    radio: UeRadio  # registers and counters as read
    rules: tuple[str, ...]  # labels ("#3") of the rules whose traffic carries this UE
    profile: str | None  # the profile of the first of them, as tables show it ("lte (modified)")
    model: Radio | None  # its radio model (None: no rule with a radio covers this UE)
    now_ns: int | None  # the switch's clock when read (None: not known, remote switch)
    # That profile's name as `show --json` and `stats --json` rows give it (None: unknown to this
    # controller, or no rule covers the UE); `profile` is its label.
    profile_name: str | None = None

    @property
    def ue_id(self) -> int:
        return self.radio.ue_id

    @property
    def seen(self) -> bool:
        return self.radio.since_ns != 0

    @property
    def _completed_promotion(self) -> RadioState | None:
        """The state a finished promotion led to (the register says PROMOTING until the UE's
        next packet), None when the register's state stands."""
        r = self.radio
        done = self.now_ns is not None and r.state == RadioState.PROMOTING and r.promotion_done_ns <= self.now_ns
        return _PROMOTED.get(self.model.model) if done and self.model is not None else None

    @property
    def state(self) -> RadioState | int:
        """The state as of the UE's last packet, a completed promotion included."""
        return self._completed_promotion or self.radio.state

    @property
    def state_since_ns(self) -> int:
        return self.radio.promotion_done_ns if self._completed_promotion else self.radio.since_ns

    @property
    def state_name(self) -> str:
        name = self.state.name if isinstance(self.state, RadioState) else str(self.state)
        return name if self.seen else f"{name} (never seen)"

    def _ago(self, ns: int) -> float | None:
        if self.now_ns is None or not ns or not self.seen:
            return None
        return max(0, self.now_ns - ns) / 1e9

    @property
    def in_state_s(self) -> float | None:
        """Seconds since the UE entered its current state."""
        return self._ago(self.state_since_ns)

    @property
    def idle_s(self) -> float | None:
        """Seconds since its last activity (its last packet's ready time)."""
        return self._ago(self.radio.last_activity_ns)

    @property
    def energy(self) -> EnergyEstimate | None:
        """From the time per state up to the UE's last state change and the model's power figures."""
        if self.model is None or self.model.model == "none":
            return None
        from ..radio.energy import estimate_energy

        return estimate_energy(self.radio, self.model)

    def to_dict(self) -> dict:
        r, energy = self.radio, self.energy
        return {
            "ue": r.ue_id, "rules": list(self.rules), "profile": self.profile_name, "profile_label": self.profile,
            "model": self.model.model if self.model is not None else None,
            "state": _name(self.state), "state_register": _name(r.state), "seen": self.seen,
            "in_state_s": self.in_state_s, "idle_s": self.idle_s,
            "promotions": {k.name.lower(): n for k, n in r.promotions.items()},
            "promotion_packets": r.promotion_packets,
            "time_in_state_s": {s.name.lower(): ns / 1e9 for s, ns in r.time_in_state_ns.items()},
            "energy_j": round(energy.total_joules, 6) if energy else None,
            "energy_missing_states": [s.name.lower() for s in energy.unknown] if energy else [],
        }


@dataclass(frozen=True)
class RadioReport:
    ues: list[UeRadioView]
    found: int  # UEs found (named ones and active by-address ones); more than len(ues) if limited
    unchecked: int  # UE ids of by-address ranges beyond the scan limit, not looked at

    def to_dict(self) -> dict:
        return {"ues": [u.to_dict() for u in self.ues], "found": self.found, "unchecked": self.unchecked}


def radio_report(client: P4RuntimeClient, applied: Sequence, ues: Iterable[int] | None = None, *,
                 limit: int = DEFAULT_LIMIT, scan: int = SCAN_LIMIT, address: str | None = None) -> RadioReport:
    """The radio of `ues` (each read, whether a rule covers it or not), or, by default, of the
    UEs the rules with a radio cover (bounded, see the module docs). `applied`: the rules on the
    switch (Controller.applied())."""
    from ..radio.reader import read_seen, read_ues

    now = switch_clock_ns(address or client.address)
    unchecked = 0
    if ues is None:
        wanted: list[int] = []
        for a in applied:
            if a.profile is None or not a.profile.has_radio:
                continue
            ids = a.rule.ue_range
            if len(ids) == 1:
                wanted.append(ids.start)
            else:
                unchecked += max(0, len(ids) - scan)
                wanted += read_seen(client, ids[:scan])
        wanted = list(dict.fromkeys(wanted))
    else:
        wanted = list(dict.fromkeys(ues))
    shown = wanted[:limit] if limit else wanted
    views = []
    for ue_id, radio in read_ues(client, shown).items():
        covering = [a for a in applied if ue_id in a.rule.ue_range]
        with_radio = [a for a in covering if a.profile is not None and a.profile.has_radio]
        first = (with_radio or covering or [None])[0]
        views.append(UeRadioView(
            radio=radio, rules=tuple(f"#{a.number}" for a in covering),
            profile=first.label if first is not None else None,
            profile_name=first.profile_name if first is not None else None,
            model=first.profile.radio if first is not None and first.profile is not None else None,
            now_ns=now))
    return RadioReport(ues=views, found=len(wanted), unchecked=unchecked)
