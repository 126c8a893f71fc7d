//! p4netem-switch: the p4netem pipeline on Linux interfaces, controlled over P4Runtime.
//!
//! The data plane runs on a dedicated OS thread (no tokio); the P4Runtime server runs on a small
//! tokio runtime on the main thread. SIGINT/SIGTERM stop both cleanly, also during start-up
//! (`stop_signals`).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;

use p4netem_switch::affinity;
use p4netem_switch::contract::{self, ACTION_SET_EGRESS_PORT, TABLE_PORT_MAP};
use p4netem_switch::dataplane::{DataPlane, DataPlaneConfig, PortSpec, Sizing};
use p4netem_switch::health;
use p4netem_switch::io::afpacket::{tx_max_frame, FRAME_SIZE, RX_MAX_FRAME};
use p4netem_switch::io::ethtool;
use p4netem_switch::io::flow_cache::FastPathMode;
use p4netem_switch::io::IoMode;
use p4netem_switch::metrics;
use p4netem_switch::p4rt;
use p4netem_switch::release::Slack;
use p4netem_switch::state::{ActionCall, Capacities, ControlConfig, FieldMatch, SwitchControl, TableEntry, UpdateKind};

/// The p4netem software switch: the p4netem P4 pipeline (delay, jitter, rate, loss, duplication,
/// corruption, reordering) on Linux interfaces, controlled over P4Runtime.
///
/// Ports are AF_PACKET sockets with mapped rings; every interface must have its offloads off
/// (ethtool -K IFACE tx off rx off gso off tso off gro off), which is checked at start.
#[derive(Parser, Debug)]
#[command(name = "p4netem-switch", version)]
struct Args {
    /// A data-plane port: port number N (0..511) on interface IFACE. Repeat for each port,
    /// e.g. `-i 1@veth1 -i 2@veth2` (as simple_switch_grpc). Without any, the switch only serves
    /// P4Runtime (useful to read its P4Info).
    #[arg(short = 'i', long = "interface", value_name = "N@IFACE", value_parser = parse_port)]
    interfaces: Vec<PortSpec>,

    /// P4Runtime gRPC listen address. A non-loopback address needs TLS (--grpc-cert/--grpc-key)
    /// or --grpc-insecure.
    #[arg(long, default_value = "127.0.0.1:9559")]
    grpc_addr: SocketAddr,

    /// Serve P4Runtime over TLS with this certificate chain (PEM); needs --grpc-key.
    #[arg(long, value_name = "PEM", requires = "grpc_key")]
    grpc_cert: Option<PathBuf>,

    /// The private key of --grpc-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "grpc_cert")]
    grpc_key: Option<PathBuf>,

    /// Mutual TLS: only clients with a certificate signed by this CA (PEM) may connect.
    #[arg(long, value_name = "PEM", requires = "grpc_cert")]
    grpc_client_ca: Option<PathBuf>,

    /// Serve plaintext P4Runtime on a non-loopback --grpc-addr anyway (anyone who reaches the
    /// port can take over the switch).
    #[arg(long)]
    grpc_insecure: bool,

    /// Serve the switch's own health (data-plane loop busy time, kernel ring drops, buffers,
    /// P4Runtime request latency) as Prometheus/OpenMetrics text on http://ADDR/metrics. Off by
    /// default; read-only, but keep it on loopback or a management network like the gRPC port.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<SocketAddr>,

    /// A data-plane thread (the loop; a port's TX thread) whose loop has not turned for this long,
    /// in milliseconds (2000..=3600000), is stalled: the gRPC health service on --grpc-addr
    /// (grpc.health.v1, services "" and p4.v1.P4Runtime) answers NOT_SERVING until it runs again,
    /// and `p4netem switch` stops vouching for the switch to systemd's watchdog. An idle loop turns
    /// every 100 ms, a TX thread every second. Its age is p4netem_switch_heartbeat_age_seconds.
    #[arg(long, default_value_t = health::DEFAULT_HEARTBEAT_TIMEOUT_MS, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(health::MIN_HEARTBEAT_TIMEOUT_MS..=health::MAX_HEARTBEAT_TIMEOUT_MS))]
    heartbeat_timeout_ms: u64,

