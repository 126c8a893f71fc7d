//! Native definition of the p4netem pipeline, exactly as `docs/pipeline-contract.md` states it.
//!
//! The P4 program (`p4src/p4netem.p4`), its P4Info and this file describe one pipeline; the contract
//! test compares all three. Everything here is static data so the P4Runtime layer can build the
//! P4Info from it and the data plane can validate entries against it without allocation.
//! Sizes are the contract's defaults; runtime capacities (flags) may scale the per-profile ones,
//! see [`crate::state::Capacities`].

pub use crate::state::Capacities;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Ternary,
    Range,
    Lpm,
}

#[derive(Debug, Clone, Copy)]
pub struct KeyDef {
    pub id: u32,
    pub name: &'static str,
    pub bits: u32,
    pub kind: MatchKind,
}

#[derive(Debug, Clone, Copy)]
pub struct ParamDef {
    pub id: u32,
    pub name: &'static str,
    pub bits: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct ActionDef {
    pub id: u32,
    pub name: &'static str,
    pub params: &'static [ParamDef],
}

#[derive(Debug, Clone, Copy)]
pub struct TableDef {
    pub id: u32,
    pub name: &'static str,
    pub keys: &'static [KeyDef],
    pub action_ids: &'static [u32],
    pub size: u32,
    pub default_action_id: u32,
    pub default_params: &'static [u128],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterUnit {
    Bytes,
    Packets,
    Both,
}

#[derive(Debug, Clone, Copy)]
pub struct CounterDef {
    pub id: u32,
    pub name: &'static str,
    pub unit: CounterUnit,
    pub size: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct RegisterDef {
    pub id: u32,
    pub name: &'static str,
    pub bits: u32,
    pub size: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct DigestDef {
    pub id: u32,
    pub name: &'static str,
    pub fields: &'static [(&'static str, u32)],
}

#[derive(Debug, Clone, Copy)]
pub struct ControllerHeaderDef {
    pub id: u32,
    pub name: &'static str,
    pub fields: &'static [ParamDef],
}

// ---- ids -------------------------------------------------------------------------------------

pub const TABLE_PORT_MAP: u32 = 0x0200_0001;
pub const TABLE_L2_FWD: u32 = 0x0200_0002;
pub const TABLE_L2_LEARN: u32 = 0x0200_0003;
pub const TABLE_CLASSIFIER: u32 = 0x0200_0004;
pub const TABLE_PROFILE: u32 = 0x0200_0005;
pub const TABLE_RADIO_PROFILE: u32 = 0x0200_0006;

/// p4c's fixed id for core.p4's `NoAction`.
pub const ACTION_NO_ACTION: u32 = 21257015;
pub const ACTION_SET_EGRESS_PORT: u32 = 0x0100_0001;
pub const ACTION_SEND_TO_CPU: u32 = 0x0100_0002;
pub const ACTION_DROP_PACKET: u32 = 0x0100_0003;
pub const ACTION_LEARN: u32 = 0x0100_0004;
pub const ACTION_SET_PROFILE: u32 = 0x0100_0005;
pub const ACTION_SET_IMPAIRMENT: u32 = 0x0100_0006;
pub const ACTION_SET_RADIO: u32 = 0x0100_0007;
pub const ACTION_SET_PROFILE_UE_BY_ADDR: u32 = 0x0100_0008;

pub const REG_NEXT_FREE_NS: u32 = 0x1600_0001;
pub const REG_LAST_RELEASE_NS: u32 = 0x1600_0002;
pub const REG_GE_STATE: u32 = 0x1600_0003;
pub const REG_BACKLOG_BYTES: u32 = 0x1600_0004;
pub const REG_BACKLOG_PKTS: u32 = 0x1600_0005;
pub const REG_DIST_TABLE: u32 = 0x1600_0006;
pub const REG_RNG_SEED: u32 = 0x1600_0007;
pub const REG_RADIO_STATE: u32 = 0x1600_0008;
pub const REG_RADIO_LAST_ACTIVITY_NS: u32 = 0x1600_0009;
pub const REG_RADIO_PROMO_DONE_NS: u32 = 0x1600_000A;
pub const REG_RADIO_FACH_FREE_NS: u32 = 0x1600_000B;
pub const REG_RADIO_DRX_REF_NS: u32 = 0x1600_000C;
pub const REG_RADIO_STATE_SINCE_NS: u32 = 0x1600_000D;
pub const REG_RADIO_STATE_TIME_NS: u32 = 0x1600_000E;
pub const REG_RADIO_PROMO_PKTS: u32 = 0x1600_000F;

pub const COUNTER_PROFILE_IN: u32 = 0x1200_0001;
pub const COUNTER_PROFILE_OUT: u32 = 0x1200_0002;
pub const COUNTER_DROPS: u32 = 0x1200_0003;
pub const COUNTER_PARSER_ERRORS: u32 = 0x1200_0004;
pub const COUNTER_PROFILE_DUP: u32 = 0x1200_0005;
pub const COUNTER_PROFILE_CORRUPT: u32 = 0x1200_0006;
pub const COUNTER_RADIO_PROMOTIONS: u32 = 0x1200_0007;

/// p4c derives v1model digest ids from the struct name (no @id possible): 0x17000000 | JOAAT("mac_learn_digest_t").
pub const DIGEST_MAC_LEARN: u32 = 0x17F8_D97F;
/// The same rule for the radio digest: 0x17000000 | JOAAT("radio_state_digest_t").
pub const DIGEST_RADIO_STATE: u32 = 0x17C4_B86E;

pub const CTRL_HDR_PACKET_IN: u32 = 0x0400_0001;
pub const CTRL_HDR_PACKET_OUT: u32 = 0x0400_0002;

// ---- sizes and encodings -----------------------------------------------------------------------

/// Contract default number of profiles; pd = profile_id * 2 + direction.
pub const DEFAULT_PROFILES: u32 = 4096;
pub const DEFAULT_PD: u32 = DEFAULT_PROFILES * 2;
pub const DEFAULT_CLASSIFIER_ENTRIES: u32 = 65536;
pub const DEFAULT_UE_IDS: u32 = 1 << 20;
/// Drop reasons per pd (index `pd * DROP_REASONS + reason` of `drops`).
pub const DROP_REASONS: u32 = 8;
/// Entries per distribution table in `dist_table` (normal, pareto, paretonormal, user).
pub const DIST_TABLE_LEN: u32 = 4096;
pub const DIST_TABLES: u32 = 4;
/// netem's NETEM_DIST_SCALE: table values are in units of sigma / 8192.
pub const DIST_SCALE: i64 = 8192;
/// Per-UE radio arrays with one cell per state: index `ue * RADIO_STATE_STRIDE + state`.
pub const RADIO_STATE_STRIDE: u32 = 16;
/// `radio_promotions` cells per UE: index `ue * RADIO_PROMO_KINDS + kind`.
pub const RADIO_PROMO_KINDS: u32 = 4;
/// `radio_fach_free_ns` cells per UE: index `ue * 2 + direction`.
pub const RADIO_DIRECTIONS: u32 = 2;

/// Drop reasons, the `reason` part of a `drops` index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum DropReason {
    LossRandom = 0,
    LossBurst = 1,
    QueueFull = 2,
    Radio = 3,
    NoRoute = 4,
    Malformed = 5,
    BufferExhausted = 6,
    TxError = 7,
}

