"""Cellular radio (RRC state machine) parameters of a profile.

The radio belongs to the UE, not to a direction: one state machine is shared by uplink and
downlink, so the block sits on the profile and becomes one `radio_profile` entry (`set_radio`,
see radio_table.py and docs/radio.md). Defaults are the published measurements collected in
cellular.md: Qian et al. IMC 2010 (UMTS), Huang et al. MobiSys 2012 (LTE), the thesis' GPRS
first-packet delay and 3GPP TS 24.008 (GPRS READY timer).

Every timer counts inactivity and 0 means "never fires". Each promotion lasts its delay plus a
uniform draw in [0, promotion_spread]; at most `promotion_queue` packets wait for one promotion
(0 = unlimited; the rest are dropped with reason radio). Power figures only feed the energy
estimate (p4netem.radio); they never reach the switch.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import KNOWN_FIELDS, RADIO_FIELDS, FieldProblems, Problem
from .fields import MAX_32, decimal_number, duration, integer, rate
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
PromotionQueue = integer(0, MAX_32, "packets", zero_word="unlimited")


class _Radio(BaseModel):
    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def to_table_params(self) -> dict[str, int]:
        """The exact `set_radio` action params (name -> int) of this radio."""
        from .radio_table import encode_radio

        return encode_radio(self)  # type: ignore[arg-type]


class _Waking(_Radio):
    """What every real radio model has: the promotion's random spread and its queue."""

    promotion_spread: Promotion = Duration(0)  # each promotion: delay + uniform[0, spread]
    promotion_queue: PromotionQueue = 0  # packets waiting for one promotion; 0 = unlimited


class RadioNone(_Radio):
    """No radio: packets never wait for a wake-up."""

    model: Literal["none"] = "none"


class RadioUmts(_Waking):
    """3G UMTS/HSPA: IDLE, CELL_FACH (shared, slow), CELL_DCH (dedicated)."""

    model: Literal["umts"]
    promotion_idle_dch: Promotion = Duration(2 * _S)  # 1.5-4.0 s measured
    promotion_fach_dch: Promotion = Duration(1_500_000_000)  # 0.8-3.0 s
    inactivity_dch_fach: Timer = Duration(4 * _S)  # some carriers 5 s
    inactivity_fach_idle: Timer = Duration(10 * _S)  # some carriers 12 s
    fach_threshold_uplink: RlcBytes = 543  # RLC buffer that triggers FACH -> DCH
    fach_threshold_downlink: RlcBytes = 475
    fach_rate: StateRate = Rate(20_000)  # "order of 10-30 kbit/s"; "unlimited": no FACH pacing
    power_dch: Watts = Decimal("0.8")
    power_fach: Watts = Decimal("0.46")
    power_idle: Watts = Decimal("0")
    # cellular.md gives no promotion power for UMTS: the shared channels are in use while the
    # dedicated one is set up, so FACH's figure is the default.
    power_promotion: Watts = Decimal("0.46")


class RadioLte(_Waking):
    """4G LTE: RRC_IDLE, RRC_CONNECTED (continuous reception -> short DRX -> long DRX)."""

    model: Literal["lte"]
    promotion: Promotion = Duration(260_000_000)  # RRC_IDLE -> RRC_CONNECTED
    drx_inactivity: Timer = Duration(100_000_000)  # 0: no DRX
    short_drx_cycle: Timer = Duration(20_000_000)  # 0: no short DRX
    short_drx_time: Timer = Duration(20_000_000)  # time spent in short DRX; 0: no short DRX
    long_drx_cycle: Timer = Duration(40_000_000)  # 0: no long DRX
    on_duration: Timer = Duration(1_000_000)  # receiver awake per DRX cycle (1-2 ms)
    tail: Timer = Duration(10 * _S)  # CONNECTED -> IDLE, measured up to 11.6 s
    power_promotion: Watts = Decimal("1.2")
    power_tail: Watts = Decimal("1.06")  # average over the tail (DRX)
    power_drx_wake: Watts = Decimal("1.68")  # receiver on: continuous reception

    @model_validator(mode="after")
    def _cycles(self) -> "RadioLte":
        problems = []
        if self.short_drx_cycle and self.long_drx_cycle and self.short_drx_cycle > self.long_drx_cycle:
            problems.append(Problem("short_drx_cycle", f"{self.short_drx_cycle} is longer than "
                                    f"long_drx_cycle {self.long_drx_cycle}"))
        for name in ("short_drx_cycle", "long_drx_cycle"):
            cycle = getattr(self, name)
            if cycle and self.on_duration > cycle:
                problems.append(Problem("on_duration", f"{self.on_duration} is longer than "
                                        f"{name} {cycle}"))
        if self.on_duration == 0:
            problems.append(Problem("on_duration", "0s: the receiver would never wake up"))
        if self.tail and self.drx_inactivity and self.tail < self.drx_inactivity:
            problems.append(Problem("tail", f"{self.tail} ends before drx_inactivity "
                                    f"{self.drx_inactivity}: DRX would never start"))
        if problems:
            raise FieldProblems(problems)
        return self


class RadioGprs(_Waking):
    """2.5G GPRS: IDLE, READY, STANDBY; READY timer expiry -> STANDBY, a packet -> READY."""

    model: Literal["gprs"]
    promotion: Promotion = Duration(750_000_000)  # IDLE -> READY; measured first packet 0.5-1 s
    # STANDBY -> READY; unset: the same as `promotion` (the measured first-packet delay).
    promotion_standby_ready: Promotion | None = None
    ready_timer: Timer = Duration(44 * _S)  # T3314 default, 3GPP TS 24.008
    standby_timer: Timer = Duration(0)  # STANDBY -> IDLE; 0: never (the UE stays attached)
    # cellular.md gives no GPRS power figures: no energy estimate unless they are set.
    power_ready: Watts | None = None
    power_standby: Watts | None = None
    power_idle: Watts | None = None
    power_promotion: Watts | None = None


Radio = Annotated[Union[RadioNone, RadioUmts, RadioLte, RadioGprs], Field(discriminator="model")]

RADIO_MODELS = ("none", "umts", "lte", "gprs")

for _name, _model in zip(RADIO_MODELS, (RadioNone, RadioUmts, RadioLte, RadioGprs)):
    KNOWN_FIELDS.update(_model.model_fields)
    RADIO_FIELDS[_name] = tuple(_model.model_fields)