    /// Largest gRPC message the P4Runtime server accepts or sends, in bytes (65536..=1073741824).
    #[arg(long, default_value_t = p4rt::listen::DEFAULT_MAX_MESSAGE_BYTES, value_name = "BYTES")]
    grpc_max_message_bytes: usize,

    /// With TLS: how long a client may take from its TCP connect to the end of its TLS handshake,
    /// in milliseconds (100..=300000); a slower one is closed and logged ("no handshake within
    /// 10 s"). As nginx's ssl_handshake_timeout.
    #[arg(long, default_value_t = p4rt::handshake::DEFAULT_HANDSHAKE_TIMEOUT_MS, value_name = "MS")]
    grpc_handshake_timeout_ms: u64,

    /// With TLS: TLS handshakes in progress at once (1..=65536). A connection beyond closes the
    /// oldest handshake in progress, so a flood of stalled connections cannot hold a controller out
    /// (each counted in p4netem_switch_p4runtime_tls_handshakes_evicted_total).
    #[arg(long, default_value_t = p4rt::handshake::DEFAULT_MAX_PENDING_HANDSHAKES, value_name = "N")]
    grpc_max_pending_handshakes: usize,

    /// Test: the window of the failed TLS handshakes' log, in milliseconds (100..=3600000): at most
    /// 10 lines per window, then one line counting the rest when it ends.
    #[arg(long, hide = true, default_value_t = p4rt::handshake::DEFAULT_LOG_WINDOW_MS, value_name = "MS")]
    grpc_handshake_log_window_ms: u64,

    /// P4Runtime device id.
    #[arg(long, default_value_t = 1)]
    device_id: u64,

    /// Port number that stands for the controller: set_egress_port to it (or send_to_cpu) sends
    /// the frame as a PacketIn. Must not be one of the -i ports.
    #[arg(long, value_name = "N")]
    cpu_port: Option<u16>,

    /// Write pcap files of every port's received and transmitted frames into DIR
    /// (`<N>-<iface>_in.pcap`, `<N>-<iface>_out.pcap`). Costs throughput (buffered writes on the
    /// data-plane thread).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,

    /// Capacity of the classifier table (entries).
    #[arg(long, default_value_t = contract::DEFAULT_CLASSIFIER_ENTRIES)]
    classifier_entries: u32,

    /// Number of profile ids (profile table and per-profile registers/counters hold 2x this).
    #[arg(long, default_value_t = contract::DEFAULT_PROFILES)]
    profiles: u32,

    /// Number of UE ids (radio state capacity).
    #[arg(long, default_value_t = contract::DEFAULT_UE_IDS)]
    ue_ids: u32,

    /// Packet buffers for held packets (delay line, tx backlog). When all are in use, packets
    /// that need one are dropped with reason buffer_exhausted. Default: 65536; with a port MTU
    /// above 1968 (jumbo frames), as many as fit the same 128 MiB (14873 at MTU 9000).
    #[arg(long, value_name = "N")]
    buffers: Option<usize>,

    /// Size of one packet buffer in bytes. Default: 2048; with a port MTU above 1968, the MTU +
    /// 18 (a tagged frame) rounded up to 64 bytes (9024 at MTU 9000). Smaller than that is refused.
    #[arg(long, value_name = "BYTES")]
    buffer_size: Option<usize>,

    /// Frames in each port's RX ring. Default: 4096 frames of 2048 bytes; with a port MTU above
    /// 1968 the frames are larger (16384 bytes at MTU 9000) and the default 1024.
    #[arg(long, value_name = "N")]
    rx_frames: Option<usize>,

    /// Frames in each port's TX ring. Default: 2048; 512 with a port MTU above 1968.
    #[arg(long, value_name = "N")]
    tx_frames: Option<usize>,

    /// Keep polling the rings this many microseconds after the last packet before sleeping in
    /// ppoll (trades CPU for latency and throughput under load; 0 = sleep at once).
    #[arg(long, default_value_t = 30, value_name = "US")]
    busy_poll_us: u64,

    /// How long before a timed release the data-plane loop stops sleeping and spins: `auto` learns
    /// it from how late its own wake-ups come (wait.rs, docs/dataplane.md "The loop's wait"), a
    /// number fixes it (0..=1000; 0 = never spin, trust the timer).
    #[arg(long, default_value = "auto", value_name = "US|auto", value_parser = parse_wake_margin)]
    wake_margin_us: MicrosOr,