/// Indices of the `parser_errors` counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ParserError {
    Other = 0,
    PacketTooShort = 1,
    NoMatch = 2,
    HeaderTooShort = 3,
}

/// `jitter_dist` values of `set_impairment`.
pub const JITTER_NONE: u8 = 0;
pub const JITTER_UNIFORM: u8 = 1;
pub const JITTER_NORMAL: u8 = 2;
pub const JITTER_PARETO: u8 = 3;
pub const JITTER_PARETONORMAL: u8 = 4;
pub const JITTER_USER: u8 = 5;

/// `set_radio.model` values.
pub mod radio_model {
    pub const NONE: u8 = 0;
    pub const UMTS: u8 = 1;
    pub const LTE: u8 = 2;
    pub const GPRS: u8 = 3;
}

/// The radio state enum shared by `radio_state`, `radio_state_time_ns` and the digest.
pub mod radio_state {
    pub const IDLE: u8 = 0;
    pub const PROMOTING: u8 = 1;
    pub const FACH: u8 = 2;
    pub const DCH: u8 = 3;
    pub const CONNECTED: u8 = 4;
    pub const SHORT_DRX: u8 = 5;
    pub const LONG_DRX: u8 = 6;
    pub const STANDBY: u8 = 7;
    pub const READY: u8 = 8;
}

