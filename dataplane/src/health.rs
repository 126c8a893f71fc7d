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
//!
//! Whether the data plane still runs: every data-plane thread (the loop, and each port's TX thread
//! with `--tx-threads`) stores the time of its loop turn in its `Heartbeat`, and a thread whose
//! heartbeat is older than `--heartbeat-timeout-ms` is stalled (`Health::stall`). The loop turns at
//! least every `MAX_SLEEP_NS` (100 ms) on an idle switch, a TX thread at least once a second; a
//! thread deadlocked, spinning inside one turn or stopped does not. The gRPC health service
//! (p4rt/health_check.rs) answers NOT_SERVING then, and the heartbeats' ages are metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use arc_swap::ArcSwapOption;

use crate::dataplane::monotonic_ns;
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
    /// The heartbeat of the port's TX thread (`--tx-threads`, io/kicker.rs); none without one.
    /// Replaced when the port is opened again (a new socket, a new thread).
    pub tx_beat: ArcSwapOption<Heartbeat>,
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

/// Default `--heartbeat-timeout-ms`: 30 times the idle loop's longest sleep and 3 times a TX
/// thread's, so that a loaded machine's scheduling delays never count as a stall, while a stopped
/// data plane is seen well within systemd's watchdog period (docs/cli.md: 30 s).
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 3000;
/// Smallest `--heartbeat-timeout-ms`: above a TX thread's longest wait (1 s) with room for a late
/// wake-up.
pub const MIN_HEARTBEAT_TIMEOUT_MS: u64 = 2000;
/// Largest `--heartbeat-timeout-ms` (an hour).
pub const MAX_HEARTBEAT_TIMEOUT_MS: u64 = 3_600_000;

/// A data-plane thread's sign of life: the CLOCK_MONOTONIC time (ns) of its last loop turn, a
/// relaxed store per turn (no lock, no per-packet cost; the turn has read the clock anyway).
#[derive(Debug)]
pub struct Heartbeat(AtomicU64);

impl Heartbeat {
    /// A heartbeat that counts as beaten now: a thread that has yet to run its first turn is not
    /// stalled from the moment it is made.
    pub fn new() -> Heartbeat {
        Heartbeat(AtomicU64::new(monotonic_ns()))
    }

    /// The thread's loop turned at `now_ns` (CLOCK_MONOTONIC).
    #[inline]
    pub fn beat(&self, now_ns: u64) {
        self.0.store(now_ns, Ordering::Relaxed);
    }

    /// How long before `now_ns` the thread last turned (0 if it turned since `now_ns` was read).
    pub fn age_ns(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.0.load(Ordering::Relaxed))
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat::new()
    }
}

/// A data-plane thread whose heartbeat is older than the timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Which thread: "data-plane loop", or "TX thread of port N (IFACE)".
    pub thread: String,
    pub age_ns: u64,
}