    /// How late (0..=1000 us) a packet that waited behind another in a rate queue may leave: the
    /// loop does not spin for such releases, and while a port's frames all go to backlogged rate
    /// queues it wakes once per batch (not per frame), takes every frame that came and sends every
    /// packet due in one transmit. Departures on the shaper's virtual clock are unchanged, so the
    /// rate over any window longer than this is exact; such a port's frames wait in its RX ring at
    /// most this long (they keep their kernel arrival time). Unqueued packets, delay-only profiles,
    /// slots, traces and cells stay precise. auto (the default): 500 us, for the packets of links
    /// that serve at least 32 of them within it (1500-byte frames from 768 Mbit/s up); slower
    /// links stay precise. A number applies to every queued packet; 0 = every release precise (the
    /// loop spins for each, a core's worth at a gigabit). docs/dataplane.md "Release slack".
    #[arg(long, default_value = "auto", value_name = "US|auto", value_parser = parse_release_slack)]
    release_slack_us: MicrosOr,

    /// Run the data-plane thread with this SCHED_FIFO real-time priority (1..99; 0 = normal
    /// scheduling). Keeps release times accurate when the machine is busy.
    #[arg(long, default_value_t = 10, value_name = "PRIO")]
    rt_priority: i32,

    /// SCHED_FIFO priority of the P4Runtime server's threads (0 = normal scheduling). Below the
    /// data plane's: it keeps a controller's Write from queueing behind other load, which is what
    /// makes timed profile switches (timelines) accurate to a millisecond on a busy machine.
    #[arg(long, default_value_t = 5, value_name = "PRIO")]
    grpc_rt_priority: i32,

    /// CPU wake-up latency to hold while the switch runs, in microseconds (0..=10000), or off. A
    /// Linux PM QoS request (/dev/cpu_dma_latency): idle CPUs stay in idle states that exit within
    /// it. 0 (the default) keeps them polling, so a release's timer, a P4Runtime request and its
    /// reply wake their threads at once; it costs idle power, as with cyclictest or tuned's
    /// latency profiles. On a VM a halted vCPU made MODIFY round trips p99 1.2-3.4 ms against
    /// 0.23-0.30 ms and slot releases ms late (docs/dataplane.md "CPU wake-up latency"). The request
    /// ends with the switch; the value in force is logged and served as
    /// p4netem_switch_cpu_latency_request_seconds.
    #[arg(long, default_value = "0", env = "P4NETEM_SWITCH_CPU_LATENCY_US", value_name = "US|off",
          value_parser = parse_cpu_latency)]
    cpu_latency_us: MicrosOr,

    /// Pin the data-plane thread to this CPU and keep the switch's other threads (main, P4Runtime,
    /// TX threads) on the other CPUs the process may use. For a machine with a core to give it: on a
    /// kernel without full preemption, another task's system call on the data-plane thread's CPU
    /// holds off its releases until the call yields (docs/dataplane.md "A CPU of its own"). Unset
    /// (the default): the scheduler places every thread.
    #[arg(long, value_name = "CPU")]
    dataplane_cpu: Option<usize>,

    /// Do each port's transmit syscall on a thread of its own (on veths it runs the receiving
    /// host's network stack). Off by default: on a 2-vCPU machine unshaped TCP measured slightly
    /// slower than with the syscalls on the data-plane thread, precise releases wait for the TX
    /// thread's wake-up, and the kernel fast path stays off. At a gigabit the release slack alone
    /// (the default, auto) brings the data-plane thread from 95 % to about 30 % busy; TX threads
    /// move the transmit's cost further off it (docs/dataplane.md "Gigabit shaping").
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    tx_threads: bool,

    /// Packet I/O path of the ports: af_packet (TPACKET_V2 rings, the default: on veths it measured
    /// as fast as AF_XDP and more accurate at 1 Gbit/s, docs/dataplane.md), af_xdp (copy mode), or
    /// auto (AF_XDP where the kernel and interface allow it, else AF_PACKET, logged). A forced path
    /// that cannot open fails the start. Each port's path is logged and served as
    /// p4netem_switch_port_io.
    #[arg(long, default_value = "af_packet", env = "P4NETEM_SWITCH_IO", value_name = "auto|af_xdp|af_packet")]
    io: IoMode,

    /// Kernel fast path for unimpaired flows: an XDP flow cache on every port forwards, in the
    /// kernel, the packets of flows the pipeline already decided to forward with no impairment,
    /// no radio and no learning (docs/dataplane.md). auto: on where XDP works, else off; on: fail
    /// the start when it cannot be set up; off: every packet through the data-plane thread.
    /// --pcap, --tx-threads and AF_XDP ports keep it off. Logged at start and served as
    /// p4netem_switch_fast_path.
    #[arg(long, default_value = "auto", env = "P4NETEM_SWITCH_FAST_PATH", value_name = "off|on|auto")]
    fast_path: FastPathMode,

    /// PRNG seed (also settable at run time through the rng_seed register). Default: from the clock.
    #[arg(long)]
    seed: Option<u64>,

    /// Log level (error, warn, info, debug, trace) or a tracing filter directive.
    #[arg(long, default_value = "info")]
    log_level: String,

    /// Debug/bench: install port_map entries at start, e.g. `1:2,2:1` (ingress:egress).
    #[arg(long, hide = true, value_name = "IN:OUT,...")]
    static_port_map: Option<String>,

    /// Debug: start even if interfaces have offloads on.
    #[arg(long, hide = true)]
    no_offload_check: bool,
}