/// Promotion kinds, the `kind` part of a `radio_promotions` index.
pub mod radio_promo {
    pub const IDLE_DCH: u32 = 0;
    pub const FACH_DCH: u32 = 1;
    pub const IDLE_CONNECTED: u32 = 2;
    pub const TO_READY: u32 = 3;
}

// ---- params ------------------------------------------------------------------------------------

const fn p(id: u32, name: &'static str, bits: u32) -> ParamDef {
    ParamDef { id, name, bits }
}

const fn k(id: u32, name: &'static str, bits: u32, kind: MatchKind) -> KeyDef {
    KeyDef { id, name, bits, kind }
}

/// Indices into `set_impairment`'s params (param id - 1).
pub mod imp {
    pub const DELAY_NS: usize = 0;
    pub const JITTER_NS: usize = 1;
    pub const JITTER_DIST: usize = 2;
    pub const REORDER_MODE: usize = 3;
    pub const REORDER_PROB: usize = 4;
    pub const LOSS_PROB: usize = 5;
    pub const GE_P: usize = 6;
    pub const GE_R: usize = 7;
    pub const GE_LOSS_GOOD: usize = 8;
    pub const GE_LOSS_BAD: usize = 9;
    pub const NS_PER_BYTE_Q16: usize = 10;
    pub const OVERHEAD_BYTES: usize = 11;
    pub const QUEUE_LIMIT_BYTES: usize = 12;
    pub const QUEUE_LIMIT_PKTS: usize = 13;
    pub const DUP_PROB: usize = 14;
    pub const CORRUPT_PROB: usize = 15;
    pub const COUNT: usize = 16;
}

/// Indices into `set_radio`'s params (param id - 1).
pub mod rp {
    pub const MODEL: usize = 0;
    pub const IDLE_TO_DCH_NS: usize = 1;
    pub const FACH_TO_DCH_NS: usize = 2;
    pub const IDLE_TO_CONNECTED_NS: usize = 3;
    pub const STANDBY_TO_READY_NS: usize = 4;
    pub const PROMO_SPREAD_NS: usize = 5;
    pub const DCH_FACH_TIMER_NS: usize = 6;
    pub const FACH_IDLE_TIMER_NS: usize = 7;
    pub const DRX_INACTIVITY_NS: usize = 8;
    pub const SHORT_DRX_TIME_NS: usize = 9;
    pub const SHORT_DRX_CYCLE_NS: usize = 10;
    pub const LONG_DRX_CYCLE_NS: usize = 11;
    pub const DRX_ON_NS: usize = 12;
    pub const TAIL_NS: usize = 13;
    pub const READY_TIMER_NS: usize = 14;
    pub const RLC_UL_BYTES: usize = 15;
    pub const RLC_DL_BYTES: usize = 16;
    pub const FACH_NS_PER_BYTE_Q16: usize = 17;
    pub const PROMO_QUEUE_PKTS: usize = 18;
    pub const COUNT: usize = 19;
}

