//! Start: `DataPlane::open` checks the configuration, locks and opens every port (all at once,
//! io/fan_out.rs) and builds the loop's state; `open_port_io` opens one port, at start and again
//! when it comes back (port_lifecycle.rs); the kernel fast path is opened, or said to be off and
//! why. Apart from the loop: it runs once, before the loop's thread starts.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context as _};

use super::port::{sendable, Port};
use super::port_lifecycle::ReopenJob;
use super::sizing::warn_mtu_above_ring;
use super::{
    check_offloads, monotonic_ns, wall_offset_ns, DataPlane, DataPlaneConfig, ETH_HEADER, LEARN_WINDOW_NS, NO_PORT,
};
use crate::health::Health;
use crate::io::afpacket::{tx_max_frame, FRAME_SIZE};
use crate::io::flow_cache::{FastPathMode, FlowCache};
use crate::io::pcap::PcapWriter;
use crate::io::reopen::Reopener;
use crate::io::{ethtool, fan_out, port_lock, IoMode, PortIo, RingConfig};
use crate::learn::LearnFilter;
use crate::pool::{self, Pool};
use crate::release::DelayLine;
use crate::rng::Prng;
use crate::stage::Impairments;
use crate::state::DataPlaneLink;
use crate::wait::Lateness;

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
}

/// Opens port `number` on `ifname` as the switch opens a port, at start and again when its
/// interface came back (io/reopen.rs): the I/O path of `mode` (promiscuous mode, AF_XDP's
/// XDP program), the TX thread of `--tx-threads`, the largest frame the interface sends (MTU +
/// Ethernet header) and the largest the port receives whole (its path's ring, and `buffer_limit`,
/// a packet buffer less a tag). The offload check is the caller's (at start, one error for every
/// port).
pub(super) fn open_port_io(
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
pub(super) struct Opened {
    pub(super) io: PortIo,
    pub(super) max_frame: usize,
    pub(super) rx_limit: usize,
    pub(super) mtu_frame: usize,
    pub(super) class: Option<pool::Class>,
}

/// An XDP attach refused with EBUSY: a program is attached to a port already, most likely by
/// another p4netem-switch on the same interface, which would forward every frame too (the
/// receivers get each one twice): says so, naming the interfaces.
pub(super) fn busy_hint(e: std::io::Error, ports: &[Port]) -> std::io::Error {
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