fn parse_port(s: &str) -> Result<PortSpec, String> {
    let (n, iface) = s.split_once('@').ok_or_else(|| format!("expected N@IFACE, got {s:?}"))?;
    let number: u16 = n.parse().map_err(|_| format!("bad port number {n:?} in {s:?}"))?;
    if number > 511 {
        return Err(format!("port number {number} does not fit 9 bits"));
    }
    if iface.is_empty() || iface.len() >= 16 {
        return Err(format!("bad interface name {iface:?}"));
    }
    Ok(PortSpec { number, ifname: iface.to_string() })
}

/// The largest single allocations the capacity flags ask for, in bytes, by the flags that set
/// them (each is one calloc/vec: the kernel refuses one larger than its RAM and swap).
fn memory_needs(args: &Args, sizing: &Sizing) -> Vec<(&'static str, u128)> {
    vec![
        ("--buffers x --buffer-size", sizing.buffers as u128 * sizing.buffer_size as u128),
        // The widest per-UE register, of u64 cells.
        ("--ue-ids", args.ue_ids as u128 * Capacities::CELLS_PER_UE as u128 * 8),
    ]
}

fn static_port_map(control: &SwitchControl, spec: &str) -> anyhow::Result<()> {
    let mut updates = Vec::new();
    for pair in spec.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = pair.split_once(':').with_context(|| format!("bad --static-port-map item {pair:?}"))?;
        let (a, b): (u128, u128) = (a.parse()?, b.parse()?);
        updates.push((
            UpdateKind::Insert,
            TableEntry {
                table_id: TABLE_PORT_MAP,
                matches: vec![Some(FieldMatch::Exact(a))],
                priority: 0,
                action: ActionCall { action_id: ACTION_SET_EGRESS_PORT, params: vec![b] },
                controller_metadata: 0,
                metadata: Vec::new(),
            },
        ));
    }
    for r in control.write_tables(updates) {
        r.map_err(|e| anyhow::anyhow!("--static-port-map: {e}"))?;
    }
    Ok(())
}

/// Puts the calling thread in SCHED_FIFO at `prio` (nothing for 0); a refusal is logged, not fatal.
fn set_fifo(prio: i32, what: &str) {
    if prio <= 0 {
        return;
    }
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: sets the calling thread's policy; p is a valid sched_param.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) };
    if r != 0 {
        tracing::warn!(
            "{what} thread: SCHED_FIFO priority {prio} not granted ({})",
            std::io::Error::from_raw_os_error(r)
        );
    } else {
        tracing::debug!(priority = prio, "{what} thread runs SCHED_FIFO");
    }
}

/// SIGINT and SIGTERM handlers, installed when this is called (inside the runtime), not when the
/// returned future is first polled: the server logs "listening" before it polls its shutdown
/// future, and a SIGTERM sent on seeing that line (as a supervisor or a test does) used to find the
/// default action still in place and kill the switch without its shutdown (no final counters, no
/// XDP detach log).
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        }
    })
}

