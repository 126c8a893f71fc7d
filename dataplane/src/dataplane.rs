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
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context as _};

use crate::contract::{DropReason, DIGEST_MAC_LEARN, DIGEST_RADIO_STATE};
use crate::health::Health;
use crate::io::afpacket::{ring_frame_size, tx_max_frame, FRAME_SIZE, MAX_RING_FRAME_SIZE};
use crate::io::flow_cache::{key_of, FastPathMode, FlowCache};
use crate::io::pcap::PcapWriter;
use crate::io::reopen::{self, Reopener};
use crate::io::{ethtool, fan_out, port_lock, IoMode, PortIo, RingConfig};
use crate::learn::LearnFilter;
use crate::parse::parse;
use crate::pool::{self, Handle, PktMeta, Pool, NO_PD, OUT_CPU};
use crate::rng::Prng;

use crate::release::{DelayLine, Exactness, Slack};
use crate::stage::{Ctx, Edits, Impairment, Impairments, Pkt, Served, Stage, Verdict};
use crate::state::{DataPlaneLink, DigestEvent, PacketIn};
use crate::tables::{Forward, Snapshot};
use crate::wait::{plan, Lateness, SpinBudget, Wait, WakeMargin, WINDOW_NS};

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

struct Port {
    io: PortIo,
    number: u16,
    /// Packets waiting for TX ring space, in order (pool handles).
    backlog: VecDeque<Handle>,
    pcap_in: Option<PcapWriter>,
    pcap_out: Option<PcapWriter>,
    warned_truncated: bool,
    warned_csum: bool,
    warned_mtu: bool,
    tx_failing: bool,
    /// The interface is up and has a carrier, as last seen (each change is logged).
    link_up: bool,
    /// The interface was deleted or moved to another namespace: the port drops what it would send
    /// (tx_error) until an interface of its name is back and it is opened again on it
    /// (`DataPlane::install_reopened`).
    is_gone: bool,
    /// While gone: what kept the last attempt to open it again from succeeding (logged once each).
    reopen_blocked: Option<String>,
    /// Every frame of this port's last turn with any went to a backlogged rate queue (or was
    /// dropped): nothing of theirs needs the loop before the next coalesced release, so a batching
    /// sleep leaves this port out of its poll (wait.rs `plan`).
    rx_backlogged: bool,
    /// Largest frame (as the ring holds it: a tag the kernel strips does not count) this port
    /// receives whole: its path's ring, and a packet buffer with room for a tag put back. Longer
    /// ones are malformed drops. Set when the port opens; an MTU raised above it later has the
    /// port opened again with rings (and packet buffers) for it (`DataPlane::resize_for_mtu`).
    rx_limit: usize,
    /// MTU + Ethernet header, as last read (at open, then once a second).
    mtu_frame: usize,
    /// The `mtu_frame` the port was last opened again for (`resize_for_mtu`), or found at open:
    /// each MTU is acted on (or warned about) once.
    resized_for: usize,
    /// Largest untagged frame the interface sends: MTU + Ethernet header. Linux drops longer
    /// ones silently (AF_PACKET TX ring with PACKET_LOSS, or the veth peer), so they are counted
    /// here as tx_error drops instead of as sent.
    max_frame: usize,
}

