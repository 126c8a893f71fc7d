//! The control-plane facing store: table entries, registers, counters, packet-in/digest queues.
//!
//! Values arrive here already decoded from P4Runtime bytes into native integers. The data plane
//! never sees this module's entry lists; it sees the compiled, immutable [`crate::tables::Snapshot`]
//! that [`SwitchControl::write_tables`] publishes once per batch.

mod control;
mod entries;
pub mod lazy;
mod store;

pub use control::{ControlConfig, DataPlaneLink, SwitchControl};
pub use entries::TableStore;
pub use store::{CounterArray, Counters, RadioRegisters, Registers, UeBearer, UeRadio, BEARER_UE_REGISTERS};

/// One key of a table entry, already decoded to integers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldMatch {
    Exact(u128),
    Ternary { value: u128, mask: u128 },
    Range { lo: u128, hi: u128 },
    Lpm { value: u128, prefix_len: u32 },
}

/// An action with its params in `ParamDef` order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActionCall {
    pub action_id: u32,
    pub params: Vec<u128>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    pub table_id: u32,
    /// One slot per key in `KeyDef` order; `None` = wildcard ("don't care").
    pub matches: Vec<Option<FieldMatch>>,
    pub priority: i32,
    pub action: ActionCall,
    pub controller_metadata: u64,
    /// P4Runtime's opaque `TableEntry.metadata` bytes: kept for the controller, returned on reads,
    /// never seen by the data plane (it compiles the entries into its own structures).
    pub metadata: Vec<u8>,
}

/// The controller's opaque cookies of a table's default entry (P4Runtime `controller_metadata`
/// and `metadata`); the spec treats the default entry like any other, so it stores them too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefaultCookies {
    pub controller_metadata: u64,
    pub metadata: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    Insert,
    Modify,
    Delete,
}

/// Semantic errors; the P4Runtime layer maps each to the gRPC status of the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("out of range: {0}")]
    OutOfRange(String),
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub ingress_port: u32,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestEvent {
    pub digest_id: u32,
    /// In `DigestDef` field order.
    pub fields: Vec<u128>,
}

/// Runtime capacities (flags). With the default flags every size equals the contract's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacities {
    pub classifier_entries: u32,
    /// Number of profile ids; there are `2 * profiles` profile-directions (pd).
    pub profiles: u32,
    /// Number of UE ids (per-UE radio registers, `radio_promotions`); classifier results must
    /// name a UE below it.
    pub ue_ids: u32,
}

impl Default for Capacities {
    fn default() -> Self {
        Capacities {
            classifier_entries: crate::contract::DEFAULT_CLASSIFIER_ENTRIES,
            profiles: crate::contract::DEFAULT_PROFILES,
            ue_ids: crate::contract::DEFAULT_UE_IDS,
        }
    }
}

impl Capacities {
    /// Cells per UE of the widest per-UE array (`radio_state_time_ns`, one per radio state).
    pub const CELLS_PER_UE: u32 = {
        use crate::contract::{RADIO_DIRECTIONS, RADIO_PROMO_KINDS, RADIO_STATE_STRIDE};
        let m = if RADIO_STATE_STRIDE > RADIO_PROMO_KINDS { RADIO_STATE_STRIDE } else { RADIO_PROMO_KINDS };
        if m > RADIO_DIRECTIONS {
            m
        } else {
            RADIO_DIRECTIONS
        }
    };
    /// Largest `--ue-ids`: every per-UE array's size (`ue_ids` x its cells per UE) is a u32, as
    /// P4Runtime reports it. Above it the sizes wrapped (268435456 UEs gave radio_state_time_ns
    /// 0 cells).
    pub const MAX_UE_IDS: u32 = u32::MAX / Self::CELLS_PER_UE;

    /// The flags' limits, checked before anything is allocated.
    pub fn check(&self) -> Result<(), String> {
        if self.profiles == 0 || self.profiles > 1 << 16 {
            return Err("--profiles must be in 1..=65536 (profile_id is 16 bits)".into());
        }
        if self.classifier_entries == 0 {
            return Err("--classifier-entries must be positive".into());
        }
        if self.ue_ids > Self::MAX_UE_IDS {
            return Err(format!(
                "--ue-ids must be at most {} (its widest per-UE array has {} cells a UE, and an array's size is 32 \
                 bits)",
                Self::MAX_UE_IDS,
                Self::CELLS_PER_UE
            ));
        }
        Ok(())
    }

    /// Number of profile-direction indices.
    pub fn pds(&self) -> u32 {
        self.profiles * 2
    }

    /// Runtime size of a table (what the P4Info reports).
    pub fn table_size(&self, table_id: u32) -> Option<u32> {
        use crate::contract::*;
        let t = table(table_id)?;
        Some(match table_id {
            TABLE_CLASSIFIER => self.classifier_entries,
            TABLE_PROFILE => self.pds(),
            TABLE_RADIO_PROFILE => self.profiles,
            _ => t.size,
        })
    }

    /// Runtime size of a counter array.
    pub fn counter_size(&self, counter_id: u32) -> Option<u32> {
        use crate::contract::*;
        let c = counter(counter_id)?;
        Some(match counter_id {
            COUNTER_DROPS => self.pds() * DROP_REASONS,
            COUNTER_PARSER_ERRORS => c.size,
            COUNTER_RADIO_PROMOTIONS => self.ue_ids * RADIO_PROMO_KINDS,
            _ => self.pds(),
        })
    }

    /// Runtime size of a register array.
    pub fn register_size(&self, reg_id: u32) -> Option<u32> {
        use crate::contract::*;
        let r = register(reg_id)?;
        Some(match reg_id {
            REG_DIST_TABLE | REG_RNG_SEED | REG_TRACE_OPPORTUNITY_MS | REG_TRACE_FIRST_AT => r.size,
            REG_RADIO_FACH_FREE_NS => self.ue_ids * RADIO_DIRECTIONS,
            id if crate::state::BEARER_UE_REGISTERS.contains(&id) => self.ue_ids * RADIO_DIRECTIONS,
            REG_RADIO_STATE_TIME_NS => self.ue_ids * RADIO_STATE_STRIDE,
            REG_RADIO_STATE
            | REG_RADIO_LAST_ACTIVITY_NS
            | REG_RADIO_PROMO_DONE_NS
            | REG_RADIO_DRX_REF_NS
            | REG_RADIO_STATE_SINCE_NS
            | REG_RADIO_PROMO_PKTS => self.ue_ids,
            _ => self.pds(),
        })
    }
}

#[cfg(test)]
mod tests;