/// SIGINT and SIGTERM held off during start-up.
///
/// Their handlers are the tokio runtime's (`shutdown_signal`), which exists only once the data
/// plane is open: it comes after the gRPC bind (an address in use is reported with nothing
/// started) and after the ports open (the runtime's threads take the P4Runtime SCHED_FIFO
/// priority, which the data-plane thread must not inherit). A supervisor sends SIGTERM as soon as
/// the switch listens (or while it starts: systemd's `stop`), and in that window the default
/// action killed it by the signal (exit -15): no final counters, unflushed pcap files, port lock
/// files left in /run/p4netem/ports. So main blocks both signals first thing, before any thread
/// exists (every thread it starts inherits the mask); one that arrives during start-up stays
/// pending, `pending` tells, and `release` (once the handlers are in) delivers it to them.
mod stop_signals {
    const SIGNALS: [(libc::c_int, &str); 2] = [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")];

    fn set() -> libc::sigset_t {
        // SAFETY: sigemptyset initialises the set; sigaddset takes valid signal numbers.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            for (sig, _) in SIGNALS {
                libc::sigaddset(&mut set, sig);
            }
            set
        }
    }

    fn mask(how: libc::c_int) {
        let set = set();
        // SAFETY: changes the calling thread's mask; set is a valid sigset_t. It cannot fail with
        // a valid `how`.
        unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    }

    /// Blocks them in the calling thread and so in every thread it starts from now on.
    pub fn hold() {
        mask(libc::SIG_BLOCK);
    }

    /// The name of a stop signal that arrived while held, if any.
    pub fn pending() -> Option<&'static str> {
        // SAFETY: sigpending fills a valid sigset_t; sigismember reads it.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            if libc::sigpending(&mut set) != 0 {
                return None;
            }
            SIGNALS.iter().find(|(sig, _)| libc::sigismember(&set, *sig) == 1).map(|(_, name)| *name)
        }
    }

    /// Unblocks them in the calling (main) thread: a pending one is delivered now, to the handlers
    /// installed by then. The other threads keep them blocked; the process's signals come here.
    /// Unblocked, not the inherited mask restored: a switch started with them blocked could not
    /// be stopped otherwise.
    pub fn release() {
        mask(libc::SIG_UNBLOCK);
    }
}

