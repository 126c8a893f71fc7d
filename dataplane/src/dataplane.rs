//! The data-plane loop, on its own OS thread: receive batches from every port, run the pipeline,
//! hold packets in the delay line (release.rs: two timing wheels), transmit, sleep in `ppoll` until
//! the next frame or until shortly before the next release, and spin the rest of the way (wait.rs)
//! unless that release may be coalesced.
//!
//! Per packet (contract "Stage semantics"): parse -> l2_learn/l2_fwd/port_map -> classifier ->
//! profile_in -> route -> profile -> loss -> duplication -> corruption -> rate -> delay -> release.
//! Everything here is allocation-free and lock-free on the packet path: tables come from an
//! immutable snapshot loaded once per loop turn, counters/registers are atomics, waiting packets
//! use preallocated pool buffers. Only PacketIn and digests (slow path, bounded queues) allocate.
//!
//! Zero-impairment packets (no profile entry, or a release time that is already due) never touch
//! the pool or the wheel: they are copied from the RX ring straight into the TX ring.
//!
//! The rest of the data plane's thread is in dataplane/, one concept a file: `packet_path` (a
//! frame from an RX ring through the pipeline to a TX ring or the delay line, and held packets
//! out again), `port` (one port's state and its own checks), `port_lifecycle` (ports that go,
//! come back or have their MTU raised while the loop runs), `open` (start: the ports opened and
//! the loop's state built), `sizing` (rings and buffers for the ports' MTU), `clock` (the loop's
//! time and a frame's arrival), `preflight` (checks before anything is allocated or opened).
mod clock;
mod open;
mod packet_path;
mod port;
mod port_lifecycle;
mod preflight;
mod sizing;

pub use clock::{monotonic_ns, wall_offset_ns};
pub use preflight::{check_memory, check_offloads, system_memory};
pub use sizing::{Sizing, DEFAULT_BUFFERS, DEFAULT_BUFFER_SIZE};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::health::Health;
use crate::io::flow_cache::{FastPathMode, FlowCache};
use crate::io::reopen::Reopener;
use crate::io::{fan_out, port_lock, IoMode, RingConfig};
use crate::learn::LearnFilter;
use crate::pool::{Handle, Pool};
use crate::release::{DelayLine, Slack};
use crate::rng::Prng;
use crate::stage::{Impairments, Served};
use crate::state::DataPlaneLink;
use crate::tables::Snapshot;
use crate::wait::{plan, Lateness, SpinBudget, Wait, WakeMargin, WINDOW_NS};

use port::Port;
use port_lifecycle::{ReopenJob, Reopened};

/// Longest sleep: bounds pcap flush delay even when idle, and the time between two heartbeats of
/// the loop (health.rs).
const MAX_SLEEP_NS: u64 = 100_000_000;
/// Frames taken from one port per loop turn, so one busy port cannot starve the others.
const RX_BATCH: usize = 256;
const PACKET_OUT_BATCH: usize = 64;
const LEARN_WINDOW_NS: u64 = 100_000_000;
/// How often each port's MTU is read again (an `ip link set mtu` takes effect within this).
const MTU_REFRESH_NS: u64 = 1_000_000_000;
/// How often the wall-to-monotonic offset for RX timestamps is read again (9 vDSO clock reads).
const WALL_OFFSET_REFRESH_NS: u64 = 10_000_000;
/// Ethernet header bytes on top of the MTU (the kernel's dev->hard_header_len).
const ETH_HEADER: usize = 14;
const NO_PORT: u16 = u16::MAX;

#[derive(Debug, Clone)]
pub struct PortSpec {
    pub number: u16,
    pub ifname: String,
}

#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    pub ports: Vec<PortSpec>,
    pub cpu_port: Option<u16>,
    pub buffers: usize,
    pub buffer_size: usize,
    pub pcap_dir: Option<PathBuf>,
    pub seed: u64,
    pub rx_frames: usize,
    pub tx_frames: usize,
    /// Bytes per AF_PACKET ring frame ([`Sizing`]).
    pub ring_frame_size: usize,
    pub check_offloads: bool,
    /// Keep polling this long after the last work before sleeping (0 = sleep at once).
    pub busy_poll_ns: u64,
    /// Fixed wake margin before a timed release (None: learnt, wait.rs).
    pub wake_margin_ns: Option<u64>,
    /// How late a packet queued behind another in a rate queue may leave, and which such packets
    /// (release.rs `Slack`).
    pub release_slack: Slack,
    /// SCHED_FIFO priority for the data-plane thread (0 = normal scheduling).
    pub rt_priority: i32,
    /// The CPU the data-plane thread pins itself to (`--dataplane-cpu`, affinity.rs; None: anywhere).
    pub cpu: Option<usize>,
    /// One TX thread per port doing the `sendto`s (see io/kicker.rs); false: the loop does them.
    pub tx_threads: bool,
    /// Packet I/O path of the ports (io/port.rs).
    pub io: IoMode,
    /// The kernel fast path for unimpaired flows (io/flow_cache.rs).
    pub fast_path: FastPathMode,
    /// The P4Runtime address, written into the port locks (io/port_lock.rs) so that a second
    /// switch refused on a port can name this one.
    pub grpc_addr: Option<std::net::SocketAddr>,
}