impl Port {
    /// Whether Linux will send `frame` on this port: at most MTU + 14 bytes, 4 more when it
    /// carries a VLAN tag (the kernel's packet_extra_vlan_len_allowed).
    #[inline]
    fn fits(&self, frame: &[u8]) -> bool {
        let len = frame.len();
        len <= self.max_frame
            || (len <= self.max_frame + 4
                && len >= 14
                && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8))
    }

    /// `ppoll` reported POLLERR on this port's socket: reads (and so clears) the pending error,
    /// which would otherwise end every sleep at once (the loop spun at 50-80 % of a CPU after a
    /// port's link went down once), and says what happened to the port. True: its interface is
    /// gone (the caller handles that, `DataPlane::port_gone`).
    fn socket_error(&mut self) -> bool {
        if self.io.is_gone() {
            let _ = self.io.take_error();
            return true;
        }
        match self.io.take_error() {
            Ok(Some(e)) => {
                // The once-a-second check logs the link coming up again.
                self.link_up = false;
                tracing::warn!(
                    port = self.number,
                    iface = %self.io.ifname(),
                    "port error: {e} (link down?): the port receives and sends again once the link is up"
                );
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(port = self.number, iface = %self.io.ifname(), "SO_ERROR query failed: {e}"),
        }
        false
    }

    /// Once a second, for a port that is not gone: true when its interface is gone (an AF_XDP
    /// socket reports that by no poll event, an AF_PACKET one by POLLERR only when it sleeps),
    /// else logs a change of its link (an AF_XDP socket has no link-down error at all, and an
    /// AF_PACKET one none for a lost carrier).
    fn check(&mut self) -> bool {
        if self.io.is_gone() {
            return true;
        }
        match self.io.link_up() {
            Ok(up) if up != self.link_up => {
                self.link_up = up;
                if up {
                    tracing::info!(port = self.number, iface = %self.io.ifname(), "port link up: the port receives and sends again");
                } else {
                    tracing::warn!(port = self.number, iface = %self.io.ifname(),
                        "port link down (interface down or no carrier): the port receives and sends again once it is up");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(iface = %self.io.ifname(), "interface flags query failed: {e}"),
        }
        false
    }

    /// Reads the MTU again; true when the largest frame changed.
    fn refresh_mtu(&mut self) -> bool {
        match self.io.mtu() {
            Ok(mtu) => {
                let before = self.max_frame;
                self.mtu_frame = mtu as usize + ETH_HEADER;
                self.max_frame = sendable(self.mtu_frame, &self.io);
                self.max_frame != before
            }
            Err(e) => {
                tracing::debug!(iface = %self.io.ifname(), "MTU query failed: {e}");
                false
            }
        }
    }
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

pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC now, for turning the kernel's wall-clock RX timestamps into
/// the loop's monotonic time.
///
/// Read as (monotonic, wall, monotonic) three times, keeping the tightest bracket, and taken as
/// wall minus the *second* monotonic read: a preemption between the reads can then only make the
/// offset smaller than the truth, which makes arrival times later, never earlier. A packet must never
/// leave before its sender's time plus the delay; one that leaves a few microseconds late is what
/// a loop turn costs anyway. (Reading monotonic first and wall much later, as the loop once did at
/// start, after allocating the buffer pool, made every arrival of the first ~100 ms early by the
/// pool's allocation time.)
pub fn wall_offset_ns() -> i64 {
    wall_offset_from(clock_ns)
}

/// [`wall_offset_ns`] over any clock reader (the tests script a preempted read).
fn wall_offset_from(mut read: impl FnMut(libc::clockid_t) -> u64) -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..3 {
        let before = read(libc::CLOCK_MONOTONIC);
        let wall = read(libc::CLOCK_REALTIME);
        let after = read(libc::CLOCK_MONOTONIC);
        let width = after.saturating_sub(before);
        if width < best.0 {
            best = (width, wall as i64 - after as i64);
        }
    }
    best.1
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// RAM plus swap, in bytes (sysinfo(2)): what the kernel's default overcommit heuristic lets one
/// allocation reserve at most. None when it cannot be read, or when the kernel overcommits
/// without a check (vm.overcommit_memory = 1).
pub fn system_memory() -> Option<u64> {
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1") {
        return None;
    }
    // SAFETY: sysinfo fills the zeroed struct it is given.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: si is a valid, writable struct sysinfo.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return None;
    }
    let unit = si.mem_unit.max(1) as u64;
    Some((si.totalram as u64).saturating_add(si.totalswap as u64).saturating_mul(unit))
}

/// Refuses a capacity whose allocation (`needs`: what it is, bytes) exceeds `memory` bytes,
/// naming the flag and both sizes.
pub fn check_memory(needs: &[(&str, u128)], memory: u64) -> Result<(), String> {
    const GIB: f64 = (1u64 << 30) as f64;
    match needs.iter().find(|(_, bytes)| *bytes > memory as u128) {
        Some((what, bytes)) => Err(format!(
            "{what} would need {:.1} GiB in one allocation, more than this machine's memory ({:.1} GiB of RAM and \
             swap): lower it",
            *bytes as f64 / GIB,
            memory as f64 / GIB
        )),
        None => Ok(()),
    }
}

/// Checks the offloads of every port; one error naming every bad interface and its fix.
pub fn check_offloads(ports: &[PortSpec]) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for p in ports {
        let problem =
            ethtool::offload_problem(&p.ifname).with_context(|| format!("port {}: {}", p.number, p.ifname))?;
        problems.extend(problem);
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}

/// A frame's arrival: its kernel stamp `stamp` (monotonic ns) when plausible against `now`, the
/// clock read before its batch, else a fresh read of `clock`. `now` itself is never used as the
/// arrival: a frame that arrived after it (the thread can be held up for a millisecond and more by
/// softirq work on its CPU) has a stamp after `now`, and `now` would make it early.
#[inline]
fn arrival_time(stamp: i64, now: u64, clock: impl FnOnce() -> u64) -> u64 {
    let plausible = |at: u64| stamp > 0 && (stamp as u64) <= at && at - (stamp as u64) < MAX_SLEEP_NS;
    if plausible(now) {
        return stamp as u64;
    }
    let fresh = clock();
    if plausible(fresh) {
        stamp as u64
    } else {
        fresh
    }
}

/// Opens port `number` on `ifname` as the switch opens a port, at start and again when its
/// interface came back (io/reopen.rs): the I/O path of `mode` (promiscuous mode, AF_XDP's
/// XDP program), the TX thread of `--tx-threads`, the largest frame the interface sends (MTU +
/// Ethernet header) and the largest the port receives whole (its path's ring, and `buffer_limit`,
/// a packet buffer less a tag). The offload check is the caller's (at start, one error for every
/// port).
fn open_port_io(
    number: u16,
    ifname: &str,
    rings: &RingConfig,
    mode: IoMode,
    tx_threads: bool,
    buffer_limit: usize,
) -> anyhow::Result<Opened> {
    let mut io = PortIo::open(ifname, rings, mode).with_context(|| format!("opening port {number}"))?;
    if tx_threads {
        io.start_tx_thread().with_context(|| format!("TX thread of port {number}"))?;
    }
    let mtu = io.mtu().with_context(|| format!("MTU of port {number} ({ifname})"))?;
    let rx_limit = io.rx_max_frame().min(buffer_limit);
    let mtu_frame = mtu as usize + ETH_HEADER;
    let max_frame = sendable(mtu_frame, &io);
    Ok(Opened { io, max_frame, rx_limit, mtu_frame, class: None })
}

/// A port opened (`open_port_io`): its I/O path, the largest frame it sends and receives whole,
/// its MTU + 14 as read at open, and the packet buffers of a new size it needs (an MTU raised,
/// `DataPlane::resize_for_mtu`).
struct Opened {
    io: PortIo,
    max_frame: usize,
    rx_limit: usize,
    mtu_frame: usize,
    class: Option<pool::Class>,
}

/// What opening a port again gave (io/reopen.rs), or why it did not open.
type Reopened = Result<Opened, String>;

/// A gone port to open again, with what start gives a port: everything the worker thread needs
/// (io/reopen.rs), so that it shares nothing with the data-plane thread.
struct ReopenJob {
    number: u16,
    ifname: String,
    mode: IoMode,
    rings: RingConfig,
    tx_threads: bool,
    buffer_limit: usize,
    check_offloads: bool,
    /// (count, size): packet buffers larger than the pool has, for this port's new MTU
    /// (`DataPlane::resize_for_mtu`) or the MTU its interface came back with
    /// (`DataPlane::reopen_job`), allocated here, off the data-plane thread.
    class: Option<(usize, usize)>,
}

impl ReopenJob {
    /// On the worker thread: the offload check as at start, then the port opened as at start
    /// (with the larger buffers it needs, and a receive limit they hold).
    fn open(&self) -> Reopened {
        match self.check_offloads.then(|| ethtool::offload_problem(&self.ifname)) {
            Some(Ok(Some(problem))) => Err(problem),
            Some(Err(e)) => Err(format!("offload check: {e}")),
            _ => {
                let class = self.class.map(|(count, size)| pool::Class::new(count, size));
                let buffer_limit =
                    class.as_ref().map_or(self.buffer_limit, |c| self.buffer_limit.max(c.buffer_size() - 4));
                open_port_io(self.number, &self.ifname, &self.rings, self.mode, self.tx_threads, buffer_limit)
                    .map(|opened| Opened { class, ..opened })
                    .map_err(|e| format!("{e:#}"))
            }
        }
    }
}

/// The largest untagged frame port `io` sends, for an MTU + 14 of `frame`: bounded by what its TX
/// ring takes with a tag (an MTU raised above what the switch was sized for at start must not
/// have its frames cut short at the ring: they are tx_error drops, `Port::fits`).
fn sendable(frame: usize, io: &PortIo) -> usize {
    frame.min(io.tx_max_frame() - 4)
}

/// What became of the `count` packet buffers of `size` bytes made for a port reopened for its MTU
/// (`resize_for_mtu`), for its log line: added to the pool, or not needed because another port
/// reopened at the same time added buffers as large first (the pool's largest are now `largest`
/// bytes), or refused for want of room for another size.
fn buffers_outcome(count: usize, size: usize, added: bool, largest: usize) -> String {
    if added {
        format!(" and {count} packet buffers of {size} bytes added")
    } else if largest >= size {
        format!(
            " (the {count} packet buffers of {size} bytes made for it were not needed: another port's, \
             of {largest} bytes, hold its frames; freed)"
        )
    } else {
        format!(
            " (the {count} packet buffers of {size} bytes made for it were not added: the pool has no room \
             for another size; its frames above {largest} bytes that must wait are dropped as buffer_exhausted)"
        )
    }
}

/// A port whose MTU lets its hosts send frames longer than the switch receives whole (`rx_limit`):
/// said at start and when the MTU changes, before any traffic, because the frames are then dropped
/// (`malformed`) with no ICMP "too big" going back, so TCP with a larger MSS stalls after its
/// handshake. The rings and buffers are sized at start from the ports' largest MTU (`Sizing`); an
/// AF_PACKET port whose MTU is raised later is opened again with rings for it
/// (`DataPlane::resize_for_mtu`), so this is said for what that cannot fix (AF_XDP's frames, an
/// MTU no ring holds), where a restart or a lower MTU does. An untagged frame of MTU + 14 bytes
/// must fit (a VLAN tag does not count: the kernel hands it over beside the frame).
fn warn_mtu_above_ring(number: u16, ifname: &str, max_frame: usize, rx_limit: usize) {
    let mtu = max_frame - ETH_HEADER;
    let most = rx_limit - ETH_HEADER;
    if mtu > most {
        tracing::warn!(port = number, iface = %ifname, mtu,
            "MTU {mtu} is above the largest this switch forwards ({most}, as sized at start from the ports' MTU): frames \
             longer than {rx_limit} bytes are dropped as malformed, without an ICMP error; restart the switch to size its \
             rings and buffers for this MTU (AF_PACKET carries up to {}; --buffer-size must hold MTU + 18), or set the MTU \
             of this interface and of the hosts on both sides to {most} or less", MAX_FORWARDED_MTU_EVER);
    }
}

/// Largest MTU the AF_PACKET path carries with the largest ring frames.
const MAX_FORWARDED_MTU_EVER: usize = crate::io::afpacket::rx_max_frame(MAX_RING_FRAME_SIZE) - ETH_HEADER;

/// Default packet buffers (`--buffers`) and their size (`--buffer-size`) at MTUs up to 1968.
pub const DEFAULT_BUFFERS: usize = 65536;
pub const DEFAULT_BUFFER_SIZE: usize = 2048;

/// Ring and buffer sizes, chosen at start from the ports' largest MTU and the flags that were given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub rings: RingConfig,
    pub buffers: usize,
    pub buffer_size: usize,
}

impl Sizing {
    /// At MTUs up to 1968: 4096 RX and 2048 TX ring frames of 2048 bytes, 65536 buffers of 2048.
    const DEFAULT: Sizing =
        Sizing { rings: RingConfig::DEFAULT, buffers: DEFAULT_BUFFERS, buffer_size: DEFAULT_BUFFER_SIZE };