fn main() {
    // First, before any thread exists: see stop_signals.
    stop_signals::hold();
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
    if let Err(e) = run(args) {
        eprintln!("p4netem-switch: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let caps = Capacities { classifier_entries: args.classifier_entries, profiles: args.profiles, ue_ids: args.ue_ids };
    caps.check().map_err(anyhow::Error::msg)?;
    if args.buffers.is_some_and(|b| b == 0 || b >= u32::MAX as usize) {
        bail!("--buffers must be in 1..{}", u32::MAX);
    }
    // Rings and buffers are sized for the ports' largest MTU (jumbo frames), read now, before any
    // port opens. An interface that cannot be read counts as 1500: opening it says what is wrong.
    let mtus: Vec<(usize, &str)> = args
        .interfaces
        .iter()
        .map(|p| (ethtool::mtu(&p.ifname).map_or(1500, |m| m as usize), p.ifname.as_str()))
        .collect();
    let max_mtu = mtus.iter().map(|m| m.0).max().unwrap_or(1500);
    let sizing = Sizing::for_mtu(max_mtu, args.rx_frames, args.tx_frames, args.buffers, args.buffer_size)
        .map_err(anyhow::Error::msg)?;
    if sizing.rings.frame_size > FRAME_SIZE {
        let ifaces: Vec<String> =
            mtus.iter().filter(|m| m.0 + 14 > RX_MAX_FRAME).map(|m| format!("{} ({})", m.1, m.0)).collect();
        tracing::info!(
            "jumbo frames: ports with MTU above 1968 ({}): ring frames of {} bytes ({} RX, {} TX per port), {} packet \
             buffers of {} bytes (--rx-frames, --tx-frames, --buffers, --buffer-size to change)",
            ifaces.join(", "),
            sizing.rings.frame_size,
            sizing.rings.rx_frames,
            sizing.rings.tx_frames,
            sizing.buffers,
            sizing.buffer_size
        );
    }
    // A flag asking for more memory than the machine has is named here, not by an allocation
    // failure's abort ("memory allocation of N bytes failed").
    if let Some(memory) = p4netem_switch::dataplane::system_memory() {
        p4netem_switch::dataplane::check_memory(&memory_needs(&args, &sizing), memory).map_err(anyhow::Error::msg)?;
    }
    // The transport policy is checked before the ports open: a refused address fails fast.
    let transport = p4rt::listen::Transport {
        tls: match (&args.grpc_cert, &args.grpc_key) {
            (Some(cert), Some(key)) => Some(p4rt::listen::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.grpc_client_ca.clone(),
            }),
            _ => None,
        },
        allow_insecure: args.grpc_insecure,
        max_message_bytes: args.grpc_max_message_bytes,
        handshakes: p4rt::handshake::Limits {
            timeout: std::time::Duration::from_millis(args.grpc_handshake_timeout_ms),
            max_pending: args.grpc_max_pending_handshakes,
            log_window: std::time::Duration::from_millis(args.grpc_handshake_log_window_ms),
        },
    };
    transport.check(&args.grpc_addr)?;
    transport.server_tls()?;
    // Checked before anything opens; applied to this thread now, so that every thread started
    // from here on (TX threads, the P4Runtime runtime) inherits the others' CPUs.
    if let Some(cpu) = args.dataplane_cpu {
        let allowed = affinity::allowed().context("reading the process's CPU affinity")?;
        let others = affinity::others(cpu, &allowed).map_err(anyhow::Error::msg)?;
        if others.is_empty() {
            tracing::info!("data-plane thread on CPU {cpu}, the only one allowed: the switch's other threads share it");
        } else {
            affinity::pin_current(&others).context("moving the switch's other threads off --dataplane-cpu")?;
            tracing::info!(
                "data-plane thread on CPU {cpu}; the switch's other threads on CPU(s) {}",
                affinity::cpu_list(&others)
            );
        }
    }
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ (std::process::id() as u64) << 32
    });
    let (control, link) = SwitchControl::new(ControlConfig {
        caps,
        ports: args.interfaces.iter().map(|p| p.number as u32).collect(),
        cpu_port: args.cpu_port.map(u32::from),
        seed,
        // PacketOut frames: what the TX ring takes and a packet buffer holds.
        max_frame: tx_max_frame(sizing.rings.frame_size).min(sizing.buffer_size),
        ..ControlConfig::default()
    })
    .context("creating the switch state")?;
    if let Some(spec) = &args.static_port_map {
        static_port_map(&control, spec)?;
    }
    // Before the ports open: an address in use is reported as such, with nothing started.
    let listener = p4rt::bind(args.grpc_addr)?;
    let metrics_listener = args.metrics_addr.map(metrics::bind).transpose()?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let waker = link.waker.clone();
    let cfg = DataPlaneConfig {
        ports: args.interfaces.clone(),
        cpu_port: args.cpu_port,
        buffers: sizing.buffers,
        buffer_size: sizing.buffer_size,
        pcap_dir: args.pcap.clone(),
        seed,
        rx_frames: sizing.rings.rx_frames,
        tx_frames: sizing.rings.tx_frames,
        ring_frame_size: sizing.rings.frame_size,
        check_offloads: !args.no_offload_check,
        busy_poll_ns: args.busy_poll_us * 1000,
        wake_margin_ns: args.wake_margin_us.0.map(|us| us * 1000),
        release_slack: args.release_slack_us.0.map_or(Slack::Auto, |us| Slack::Fixed(us * 1000)),
        rt_priority: args.rt_priority.clamp(0, 99),
        cpu: args.dataplane_cpu,
        tx_threads: args.tx_threads,
        io: args.io,
        fast_path: args.fast_path,
        grpc_addr: Some(args.grpc_addr),
    };
    let dp = DataPlane::open(&cfg, link, shutdown.clone())?;
    let health = dp.health();
    health.heartbeat_timeout_ns.store(args.heartbeat_timeout_ms * 1_000_000, Ordering::Relaxed);
    // Held until main returns (the kernel also drops it if the process dies).
    let _cpu_latency = args.cpu_latency_us.0.and_then(|us| match p4netem_switch::cpu_latency::hold(us) {
        Ok(req) => {
            tracing::info!(us, "holding CPU wake-up latency (PM QoS): idle CPUs wake within it while the switch runs");
            let _ = health.cpu_latency_us.set(us);
            Some(req)
        }
        Err(e) => {
            tracing::warn!(
                "CPU wake-up latency {us} us not held ({e}): timed wake-ups take the idle CPUs' exit latency"
            );
            None
        }
    });
    tracing::info!(seed, ports = args.interfaces.len(), buffers = sizing.buffers, "data plane ready");
    tracing::info!("release slack: {} (packets queued behind another in a rate queue may leave this late; 0: every release precise)",
                   cfg.release_slack);
    let dp_shutdown = shutdown.clone();
    let dp_thread = std::thread::Builder::new().name("p4netem-dp".into()).spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dp.run()));
        if r.is_err() || !dp_shutdown.load(Ordering::Relaxed) {
            // Forwarding has stopped: do not keep a control plane that controls nothing.
            tracing::error!("data-plane thread stopped unexpectedly");
            std::process::exit(2);
        }
    })?;

    let grpc_prio = args.grpc_rt_priority.clamp(0, 99);
    set_fifo(grpc_prio, "P4Runtime main");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("p4netem-grpc")
        .on_thread_start(move || set_fifo(grpc_prio, "P4Runtime worker"))
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let server_cfg = p4rt::ServerConfig {
        addr: args.grpc_addr,
        device_id: args.device_id,
        cpu_port: args.cpu_port.map(u32::from),
        transport,
        health: Some(health.clone()),
    };
    if let Some(listener) = metrics_listener {
        tracing::info!(addr = ?args.metrics_addr, "health metrics on /metrics");
        rt.spawn(async move {
            if let Err(e) = metrics::serve(listener, health).await {
                tracing::error!("{e:#}");
            }
        });
    }
    let stop = {
        let _in_runtime = rt.enter(); // the signal driver is the runtime's
        shutdown_signal()?
    };
    // A stop asked for during start-up is honoured now that start-up has ended: the same teardown
    // as a stop while serving (the data-plane thread ends its loop, logs its final counters, closes
    // the ports, the fast path and the port locks), without serving first.
    let served = match stop_signals::pending() {
        Some(sig) => {
            tracing::info!("{sig} during start-up: shutting down (stopped during start-up)");
            drop((listener, control, server_cfg, stop));
            Ok(())
        }
        None => {
            tracing::info!(addr = %args.grpc_addr, device_id = args.device_id, "P4Runtime server starting");
            stop_signals::release();
            rt.block_on(p4rt::serve_on(listener, control, server_cfg, stop))
        }
    };
    // Delivers the one pending, if any, to the runtime's handler (which keeps a later one from
    // killing the switch during the teardown).
    stop_signals::release();
    shutdown.store(true, Ordering::Relaxed);
    waker.wake();
    let _ = dp_thread.join();
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served.context("P4Runtime server")
}

/// A flag that takes microseconds up to a bound, or one word meaning "none" (`auto`, `off`). A
/// newtype, not `Option<u64>`: clap reads an `Option` field as "the flag may be absent".
#[derive(Debug, Clone, Copy)]
struct MicrosOr(Option<u64>);

fn micros_or(v: &str, word: &str, max: u64, flag: &str) -> Result<MicrosOr, String> {
    if v == word {
        return Ok(MicrosOr(None));
    }
    match v.parse::<u64>() {
        Ok(us) if us <= max => Ok(MicrosOr(Some(us))),
        _ => Err(format!("{flag} must be {word} or 0..={max} microseconds, got {v:?}")),
    }
}

fn parse_cpu_latency(v: &str) -> Result<MicrosOr, String> {
    micros_or(v, "off", 10_000, "--cpu-latency-us")
}

fn parse_release_slack(v: &str) -> Result<MicrosOr, String> {
    micros_or(v, "auto", 1000, "--release-slack-us")
}

fn parse_wake_margin(v: &str) -> Result<MicrosOr, String> {
    micros_or(v, "auto", 1000, "--wake-margin-us")
}