pub const SET_RADIO_PARAMS: &[ParamDef] = &[
    p(1, "model", 8),
    p(2, "idle_to_dch_ns", 48),
    p(3, "fach_to_dch_ns", 48),
    p(4, "idle_to_connected_ns", 48),
    p(5, "standby_to_ready_ns", 48),
    p(6, "promo_spread_ns", 48),
    p(7, "dch_fach_timer_ns", 48),
    p(8, "fach_idle_timer_ns", 48),
    p(9, "drx_inactivity_ns", 48),
    p(10, "short_drx_time_ns", 48),
    p(11, "short_drx_cycle_ns", 48),
    p(12, "long_drx_cycle_ns", 48),
    p(13, "drx_on_ns", 48),
    p(14, "tail_ns", 48),
    p(15, "ready_timer_ns", 48),
    p(16, "rlc_ul_bytes", 32),
    p(17, "rlc_dl_bytes", 32),
    p(18, "fach_ns_per_byte_q16", 48),
    p(19, "promo_queue_pkts", 32),
];

pub const SET_IMPAIRMENT_PARAMS: &[ParamDef] = &[
    p(1, "delay_ns", 48),
    p(2, "jitter_ns", 48),
    p(3, "jitter_dist", 8),
    p(4, "reorder_mode", 8),
    p(5, "reorder_prob", 32),
    p(6, "loss_prob", 32),
    p(7, "ge_p", 32),
    p(8, "ge_r", 32),
    p(9, "ge_loss_good", 32),
    p(10, "ge_loss_bad", 32),
    p(11, "ns_per_byte_q16", 48),
    p(12, "overhead_bytes", 16),
    p(13, "queue_limit_bytes", 32),
    p(14, "queue_limit_pkts", 32),
    p(15, "dup_prob", 32),
    p(16, "corrupt_prob", 32),
];

pub const ACTIONS: &[ActionDef] = &[
    ActionDef { id: ACTION_NO_ACTION, name: "NoAction", params: &[] },
    ActionDef {
        id: ACTION_SET_EGRESS_PORT,
        name: "P4netemIngress.set_egress_port",
        params: &[p(1, "port", 9)],
    },
    ActionDef { id: ACTION_SEND_TO_CPU, name: "P4netemIngress.send_to_cpu", params: &[] },
    ActionDef { id: ACTION_DROP_PACKET, name: "P4netemIngress.drop_packet", params: &[] },
    ActionDef { id: ACTION_LEARN, name: "P4netemIngress.learn", params: &[] },
    ActionDef {
        id: ACTION_SET_PROFILE,
        name: "P4netemIngress.set_profile",
        params: &[p(1, "profile_id", 16), p(2, "direction", 1), p(3, "ue_id", 32)],
    },
    ActionDef {
        id: ACTION_SET_IMPAIRMENT,
        name: "P4netemIngress.set_impairment",
        params: SET_IMPAIRMENT_PARAMS,
    },
    ActionDef { id: ACTION_SET_RADIO, name: "P4netemIngress.set_radio", params: SET_RADIO_PARAMS },
    ActionDef {
        id: ACTION_SET_PROFILE_UE_BY_ADDR,
        name: "P4netemIngress.set_profile_ue_by_addr",
        params: &[
            p(1, "profile_id", 16),
            p(2, "direction", 1),
            p(3, "ue_base", 32),
            p(4, "ue_mask", 32),
            p(5, "ue_from_dst", 1),
        ],
    },
];

// ---- tables ------------------------------------------------------------------------------------

/// Indices of the classifier's keys (key id - 1).
pub mod ck {
    pub const INGRESS_PORT: usize = 0;
    pub const ETHER_TYPE: usize = 1;
    pub const IPV4_SRC: usize = 2;
    pub const IPV4_DST: usize = 3;
    pub const IPV6_SRC: usize = 4;
    pub const IPV6_DST: usize = 5;
    pub const IP_PROTO: usize = 6;
    pub const L4_SRC_PORT: usize = 7;
    pub const L4_DST_PORT: usize = 8;
    pub const DSCP: usize = 9;
    pub const COUNT: usize = 10;
}