    /// For ports whose largest MTU is `mtu`. Up to MTU 1968 the defaults are what they always were
    /// (2048-byte ring frames and buffers, 65536 buffers). Above (jumbo frames), the ring frame is
    /// the power of two that holds MTU + 14 ([`ring_frame_size`]), a buffer holds MTU + 18 (a VLAN
    /// tag put back), and the defaults of the counts shrink so that the memory stays about what it
    /// is at MTU 1500 (128 MiB of buffers; rings no more than 4x, at least 1024/512 frames).
    /// A `--buffer-size` given too small for the MTU is an error naming the flag.
    pub fn for_mtu(
        mtu: usize,
        rx_frames: Option<usize>,
        tx_frames: Option<usize>,
        buffers: Option<usize>,
        buffer_size: Option<usize>,
    ) -> Result<Sizing, String> {
        // Above the largest ring: the largest, and the port is named at open (warn_mtu_above_ring).
        let frame_size = ring_frame_size(mtu).unwrap_or(MAX_RING_FRAME_SIZE);
        let jumbo = frame_size > FRAME_SIZE;
        // What a buffer must hold: the largest frame the TX ring takes (as always) at 2048-byte
        // ring frames; with jumbo frames, the MTU's tagged frame (bounded by the ring).
        let need = if jumbo { (mtu + ETH_HEADER + 4).min(tx_max_frame(frame_size)) } else { tx_max_frame(FRAME_SIZE) };
        let buffer_size = match buffer_size {
            Some(b) if b < need && !jumbo => return Err(format!("--buffer-size must be at least {need} bytes")),
            Some(b) if b < need => {
                return Err(format!(
                    "--buffer-size {b} is too small for the ports' MTU {mtu}: a frame of it is up to {need} bytes \
                     (MTU + 14, + 4 with a VLAN tag); give --buffer-size {need} or more, or leave it out (the default \
                     follows the ports' MTU)"
                ))
            }
            Some(b) => b,
            None if jumbo => need.next_multiple_of(64),
            None => DEFAULT_BUFFER_SIZE,
        };
        // The defaults' bytes: at 2048-byte frames as they always were, else scaled (`scaled`).
        let default = if jumbo { Sizing::DEFAULT.scaled(frame_size, buffer_size) } else { Sizing::DEFAULT };
        Ok(Sizing {
            rings: RingConfig {
                rx_frames: rx_frames.unwrap_or(default.rings.rx_frames),
                tx_frames: tx_frames.unwrap_or(default.rings.tx_frames),
                frame_size,
            },
            buffers: buffers.unwrap_or(default.buffers),
            buffer_size,
        })
    }

    /// This sizing for ring frames of `frame_size` bytes and packet buffers of `buffer_size` (no
    /// smaller than its own): each count keeps its bytes, but is no less than 1024 RX and 512 TX
    /// ring frames and 1024 buffers (or than itself, when it is smaller). What the defaults become
    /// at a jumbo MTU at start (`for_mtu`), and the rings and buffers a port whose MTU is raised
    /// while the switch runs is opened again with (`DataPlane::sizing_for`).
    pub fn scaled(&self, frame_size: usize, buffer_size: usize) -> Sizing {
        let keep = |n: usize, from: usize, to: usize, least: usize| (n * from / to.max(1)).max(n.min(least)).max(1);
        let r = self.rings;
        Sizing {
            rings: RingConfig {
                rx_frames: keep(r.rx_frames, r.frame_size, frame_size, 1024),
                tx_frames: keep(r.tx_frames, r.frame_size, frame_size, 512),
                frame_size,
            },
            buffers: keep(self.buffers, self.buffer_size, buffer_size, 1024),
            buffer_size,
        }
    }
}

/// An XDP attach refused with EBUSY: a program is attached to a port already, most likely by
/// another p4netem-switch on the same interface, which would forward every frame too (the
/// receivers get each one twice): says so, naming the interfaces.
fn busy_hint(e: std::io::Error, ports: &[Port]) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::ResourceBusy {
        return e;
    }
    let names: Vec<&str> = ports.iter().map(|p| p.io.ifname()).collect();
    std::io::Error::new(
        e.kind(),
        format!(
            "{e}; an XDP program is attached to one of {} already: is another p4netem-switch running on it? \
             Two switches on one interface both forward every frame (duplicates)",
            names.join(", ")
        ),
    )
}

/// The kernel fast path for `cfg`, or why there is none. Fails only when `--fast-path on` asks
/// for it and XDP or BPF maps do not work here; `auto` falls back to off.
fn open_fast_path(
    cfg: &DataPlaneConfig,
    ports: &[Port],
    link: &DataPlaneLink,
    pds: u32,
) -> anyhow::Result<Result<FlowCache, String>> {
    // Things that must see every packet, or that would let a kernel-forwarded frame overtake one
    // the data plane has queued, keep the fast path off.
    let why_not = match cfg.fast_path {
        FastPathMode::Off => Some("--fast-path off"),
        _ if cfg.pcap_dir.is_some() => Some("--pcap records every packet of every port"),
        _ if cfg.tx_threads => Some("--tx-threads sends after the loop's turn"),
        _ if ports.iter().any(|p| p.io.kind() != "af_packet") => Some("AF_XDP ports run their own XDP program"),
        _ => None,
    };
    if let Some(why) = why_not {
        return Ok(Err(why.to_string()));
    }
    let ifindexes: Vec<i32> = ports.iter().map(|p| p.io.ifindex()).collect();
    match FlowCache::open(&ifindexes, pds, &link.epoch).map_err(|e| busy_hint(e, ports)) {
        Ok(fc) => Ok(Ok(fc)),
        Err(e) if cfg.fast_path == FastPathMode::Auto => {
            tracing::warn!("fast path unavailable ({e}): every packet goes through the data-plane thread");
            Ok(Err(format!("unavailable: {e}")))
        }
        Err(e) => bail!("--fast-path on: {e}"),
    }
}

