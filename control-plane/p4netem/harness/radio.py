"""The radio before each load: E5 idles the radio before every load, so each load pays the
promotion (IDLE -> connected) on its first packet.

With the radio applied, the UE's radio must be idle when a load starts. The state demotes on its
own after the model's inactivity timers (UMTS: DCH->FACH then FACH->IDLE; LTE: the tail; GPRS:
the READY timer), evaluated at packet arrival, so waiting out those timers since the UE's last
packet is enough and needs nothing but time; a per-UE state reset over P4Runtime, when the radio
stage offers one, would make it instant (`_reset_hook`).

Without the radio applied (radio off, or no radio stage in the data plane) there is nothing to do;
the record says which.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..mininet.slots import AppliedProfile
from ..profiles import Profile

# Longest wait for demotion the harness accepts before refusing (GPRS READY is 44 s by default).
MAX_IDLE_WAIT_S = 60.0


@dataclass(frozen=True)
class RadioPrep:
    idle: str            # "n/a" | "waited" | "reset"
    waited_s: float = 0.0

    def to_json(self) -> dict:
        return {"idle": self.idle, "idle_waited_s": round(self.waited_s, 3)}


def demotion_seconds(profile: Profile) -> float:
    """Inactivity after which the profile's radio model is idle again."""
    r = profile.radio
    if r.model == "umts":
        return (int(r.inactivity_dch_fach) + int(r.inactivity_fach_idle)) / 1e9
    if r.model == "lte":
        return int(r.tail) / 1e9
    if r.model == "gprs":
        return int(r.ready_timer) / 1e9
    return 0.0


def prepare_radio(lab, applied: AppliedProfile) -> RadioPrep:
    if not applied.radio.applied:
        return RadioPrep("n/a")
    hook = _reset_hook(lab)
    if hook is not None:
        hook(applied.slot)
        return RadioPrep("reset")
    need = demotion_seconds(applied.profile)
    if need > MAX_IDLE_WAIT_S:
        raise RuntimeError(f"radio {applied.radio.model}: idling takes {need:.0f} s of silence "
                           f"(more than {MAX_IDLE_WAIT_S:.0f} s per load); shorten its timer in "
                           "the profile")
    # The last load ended just now: wait the whole demotion time plus a margin.
    wait = need + 0.5
    time.sleep(wait)
    return RadioPrep("waited", wait)


def _reset_hook(lab):
    """A per-UE radio reset offered by the control plane, when the radio stage provides one."""
    return getattr(lab, "reset_radio", None)
