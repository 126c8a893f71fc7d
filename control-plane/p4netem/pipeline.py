"""Names and index arithmetic of the pipeline contract (docs/pipeline-contract.md).

Only names live here: ids always come from the P4Info the switch runs (p4netem.p4rt.P4Info); the
param lists and the drop reasons come from the contract's P4Info (p4netem.schema).
"""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import Any

from . import schema

INGRESS = "P4netemIngress"
EGRESS = "P4netemEgress"

# Tables
PORT_MAP = f"{INGRESS}.port_map"
L2_FWD = f"{INGRESS}.l2_fwd"
L2_LEARN = f"{INGRESS}.l2_learn"
CLASSIFIER = f"{INGRESS}.classifier"
PROFILE = f"{INGRESS}.profile"
RADIO_PROFILE = f"{INGRESS}.radio_profile"

# Actions
SET_EGRESS_PORT = f"{INGRESS}.set_egress_port"
SEND_TO_CPU = f"{INGRESS}.send_to_cpu"
DROP_PACKET = f"{INGRESS}.drop_packet"
LEARN = f"{INGRESS}.learn"
SET_PROFILE = f"{INGRESS}.set_profile"
SET_IMPAIRMENT = f"{INGRESS}.set_impairment"
SET_RADIO = f"{INGRESS}.set_radio"
SET_PROFILE_UE_BY_ADDR = f"{INGRESS}.set_profile_ue_by_addr"
NO_ACTION = "NoAction"

# Registers
NEXT_FREE_NS = f"{INGRESS}.next_free_ns"
LAST_RELEASE_NS = f"{INGRESS}.last_release_ns"
GE_STATE = f"{INGRESS}.ge_state"
BACKLOG_BYTES = f"{INGRESS}.backlog_bytes"
BACKLOG_PKTS = f"{INGRESS}.backlog_pkts"
DIST_TABLE = f"{INGRESS}.dist_table"
RNG_SEED = f"{INGRESS}.rng_seed"
RADIO_STATE = f"{INGRESS}.radio_state"
RADIO_LAST_ACTIVITY_NS = f"{INGRESS}.radio_last_activity_ns"
RADIO_PROMO_DONE_NS = f"{INGRESS}.radio_promo_done_ns"
RADIO_FACH_FREE_NS = f"{INGRESS}.radio_fach_free_ns"
RADIO_DRX_REF_NS = f"{INGRESS}.radio_drx_ref_ns"
RADIO_STATE_SINCE_NS = f"{INGRESS}.radio_state_since_ns"
RADIO_STATE_TIME_NS = f"{INGRESS}.radio_state_time_ns"
RADIO_PROMO_PKTS = f"{INGRESS}.radio_promo_pkts"
# CoDel's per-pd variables (all zero: not dropping, never above target).
CODEL_REGISTERS = tuple(f"{INGRESS}.codel_{n}" for n in ("first_above_ns", "drop_next_ns", "count",
                                                          "lastcount", "rec_inv_sqrt", "state"))
# RED's per-pd variables (all zero: an empty average, outside the thresholds).
RED_REGISTERS = tuple(f"{INGRESS}.red_{n}" for n in ("qavg", "count", "qr"))
# PIE's per-pd variables (all zero: probability 0, no delay seen, no burst allowance, the update
# clock stopped; the next packet starts it with the full burst allowance).
PIE_REGISTERS = tuple(f"{INGRESS}.pie_{n}" for n in ("prob", "qdelay_old_ns", "burst_ns", "accu_prob", "next_ns"))
# netem 4-state loss per pd (0 reads as state 1, TX_IN_GAP).
LOSS4_STATE = f"{INGRESS}.loss4_state"
# netem's correlation per pd: each correlated draw's `last` (0: never drawn, seeded on first use as
# netem seeds it when a qdisc is configured) and the reorder gap's counter.
CORR_REGISTERS = (*(f"{INGRESS}.{n}_corr_last" for n in ("delay", "loss", "dup", "corrupt", "reorder")),
                  f"{INGRESS}.reorder_count")
# netem slots per pd (all zero: no slot opened yet).
SLOT_REGISTERS = tuple(f"{INGRESS}.slot_{n}" for n in ("next_ns", "used_pkts", "used_bytes"))
# The on/off link per pd (all zero: not started; its first packet finds it on).
ONOFF_REGISTERS = (f"{INGRESS}.onoff_state", f"{INGRESS}.onoff_at_ns")
# Exact trace delivery: the trace cells the controller loads, and the per-pd state (all zero: not
# started).
TRACE_OPPORTUNITY_MS = f"{INGRESS}.trace_opportunity_ms"
TRACE_FIRST_AT = f"{INGRESS}.trace_first_at"
TRACE_REGISTERS = tuple(f"{INGRESS}.trace_{n}" for n in ("cycle_ns", "pos", "left"))
# Every per-UE radio register (all zero: a UE never seen, IDLE).
RADIO_REGISTERS = (RADIO_STATE, RADIO_LAST_ACTIVITY_NS, RADIO_PROMO_DONE_NS, RADIO_FACH_FREE_NS,
                   RADIO_DRX_REF_NS, RADIO_STATE_SINCE_NS, RADIO_STATE_TIME_NS, RADIO_PROMO_PKTS)

# Counters
PROFILE_IN = f"{INGRESS}.profile_in"
PROFILE_OUT = f"{EGRESS}.profile_out"
DROPS = f"{INGRESS}.drops"
PARSER_ERRORS = f"{INGRESS}.parser_errors"
PROFILE_DUP = f"{INGRESS}.profile_dup"
PROFILE_CORRUPT = f"{INGRESS}.profile_corrupt"
PROFILE_ECN_MARK = f"{INGRESS}.profile_ecn_mark"
RADIO_PROMOTIONS = f"{INGRESS}.radio_promotions"

