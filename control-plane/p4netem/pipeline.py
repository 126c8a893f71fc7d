"""Names and index arithmetic of the pipeline contract (docs/pipeline-contract.md).

Only names live here: ids always come from the P4Info the switch runs (p4netem.p4rt.P4Info).
"""

from __future__ import annotations

from enum import IntEnum

INGRESS = "P4netemIngress"
EGRESS = "P4netemEgress"

# Tables
PORT_MAP = f"{INGRESS}.port_map"
L2_FWD = f"{INGRESS}.l2_fwd"
L2_LEARN = f"{INGRESS}.l2_learn"
CLASSIFIER = f"{INGRESS}.classifier"
PROFILE = f"{INGRESS}.profile"

# Actions
SET_EGRESS_PORT = f"{INGRESS}.set_egress_port"
SEND_TO_CPU = f"{INGRESS}.send_to_cpu"
DROP_PACKET = f"{INGRESS}.drop_packet"
LEARN = f"{INGRESS}.learn"
SET_PROFILE = f"{INGRESS}.set_profile"
SET_IMPAIRMENT = f"{INGRESS}.set_impairment"
NO_ACTION = "NoAction"

# set_impairment parameters, in contract order. All are required by P4Runtime; 0 means "off".
IMPAIRMENT_PARAMS = (
    "delay_ns",
    "jitter_ns",
    "jitter_dist",
    "reorder_mode",
    "reorder_prob",
    "loss_prob",
    "ge_p",
    "ge_r",
    "ge_loss_good",
    "ge_loss_bad",
    "ns_per_byte_q16",
    "overhead_bytes",
    "queue_limit_bytes",
    "queue_limit_pkts",
    "dup_prob",
    "corrupt_prob",
)

# Registers
NEXT_FREE_NS = f"{INGRESS}.next_free_ns"
LAST_RELEASE_NS = f"{INGRESS}.last_release_ns"
GE_STATE = f"{INGRESS}.ge_state"
BACKLOG_BYTES = f"{INGRESS}.backlog_bytes"
BACKLOG_PKTS = f"{INGRESS}.backlog_pkts"
DIST_TABLE = f"{INGRESS}.dist_table"
RNG_SEED = f"{INGRESS}.rng_seed"

# Counters
PROFILE_IN = f"{INGRESS}.profile_in"
PROFILE_OUT = f"{EGRESS}.profile_out"
DROPS = f"{INGRESS}.drops"
PARSER_ERRORS = f"{INGRESS}.parser_errors"
PROFILE_DUP = f"{INGRESS}.profile_dup"
PROFILE_CORRUPT = f"{INGRESS}.profile_corrupt"

MAC_LEARN_DIGEST = "mac_learn_digest_t"

UPLINK = 0
DOWNLINK = 1


class JitterDist(IntEnum):
    NONE = 0
    UNIFORM = 1
    NORMAL = 2
    PARETO = 3
    PARETONORMAL = 4
    USER = 5


class DropReason(IntEnum):
    LOSS_RANDOM = 0
    LOSS_BURST = 1
    QUEUE_FULL = 2
    RADIO = 3
    NO_ROUTE = 4
    MALFORMED = 5
    BUFFER_EXHAUSTED = 6
    TX_ERROR = 7


DROP_REASONS_PER_PD = 8


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
    return pd * DROP_REASONS_PER_PD + int(reason)


def impairment_params(**given: int) -> dict[str, int]:
    """All set_impairment parameters, the given ones set, the others 0 (off)."""
    unknown = set(given) - set(IMPAIRMENT_PARAMS)
    if unknown:
        raise ValueError(f"unknown set_impairment parameter(s): {', '.join(sorted(unknown))}")
    return {name: int(given.get(name, 0)) for name in IMPAIRMENT_PARAMS}
