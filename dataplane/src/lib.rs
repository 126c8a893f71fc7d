//! p4netem-switch: the native software target of the p4netem P4 pipeline.
//!
//! `contract` is the static pipeline definition; `state` is the control-plane facing store;
//! `p4rt` is the P4Runtime server; `tables` the compiled lookup structures; the rest is the
//! data plane (`parse`, `stage/*`, `wheel`, `pool`, `io/*`, `dataplane`); `health` and `metrics` the
//! switch's own health on --metrics-addr; `cpu_latency` the CPU wake-up latency it holds, `affinity`
//! the CPUs its threads run on; `mapping` the memory mappings they share with the kernel or fill lazily.
pub mod affinity;
pub mod contract;
pub mod cpu_latency;
pub mod dataplane;
pub mod dist;
pub mod exp2;
pub mod health;
pub mod io;
pub mod learn;
pub mod mapping;
pub mod metrics;
pub mod p4rt;
pub mod parse;
pub mod pool;
#[cfg(test)]
mod props;
pub mod release;
pub mod rng;
pub mod stage;
pub mod state;
pub mod tables;
pub mod wait;
pub mod wheel;
