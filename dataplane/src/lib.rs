//! p4netem-switch: the native software target of the p4netem P4 pipeline.
//!
//! `contract` is the static pipeline definition; `state` is the control-plane facing store;
//! `p4rt` is the P4Runtime server; the rest is the data plane.
pub mod contract;
pub mod p4rt;
pub mod state;