MAC_LEARN_DIGEST = "mac_learn_digest_t"
RADIO_STATE_DIGEST = "radio_state_digest_t"


@functools.cache
def _from_contract() -> dict[str, Any]:
    """The names read from the contract's P4Info (schema.py), made when one is first used (module
    __getattr__): parsing the P4Info text takes about 30 ms, which every `p4netem` command paid at
    start-up, `--help` included, when they were made at import."""
    # set_impairment and set_radio parameters, in contract order. All are required by P4Runtime;
    # 0 means "off" (for set_radio timers: never).
    impairment_params = tuple(name for _, name, _ in schema.action_params(SET_IMPAIRMENT))
    radio_params = tuple(name for _, name, _ in schema.action_params(SET_RADIO))
    # Drop reasons, the `reason` part of a drops index.
    drop_reason = IntEnum("DropReason", [(name.upper(), i) for i, name in enumerate(schema.drop_reasons(DROPS))],
                          module=__name__)
    drop_reason.__doc__ = "Drop reasons, in the drops counter's index order (P4Info @p4netem_drop_reasons)."
    return {"IMPAIRMENT_PARAMS": impairment_params, "RADIO_PARAMS": radio_params, "DropReason": drop_reason,
            "DROP_REASONS_PER_PD": schema.drop_reason_stride(DROPS, PROFILE_IN)}


_CONTRACT_NAMES = ("IMPAIRMENT_PARAMS", "RADIO_PARAMS", "DropReason", "DROP_REASONS_PER_PD")


def __getattr__(name: str) -> Any:
    if name not in _CONTRACT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals().update(_from_contract())  # from now on plain module attributes
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_CONTRACT_NAMES})


UPLINK = 0
DOWNLINK = 1


class JitterDist(IntEnum):
    NONE = 0
    UNIFORM = 1
    NORMAL = 2
    PARETO = 3
    PARETONORMAL = 4
    USER = 5


# set_impairment's slot_dist for netem's `slot MIN [MAX]` (1..5 are the JitterDist shapes).
SLOT_RANGE = 0


class Aqm(IntEnum):
    """set_impairment's `aqm`."""

    TAIL_DROP = 0
    CODEL = 1
    RED = 2
    PIE = 3


class BearerSched(IntEnum):
    """set_impairment's `bearer_sched`: one rate queue, or a queue per UE (stage 6a)."""

    FIFO = 0
    DRR = 1
    PF = 2


BEARER_DEFAULT_QUANTUM = 1514  # bearer_quantum_bytes 0 reads as this


class RadioModel(IntEnum):
    """set_radio's `model`."""

    NONE = 0
    UMTS = 1
    LTE = 2
    GPRS = 3


class RadioState(IntEnum):
    """The radio state enum of radio_state, radio_state_time_ns and radio_state_digest_t."""

    IDLE = 0
    PROMOTING = 1
    FACH = 2
    DCH = 3
    CONNECTED = 4  # LTE continuous reception
    SHORT_DRX = 5
    LONG_DRX = 6
    STANDBY = 7  # GPRS
    READY = 8  # GPRS


class PromotionKind(IntEnum):
    """The `kind` part of a radio_promotions index."""

    IDLE_DCH = 0
    FACH_DCH = 1
    IDLE_CONNECTED = 2
    TO_READY = 3


RADIO_STATE_STRIDE = 16  # radio_state_time_ns cells per UE
RADIO_PROMO_KINDS = 4  # radio_promotions cells per UE


class ParserError(IntEnum):
    OTHER = 0
    PACKET_TOO_SHORT = 1
    NO_MATCH = 2
    HEADER_TOO_SHORT = 3


def pd_index(profile_id: int, direction: int) -> int:
    """Profile-direction index: profile_id * 2 + direction."""
    if direction not in (UPLINK, DOWNLINK):
        raise ValueError(f"direction must be 0 (uplink) or 1 (downlink), got {direction}")
    return profile_id * 2 + direction


def drop_index(pd: int, reason: DropReason | int) -> int:
    """Index of the drops counter for one pd and reason."""
    return pd * _from_contract()["DROP_REASONS_PER_PD"] + int(reason)


def state_time_index(ue: int, state: RadioState | int) -> int:
    """Index of radio_state_time_ns for one UE and state."""
    return ue * RADIO_STATE_STRIDE + int(state)


def promotion_index(ue: int, kind: PromotionKind | int) -> int:
    """Index of the radio_promotions counter for one UE and promotion kind."""
    return ue * RADIO_PROMO_KINDS + int(kind)


def radio_params(**given: int) -> dict[str, int]:
    """All set_radio parameters, the given ones set, the others 0 (off)."""
    names = _from_contract()["RADIO_PARAMS"]
    unknown = set(given) - set(names)
    if unknown:
        raise ValueError(f"unknown set_radio parameter(s): {', '.join(sorted(unknown))}")
    return {name: int(given.get(name, 0)) for name in names}


def impairment_params(**given: int) -> dict[str, int]:
    """All set_impairment parameters, the given ones set, the others 0 (off)."""
    names = _from_contract()["IMPAIRMENT_PARAMS"]
    unknown = set(given) - set(names)
    if unknown:
        raise ValueError(f"unknown set_impairment parameter(s): {', '.join(sorted(unknown))}")
    return {name: int(given.get(name, 0)) for name in names}