impl DataPlane {
    pub fn open(cfg: &DataPlaneConfig, link: DataPlaneLink, shutdown: Arc<AtomicBool>) -> anyhow::Result<DataPlane> {
        for p in &cfg.ports {
            if ethtool::is_loopback(&p.ifname).unwrap_or(false) {
                bail!(
                    "port {}: {} is a loopback interface, which cannot be a port: give a veth or a NIC",
                    p.number,
                    p.ifname
                );
            }
        }
        // Before any port opens (an AF_XDP port would attach its XDP program): a second switch on an
        // interface stops here, and the first keeps it.
        let port_locks = port_lock::lock_ports(
            cfg.ports.iter().map(|p| (p.number, p.ifname.as_str())),
            cfg.grpc_addr.map(|a| a.to_string()),
        )?;
        if cfg.check_offloads {
            check_offloads(&cfg.ports)?;
        }
        if cfg.buffer_size < tx_max_frame(FRAME_SIZE) {
            bail!("--buffer-size must be at least {} bytes", tx_max_frame(FRAME_SIZE));
        }
        let mut port_index = vec![NO_PORT; 512].into_boxed_slice();
        let rings = RingConfig { rx_frames: cfg.rx_frames, tx_frames: cfg.tx_frames, frame_size: cfg.ring_frame_size };
        // A received frame is held in one packet buffer, with a VLAN tag the kernel stripped put back.
        let buffer_limit = cfg.buffer_size - 4;
        // Checked before any port opens, in port order. Two ports on one interface (by index: an
        // altname names the same one) would each take every frame, and forward it.
        let mut ifindexes: Vec<(i32, u16)> = Vec::with_capacity(cfg.ports.len());
        for (i, spec) in cfg.ports.iter().enumerate() {
            if spec.number as usize >= port_index.len() {
                bail!("port number {} is not a usable 9-bit port (0..={})", spec.number, port_index.len() - 1);
            }
            if Some(spec.number) == cfg.cpu_port {
                bail!("port number {} is the CPU port (--cpu-port): give the interface another number", spec.number);
            }
            if port_index[spec.number as usize] != NO_PORT {
                bail!("port number {} given twice", spec.number);
            }
            port_index[spec.number as usize] = i as u16;
            // 0: no such interface, which opening it says.
            let ifindex = ethtool::ifindex(&spec.ifname);
            if let Some(&(_, other)) = ifindexes.iter().find(|(x, _)| ifindex != 0 && *x == ifindex) {
                bail!(
                    "ports {other} and {} are both on interface {}: give each port an interface of its own",
                    spec.number,
                    spec.ifname
                );
            }
            ifindexes.push((ifindex, spec.number));
        }
        let mut pcaps = Vec::with_capacity(cfg.ports.len());
        for spec in &cfg.ports {
            pcaps.push(match &cfg.pcap_dir {
                Some(dir) => {
                    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                    let f =
                        |s: &str| PcapWriter::create(&dir.join(format!("{}-{}_{s}.pcap", spec.number, spec.ifname)));
                    (Some(f("in")?), Some(f("out")?))
                }
                None => (None, None),
            });
        }
        // Every port at once (io/fan_out.rs: their set-up mostly waits for the kernel, and waits
        // taken together overlap); the first failure in port order is the error, as one port after
        // the other, and the ports that did open are closed again (at once too).
        let mut opened = fan_out::map(&cfg.ports, |spec| {
            open_port_io(spec.number, &spec.ifname, &rings, cfg.io, cfg.tx_threads, buffer_limit)
        });
        if let Some(first) = opened.iter().position(Result::is_err) {
            let e = opened.swap_remove(first).err().expect("an error at that position");
            fan_out::drop_all(opened);
            return Err(e);
        }
        let mut ports = Vec::with_capacity(cfg.ports.len());
        for ((spec, opened), (pcap_in, pcap_out)) in cfg.ports.iter().zip(opened).zip(pcaps) {
            let Opened { io, max_frame, rx_limit, mtu_frame, .. } = opened.expect("no port failed to open");
            warn_mtu_above_ring(spec.number, &spec.ifname, mtu_frame, rx_limit);
            tracing::info!(port = spec.number, iface = %spec.ifname, io = io.kind(), "port up: {} ({})", io.kind(), io.detail());
            ports.push(Port {
                io,
                number: spec.number,
                backlog: VecDeque::with_capacity(cfg.buffers),
                pcap_in,
                pcap_out,
                warned_truncated: false,
                warned_csum: false,
                warned_mtu: false,
                tx_failing: false,
                // Checked within a second; a port that starts down is logged then.
                link_up: true,
                is_gone: false,
                reopen_blocked: None,
                rx_backlogged: false,
                rx_limit,
                mtu_frame,
                // As sized at start (`Sizing`, the flags): only a change is acted on.
                resized_for: mtu_frame,
                max_frame,
            });
        }
        let now = monotonic_ns();
        let reopen = {
            let waker = link.waker.clone();
            match Reopener::new(ports.len(), ReopenJob::open, move || waker.wake()) {
                Ok(r) => r,
                Err(e) => {
                    fan_out::drop_all(ports);
                    bail!("starting the thread that reopens ports: {e}");
                }
            }
        };
        let pds = link.caps.pds() as usize;
        let seed_generation = link.registers.rng_seed_generation.load(Ordering::Acquire);
        let seed = link.registers.rng_seed.load(Ordering::Relaxed);
        let health = Arc::new(Health::new(ports.iter().map(|p| (p.number, p.io.ifname().to_string(), p.io.kind()))));
        for (h, p) in health.ports.iter().zip(&ports) {
            h.tx_beat.store(p.io.tx_heartbeat());
        }
        let fast = match open_fast_path(cfg, &ports, &link, pds as u32) {
            Ok(fast) => fast,
            Err(e) => {
                fan_out::drop_all(ports);
                return Err(e);
            }
        };
        match &fast {
            Ok(fc) => {
                link.counters.profile_in.add_fast_path(fc.counts());
                link.counters.profile_out.add_fast_path(fc.counts());
                let _ = health.fast_counts.set(fc.counts());
                let _ = health.fast_path.set("on".into());
                tracing::info!(entries = crate::io::flow_cache::FLOW_ENTRIES,
                    "fast path: on (XDP flow cache at the generic hook of every port: unimpaired flows are forwarded in the kernel)");
            }
            Err(why) => {
                let _ = health.fast_path.set(format!("off: {why}"));
                tracing::info!("fast path: off ({why})");
            }
        }
        Ok(DataPlane {
            ports,
            port_index,
            pool: Pool::new(cfg.buffers, cfg.buffer_size),
            line: DelayLine::new(cfg.buffers, now),
            due: Vec::with_capacity(cfg.buffers),
            served: Vec::with_capacity(cfg.buffers),
            stages: Impairments::new(pds, cfg.buffers),
            rng: Prng::new(seed),
            seed_generation,
            reset_generation: link.reset_generation.load(Ordering::Acquire),
            profiles_seen: 0,
            learn: LearnFilter::new(LEARN_WINDOW_NS),
            cpu_port: cfg.cpu_port,
            shutdown,
            wall_offset_ns: wall_offset_ns(),
            busy_poll_ns: cfg.busy_poll_ns,
            wake_margin_ns: cfg.wake_margin_ns,
            release_slack: cfg.release_slack,
            rt_priority: cfg.rt_priority,
            cpu: cfg.cpu,
            health,
            link,
            first_due_ns: 0,
            lateness: Lateness::default(),
            lateness_at_release: Lateness::default(),
            lateness_coalesced: Lateness::default(),
            prompt: 0,
            fast: fast.ok(),
            rx_drained: vec![false; cfg.ports.len()],
            rings,
            tx_threads: cfg.tx_threads,
            check_offloads: cfg.check_offloads,
            reopen,
            scratch_len: rings.frame_size + 8,
            _port_locks: port_locks,
        })
    }

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

    /// Once a second, off the packet path: each port's link, and whether its interface is gone;
    /// gone ports whose interfaces are back are handed to a worker thread to open again
    /// (io/reopen.rs). The port's state goes to the health metrics.
    fn check_ports(&mut self) {
        let mut back = Vec::new();
        for pi in 0..self.ports.len() {
            if self.ports[pi].is_gone {
                if let Some(job) = self.reopen_job(pi) {
                    back.push((pi, job));
                }
            } else if self.ports[pi].check() {
                self.port_gone(pi);
            }
            let p = &self.ports[pi];
            if let Some(h) = self.health.ports.get(pi) {
                h.up.store(!p.is_gone && p.link_up, Ordering::Relaxed);
            }
        }
        self.reopen.open(back);
    }

    /// Port `pi`'s interface was deleted or moved to another namespace: its socket never carries
    /// a frame again. Logged once. What waits in its TX backlog is dropped as tx_error, as is what
    /// the delay line and the cells release to it until it is back (`unsendable`), so that every
    /// packet in is out or dropped (frames already in its TX ring were counted out when written
    /// there, as on any port). Its XDP programs are detached (one left on an interface moved away
    /// would refuse a new attach when it comes back) and fast-path entries made stale (they could
    /// redirect to an interface that is no more).
    fn port_gone(&mut self, pi: usize) {
        let port = &mut self.ports[pi];
        if port.is_gone {
            return;
        }
        port.is_gone = true;
        port.link_up = false;
        port.rx_backlogged = false;
        port.reopen_blocked = None;
        // Detaching an XDP program waits for the kernel (RCU: 10-40 ms a port here; 60 AF_XDP ports
        // moved to another namespace at once held the loop 0.8 s): the worker does it, before it
        // opens the port again (it takes its jobs in order), so a new attach finds the hook free.
        let mut retired: Vec<Box<dyn Send>> = port.io.release().into_iter().collect();
        if let Some(h) = self.health.ports.get(pi) {
            h.up.store(false, Ordering::Relaxed);
        }
        tracing::error!(
            port = port.number,
            iface = %port.io.ifname(),
            "port error: the interface was deleted or moved to another namespace; this port drops what it would send \
             (tx_error) until an interface named {} is back in this namespace and up, then opens again on it (the \
             other ports go on)",
            port.io.ifname()
        );
        while let Some(h) = self.ports[pi].backlog.pop_front() {
            let m = self.pool.meta(h);
            if m.pd != NO_PD {
                self.drop_pkt(m.pd, DropReason::TxError, m.len as usize);
            }
            self.pool.free(h);
        }
        if let Some(fc) = &mut self.fast {
            retired.extend(fc.detach(pi).map(|link| Box::new(link) as Box<dyn Send>));
            fc.invalidate();
        }
        self.reopen.close(retired);
    }

    /// Gone port `pi` (once a second): to be opened again when an interface of its name is in this
    /// namespace, up with a carrier and, as at start, with its offloads off; on the path it chose
    /// at start (`PortIo::reopen_mode`), with what start gives a port (`open_port_io`). None while
    /// its interface is not back, or the worker is opening it already.
    fn reopen_job(&self, pi: usize) -> Option<ReopenJob> {
        let port = &self.ports[pi];
        if self.reopen.is_opening(pi) || !matches!(port.io.link_up(), Ok(true)) {
            return None; // not back yet, or not up: nothing to say
        }
        // Sized for the MTU of the interface back (read by name): one larger than the rings hold
        // gets rings (and buffers) for it now, as `resize_for_mtu` gives a live port, rather than
        // a second open a second later. (Unreadable: as at start; a larger MTU is then acted on
        // once the port is open.)
        let frame = port.io.mtu().map_or(0, |mtu| mtu as usize + ETH_HEADER);
        let (rings, class) = self.sizing_for(frame).unwrap_or((self.rings, None));
        Some(ReopenJob {
            number: port.number,
            ifname: port.io.ifname().to_string(),
            mode: port.io.reopen_mode(),
            rings,
            tx_threads: self.tx_threads,
            // Larger buffers may have been added since the start (`resize_for_mtu`).
            buffer_limit: self.pool.buffer_size() - 4,
            check_offloads: self.check_offloads,
            class,
        })
    }

