"""Cellular radio (RRC state machine) parameters of a profile.

The radio belongs to the UE, not to a direction: one state machine is shared by uplink and
downlink, so the block sits on the profile. Defaults are the published measurements collected
in docs (cellular.md): Qian et al. IMC 2010 (UMTS), Huang et al. MobiSys 2012 (LTE), 3GPP
TS 24.008 (GPRS READY timer). Only the model and its validation exist so far: the data plane
has no radio stage yet, and table.py refuses to apply a profile with a radio model other than
`none` unless the caller explicitly leaves the radio out.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


from .errors import KNOWN_FIELDS, FieldProblems, Problem
from .fields import decimal_number, duration, integer, rate
from .units import Duration, Rate

__all__ = ["RadioNone", "RadioUmts", "RadioLte", "RadioGprs", "Radio", "RADIO_MODELS"]

_S = 10**9
# A promotion is a one-off wait of the first packet: up to a minute covers every measurement.
Promotion = duration(0, 60 * _S)
# Inactivity timers and cycles: up to an hour (GPRS READY timers are configurable that far).
Timer = duration(0, 3600 * _S)
Watts = decimal_number(Decimal(0), Decimal(10), "W")
RlcBytes = integer(0, 65535, "bytes")
StateRate = rate()


class _Radio(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RadioNone(_Radio):
    """No radio: packets never wait for a wake-up."""

    model: Literal["none"] = "none"


class RadioUmts(_Radio):
    """3G UMTS/HSPA: IDLE, CELL_FACH (shared, slow), CELL_DCH (dedicated)."""

    model: Literal["umts"]
    promotion_idle_dch: Promotion = Duration(2 * _S)  # 1.5-4.0 s measured
    promotion_fach_dch: Promotion = Duration(1_500_000_000)  # 0.8-3.0 s
    inactivity_dch_fach: Timer = Duration(4 * _S)  # some carriers 5 s
    inactivity_fach_idle: Timer = Duration(10 * _S)  # some carriers 12 s
    fach_threshold_uplink: RlcBytes = 543  # RLC buffer that triggers FACH -> DCH
    fach_threshold_downlink: RlcBytes = 475
    fach_rate: StateRate = Rate(20_000)  # "order of 10-30 kbit/s"
    power_dch: Watts = Decimal("0.8")
    power_fach: Watts = Decimal("0.46")
    power_idle: Watts = Decimal("0")


class RadioLte(_Radio):
    """4G LTE: RRC_IDLE, RRC_CONNECTED (continuous reception -> short DRX -> long DRX)."""

    model: Literal["lte"]
    promotion: Promotion = Duration(260_000_000)  # RRC_IDLE -> RRC_CONNECTED
    drx_inactivity: Timer = Duration(100_000_000)
    short_drx_cycle: Timer = Duration(20_000_000)
    short_drx_time: Timer = Duration(20_000_000)  # time spent in short DRX
    long_drx_cycle: Timer = Duration(40_000_000)
    on_duration: Timer = Duration(1_000_000)  # receiver awake per DRX cycle (1-2 ms)
    tail: Timer = Duration(10 * _S)  # CONNECTED -> IDLE, measured up to 11.6 s
    idle_paging_cycle: Timer = Duration(1_280_000_000)
    power_promotion: Watts = Decimal("1.2")
    power_tail: Watts = Decimal("1.06")
    power_drx_wake: Watts = Decimal("1.68")

    @model_validator(mode="after")
    def _cycles(self) -> "RadioLte":
        problems = []
        if self.short_drx_cycle > self.long_drx_cycle:
            problems.append(Problem("short_drx_cycle", f"{self.short_drx_cycle} is longer than "
                                    f"long_drx_cycle {self.long_drx_cycle}"))
        if self.on_duration > self.short_drx_cycle:
            problems.append(Problem("on_duration", f"{self.on_duration} is longer than "
                                    f"short_drx_cycle {self.short_drx_cycle}"))
        if self.on_duration == 0:
            problems.append(Problem("on_duration", "0s: the receiver would never wake up"))
        if problems:
            raise FieldProblems(problems)
        return self


class RadioGprs(_Radio):
    """2.5G GPRS: IDLE, READY, STANDBY; READY timer expiry -> STANDBY, a packet -> READY."""

    model: Literal["gprs"]
    promotion: Promotion = Duration(750_000_000)  # measured first-packet delay 0.5-1 s
    ready_timer: Timer = Duration(44 * _S)  # T3314 default, 3GPP TS 24.008


Radio = Annotated[Union[RadioNone, RadioUmts, RadioLte, RadioGprs], Field(discriminator="model")]

RADIO_MODELS = ("none", "umts", "lte", "gprs")

for _model in (RadioNone, RadioUmts, RadioLte, RadioGprs):
    KNOWN_FIELDS.update(_model.model_fields)