pub const TABLES: &[TableDef] = &[
    TableDef {
        id: TABLE_PORT_MAP,
        name: "P4netemIngress.port_map",
        keys: &[k(1, "standard_metadata.ingress_port", 9, MatchKind::Exact)],
        action_ids: &[ACTION_SET_EGRESS_PORT, ACTION_SEND_TO_CPU, ACTION_DROP_PACKET],
        size: 512,
        default_action_id: ACTION_DROP_PACKET,
        default_params: &[],
    },
    TableDef {
        id: TABLE_L2_FWD,
        name: "P4netemIngress.l2_fwd",
        keys: &[k(1, "hdr.ethernet.dst_addr", 48, MatchKind::Exact)],
        action_ids: &[ACTION_SET_EGRESS_PORT, ACTION_SEND_TO_CPU, ACTION_NO_ACTION],
        size: 4096,
        default_action_id: ACTION_NO_ACTION,
        default_params: &[],
    },
    TableDef {
        id: TABLE_L2_LEARN,
        name: "P4netemIngress.l2_learn",
        keys: &[k(1, "hdr.ethernet.src_addr", 48, MatchKind::Exact)],
        action_ids: &[ACTION_NO_ACTION, ACTION_LEARN],
        size: 4096,
        default_action_id: ACTION_NO_ACTION,
        default_params: &[],
    },
    TableDef {
        id: TABLE_CLASSIFIER,
        name: "P4netemIngress.classifier",
        keys: &[
            k(1, "standard_metadata.ingress_port", 9, MatchKind::Ternary),
            k(2, "meta.ether_type", 16, MatchKind::Ternary),
            k(3, "meta.ipv4_src", 32, MatchKind::Ternary),
            k(4, "meta.ipv4_dst", 32, MatchKind::Ternary),
            k(5, "meta.ipv6_src", 128, MatchKind::Ternary),
            k(6, "meta.ipv6_dst", 128, MatchKind::Ternary),
            k(7, "meta.ip_proto", 8, MatchKind::Ternary),
            k(8, "meta.l4_src_port", 16, MatchKind::Range),
            k(9, "meta.l4_dst_port", 16, MatchKind::Range),
            k(10, "meta.dscp", 6, MatchKind::Ternary),
        ],
        action_ids: &[ACTION_SET_PROFILE, ACTION_SET_PROFILE_UE_BY_ADDR],
        size: DEFAULT_CLASSIFIER_ENTRIES,
        default_action_id: ACTION_SET_PROFILE,
        default_params: &[0, 0, 0],
    },
    TableDef {
        id: TABLE_PROFILE,
        name: "P4netemIngress.profile",
        keys: &[
            k(1, "meta.profile_id", 16, MatchKind::Exact),
            k(2, "meta.direction", 1, MatchKind::Exact),
        ],
        action_ids: &[ACTION_SET_IMPAIRMENT, ACTION_NO_ACTION],
        size: DEFAULT_PD,
        default_action_id: ACTION_NO_ACTION,
        default_params: &[],
    },
    TableDef {
        id: TABLE_RADIO_PROFILE,
        name: "P4netemIngress.radio_profile",
        keys: &[k(1, "meta.profile_id", 16, MatchKind::Exact)],
        action_ids: &[ACTION_SET_RADIO, ACTION_NO_ACTION],
        size: DEFAULT_PROFILES,
        default_action_id: ACTION_NO_ACTION,
        default_params: &[],
    },
];

/// Where an action may appear in a table (P4Info `ActionRef.scope`, from `@tableonly`/`@defaultonly`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionScope {
    TableAndDefault,
    TableOnly,
    DefaultOnly,
}

/// (table, action) pairs annotated `@defaultonly` in the P4 program: entries (known keys) never
/// run them, only a miss does.
pub const DEFAULT_ONLY_ACTIONS: &[(u32, u32)] = &[
    (TABLE_L2_FWD, ACTION_NO_ACTION),
    (TABLE_L2_LEARN, ACTION_LEARN),
    (TABLE_PROFILE, ACTION_NO_ACTION),
    (TABLE_RADIO_PROFILE, ACTION_NO_ACTION),
];

/// (table, action) pairs annotated `@tableonly` (none in this program).
pub const TABLE_ONLY_ACTIONS: &[(u32, u32)] = &[];

/// Tables whose default action is `const default_action` in the P4 program.
pub const CONST_DEFAULT_TABLES: &[u32] = &[TABLE_L2_FWD];