    /// The rings and packet buffers an AF_PACKET port opened for frames of `frame` bytes (MTU +
    /// 14) needs: the rings in force when they hold it, else those scaled to the ring frame that
    /// does (`Sizing::scaled`: as many bytes, with `Sizing::for_mtu`'s floors), and, when no packet
    /// buffer holds it with a tag, a class of buffers of that ring frame's size (few sizes: each
    /// MTU raised does not add its own) of as many bytes as the start's buffers. None when no
    /// ring holds it.
    fn sizing_for(&self, frame: usize) -> Option<(RingConfig, Option<(usize, usize)>)> {
        let frame_size = ring_frame_size(frame.saturating_sub(ETH_HEADER))?.max(self.rings.frame_size);
        let (buffers, buffer_size) = self.pool.base();
        let scaled = Sizing { rings: self.rings, buffers, buffer_size }.scaled(frame_size, frame_size);
        let class = (self.pool.buffer_size() < frame + 4).then_some((scaled.buffers, frame_size));
        Some((scaled.rings, class))
    }

    /// Once a second, after the MTUs were read: an AF_PACKET port whose MTU was raised above what
    /// its rings (or the packet buffers) hold is opened again by the worker (io/reopen.rs) with
    /// rings sized for it, as `Sizing` sizes them at start, and with larger packet buffers when no
    /// buffer holds its frames, allocated there too; `install_reopened` swaps it in as it does a
    /// port whose interface came back (same number, lock, counters, pcap, fast path). Until then,
    /// and for what this cannot fix (an AF_XDP port, an MTU no ring holds: said once per MTU), its
    /// longer frames are malformed drops. A lowered MTU needs nothing: the rings are larger than
    /// needed, and what is sent is bounded by `max_frame`, read again each second.
    fn resize_for_mtu(&mut self) {
        let mut jobs = Vec::new();
        for pi in 0..self.ports.len() {
            let port = &self.ports[pi];
            let frame = port.mtu_frame;
            if port.is_gone || frame <= port.rx_limit || frame == port.resized_for || self.reopen.is_opening(pi) {
                continue;
            }
            let mtu = frame - ETH_HEADER;
            let sized = self.sizing_for(frame).filter(|_| port.io.reopen_mode() == IoMode::AfPacket);
            let Some((rings, class)) = sized else {
                warn_mtu_above_ring(port.number, port.io.ifname(), frame, port.rx_limit);
                self.ports[pi].resized_for = frame;
                continue;
            };
            tracing::info!(port = port.number, iface = %port.io.ifname(), mtu,
                "MTU {mtu} is above the {} this port's rings were sized for: reopening the port with rings for it{} \
                 (its number, counters, pcap and fast path kept; frames in its old rings at the swap are lost)",
                port.rx_limit - ETH_HEADER,
                // Made now, added when the port is installed, unless another port's come first.
                class.map_or(String::new(), |(count, size)| format!(" and {count} packet buffers of {size} bytes")));
            jobs.push((
                pi,
                ReopenJob {
                    number: port.number,
                    ifname: port.io.ifname().to_string(),
                    mode: IoMode::AfPacket,
                    rings,
                    tx_threads: self.tx_threads,
                    buffer_limit: self.pool.buffer_size() - 4,
                    check_offloads: false, // a live port: its offloads were checked when it opened
                    class,
                },
            ));
            self.ports[pi].resized_for = frame;
        }
        self.reopen.open_serially(jobs);
    }

    /// Once a second, after `resize_for_mtu`: the larger packet buffers added for a raised MTU
    /// (`resize_for_mtu`) that no port needs any more (its MTU lowered again, or the port gone) are
    /// taken out of the pool once none of them holds a packet (held packets wait in delay and rate
    /// queues for seconds: such a class stays until the last one leaves), and freed off this
    /// thread, as they were allocated. A port's frames need a buffer of its MTU + 18 (a tag put
    /// back), or of what its path receives whole when that is less. Not while ports are being
    /// opened: one may bring (or count on) larger buffers. A port's receive limit then follows the
    /// buffers, as at open: a longer frame (above its MTU) is a malformed drop, and an MTU raised
    /// again has the port opened again with buffers for it (`resize_for_mtu`).
    fn free_unneeded_buffers(&mut self) {
        if self.pool.classes() == 0 || self.reopen.busy() {
            return;
        }
        let needs: Vec<usize> =
            self.ports.iter().filter(|p| !p.is_gone).map(|p| p.mtu_frame.min(p.rx_limit) + 4).collect();
        let unneeded = self.pool.take_unneeded(&needs);
        if unneeded.is_empty() {
            return;
        }
        for class in &unneeded {
            tracing::info!(
                buffers = class.count(),
                size = class.buffer_size(),
                "packet buffers of {} bytes freed: no port's MTU needs them any more (an MTU raised again adds them \
                 again)",
                class.buffer_size()
            );
        }
        let limit = self.pool.buffer_size() - 4;
        for port in self.ports.iter_mut().filter(|p| p.rx_limit > limit) {
            port.rx_limit = limit;
            port.resized_for = 0; // the same MTU raised again is acted on
        }
        if let Some(fc) = &mut self.fast {
            fc.invalidate(); // entries carry a length bound from the receive limit
        }
        self.health.buffers.store(self.pool.capacity() as u64, Ordering::Relaxed);
        self.health.free_buffers.store(self.pool.available() as u64, Ordering::Relaxed);
        self.reopen.close(unneeded.into_iter().map(|c| Box::new(c) as Box<dyn Send>).collect());
    }

    /// Each turn while ports are being opened again: takes the ones the worker opened (at most
    /// `reopen::PER_TURN`, the rest next turn, so that a turn stays short however many came back)
    /// and puts each on its port, which keeps its number, lock, counters and pcap files, with the
    /// fast path's program; the old sockets are closed by the worker (that waits for the kernel too).
    /// What kept a port from opening is logged once per reason, and it is tried again a second on.
    fn install_reopened(&mut self) {
        let mut old = Vec::new();
        // Larger packet buffers added: room for their handles before any packet is held in one.
        let mut added = false;
        for (pi, opened) in self.reopen.opened(reopen::PER_TURN) {
            let port = &mut self.ports[pi];
            let (number, ifname) = (port.number, port.io.ifname().to_string());
            let Opened { io, max_frame, rx_limit, mtu_frame, class } = match opened {
                Ok(opened) => opened,
                Err(why) => {
                    if port.reopen_blocked.as_ref() != Some(&why) {
                        tracing::warn!(port = number, iface = %ifname, "port not reopened yet (tried again every second): {why}");
                        port.reopen_blocked = Some(why);
                    }
                    continue;
                }
            };
            let ifindex = io.ifindex();
            // A live port opened again for its MTU (`resize_for_mtu`) rather than one that was gone:
            // same interface, whose fast-path program stays attached.
            let resized = !port.is_gone;
            old.push(Box::new(std::mem::replace(&mut port.io, io)) as Box<dyn Send>);
            port.max_frame = max_frame;
            port.rx_limit = rx_limit;
            port.mtu_frame = mtu_frame;
            if !resized {
                // Sized for the MTU the interface came back with (`reopen_job`); one changed since
                // is acted on next second (`resize_for_mtu`).
                port.resized_for = 0;
            }
            let mut buffers = String::new();
            if let Some(class) = class {
                let (count, size) = (class.count(), class.buffer_size());
                // Not added when another port's already gave buffers as large: freed off this thread.
                let handed_back = self.pool.add_class(class).map(|unused| old.push(Box::new(unused) as Box<dyn Send>));
                added |= handed_back.is_none();
                buffers = buffers_outcome(count, size, handed_back.is_none(), self.pool.buffer_size());
                self.health.buffers.store(self.pool.capacity() as u64, Ordering::Relaxed);
            }
            self.scratch_len = self.scratch_len.max(rx_limit + 8);
            port.is_gone = false;
            port.link_up = true;
            port.reopen_blocked = None;
            port.tx_failing = false;
            // A new interface: its own misconfigurations are logged again.
            (port.warned_truncated, port.warned_csum, port.warned_mtu) = (false, false, false);
            if let Some(h) = self.health.ports.get(pi) {
                h.set_io(port.io.kind());
                h.tx_beat.store(port.io.tx_heartbeat()); // the old port's thread ends with it
                h.up.store(true, Ordering::Relaxed);
            }
            if resized {
                tracing::info!(port = number, iface = %ifname, io = port.io.kind(), mtu = mtu_frame - ETH_HEADER,
                    "port reopened with rings for its MTU{buffers}: frames up to {rx_limit} bytes received whole");
                if let Some(fc) = &mut self.fast {
                    fc.invalidate(); // entries carry a length bound
                }
                continue;
            }
            tracing::info!(port = number, iface = %ifname, io = port.io.kind(), mtu = mtu_frame - ETH_HEADER,
                "port reopened{buffers}");
            if let Some(fc) = &mut self.fast {
                if let Err(e) = fc.attach(pi, ifindex).map_err(|e| busy_hint(e, &self.ports)) {
                    tracing::warn!(port = number, iface = %ifname,
                        "fast path: not attached to the reopened port ({e}): its frames take the data-plane thread");
                }
                // Entries name interfaces by index, and the port's is new.
                fc.invalidate();
            }
        }
        if added {
            self.grow_for_handles();
        }
        self.reopen.close(old);
    }