pub struct DataPlane {
    ports: Vec<Port>,
    port_index: Box<[u16]>,
    link: DataPlaneLink,
    pool: Pool,
    line: DelayLine,
    due: Vec<Handle>,
    /// Packets the cells gave the link this turn (reused buffer, as `due`).
    served: Vec<Served>,
    stages: Impairments,
    rng: Prng,
    seed_generation: u64,
    reset_generation: u64,
    profiles_seen: usize,
    learn: LearnFilter,
    cpu_port: Option<u16>,
    shutdown: Arc<AtomicBool>,
    wall_offset_ns: i64,
    busy_poll_ns: u64,
    wake_margin_ns: Option<u64>,
    release_slack: Slack,
    rt_priority: i32,
    cpu: Option<usize>,
    health: Arc<Health>,
    /// When this turn's first precise release was due (its tick), 0 if none (release_due).
    first_due_ns: u64,
    /// How late precise releases leave: when taken from the wheel (the loop's wait) and after the
    /// turn's transmit (plus the TX path: on a veth, sendto runs the receiver's stack for each
    /// frame); and coalesced ones, when taken from their wheel (bounded by the slack).
    lateness_at_release: Lateness,
    lateness: Lateness,
    lateness_coalesced: Lateness,
    /// Work this turn that wants the loop to keep polling (`--busy-poll-us`): frames sent at
    /// once, precise holds and releases, PacketOuts. A frame that only joined a backlogged rate
    /// queue (or was dropped) does not: the next one of that stream can wait for a wake-up too.
    prompt: usize,
    /// The kernel fast path, when it is on: unimpaired flows are installed into it.
    fast: Option<FlowCache>,
    /// Per port: this turn's receive emptied its ring.
    rx_drained: Vec<bool>,
    /// How a port is opened again when its interface is back (as at start: `open_port_io`).
    rings: RingConfig,
    tx_threads: bool,
    check_offloads: bool,
    /// Gone ports being opened again by a worker thread (io/reopen.rs says why not on this one),
    /// which also closes what a port lets go of (old sockets, XDP programs and links).
    reopen: Reopener<ReopenJob, Reopened, Box<dyn Send>>,
    /// Size of the loop's scratch buffer (a frame with its VLAN tag put back): the largest ring
    /// frame, grown when a port is opened again with larger rings (`resize_for_mtu`).
    scratch_len: usize,
    /// The lock on every port's interface (io/port_lock.rs), held for the whole run: a port
    /// reopened on a new interface of its name keeps it.
    _port_locks: Vec<port_lock::PortLock>,
}

impl Drop for DataPlane {
    /// Closes every port at once (io/fan_out.rs: closing a port mostly waits for the kernel, and
    /// waits taken together overlap), then the fast path's programs, then the port locks: in that
    /// order, as the fields would drop, so that no other switch takes an interface while a socket or
    /// program of this one is still on it.
    fn drop(&mut self) {
        // Ports still being opened again are waited for, and closed with the others.
        fan_out::drop_all(self.reopen.finish());
        fan_out::drop_all(std::mem::take(&mut self.ports));
        if let Some(fast) = self.fast.take() {
            fast.close();
        }
        fan_out::drop_all(std::mem::take(&mut self._port_locks));
    }
}

impl DataPlane {
    /// The health counters this data plane keeps (health.rs), for --metrics-addr.
    pub fn health(&self) -> Arc<Health> {
        self.health.clone()
    }