pub fn action_scope(table_id: u32, action_id: u32) -> ActionScope {
    if DEFAULT_ONLY_ACTIONS.contains(&(table_id, action_id)) {
        ActionScope::DefaultOnly
    } else if TABLE_ONLY_ACTIONS.contains(&(table_id, action_id)) {
        ActionScope::TableOnly
    } else {
        ActionScope::TableAndDefault
    }
}

pub fn default_is_const(table_id: u32) -> bool {
    CONST_DEFAULT_TABLES.contains(&table_id)
}

// ---- counters, registers, digests, controller headers -----------------------------------------

pub const COUNTERS: &[CounterDef] = &[
    CounterDef { id: COUNTER_PROFILE_IN, name: "P4netemIngress.profile_in", unit: CounterUnit::Both, size: DEFAULT_PD },
    CounterDef { id: COUNTER_PROFILE_OUT, name: "P4netemEgress.profile_out", unit: CounterUnit::Both, size: DEFAULT_PD },
    CounterDef { id: COUNTER_DROPS, name: "P4netemIngress.drops", unit: CounterUnit::Both, size: DEFAULT_PD * DROP_REASONS },
    CounterDef { id: COUNTER_PARSER_ERRORS, name: "P4netemIngress.parser_errors", unit: CounterUnit::Packets, size: 4 },
    CounterDef { id: COUNTER_PROFILE_DUP, name: "P4netemIngress.profile_dup", unit: CounterUnit::Both, size: DEFAULT_PD },
    CounterDef { id: COUNTER_PROFILE_CORRUPT, name: "P4netemIngress.profile_corrupt", unit: CounterUnit::Both, size: DEFAULT_PD },
    CounterDef {
        id: COUNTER_RADIO_PROMOTIONS,
        name: "P4netemIngress.radio_promotions",
        unit: CounterUnit::Packets,
        size: DEFAULT_UE_IDS * RADIO_PROMO_KINDS,
    },
];

pub const REGISTERS: &[RegisterDef] = &[
    RegisterDef { id: REG_NEXT_FREE_NS, name: "P4netemIngress.next_free_ns", bits: 64, size: DEFAULT_PD },
    RegisterDef { id: REG_LAST_RELEASE_NS, name: "P4netemIngress.last_release_ns", bits: 64, size: DEFAULT_PD },
    RegisterDef { id: REG_GE_STATE, name: "P4netemIngress.ge_state", bits: 8, size: DEFAULT_PD },
    RegisterDef { id: REG_BACKLOG_BYTES, name: "P4netemIngress.backlog_bytes", bits: 32, size: DEFAULT_PD },
    RegisterDef { id: REG_BACKLOG_PKTS, name: "P4netemIngress.backlog_pkts", bits: 32, size: DEFAULT_PD },
    RegisterDef { id: REG_DIST_TABLE, name: "P4netemIngress.dist_table", bits: 16, size: DIST_TABLE_LEN * DIST_TABLES },
    RegisterDef { id: REG_RNG_SEED, name: "P4netemIngress.rng_seed", bits: 64, size: 1 },
    RegisterDef { id: REG_RADIO_STATE, name: "P4netemIngress.radio_state", bits: 8, size: DEFAULT_UE_IDS },
    RegisterDef {
        id: REG_RADIO_LAST_ACTIVITY_NS,
        name: "P4netemIngress.radio_last_activity_ns",
        bits: 64,
        size: DEFAULT_UE_IDS,
    },
    RegisterDef { id: REG_RADIO_PROMO_DONE_NS, name: "P4netemIngress.radio_promo_done_ns", bits: 64, size: DEFAULT_UE_IDS },
    RegisterDef {
        id: REG_RADIO_FACH_FREE_NS,
        name: "P4netemIngress.radio_fach_free_ns",
        bits: 64,
        size: DEFAULT_UE_IDS * RADIO_DIRECTIONS,
    },
    RegisterDef { id: REG_RADIO_DRX_REF_NS, name: "P4netemIngress.radio_drx_ref_ns", bits: 64, size: DEFAULT_UE_IDS },
    RegisterDef {
        id: REG_RADIO_STATE_SINCE_NS,
        name: "P4netemIngress.radio_state_since_ns",
        bits: 64,
        size: DEFAULT_UE_IDS,
    },
    RegisterDef {
        id: REG_RADIO_STATE_TIME_NS,
        name: "P4netemIngress.radio_state_time_ns",
        bits: 64,
        size: DEFAULT_UE_IDS * RADIO_STATE_STRIDE,
    },
    RegisterDef { id: REG_RADIO_PROMO_PKTS, name: "P4netemIngress.radio_promo_pkts", bits: 32, size: DEFAULT_UE_IDS },
];