    /// Larger packet buffers were added (`install_reopened`): what is indexed by a buffer's handle
    /// (the delay line's wheels, the cells' bearers) gets room for theirs, which follow the
    /// others' (until 2026-12-01 it did not: the first packet held in one, a jumbo frame through a
    /// delay, stopped the data-plane thread on an index out of bounds). Once per class added, on
    /// this thread, as what waits must keep its place: a few hundred KiB written for the new
    /// handles (a large block grows in place, `mremap`), well under a millisecond.
    fn grow_for_handles(&mut self) {
        let handles = self.pool.handles();
        self.line.grow(handles);
        self.stages.grow(handles);
        let capacity = self.pool.capacity();
        self.due.reserve(capacity.saturating_sub(self.due.len()));
        self.served.reserve(capacity.saturating_sub(self.served.len()));
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

    /// Takes up to RX_BATCH frames from port `pi` through the pipeline; `now` is the turn's clock
    /// read (a frame stamped after it gets a fresh one, `arrival_time`).
    fn rx_port(&mut self, pi: usize, snap: &Snapshot, scratch: &mut [u8], now: u64) -> usize {
        let mut n = 0;
        let prompt_before = self.prompt;
        while n < RX_BATCH {
            let Some(f) = self.ports[pi].io.rx_peek() else { break };
            n += 1;
            // What the ring holds and a packet buffer takes (a frame longer than either is truncated
            // and dropped as malformed).
            let snaplen = f.snaplen.min(self.ports[pi].rx_limit);
            // SAFETY: the frame stays in the RX ring (ours, TP_STATUS_USER) until rx_release below.
            let raw = unsafe { std::slice::from_raw_parts(f.data, snaplen) };
            let truncated = f.len > snaplen;
            let frame: &[u8] = if f.status & crate::io::afpacket::VLAN_VALID != 0 && raw.len() >= 12 {
                let tpid = if f.status & crate::io::afpacket::VLAN_TPID_VALID != 0 { f.vlan_tpid } else { 0x8100 };
                let total = raw.len() + 4;
                scratch[..12].copy_from_slice(&raw[..12]);
                scratch[12..14].copy_from_slice(&tpid.to_be_bytes());
                scratch[14..16].copy_from_slice(&f.vlan_tci.to_be_bytes());
                scratch[16..total].copy_from_slice(&raw[12..]);
                &scratch[..total]
            } else {
                raw
            };
            let port = &mut self.ports[pi];
            if truncated && !port.warned_truncated {
                port.warned_truncated = true;
                tracing::warn!(iface = %port.io.ifname(), len = f.len,
                    "frames larger than {snaplen} bytes arrive (GRO/GSO/TSO on the sender, or an MTU above {}, the largest \
                     this switch was sized for at start?): dropped as malformed", port.rx_limit - ETH_HEADER);
            }
            if f.status & crate::io::afpacket::CSUM_NOT_READY != 0 && !port.warned_csum {
                port.warned_csum = true;
                tracing::warn!(iface = %port.io.ifname(),
                    "frames arrive with checksums not yet computed: turn tx checksum offload off on the sender (the veth peer)");
            }
            if let Some(w) = &mut port.pcap_in {
                let _ = w.record((now as i64 + self.wall_offset_ns) as u64, frame);
            }
            let number = port.number;
            // Time of arrival: the kernel's RX timestamp (wall clock) when it is plausible, so that
            // delay and rate count from when the frame reached the port, not from when this loop
            // got to it.
            let stamp = if f.monotonic { f.timestamp_ns as i64 } else { f.timestamp_ns as i64 - self.wall_offset_ns };
            let arrival = arrival_time(stamp, now, monotonic_ns);
            self.process(snap, number, frame, truncated, arrival);
            self.ports[pi].io.rx_release();
        }
        if n > 0 {
            self.ports[pi].rx_backlogged = self.prompt == prompt_before;
        }
        n
    }

    #[inline]
    fn drop_pkt(&self, pd: u32, reason: DropReason, len: usize) {
        self.link.counters.count_drop(pd, reason, len as u64);
    }

    /// One received frame through the pipeline.
    fn process(&mut self, snap: &Snapshot, in_port: u16, frame: &[u8], truncated: bool, now: u64) {
        let len = frame.len();
        let parsed = parse(frame, in_port);
        if let Some(e) = parsed.error {
            self.link.counters.parser_errors.add(e as usize, len as u64);
        }
        // Forwarding: l2_fwd decides on a hit, otherwise port_map (forwarding.p4).
        let mut fwd = None;
        let mut learns = false;
        if parsed.l2_usable() {
            if snap.learn_on_miss && snap.l2_learn.get(parsed.src_mac).is_none() {
                learns = true;
                self.learn_mac(parsed.src_mac, in_port, now);
            }
            fwd = snap.l2_fwd.get(parsed.dst_mac);
        }
        let fwd = fwd.or_else(|| snap.port_map.get(in_port)).unwrap_or(snap.port_map_default);
        // Classification happens for every packet, so that route drops count against its profile.
        let mut sel = snap.classifier.lookup(&parsed.key).unwrap_or(snap.classifier_default);
        if sel.profile_id as u32 >= self.link.caps.profiles {
            sel.profile_id = 0; // as p4src: ids the arrays cannot index fall back to profile 0
        }
        let pd = sel.pd();
        self.link.counters.profile_in.add(pd as usize, len as u64);
        let out = match fwd {
            Forward::Drop => return self.drop_pkt(pd, DropReason::NoRoute, len),
            Forward::Cpu => OUT_CPU,
            Forward::Port(p) if Some(p) == self.cpu_port => OUT_CPU,
            Forward::Port(p) => match self.port_index.get(p as usize).copied().unwrap_or(NO_PORT) {
                NO_PORT => return self.drop_pkt(pd, DropReason::TxError, len),
                i => i,
            },
        };
        if truncated {
            return self.drop_pkt(pd, DropReason::Malformed, len);
        }
        let imp = snap.impairment(pd);
        let radio = snap.radio(sel.profile_id as u32);
        if imp.is_none() && radio.is_none() {
            if self.fast.is_some() && out != OUT_CPU && !learns && parsed.error.is_none() {
                self.offer_fast(snap, in_port, out, pd, frame, now);
            }
            return self.send_now(out, pd, in_port, frame, Edits::default());
        }
        let imp = imp.copied().unwrap_or_default();
        let mut pkt = Pkt::new(len as u32, now);
        pkt.ip = parsed.ip;
        if radio.is_some() || imp.bearer_sched != 0 {
            // The UE owns the radio and, in a cell, the bearer.
            pkt.ue = sel.ue(parsed.key.ipv4_src, parsed.key.ipv4_dst);
        }
        if let Some(radio) = radio {
            let mut ctx =
                Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            let verdict = self.stages.radio.enqueue(radio, &mut ctx, &mut pkt);
            self.report_radio_events();
            if let Verdict::Drop(reason) = verdict {
                return self.drop_pkt(pd, reason, len);
            }
        }
        self.impair(&imp, out, pd, in_port, frame, pkt, now);
    }

    /// Offers the kernel fast path an entry for `frame`'s flow: the pipeline forwards it to `out`
    /// unchanged, counted against `pd`, under this snapshot (the caller checked: no impairment,
    /// no radio, no learning, not to or from the CPU port).
    fn offer_fast(&mut self, snap: &Snapshot, in_port: u16, out: u16, pd: u32, frame: &[u8], now: u64) {
        let Some(&pi) = self.port_index.get(in_port as usize) else { return };
        let (Some(inp), Some(outp)) = (self.ports.get(pi as usize), self.ports.get(out as usize)) else { return };
        let max_len = inp.rx_limit.min(outp.max_frame);
        if frame.len() > max_len || outp.is_gone {
            return;
        }
        let Some(key) = key_of(inp.io.ifindex() as u32, frame) else { return };
        let out_ifindex = outp.io.ifindex();
        if let Some(fc) = &mut self.fast {
            fc.offer(key, snap.epoch, pd, max_len as u32, out_ifindex, (pi, out), now);
        }
    }

    /// The stages after the radio, for a packet and its duplicate.
    #[allow(clippy::too_many_arguments)]
    fn impair(&mut self, imp: &Impairment, out: u16, pd: u32, in_port: u16, frame: &[u8], mut pkt: Pkt, now: u64) {
        let len = frame.len();
        let mut ctx = Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
        match self.stages.run(imp, &mut ctx, &mut pkt) {
            Verdict::Drop(reason) => self.drop_pkt(pd, reason, len),
            Verdict::Pass => self.emit(out, pd, in_port, frame, pkt.edits(), pkt.release, self.exactness(&pkt), now),
            Verdict::Held => self.hold_in_bearer(imp, out, pd, in_port, frame, pkt),
        }
        // The copy exists from the duplication stage on, whatever happens to the original after.
        if pkt.duplicate {
            let mut copy = pkt.copy_of(now);
            let mut ctx =
                Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            match self.stages.run(imp, &mut ctx, &mut copy) {
                Verdict::Drop(reason) => self.drop_pkt(pd, reason, len),
                Verdict::Pass => {
                    self.emit(out, pd, in_port, frame, copy.edits(), copy.release, self.exactness(&copy), now)
                }
                Verdict::Held => self.hold_in_bearer(imp, out, pd, in_port, frame, copy),
            }
        }
    }

    /// Which wheel of the delay line a packet waits in (release.rs): coalesced only when the rate
    /// stage queued it behind another and a release slack is set.
    #[inline]
    fn exactness(&self, pkt: &Pkt) -> Exactness {
        if pkt.coalescable && self.release_slack.coalesces(pkt.service_ns) {
            Exactness::Coalesced
        } else {
            Exactness::Precise
        }
    }

    /// A packet a cell's bearer holds (stage 6a): into a pool buffer (with its edits) and its bearer.
    fn hold_in_bearer(&mut self, imp: &Impairment, out: u16, pd: u32, in_port: u16, frame: &[u8], pkt: Pkt) {
        self.prompt += 1;
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            return self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        pkt.edits().apply(self.pool.frame_mut(h));
        self.stages.hold(pd, imp, h, pkt, &self.link.registers);
    }

    /// The cells' links: packets given the link get their release time (the stages after the
    /// rate) and wait in the wheel, or go now if it has come.
    fn serve_cells(&mut self, snap: &Snapshot, now: u64) -> usize {
        let mut served = std::mem::take(&mut self.served);
        self.stages.serve(
            now,
            &self.link.registers,
            |pd| snap.impairment(pd).copied().unwrap_or_default(),
            &mut served,
        );
        let n = served.len();
        for s in served.iter_mut() {
            let imp = snap.impairment(s.pd).copied().unwrap_or_default();
            let mut ctx =
                Ctx { now, pd: s.pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            match self.stages.after_link(&imp, &mut ctx, &mut s.pkt) {
                Verdict::Pass | Verdict::Held => {}
                Verdict::Drop(reason) => {
                    self.drop_pkt(s.pd, reason, self.pool.meta(s.handle).len as usize);
                    self.pool.free(s.handle);
                    continue;
                }
            }
            if s.pkt.release <= now {
                self.send_held(s.handle);
            } else {
                self.line.insert(s.handle, s.pkt.release, Exactness::Precise);
            }
        }
        served.clear();
        self.served = served;
        n
    }

    /// Radio state changes of the last packet become `radio_state_digest_t` messages (only when a
    /// client enabled the digest; a full queue drops them, as P4Runtime allows for digests).
    fn report_radio_events(&self) {
        let events = self.stages.radio.events();
        if events.is_empty() || !self.link.radio_digests.load(Ordering::Relaxed) {
            return;
        }
        for ev in events {
            let fields = vec![ev.ue as u128, ev.old as u128, ev.new as u128, ev.at_ns as u128];
            if self.link.digest_tx.try_send(DigestEvent { digest_id: DIGEST_RADIO_STATE, fields }).is_err() {
                tracing::debug!(ue = ev.ue, "digest queue full: radio state event dropped");
            }
        }
    }

    fn learn_mac(&mut self, mac: u64, port: u16, now: u64) {
        if self.learn.admit(mac, port, now) {
            let ev = DigestEvent { digest_id: DIGEST_MAC_LEARN, fields: vec![mac as u128, port as u128] };
            if self.link.digest_tx.try_send(ev).is_err() {
                tracing::debug!("digest queue full: learn event for {mac:012x} dropped");
            }
        }
    }

    /// Sends now if the release time has come, else holds the packet in the delay line.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        out: u16,
        pd: u32,
        in_port: u16,
        frame: &[u8],
        edits: Edits,
        release: u64,
        how: Exactness,
        now: u64,
    ) {
        if release <= now {
            return self.send_now(out, pd, in_port, frame, edits);
        }
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            return self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        edits.apply(self.pool.frame_mut(h));
        if how == Exactness::Precise {
            self.prompt += 1;
        }
        self.line.insert(h, release, how);
    }

    #[inline]
    fn count_out(&self, pd: u32, len: usize) {
        if pd != NO_PD {
            self.link.counters.profile_out.add(pd as usize, len as u64);
        }
    }

    fn packet_in(&self, pd: u32, in_port: u16, frame: &[u8], edits: Edits) {
        let mut payload = frame.to_vec();
        edits.apply(&mut payload);
        let len = payload.len();
        match self.link.packet_in_tx.try_send(PacketIn { ingress_port: in_port as u32, payload }) {
            Ok(()) => self.count_out(pd, len),
            Err(_) => {
                if pd != NO_PD {
                    self.drop_pkt(pd, DropReason::TxError, len);
                }
            }
        }
    }

    /// Transmits a frame from a slice (RX ring or PacketOut), straight into the TX ring when it
    /// has room and nothing is queued before it; else into the port's backlog.
    #[inline]
    fn send_now(&mut self, out: u16, pd: u32, in_port: u16, frame: &[u8], edits: Edits) {
        self.prompt += 1;
        if out == OUT_CPU {
            return self.packet_in(pd, in_port, frame, edits);
        }
        let port = &mut self.ports[out as usize];
        if port.is_gone || !port.fits(frame) {
            return self.unsendable(out, pd, frame.len());
        }
        let port = &mut self.ports[out as usize];
        if port.backlog.is_empty() && port.io.tx_push(frame, |d| edits.apply(d)) {
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, frame);
            }
            return self.count_out(pd, frame.len());
        }
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            if pd != NO_PD {
                self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
            }
            return;
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        edits.apply(self.pool.frame_mut(h));
        self.ports[out as usize].backlog.push_back(h);
    }

    /// A frame the egress port cannot send: its interface is gone (a tx_error drop, the port's
    /// state logged when it went), or the frame is too long (`oversized`).
    #[cold]
    fn unsendable(&mut self, out: u16, pd: u32, len: usize) {
        if !self.ports[out as usize].is_gone {
            return self.oversized(out, pd, len);
        }
        if pd != NO_PD {
            self.drop_pkt(pd, DropReason::TxError, len);
        }
    }

    /// A frame longer than the egress port takes: counted as a tx_error drop (Linux would drop it
    /// without telling us), logged once per port.
    #[cold]
    fn oversized(&mut self, out: u16, pd: u32, len: usize) {
        if pd != NO_PD {
            self.drop_pkt(pd, DropReason::TxError, len);
        }
        let port = &mut self.ports[out as usize];
        if !port.warned_mtu {
            port.warned_mtu = true;
            tracing::warn!(iface = %port.io.ifname(), len, max = port.max_frame,
                "frames longer than the egress MTU allows: dropped as tx_error (raise the MTU of this port or lower the sender's)");
        }
    }

    /// Transmits a held packet (its buffer is freed once the frame is in the TX ring).
    fn send_held(&mut self, h: Handle) {
        let m = self.pool.meta(h);
        if m.out == OUT_CPU {
            self.packet_in(m.pd, m.in_port, self.pool.frame(h), Edits::default());
            return self.pool.free(h);
        }
        let port = &mut self.ports[m.out as usize];
        if port.is_gone || !port.fits(self.pool.frame(h)) {
            // Its interface went while the frame was held, or the MTU shrank.
            self.unsendable(m.out, m.pd, self.pool.frame(h).len());
            return self.pool.free(h);
        }
        let port = &mut self.ports[m.out as usize];
        if port.backlog.is_empty() && port.io.tx_push(self.pool.frame(h), |_| {}) {
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, self.pool.frame(h));
            }
            self.count_out(m.pd, m.len as usize);
            self.pool.free(h);
        } else {
            port.backlog.push_back(h);
        }
    }

    fn drain_backlog(&mut self, pi: usize) {
        while let Some(&h) = self.ports[pi].backlog.front() {
            let port = &mut self.ports[pi];
            if !port.io.tx_push(self.pool.frame(h), |_| {}) {
                break;
            }
            port.backlog.pop_front();
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, self.pool.frame(h));
            }
            let m = self.pool.meta(h);
            self.count_out(m.pd, m.len as usize);
            self.pool.free(h);
        }
    }

    fn release_due(&mut self, now: u64) -> usize {
        let mut due = std::mem::take(&mut self.due);
        let polled = self.line.poll(now, &mut due);
        let n = due.len();
        self.prompt += polled.precise;
        if let Some(first) = polled.first_precise_ns {
            self.first_due_ns = first;
            self.lateness_at_release.observe(now.saturating_sub(first));
        }
        if let Some(first) = polled.first_coalesced_ns {
            self.lateness_coalesced.observe(now.saturating_sub(first));
        }
        for &h in &due {
            let pd = self.pool.meta(h).pd;
            if pd != NO_PD {
                self.stages.dequeue(pd, now, &self.link.registers);
            }
            self.send_held(h);
        }
        due.clear();
        self.due = due;
        n
    }

    fn packet_outs(&mut self) -> usize {
        let mut n = 0;
        while n < PACKET_OUT_BATCH {
            let Ok((port_no, frame)) = self.link.packet_out_rx.try_recv() else { break };
            n += 1;
            match self.port_index.get(port_no as usize).copied() {
                Some(i) if i != NO_PORT => self.send_now(i, NO_PD, 0, &frame, Edits::default()),
                _ => tracing::warn!(port_no, "PacketOut to a port this switch does not have: dropped"),
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ports_reopened_at_once_say_whose_packet_buffers_were_added() {
        // Two ports' MTUs raised in the same second: each is reopened with buffers of the new
        // size; the first installed adds them, the second's are handed back (and freed). Before,
        // both log lines said "and packet buffers".
        let mut pool = crate::pool::Pool::new(64, 2048);
        let first = pool.add_class(crate::pool::Class::new(8, 16384));
        assert!(first.is_none());
        assert_eq!(buffers_outcome(8, 16384, true, pool.buffer_size()), " and 8 packet buffers of 16384 bytes added");
        let second = pool.add_class(crate::pool::Class::new(8, 16384));
        assert!(second.is_some());
        let said = buffers_outcome(8, 16384, false, pool.buffer_size());
        assert!(said.contains("were not needed: another port's, of 16384 bytes, hold its frames; freed"), "{said}");
        // Refused for want of room (larger than any, but no slot): said so, not "not needed".
        let said = buffers_outcome(8, 65536, false, pool.buffer_size());
        assert!(said.contains("were not added: the pool has no room for another size"), "{said}");
    }

    #[test]
    fn sizing_follows_the_largest_mtu_and_keeps_mtu_1500_as_it_was() {
        let at_1500 = Sizing::for_mtu(1500, None, None, None, None).unwrap();
        assert_eq!(at_1500.rings, RingConfig::default());
        assert_eq!((at_1500.buffers, at_1500.buffer_size), (DEFAULT_BUFFERS, DEFAULT_BUFFER_SIZE));
        assert_eq!(Sizing::for_mtu(1968, None, None, None, None).unwrap(), at_1500);
        // The flags given are kept, and --buffer-size's old floor with them.
        let given = Sizing::for_mtu(1500, Some(8), Some(4), Some(100), Some(4096)).unwrap();
        assert_eq!((given.rings.rx_frames, given.rings.tx_frames, given.buffers, given.buffer_size), (8, 4, 100, 4096));
        assert_eq!(
            Sizing::for_mtu(1500, None, None, None, Some(2000)).unwrap_err(),
            "--buffer-size must be at least 2016 bytes"
        );

        // MTU 9000: 16 KiB ring frames, buffers that hold a tagged 9018-byte frame, and about the
        // memory of MTU 1500 (128 MiB of buffers, not 65536 x 16 KiB = 1 GiB).
        let jumbo = Sizing::for_mtu(9000, None, None, None, None).unwrap();
        assert_eq!(jumbo.rings, RingConfig { rx_frames: 1024, tx_frames: 512, frame_size: 16384 });
        assert_eq!(jumbo.buffer_size, 9024);
        assert_eq!(jumbo.buffers, 14873);
        assert!(jumbo.buffers * jumbo.buffer_size <= DEFAULT_BUFFERS * DEFAULT_BUFFER_SIZE);
        let err = Sizing::for_mtu(9000, None, None, None, Some(2048)).unwrap_err();
        assert!(err.contains("--buffer-size 2048 is too small") && err.contains("--buffer-size 9018 or more"), "{err}");
        assert_eq!(Sizing::for_mtu(9000, None, None, None, Some(9018)).unwrap().buffer_size, 9018);
        // Above the largest ring: the largest (the port is named at open).
        assert_eq!(Sizing::for_mtu(200_000, None, None, None, None).unwrap().rings.frame_size, MAX_RING_FRAME_SIZE);
    }

    #[test]
    fn an_mtu_raised_live_is_sized_by_the_arithmetic_of_the_start() {
        // `resize_for_mtu` and `reopen_job` (through `sizing_for`) and `for_mtu` share `scaled`:
        // the rings a port raised to MTU 9000 is opened with are the ones a start at MTU 9000 gives,
        // and its buffers as many bytes as the start's (128 MiB).
        let start = Sizing::for_mtu(1500, None, None, None, None).unwrap();
        let raised = start.scaled(16384, 16384);
        assert_eq!(raised.rings, Sizing::for_mtu(9000, None, None, None, None).unwrap().rings);
        assert_eq!((raised.buffers, raised.buffer_size), (8192, 16384));
        // Counts given below the floors are kept (--rx-frames 64 --tx-frames 64 --buffers 100).
        let small = Sizing::for_mtu(1500, Some(64), Some(64), Some(100), None).unwrap().scaled(16384, 16384);
        assert_eq!((small.rings.rx_frames, small.rings.tx_frames, small.buffers), (64, 64, 100));
    }

    #[test]
    fn check_memory_names_the_flag_that_asks_for_too_much() {
        let gib = 1u64 << 30;
        let needs = [("--buffers x --buffer-size", 128u128 << 20), ("--ue-ids", 64u128 << 30)];
        let e = check_memory(&needs, 23 * gib).unwrap_err();
        assert!(e.starts_with("--ue-ids would need 64.0 GiB"), "{e}");
        assert!(e.contains("(23.0 GiB of RAM and swap)"), "{e}");
        assert!(check_memory(&needs, 65 * gib).is_ok());
        let always = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1");
        assert!(always || system_memory().is_some_and(|m| m > 0));
    }

    #[test]
    fn arrival_is_never_before_the_frame() {
        // Stamped before the batch's read: the stamp.
        assert_eq!(arrival_time(1_000, 2_000, || 3_000), 1_000);
        // Stamped after the batch's read (arrived during the batch): still the stamp, checked
        // against a fresh read; the batch's read (2_000) would be before the frame existed.
        assert_eq!(arrival_time(2_500, 2_000, || 3_000), 2_500);
        // No stamp, one from the future, or one too old: the fresh read, not the batch's.
        assert_eq!(arrival_time(0, 2_000, || 3_000), 3_000);
        assert_eq!(arrival_time(4_000, 2_000, || 3_000), 3_000);
        assert_eq!(arrival_time(1, 2 * MAX_SLEEP_NS, || 2 * MAX_SLEEP_NS + 1), 2 * MAX_SLEEP_NS + 1);
    }

    /// A clock whose wall time is monotonic time + `offset`, every read advancing time by
    /// `steps[i]` first (a preemption is a large step).
    fn scripted(offset: u64, steps: Vec<u64>) -> impl FnMut(libc::clockid_t) -> u64 {
        let (mut t, mut i) = (1_000_000u64, 0);
        move |clock| {
            t += steps[i];
            i += 1;
            if clock == libc::CLOCK_REALTIME {
                t + offset
            } else {
                t
            }
        }
    }

    #[test]
    fn wall_offset_errs_only_toward_later_arrivals() {
        let truth = 5_000_000_000u64;
        // Preempted for 400 us between the wall read and the monotonic read after it, in the
        // first bracket: the tightest bracket (the second, 20 ns wide) is the one taken.
        let steps = vec![10, 10, 400_000, 10, 10, 10, 10, 10, 30];
        assert_eq!(wall_offset_from(scripted(truth, steps)), truth as i64 - 10);
        // Every bracket preempted: still never above the truth (arrivals late, never early).
        let steps = vec![10, 10, 300_000, 10, 10, 200_000, 10, 10, 250_000];
        let offset = wall_offset_from(scripted(truth, steps));
        assert!(offset <= truth as i64 && offset == truth as i64 - 200_000, "{offset}");
        // On this machine's clocks: within a millisecond of a plain reading.
        let plain = clock_ns(libc::CLOCK_REALTIME) as i64 - monotonic_ns() as i64;
        assert!((wall_offset_ns() - plain).abs() < 1_000_000);
    }
}
