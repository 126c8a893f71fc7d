//! Native definition of the p4netem pipeline, exactly as `docs/pipeline-contract.md` states it.
//!
//! The P4 program (`p4src/p4netem.p4`) and its P4Info describe the pipeline; this module's schema
//! (ids, params, widths, sizes, drop reasons) is generated from that P4Info at build time, and the
//! contract test compares the P4 source, the P4Info and what the running switch reports. Everything here is static data so the P4Runtime layer can build the
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
    /// P4Info preamble annotations (the drops counter's lists the drop reasons).
    pub annotations: &'static [&'static str],
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

// ---- generated from the P4Info --------------------------------------------------------------

// Every id, every action's params and widths, tables, counters, registers, digests, controller
// headers, the `imp::`/`rp::`/`ck::` indices and `DropReason`: generated at build time from
// p4src/p4netem.p4info.txtpb by proto/gen_contract.py (see build.rs), so that the switch and the
// P4Info cannot disagree. What follows here is only what the P4Info does not hold: the meaning
// of values (jitter distributions, radio models and states) and lookups.
include!(concat!(env!("OUT_DIR"), "/contract_gen.rs"));

const fn p(id: u32, name: &'static str, bits: u32) -> ParamDef {
    ParamDef { id, name, bits }
}

const fn k(id: u32, name: &'static str, bits: u32, kind: MatchKind) -> KeyDef {
    KeyDef { id, name, bits, kind }
}

// ---- sizes and encodings -----------------------------------------------------------------------

/// Contract default number of profiles (one radio_profile entry each); pd = profile_id * 2 + direction.
pub const DEFAULT_PROFILES: u32 = TABLE_RADIO_PROFILE_SIZE;
pub const DEFAULT_PD: u32 = COUNTER_PROFILE_IN_SIZE;
pub const DEFAULT_CLASSIFIER_ENTRIES: u32 = TABLE_CLASSIFIER_SIZE;
pub const DEFAULT_UE_IDS: u32 = REG_RADIO_STATE_SIZE;
/// Drop reason cells per pd (index `pd * DROP_REASONS + reason` of `drops`).
pub const DROP_REASONS: u32 = COUNTER_DROPS_SIZE / COUNTER_PROFILE_IN_SIZE;
/// Entries per distribution table in `dist_table` (normal, pareto, paretonormal, user).
pub const DIST_TABLE_LEN: u32 = 4096;
pub const DIST_TABLES: u32 = REG_DIST_TABLE_SIZE / DIST_TABLE_LEN;
/// netem's NETEM_DIST_SCALE: table values are in units of sigma / 8192.
pub const DIST_SCALE: i64 = 8192;
/// Per-UE radio arrays with one cell per state: index `ue * RADIO_STATE_STRIDE + state`.
pub const RADIO_STATE_STRIDE: u32 = REG_RADIO_STATE_TIME_NS_SIZE / REG_RADIO_STATE_SIZE;
/// `radio_promotions` cells per UE: index `ue * RADIO_PROMO_KINDS + kind`.
pub const RADIO_PROMO_KINDS: u32 = COUNTER_RADIO_PROMOTIONS_SIZE / REG_RADIO_STATE_SIZE;
/// `radio_fach_free_ns` cells per UE: index `ue * 2 + direction`.
pub const RADIO_DIRECTIONS: u32 = REG_RADIO_FACH_FREE_NS_SIZE / REG_RADIO_STATE_SIZE;

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

/// `slot_dist` of `set_impairment`: netem's `slot MIN [MAX]` (a uniform range); 1..5 are
/// `slot distribution` with the `JITTER_*` shapes.
pub const SLOT_RANGE: u8 = 0;

/// `aqm` values of `set_impairment`.
pub const AQM_TAIL_DROP: u8 = 0;
pub const AQM_CODEL: u8 = 1;
pub const AQM_RED: u8 = 2;
pub const AQM_PIE: u8 = 3;

/// `bearer_sched` values of `set_impairment` (stage/bearer.rs).
pub const BEARER_FIFO: u8 = 0;
pub const BEARER_DRR: u8 = 1;
pub const BEARER_PF: u8 = 2;
/// `bearer_quantum_bytes` 0 reads as this (one Ethernet frame).
pub const BEARER_DEFAULT_QUANTUM: u32 = 1514;

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

// ---- scopes -----------------------------------------------------------------------------------

/// Where an action may appear in a table (P4Info `ActionRef.scope`, from `@tableonly`/`@defaultonly`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionScope {
    TableAndDefault,
    TableOnly,
    DefaultOnly,
}

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
