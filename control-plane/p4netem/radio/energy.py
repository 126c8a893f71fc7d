"""Radio energy per UE: sum over states of (time in state x the model's power in that state).

Power per state, from the profile's radio model (defaults from cellular.md):
  umts  IDLE power_idle, PROMOTING power_promotion, FACH power_fach, DCH power_dch;
  lte   IDLE 0 (idle paging is not modelled), PROMOTING power_promotion, CONNECTED (continuous
        reception: the receiver is on) power_drx_wake, SHORT_DRX / LONG_DRX power_tail (the
        measured average over the tail, DRX wake-ups included);
  gprs  IDLE power_idle, PROMOTING power_promotion, READY power_ready, STANDBY power_standby
        (no published figures: unset ones make the estimate partial).
The time comes from radio_state_time_ns, which the switch accumulates at each state change: the
estimate covers the UE's life up to its last state change.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from ..pipeline import RadioState
from ..profiles.radio import RadioGprs, RadioLte, RadioNone, RadioUmts
from .reader import UeRadio

__all__ = ["state_power", "EnergyEstimate", "estimate_energy"]

RadioModel = RadioNone | RadioUmts | RadioLte | RadioGprs


def state_power(radio: RadioModel) -> dict[RadioState, Decimal | None]:
    """Watts per state of `radio`'s model (None: no figure for that state)."""
    if isinstance(radio, RadioUmts):
        return {RadioState.IDLE: radio.power_idle, RadioState.PROMOTING: radio.power_promotion,
                RadioState.FACH: radio.power_fach, RadioState.DCH: radio.power_dch}
    if isinstance(radio, RadioLte):
        return {RadioState.IDLE: Decimal(0), RadioState.PROMOTING: radio.power_promotion,
                RadioState.CONNECTED: radio.power_drx_wake, RadioState.SHORT_DRX: radio.power_tail,
                RadioState.LONG_DRX: radio.power_tail}
    if isinstance(radio, RadioGprs):
        return {RadioState.IDLE: radio.power_idle, RadioState.PROMOTING: radio.power_promotion,
                RadioState.READY: radio.power_ready, RadioState.STANDBY: radio.power_standby}
    return {}


@dataclass(frozen=True)
class EnergyEstimate:
    ue_id: int
    joules: dict[RadioState, float]  # per state with a power figure
    seconds: dict[RadioState, float]  # time per state (all states with time)
    unknown: tuple[RadioState, ...]  # states with time but no power figure

    @property
    def total_joules(self) -> float:
        return sum(self.joules.values())

    @property
    def complete(self) -> bool:
        return not self.unknown


def estimate_energy(ue: UeRadio, radio: RadioModel) -> EnergyEstimate:
    """Energy of one UE's radio from its time per state and the model's power figures."""
    power = state_power(radio)
    seconds = {s: ns / 1e9 for s, ns in ue.time_in_state_ns.items() if isinstance(s, RadioState)}
    joules: dict[RadioState, float] = {}
    unknown = []
    for s, sec in seconds.items():
        watts = power.get(s)
        if watts is None:
            unknown.append(s)
        else:
            joules[s] = float(watts) * sec
    return EnergyEstimate(ue.ue_id, joules, seconds, tuple(unknown))
