//! The switch's own health, for operators: how busy the data-plane loop is, what the kernel
//! dropped before the switch saw it (AF_PACKET ring overruns), how full the packet pool and the
//! delay line are, and how long P4Runtime requests take. Served as Prometheus/OpenMetrics text
//! on `--metrics-addr` (metrics.rs); `p4netem web` re-exports it on its own /metrics and
//! /api/health.
//!
//! Each port's packet I/O path (AF_XDP or the AF_PACKET fallback) is an info metric, and whether
//! it is up (its interface there, up and with a carrier) a gauge.
//!
//! The data-plane thread writes plain relaxed atomics once per loop turn with work (and the
//! ring statistics once a second), never per packet; the scrape reads them. P4Runtime latency
//! is a prometheus-client histogram per RPC, observed by the gRPC handlers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::io::flow_cache::FastCounts;
use crate::release::Slack;

/// One port's kernel-side receive statistics, summed since the switch started (the kernel's
/// PACKET_STATISTICS resets at each read), its path and its state.
#[derive(Debug, Default)]
pub struct PortHealth {
    pub number: u16,
    pub ifname: String,
    /// The port's packet I/O path is AF_XDP (else AF_PACKET, io/port.rs): a flag rather than the
    /// name, as a port opened again on an interface that came back may fall back.
    pub af_xdp: AtomicBool,
    /// Its interface is there, up and has a carrier (as the data plane last saw, once a second).
    pub up: AtomicBool,
    pub kernel_rx: AtomicU64,
    pub ring_drops: AtomicU64,
}

impl PortHealth {
    /// The port's packet I/O path: "af_xdp" or "af_packet" (io/port.rs `PortIo::kind`).
    pub fn io(&self) -> &'static str {
        if self.af_xdp.load(Ordering::Relaxed) {
            "af_xdp"
        } else {
            "af_packet"
        }
    }

    /// The path the port runs on now (its kind, "af_xdp" or "af_packet").
    pub fn set_io(&self, kind: &str) {
        self.af_xdp.store(kind == "af_xdp", Ordering::Relaxed);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Rpc {
    Write,
    Read,
    SetForwardingPipelineConfig,
    GetForwardingPipelineConfig,
    Capabilities,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub rpc: Rpc,
}

#[derive(Debug)]
pub struct Health {
    pub started: Instant,
    /// Nanoseconds the data-plane loop spent in turns that had work (packets in or out, timers).
    pub dataplane_busy_ns: AtomicU64,
    /// Loop turns that had work.
    pub dataplane_busy_turns: AtomicU64,
    /// Packets the switch holds at the last turn: in the delay line, bearer queues and TX backlogs
    /// (the packet buffers in use).
    pub held_packets: AtomicU64,
    /// How long before a deadline the loop stops sleeping and spins (wait.rs), last value.
    pub wake_margin_ns: AtomicU64,
    /// 100 ms windows in which the loop's spin budget ran out (wait.rs `SpinBudget`): it then
    /// slept until each release instead of spinning, so as not to be throttled by the kernel.
    pub spin_budget_exhausted: AtomicU64,
    /// `--release-slack-us` (release.rs `Slack`): how late a packet queued behind another in a
    /// rate queue may leave, and whether only on links fast enough to batch. Set once at start.
    pub release_slack: OnceLock<Slack>,
    /// `--cpu-latency-us` as held (cpu_latency.rs); unset: no request held. Set once at start.
    pub cpu_latency_us: OnceLock<u64>,
    /// Free packet buffers at the last turn, of `buffers`.
    pub free_buffers: AtomicU64,
    pub buffers: AtomicU64,
    pub ports: Vec<PortHealth>,
    /// Time to answer each P4Runtime request, by RPC.
    pub p4rt_seconds: Family<RpcLabels, Histogram>,
    /// The kernel fast path (io/flow_cache.rs): "on", or "off: <why>". Set once at start.
    pub fast_path: OnceLock<String>,
    /// What the fast path forwarded, when it is on.
    pub fast_counts: OnceLock<Arc<FastCounts>>,
    /// Flow-cache entries the data plane installed.
    pub fast_installs: AtomicU64,
}

impl Health {
    pub fn new(ports: impl IntoIterator<Item = (u16, String, &'static str)>) -> Health {
        Health {
            started: Instant::now(),
            dataplane_busy_ns: AtomicU64::new(0),
            dataplane_busy_turns: AtomicU64::new(0),
            held_packets: AtomicU64::new(0),
            wake_margin_ns: AtomicU64::new(0),
            spin_budget_exhausted: AtomicU64::new(0),
            release_slack: OnceLock::new(),
            cpu_latency_us: OnceLock::new(),
            free_buffers: AtomicU64::new(0),
            buffers: AtomicU64::new(0),
            ports: ports
                .into_iter()
                .map(|(number, ifname, io)| {
                    let p = PortHealth { number, ifname, up: AtomicBool::new(true), ..Default::default() };
                    p.set_io(io);
                    p
                })
                .collect(),
            // 50 us .. ~3 s: a counter read of one rule takes ~100 us, a full-table Read seconds.
            p4rt_seconds: Family::new_with_constructor(|| Histogram::new(exponential_buckets(50e-6, 2.0, 17))),
            fast_path: OnceLock::new(),
            fast_counts: OnceLock::new(),
            fast_installs: AtomicU64::new(0),
        }
    }

    /// A data-plane loop turn with work took `ns`.
    #[inline]
    pub fn busy_turn(&self, ns: u64) {
        self.dataplane_busy_ns.fetch_add(ns, Ordering::Relaxed);
        self.dataplane_busy_turns.fetch_add(1, Ordering::Relaxed);
    }

    /// Add what a port's kernel ring reported since its last read.
    pub fn port_stats(&self, index: usize, rx: u64, drops: u64) {
        if let Some(p) = self.ports.get(index) {
            p.kernel_rx.fetch_add(rx, Ordering::Relaxed);
            p.ring_drops.fetch_add(drops, Ordering::Relaxed);
        }
    }

    pub fn observe_rpc(&self, rpc: Rpc, since: Instant) {
        self.p4rt_seconds.get_or_create(&RpcLabels { rpc }).observe(since.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_stats_accumulate_per_port() {
        let h = Health::new([(1, "a".to_string(), "af_xdp"), (2, "b".to_string(), "af_packet")]);
        h.port_stats(0, 10, 1);
        h.port_stats(0, 5, 2);
        h.port_stats(1, 7, 0);
        h.port_stats(9, 1, 1); // no such port: ignored
        assert_eq!(h.ports[0].kernel_rx.load(Ordering::Relaxed), 15);
        assert_eq!(h.ports[0].ring_drops.load(Ordering::Relaxed), 3);
        assert_eq!(h.ports[1].ring_drops.load(Ordering::Relaxed), 0);
    }
}