pub const DIGESTS: &[DigestDef] = &[
    DigestDef { id: DIGEST_MAC_LEARN, name: "mac_learn_digest_t", fields: &[("src_addr", 48), ("ingress_port", 9)] },
    DigestDef {
        id: DIGEST_RADIO_STATE,
        name: "radio_state_digest_t",
        fields: &[("ue_id", 32), ("old_state", 8), ("new_state", 8), ("timestamp_ns", 64)],
    },
];

pub const CONTROLLER_HEADERS: &[ControllerHeaderDef] = &[
    ControllerHeaderDef {
        id: CTRL_HDR_PACKET_IN,
        name: "packet_in",
        fields: &[p(1, "ingress_port", 9), p(2, "_pad", 7)],
    },
    ControllerHeaderDef {
        id: CTRL_HDR_PACKET_OUT,
        name: "packet_out",
        fields: &[p(1, "egress_port", 9), p(2, "_pad", 7)],
    },
];

// ---- lookups -----------------------------------------------------------------------------------

pub fn table(id: u32) -> Option<&'static TableDef> {
    TABLES.iter().find(|t| t.id == id)
}

pub fn action(id: u32) -> Option<&'static ActionDef> {
    ACTIONS.iter().find(|a| a.id == id)
}

pub fn counter(id: u32) -> Option<&'static CounterDef> {
    COUNTERS.iter().find(|c| c.id == id)
}

pub fn register(id: u32) -> Option<&'static RegisterDef> {
    REGISTERS.iter().find(|r| r.id == id)
}

pub fn digest(id: u32) -> Option<&'static DigestDef> {
    DIGESTS.iter().find(|d| d.id == id)
}

pub fn controller_header(id: u32) -> Option<&'static ControllerHeaderDef> {
    CONTROLLER_HEADERS.iter().find(|c| c.id == id)
}

pub fn table_by_name(name: &str) -> Option<&'static TableDef> {
    TABLES.iter().find(|t| t.name == name)
}

pub fn action_by_name(name: &str) -> Option<&'static ActionDef> {
    ACTIONS.iter().find(|a| a.name == name)
}

/// Largest value a field of `bits` bits holds.
pub const fn max_value(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_tables_reference_known_actions() {
        let mut ids: Vec<u32> = TABLES.iter().map(|t| t.id).collect();
        ids.extend(ACTIONS.iter().map(|a| a.id));
        ids.extend(COUNTERS.iter().map(|c| c.id));
        ids.extend(REGISTERS.iter().map(|r| r.id));
        ids.extend(DIGESTS.iter().map(|d| d.id));
        ids.extend(CONTROLLER_HEADERS.iter().map(|c| c.id));
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
        for t in TABLES {
            for a in t.action_ids {
                assert!(action(*a).is_some(), "{} references unknown action {a:#x}", t.name);
            }
            assert!(t.action_ids.contains(&t.default_action_id));
            let d = action(t.default_action_id).unwrap();
            assert_eq!(d.params.len(), t.default_params.len(), "{}", t.name);
        }
        assert_eq!(action(ACTION_SET_IMPAIRMENT).unwrap().params.len(), imp::COUNT);
        assert_eq!(action(ACTION_SET_RADIO).unwrap().params.len(), rp::COUNT);
        assert_eq!(table(TABLE_CLASSIFIER).unwrap().keys.len(), ck::COUNT);
    }
}
