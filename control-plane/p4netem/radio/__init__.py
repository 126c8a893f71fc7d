"""The cellular radio (RRC) of each UE, seen from the control plane.

- `RadioWatcher`: live radio state changes from the switch's `radio_state_digest_t` digests,
  decoded into `RadioEvent`s (per UE in time order).
- `read_ue()`: one UE's radio registers and promotion counters (`UeRadio`).
- `estimate_energy()`: joules per state from the time a UE spent in each state and the power
  figures of its radio model.
- `idle_ues()`: put UEs' radios back in IDLE at once (register writes equivalent to a demotion;
  idle.py says exactly what it writes), so their next packet pays the whole promotion.

Times are the switch's clock (p4netem-switch: CLOCK_MONOTONIC ns of its host, so the same clock as
`time.monotonic_ns()` on that host). See docs/radio.md.
"""

from ..lazy_exports import lazy_exports

# Imported from their submodule when first used (p4netem.lazy_exports).
__getattr__, __dir__ = lazy_exports(__name__, {
    "..pipeline": ("PromotionKind", "RadioState"),
    ".energy": ("EnergyEstimate", "estimate_energy", "state_power"),
    ".events": ("RadioEvent", "RadioWatcher"),
    ".idle": ("IdledUe", "idle_ues", "plan_idle"),
    ".reader": ("UeRadio", "read_promotions", "read_seen", "read_ue", "read_ues"),
})

__all__ = ["RadioState", "PromotionKind", "RadioEvent", "RadioWatcher", "UeRadio", "read_ue",
           "read_ues", "read_promotions", "read_seen", "EnergyEstimate", "estimate_energy", "state_power", "IdledUe", "idle_ues",
           "plan_idle"]