    /// Runs until the shutdown flag is set.
    pub fn run(mut self) {
        // SAFETY: prctl on the calling thread only. 1 ns slack: ppoll timeouts are not coalesced.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        if let Some(cpu) = self.cpu {
            // Checked at start against the process's CPUs; a refusal now (a cpuset changed under
            // us) leaves the thread where the scheduler puts it, which only costs precision.
            if let Err(e) = crate::affinity::pin_current(&[cpu]) {
                tracing::warn!("data-plane thread: --dataplane-cpu {cpu} not applied ({e})");
            }
        }
        let mut rt = false;
        if self.rt_priority > 0 {
            // Release accuracy is bounded by how soon this thread runs after its timer fires; a
            // real-time priority keeps ordinary load (compilers, traffic generators) from delaying
            // it. The kernel's RT throttling still leaves 5% of each CPU to everything else.
            let p = libc::sched_param { sched_priority: self.rt_priority };
            // SAFETY: sets the calling thread's policy; p is a valid sched_param.
            let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) };
            if r != 0 {
                tracing::warn!(
                    "SCHED_FIFO priority {} not granted ({}): normal scheduling",
                    self.rt_priority,
                    std::io::Error::from_raw_os_error(r)
                );
            } else {
                rt = true;
                tracing::info!(priority = self.rt_priority, "data-plane thread runs SCHED_FIFO");
            }
        }
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&p.io), events: libc::POLLIN, revents: 0 })
            .collect();
        fds.push(libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&*self.link.waker),
            events: libc::POLLIN,
            revents: 0,
        });
        // VLAN tags the kernel stripped into the ring header are put back here.
        let mut scratch = vec![0u8; self.scratch_len];
        let mut last_flush = monotonic_ns();
        let mut last_mtu = last_flush;
        let mut last_offset = last_flush;
        let mut last_work = 0u64;
        // How long before a deadline the sleep ends (wait.rs): learnt from the wake-ups' lateness.
        let mut margin = self.wake_margin_ns.map_or_else(WakeMargin::default, WakeMargin::fixed);
        // How long the loop may be awake per window before it stops spinning (wait.rs): only a
        // real-time thread is throttled by the kernel.
        let mut budget = if rt { SpinBudget::of_this_kernel() } else { SpinBudget::unlimited() };
        if let Some(limit) = budget.limit_ns() {
            tracing::info!(
                awake_ms = limit / 1_000_000,
                window_ms = WINDOW_NS / 1_000_000,
                "spin budget (below the kernel's RT throttling)"
            );
        }
        self.health.buffers.store(self.pool.capacity() as u64, Ordering::Relaxed);
        // Updated after each turn with work; until the first, every buffer is free (it read 0).
        self.health.free_buffers.store(self.pool.available() as u64, Ordering::Relaxed);
        let _ = self.health.release_slack.set(self.release_slack);
        while !self.shutdown.load(Ordering::Relaxed) {
            // One clock read per turn, handed to every step; a second one only after a turn that
            // received frames (their processing took time, and releases must not be judged on a
            // stale clock, which would only make them late). A spinning turn reads it once (the
            // issue 14 profile: four reads per turn were 35 % of the thread at 1 Gbit/s).
            let turn_start = monotonic_ns();
            // Alive (health.rs): a turn comes at least every MAX_SLEEP_NS, idle or not.
            self.health.dataplane_beat.beat(turn_start);
            let snap = self.link.snapshot.load_full();
            self.sync_control(&snap);
            if self.reopen.busy() {
                self.install_reopened();
                if scratch.len() < self.scratch_len {
                    scratch.resize(self.scratch_len, 0); // a port reopened with larger rings
                }
            }
            let mut work = 0;
            self.prompt = 0;
            for pi in 0..self.ports.len() {
                let n = self.rx_port(pi, &snap, &mut scratch, turn_start);
                // A full batch may have left frames in the ring (fast-path installs wait for it).
                self.rx_drained[pi] = n < RX_BATCH;
                work += n;
            }
            let outs = self.packet_outs();
            work += outs;
            self.prompt += outs;
            let now = if work > 0 { monotonic_ns() } else { turn_start };
            if now.saturating_sub(last_offset) >= WALL_OFFSET_REFRESH_NS {
                // Follow steps of the wall clock (RX timestamps are wall-clock; a VM's clock can be
                // set by its host): busy or idle, so a step is followed within this period.
                last_offset = now;
                self.wall_offset_ns = wall_offset_ns();
            }
            if now.saturating_sub(last_mtu) >= MTU_REFRESH_NS {
                last_mtu = now;
                // Every port is read (no short-circuit); fast-path entries carry a length bound
                // taken from the egress MTU, so any change makes them stale.
                let changed = self.ports.iter_mut().fold(false, |any, p| (!p.is_gone && p.refresh_mtu()) | any);
                if let (true, Some(fc)) = (changed, &mut self.fast) {
                    fc.invalidate();
                }
                self.check_ports();
                self.resize_for_mtu();
                self.free_unneeded_buffers();
                self.read_ring_stats();
            }
            self.stages.tick(now, &self.link.registers);
            let served = self.serve_cells(&snap, now);
            work += served;
            self.prompt += served;
            work += self.release_due(now);
            let mut backlog = false;
            for pi in 0..self.ports.len() {
                if self.ports[pi].is_gone {
                    continue; // its socket sends nothing again (port_gone emptied its backlog)
                }
                self.drain_backlog(pi);
                backlog |= !self.ports[pi].backlog.is_empty();
                let port = &mut self.ports[pi];
                match port.io.tx_flush() {
                    Err(e) if !port.tx_failing => {
                        port.tx_failing = true; // log once per failure episode, not per loop turn
                        tracing::warn!(iface = %port.io.ifname(), "tx failing: {e}");
                    }
                    Ok(()) if port.tx_failing => {
                        port.tx_failing = false;
                        tracing::info!(iface = %port.io.ifname(), "tx works again");
                    }
                    _ => {}
                }
            }
            if let Some(fc) = self.fast.as_mut().filter(|f| f.has_pending()) {
                // After the turn's transmit, only towards a port with no backlog and from a port
                // whose RX ring this turn emptied: a frame the kernel forwards from now on cannot
                // overtake one of the same flow this loop sent or has yet to take from the ring
                // (but for frames that arrive in the microseconds between the last read and the
                // map update).
                let (ports, drained) = (&self.ports, &self.rx_drained);
                fc.commit(|inp, out| drained[inp as usize] && ports[out as usize].backlog.is_empty());
                self.health.fast_installs.store(fc.installs, Ordering::Relaxed);
            }
            if self.first_due_ns != 0 {
                // After the turn's transmit: what a receiver sees, less the path.
                self.lateness.observe(monotonic_ns().saturating_sub(self.first_due_ns));
                self.first_due_ns = 0;
            }
            if self.prompt > 0 || backlog {
                last_work = now;
            }
            if work > 0 || backlog {
                let took = monotonic_ns().saturating_sub(turn_start);
                self.health.busy_turn(took);
                budget.worked(took);
                // Every packet the switch holds is in a pool buffer, wherever it waits: the delay
                // line (rate, delay, slot and trace release times), a cell's bearer queues, a
                // port's TX backlog. So the buffers in use are the held packets, all queues counted.
                let free = self.pool.available();
                self.health.held_packets.store((self.pool.capacity() - free) as u64, Ordering::Relaxed);
                self.health.free_buffers.store(free as u64, Ordering::Relaxed);
                continue;
            }
            // A turn without work: `now` is this turn's read (nothing since took long).
            let may_spin = budget.may_spin(now);
            if may_spin && now.saturating_sub(last_work) < self.busy_poll_ns {
                std::hint::spin_loop();
                continue;
            }
            if now.saturating_sub(last_flush) > MAX_SLEEP_NS {
                self.flush_pcaps();
                last_flush = now;
            }
            let precise = match (self.line.next_precise_ns(), self.stages.next_event(&self.link.registers)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Sleep until `margin` before a precise deadline, then spin through ordinary turns up
            // to it; a coalesced release is slept for up to its time (wait.rs says why); with no
            // deadline, sleep until a frame or MAX_SLEEP_NS.
            // Over the spin budget: no margin, slack or batching, so it sleeps until the earliest
            // release itself (wait.rs SpinBudget).
            let backlogged = self.ports.iter().any(|p| p.rx_backlogged);
            let (margin_ns, slack_ns) = if may_spin { (margin.margin_ns(), self.release_slack.ns()) } else { (0, 0) };
            let (sleep, timed, defer_rx) = match plan(
                now,
                precise,
                self.line.next_coalesced_ns(),
                margin_ns,
                slack_ns,
                backlogged && may_spin,
                MAX_SLEEP_NS,
            ) {
                Wait::Spin => {
                    std::hint::spin_loop();
                    continue;
                }
                Wait::Sleep { ns, timed, defer_rx } => (ns, timed, defer_rx),
            };
            for (f, p) in fds.iter_mut().zip(&self.ports) {
                // A negative fd is skipped by ppoll: a deferred port does not end this sleep.
                let fd = std::os::fd::AsRawFd::as_raw_fd(&p.io);
                // Nor does a gone one (its socket receives nothing again).
                f.fd = if p.is_gone || (defer_rx && p.rx_backlogged) { -1 } else { fd };
            }
            // A sleeping loop holds no snapshot: the control side reuses the classifier copy
            // this one replaced as soon as nobody reads it (state/entries.rs WHY_TWO_COPIES).
            drop(snap);
            // The timeout counts from the syscall, not from the turn's clock read.
            let start = monotonic_ns();
            let sleep = sleep.saturating_sub(start - now).max(1);
            let ts = libc::timespec { tv_sec: (sleep / 1_000_000_000) as _, tv_nsec: (sleep % 1_000_000_000) as _ };
            // SAFETY: fds is a valid array of pollfd; ts a valid timespec; no signal mask change.
            let ready = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
            let woke = monotonic_ns();
            budget.slept(woke.saturating_sub(start));
            if ready == 0 && timed {
                // Woken by the timeout, not by a frame: how late is what the margin must cover.
                margin.observe(woke.saturating_sub(start + sleep));
                self.health.wake_margin_ns.store(margin.margin_ns(), Ordering::Relaxed);
            }
            if !may_spin {
                self.health.spin_budget_exhausted.store(budget.windows_exhausted, Ordering::Relaxed);
            }
            if fds.last().is_some_and(|f| f.revents != 0) {
                self.link.waker.drain();
            }
            if ready > 0 {
                for (pi, f) in fds.iter().enumerate().take(self.ports.len()) {
                    if f.revents & libc::POLLERR != 0 && self.ports[pi].socket_error() {
                        self.port_gone(pi);
                    }
                }
            }
        }
        if budget.limit_ns().is_some() {
            tracing::info!(windows = budget.windows_exhausted, "spin budget ran out (windows of 100 ms)");
        }
        self.finish();
    }

    /// Add the kernel's receive-ring statistics of every port (reset by each read) to the health
    /// counters: once a second and at shutdown.
    fn read_ring_stats(&mut self) {
        for (i, p) in self.ports.iter_mut().enumerate() {
            let (rx, drops) = p.io.rx_stats();
            self.health.port_stats(i, rx.into(), drops.into());
        }
    }

    fn finish(&mut self) {
        self.flush_pcaps();
        self.read_ring_stats();
        for p in &self.health.ports {
            tracing::info!(port = p.number, iface = %p.ifname, kernel_rx = p.kernel_rx.load(Ordering::Relaxed),
                           kernel_ring_drops = p.ring_drops.load(Ordering::Relaxed), "port down");
        }
        for (l, what) in [
            (&self.lateness_at_release, "taken from the wheel (first precise release of each turn)"),
            (&self.lateness, "after the turn's transmit (first precise release of each turn)"),
            (&self.lateness_coalesced, "coalesced, taken from the wheel (first coalesced release of each turn)"),
        ] {
            if let (Some(p50), Some(p99), Some(p999)) = (l.quantile_us(0.5), l.quantile_us(0.99), l.quantile_us(0.999))
            {
                tracing::info!(
                    turns = l.turns(),
                    p50_below_us = p50,
                    p99_below_us = p99,
                    p999_below_us = p999,
                    max_us = l.max_us(),
                    "release lateness, {what}"
                );
            }
        }
        if let Some(fc) = &self.fast {
            let (bytes, packets) = fc.counts().total();
            tracing::info!(
                installs = fc.installs,
                install_errors = fc.install_errors,
                packets,
                bytes,
                "fast path: entries installed and packets forwarded in the kernel"
            );
        }
        if !self.line.is_empty() {
            tracing::info!(held = self.line.len(), "packets still in the delay line at shutdown were not sent");
        }
    }

    fn flush_pcaps(&mut self) {
        for p in &mut self.ports {
            for w in [&mut p.pcap_in, &mut p.pcap_out].into_iter().flatten() {
                if let Err(e) = w.flush() {
                    tracing::warn!("pcap flush: {e}");
                }
            }
        }
    }

    /// Reseed, reset and stage provisioning requests from the control plane.
    fn sync_control(&mut self, snap: &Snapshot) {
        let regs = &self.link.registers;
        let g = regs.rng_seed_generation.load(Ordering::Acquire);
        if g != self.seed_generation {
            self.seed_generation = g;
            self.rng.reseed(regs.rng_seed.load(Ordering::Relaxed));
        }
        let r = self.link.reset_generation.load(Ordering::Acquire);
        if r != self.reset_generation {
            self.reset_generation = r;
            self.stages.reset();
            self.learn.clear();
        }
        let profiles = Arc::as_ptr(&snap.profiles) as usize;
        if profiles != self.profiles_seen {
            self.profiles_seen = profiles;
            for (pd, imp) in snap.profiles.iter() {
                self.stages.provision(pd, imp);
            }
        }
    }
}