/// The freshness decision: the stalest of `ages` (thread, ns since its heartbeat) if it is older
/// than `timeout_ns`; None (every thread fresh) otherwise. An age equal to the timeout is fresh.
pub fn stalest(ages: impl IntoIterator<Item = (String, u64)>, timeout_ns: u64) -> Option<Stall> {
    ages.into_iter()
        .filter(|&(_, age)| age > timeout_ns)
        .max_by_key(|&(_, age)| age)
        .map(|(thread, age_ns)| Stall { thread, age_ns })
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
    /// TLS handshakes on the P4Runtime port that failed (p4rt/handshake.rs; connections closed
    /// before sending anything are not counted).
    pub tls_handshake_failures: AtomicU64,
    /// Of those, the handshakes closed unfinished to admit a new connection because
    /// `--grpc-max-pending-handshakes` were in progress (p4rt/handshake.rs `accept_loop`).
    pub tls_handshakes_evicted: AtomicU64,
    /// The kernel fast path (io/flow_cache.rs): "on", or "off: <why>". Set once at start.
    pub fast_path: OnceLock<String>,
    /// What the fast path forwarded, when it is on.
    pub fast_counts: OnceLock<Arc<FastCounts>>,
    /// Flow-cache entries the data plane installed.
    pub fast_installs: AtomicU64,
    /// The data-plane loop's heartbeat (a store per loop turn).
    pub dataplane_beat: Heartbeat,
    /// `--heartbeat-timeout-ms`, in ns: an older heartbeat is a stalled thread.
    pub heartbeat_timeout_ns: AtomicU64,
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
            tls_handshake_failures: AtomicU64::new(0),
            tls_handshakes_evicted: AtomicU64::new(0),
            fast_path: OnceLock::new(),
            fast_counts: OnceLock::new(),
            fast_installs: AtomicU64::new(0),
            dataplane_beat: Heartbeat::new(),
            heartbeat_timeout_ns: AtomicU64::new(DEFAULT_HEARTBEAT_TIMEOUT_MS * 1_000_000),
        }
    }

    /// Each data-plane thread and how long ago (ns before `now_ns`) its loop last turned: the
    /// loop's, then each port's TX thread's (ports without one are left out).
    pub fn heartbeat_ages(&self, now_ns: u64) -> Vec<(String, u64)> {
        self.heartbeats(now_ns)
            .map(|(port, age)| match port {
                None => ("data-plane loop".to_string(), age),
                Some(p) => (format!("TX thread of port {} ({})", p.number, p.ifname), age),
            })
            .collect()
    }

    /// Each data-plane thread's heartbeat age (ns before `now_ns`): the loop's (port None), then
    /// each port's TX thread's. The one walk over the threads, for the health service and the
    /// metrics alike.
    pub fn heartbeats(&self, now_ns: u64) -> impl Iterator<Item = (Option<&PortHealth>, u64)> + '_ {
        let tx =
            self.ports.iter().filter_map(move |p| (*p.tx_beat.load()).as_ref().map(|b| (Some(p), b.age_ns(now_ns))));
        std::iter::once((None, self.dataplane_beat.age_ns(now_ns))).chain(tx)
    }

    /// The stalest data-plane thread, if one has not turned for longer than the timeout.
    pub fn stall(&self, now_ns: u64) -> Option<Stall> {
        stalest(self.heartbeat_ages(now_ns), self.heartbeat_timeout_ns.load(Ordering::Relaxed))
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

    #[test]
    fn the_stalest_thread_past_the_timeout_is_the_stall() {
        let ages = |list: &[(&str, u64)]| list.iter().map(|&(t, a)| (t.to_string(), a)).collect::<Vec<_>>();
        assert_eq!(stalest(ages(&[]), 3000), None);
        assert_eq!(stalest(ages(&[("loop", 100), ("tx", 2999)]), 3000), None);
        assert_eq!(stalest(ages(&[("loop", 3000)]), 3000), None, "at the timeout: still fresh");
        assert_eq!(stalest(ages(&[("loop", 3001)]), 3000), Some(Stall { thread: "loop".into(), age_ns: 3001 }));
        let both = stalest(ages(&[("loop", 5000), ("tx", 9000), ("tx2", 10)]), 3000);
        assert_eq!(both, Some(Stall { thread: "tx".into(), age_ns: 9000 }));
    }

    #[test]
    fn a_heartbeat_that_stops_turns_stale_and_a_beat_makes_it_fresh() {
        let h = Health::new([(1, "a".to_string(), "af_packet"), (2, "b".to_string(), "af_packet")]);
        let timeout = h.heartbeat_timeout_ns.load(Ordering::Relaxed);
        let start = monotonic_ns();
        h.dataplane_beat.beat(start);
        // New: fresh (a thread that has not turned yet is not stalled), and 0 for a beat after `now`.
        assert_eq!(h.stall(start), None);
        assert_eq!(h.dataplane_beat.age_ns(start - 1), 0);
        assert_eq!(h.stall(start + timeout), None);
        let stall = h.stall(start + timeout + 1).expect("stale past the timeout");
        assert_eq!((stall.thread.as_str(), stall.age_ns), ("data-plane loop", timeout + 1));
        h.dataplane_beat.beat(start + timeout);
        assert_eq!(h.stall(start + timeout + 1), None);
        // A TX thread counts once the port has one; the port without one is not listed.
        let tx = Arc::new(Heartbeat::new());
        tx.beat(start);
        h.ports[1].tx_beat.store(Some(tx.clone()));
        assert_eq!(h.heartbeat_ages(start + 5).len(), 2);
        h.dataplane_beat.beat(start + 10 * timeout);
        let stall = h.stall(start + 10 * timeout).expect("the TX thread stopped");
        assert_eq!((stall.thread.as_str(), stall.age_ns), ("TX thread of port 2 (b)", 10 * timeout));
        tx.beat(start + 10 * timeout);
        assert_eq!(h.stall(start + 10 * timeout), None);
    }
}
