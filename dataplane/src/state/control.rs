//! `SwitchControl`: the handle the P4Runtime server holds (Clone + Send + Sync).
use std::sync::Arc;

use super::*;

/// The control-plane side of the switch. Cheap to clone.
#[derive(Clone)]
pub struct SwitchControl {
    inner: Arc<Inner>,
}

struct Inner {
    caps: Capacities,
}

/// The data-plane side of the links created together with a [`SwitchControl`].
pub struct DataPlaneLink {}

impl SwitchControl {
    /// Apply table updates as ONE batch: the data plane sees all of them or none of them (the new
    /// table snapshot is published once, at the end). Returns one result per update, in order.
    pub fn write_tables(&self, updates: Vec<(UpdateKind, TableEntry)>) -> Vec<Result<(), StateError>> {
        let _ = updates;
        todo!()
    }
    /// `None` = reset to the P4 default.
    pub fn set_default_action(&self, table_id: u32, action: Option<ActionCall>) -> Result<(), StateError> {
        let _ = (table_id, action);
        todo!()
    }
    /// `table_id` 0 = all tables.
    pub fn read_table(&self, table_id: u32) -> Result<Vec<TableEntry>, StateError> {
        let _ = table_id;
        todo!()
    }
    pub fn default_action(&self, table_id: u32) -> Result<ActionCall, StateError> {
        let _ = table_id;
        todo!()
    }
    pub fn read_register(&self, reg_id: u32, index: u32) -> Result<u128, StateError> {
        let _ = (reg_id, index);
        todo!()
    }
    pub fn write_register(&self, reg_id: u32, index: u32, value: u128) -> Result<(), StateError> {
        let _ = (reg_id, index, value);
        todo!()
    }
    pub fn register_size(&self, reg_id: u32) -> Result<u32, StateError> {
        let _ = reg_id;
        todo!()
    }
    /// Returns (bytes, packets).
    pub fn read_counter(&self, counter_id: u32, index: u32) -> Result<(u64, u64), StateError> {
        let _ = (counter_id, index);
        todo!()
    }
    pub fn write_counter(&self, counter_id: u32, index: u32, bytes: u64, packets: u64) -> Result<(), StateError> {
        let _ = (counter_id, index, bytes, packets);
        todo!()
    }
    pub fn counter_size(&self, counter_id: u32) -> Result<u32, StateError> {
        let _ = counter_id;
        todo!()
    }
    pub fn packet_out(&self, egress_port: u32, frame: Vec<u8>) -> Result<(), StateError> {
        let _ = (egress_port, frame);
        todo!()
    }
    /// Next frame the pipeline sent to the CPU port (bounded queue; waits until one arrives).
    pub async fn next_packet_in(&self) -> PacketIn {
        todo!()
    }
    /// Next digest event (bounded queue; waits until one arrives).
    pub async fn next_digest(&self) -> DigestEvent {
        todo!()
    }
    pub fn capacities(&self) -> Capacities {
        self.inner.caps
    }
    /// The CPU port given with `--cpu-port`, if any.
    pub fn cpu_port(&self) -> Option<u32> {
        todo!()
    }
    /// Clear every table entry (defaults back to the P4 defaults), register and counter.
    pub fn reset_all(&self) {
        todo!()
    }
}
