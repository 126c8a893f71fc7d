//! The kernel fast path: an XDP program on every port that forwards, inside the kernel, the
//! packets of flows the pipeline has already decided to forward unimpaired, as a hardware
//! switch's or OVS's flow cache does. Everything else (a miss, a stale entry, a frame of another
//! shape) goes on to the data-plane thread (XDP_PASS to its AF_PACKET socket), which runs the
//! whole pipeline and may install an entry.
//!
//! Per frame the program does:
//!
//! ```c
//! if (not untagged Ethernet + IPv4 with IHL 5, not a later fragment, TCP (20 B) or UDP (8 B))
//!     return XDP_PASS;
//! key = { ingress_ifindex, dst MAC, src MAC, IPv4 src, dst, L4 src/dst ports, proto, DSCP };
//! e = flows[key];                             // LRU hash, installed by the data-plane thread
//! if (!e || e->ctl_epoch != epoch[0].ctl || e->dp_epoch != epoch[0].dp) return XDP_PASS;
//! if (frame length > e->max_len) return XDP_PASS;   // would be truncated/oversized: slow path
//! counts[e->pd] += (len, 1);                // atomic adds, mmapped by the switch
//! return bpf_redirect(e->out_ifindex, 0);
//! ```
//!
//! The key holds every field the pipeline reads for such a frame: the ingress port, both MACs
//! (l2_fwd, l2_learn), and the whole classifier key (ether_type is 0x0800 by shape, the IPv6
//! fields are 0 for IPv4, DSCP, protocol, addresses, ports). The data plane installs an entry
//! only for a packet it sent at once through `send_now`, with no edits, no impairment, no radio,
//! no pcap, no learning digest and neither end the CPU port, so a hit is exactly what the
//! pipeline would have done with that frame under the same tables.
//!
//! Why invalidation is atomic: every entry carries the two epochs it was decided under. The
//! control epoch is bumped (a store into the mmapped epoch map) while the store mutex is held,
//! after the new snapshot is compiled and *before* it is published; the snapshot carries the new
//! value, and the data plane stamps an entry with the epoch of the snapshot it decided with. So
//! from the bump on, every entry of an older snapshot misses (the program compares the entry's
//! epoch with the map's on every frame) and the frame goes to the data plane, which decides with
//! the old snapshot only until it loads the new one; an entry decided with the old snapshot but
//! installed after the bump carries the old epoch and never matches. No packet is forwarded
//! under the old decision once the write has returned. The data-plane epoch is the data plane's
//! own (bumped when a port's MTU changes: entries carry a length bound from it).
//!
//! Counters conserve: the program counts a hit against its pd in an array the switch mmaps, and
//! the switch reports profile_in and profile_out as its own count plus this one (state/store.rs),
//! so profile_in = profile_out + drops still holds with fast-path packets in both.
//!
//! The maps are mmapped (BPF_F_MMAPABLE arrays): reading a counter or bumping an epoch is a plain
//! atomic on shared memory, no system call. A per-CPU array would avoid the shared cache line of
//! the atomic add but cannot be mmapped, so every counter read would be a system call per pd.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::bpf::*;
use crate::mapping::Mapping;

pub const KEY_SIZE: usize = 32;
const VALUE_SIZE: usize = 32;
/// Entries in the flow cache: the least recently used go when it is full.
pub const FLOW_ENTRIES: u32 = 65536;
/// Bytes per pd in the counts array: one cache line each. A TCP flow's two directions are
/// different pds, counted by the CPUs that run each direction's transmit; with a shared line (or
/// a shared total counter, as the first version had) a hit's atomic add can find the line last
/// written by the other CPU.
const COUNT_STRIDE: u32 = 64;
const COUNT_WORDS: usize = COUNT_STRIDE as usize / 8;
/// Offers remembered, so that the packets of a flow already in the RX ring when its entry was
/// installed do not install it again (direct-mapped by key hash).
const RECENT: usize = 4096;
/// An offer of the same flow and epochs within this time is not installed again.
const RECENT_NS: u64 = 1_000_000;
/// Installs queued in one loop turn (the rest wait for a later packet).
const PENDING: usize = 256;

// struct xdp_md offsets
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_INGRESS_IFINDEX: i16 = 12;

/// What `--fast-path` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FastPathMode {
    Off,
    On,
    /// On where XDP and BPF maps work, else off (logged).
    #[default]
    Auto,
}

impl std::str::FromStr for FastPathMode {
    type Err = String;
    fn from_str(s: &str) -> Result<FastPathMode, String> {
        match s {
            "off" => Ok(FastPathMode::Off),
            "on" => Ok(FastPathMode::On),
            "auto" => Ok(FastPathMode::Auto),
            _ => Err(format!("--fast-path must be off, on or auto, got {s:?}")),
        }
    }
}

/// A shared mapping of a BPF array's values.
pub struct MapMem {
    mem: Mapping,
    _fd: OwnedFd,
}

// SAFETY: the mapping is only accessed through atomics; it lives as long as this value.
unsafe impl Send for MapMem {}
// SAFETY: as above.
unsafe impl Sync for MapMem {}

impl MapMem {
    /// Creates an mmapable array of `entries` values of `value_size` bytes and maps it.
    fn array(entries: u32, value_size: u32, name: &str) -> io::Result<MapMem> {
        let fd = map_create(BPF_MAP_TYPE_ARRAY, 4, value_size, entries, BPF_F_MMAPABLE, name)?;
        let page = 4096usize;
        let len = (entries as usize * value_size as usize).div_ceil(page) * page;
        // The array's values (offset 0), shared with the kernel.
        let mem = Mapping::shared(fd.as_raw_fd(), len, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("mmap of BPF map {name}: {e}")))?;
        Ok(MapMem { mem, _fd: fd })
    }

    #[inline]
    fn u64(&self, i: usize) -> &AtomicU64 {
        assert!((i + 1) * 8 <= self.mem.len());
        // SAFETY: in bounds (checked), 8-aligned (page-aligned base), and only used atomically.
        unsafe { &*(self.mem.as_ptr().add(i * 8) as *const AtomicU64) }
    }

    fn fd(&self) -> i32 {
        self._fd.as_raw_fd()
    }
}

/// The fast path's per-pd (bytes, packets), one cache line per pd (`COUNT_STRIDE`).
pub struct FastCounts {
    mem: MapMem,
    pds: usize,
}

impl std::fmt::Debug for FastCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastCounts").field("pds", &self.pds).field("total", &self.total()).finish()
    }
}

impl FastCounts {
    /// (bytes, packets) the fast path forwarded for `pd`.
    #[inline]
    pub fn get(&self, pd: usize) -> (u64, u64) {
        if pd >= self.pds {
            return (0, 0);
        }
        let w = COUNT_WORDS * pd;
        (self.mem.u64(w).load(Ordering::Relaxed), self.mem.u64(w + 1).load(Ordering::Relaxed))
    }

    /// (bytes, packets) of every fast-path hit: the sum over pds (read for metrics and the stop
    /// log, not per packet).
    pub fn total(&self) -> (u64, u64) {
        (0..self.pds).map(|pd| self.get(pd)).fold((0, 0), |(b, p), (pb, pp)| (b + pb, p + pp))
    }

    pub fn len(&self) -> usize {
        self.pds
    }

    pub fn is_empty(&self) -> bool {
        self.pds == 0
    }
}

/// The control epoch, shared by the control side (which bumps it at every snapshot publish) and
/// the data plane (which attaches the epoch map when the fast path is up).
#[derive(Default)]
pub struct Epoch {
    state: Mutex<(u64, Option<Arc<MapMem>>)>,
}

impl Epoch {
    /// A new epoch, made visible to the XDP program before this returns; the snapshot about to be
    /// published carries it. Called with the table store's lock held, so bumps and publishes
    /// happen in the same order.
    pub fn bump(&self) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        if let Some(m) = &s.1 {
            m.u64(0).store(s.0, Ordering::SeqCst);
        }
        s.0
    }

    fn attach(&self, m: Arc<MapMem>) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        m.u64(0).store(s.0, Ordering::SeqCst);
        s.1 = Some(m);
    }
}

/// The cache key of `frame` received on `ifindex`, or None when the frame is not of the shape
/// the program handles (the same checks, byte for byte).
#[inline]
pub fn key_of(ifindex: u32, frame: &[u8]) -> Option<[u8; KEY_SIZE]> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x00] || frame[14] != 0x45 || frame[20] & 0x1f != 0 || frame[21] != 0
    {
        return None;
    }
    let proto = frame[23];
    match proto {
        17 => {}
        6 if frame.len() >= 54 => {}
        _ => return None,
    }
    let mut k = [0u8; KEY_SIZE];
    k[0..4].copy_from_slice(&ifindex.to_ne_bytes());
    k[4..16].copy_from_slice(&frame[0..12]);
    k[16..24].copy_from_slice(&frame[26..34]);
    k[24..28].copy_from_slice(&frame[34..38]);
    k[28] = proto;
    k[29] = frame[15] >> 2;
    Some(k)
}

/// The program, with the three maps' fds patched in.
fn program(flows: i32, epoch: i32, counts: i32) -> Vec<u64> {
    let mut a = Asm::default();
    a.op(MOV64_X, 6, 1, 0, 0) // r6 = ctx
        .op(LDX_W, 2, 6, MD_DATA, 0) // r2 = data
        .op(LDX_W, 3, 6, MD_DATA_END, 0) // r3 = data_end
        .op(MOV64_X, 9, 3, 0, 0)
        .op(SUB64_X, 9, 2, 0, 0) // r9 = frame length
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 42)
        .jmp(JGT_X, 4, 3, 0, "pass") // Ethernet + IPv4 + UDP
        .op(LDX_H, 5, 2, 12, 0)
        .jmp(JNE_K, 5, 0, 0x0008, "pass") // EtherType 0x0800 (read little-endian)
        .op(LDX_B, 5, 2, 14, 0)
        .jmp(JNE_K, 5, 0, 0x45, "pass") // IPv4, no options
        .op(LDX_H, 5, 2, 20, 0)
        .op(AND64_K, 5, 0, 0, 0xff1f)
        .jmp(JNE_K, 5, 0, 0, "pass") // a later fragment (no L4 header)
        .op(LDX_B, 7, 2, 23, 0) // r7 = protocol
        .jmp(JEQ_K, 7, 0, 17, "l4ok")
        .jmp(JNE_K, 7, 0, 6, "pass")
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 54)
        .jmp(JGT_X, 4, 3, 0, "pass") // the whole TCP header, as the parser wants
        .label("l4ok")
        .op(LDX_W, 5, 6, MD_INGRESS_IFINDEX, 0)
        .op(STX_W, FP, 5, -32, 0);
    // MACs, addresses, ports: the frame's own bytes, as key_of copies them.
    for (from, to) in [(0, -28), (4, -24), (8, -20), (26, -16), (30, -12), (34, -8)] {
        a.op(LDX_W, 5, 2, from, 0).op(STX_W, FP, 5, to, 0);
    }
    a.op(LDX_B, 5, 2, 15, 0)
        .op(RSH64_K, 5, 0, 0, 2)
        .op(LSH64_K, 5, 0, 0, 8)
        .op(OR64_X, 5, 7, 0, 0)
        .op(STX_W, FP, 5, -4, 0) // proto, DSCP, 0, 0
        .ld_map(1, flows)
        .op(MOV64_X, 2, FP, 0, 0)
        .op(ADD64_K, 2, 0, 0, -32)
        .op(CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM)
        .jmp(JEQ_K, 0, 0, 0, "pass")
        .op(MOV64_X, 8, 0, 0, 0) // r8 = entry
        .op(ST_W, FP, 0, -36, 0)
        .ld_map(1, epoch)
        .op(MOV64_X, 2, FP, 0, 0)
        .op(ADD64_K, 2, 0, 0, -36)
        .op(CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM)
        .jmp(JEQ_K, 0, 0, 0, "pass")
        .op(0x79, 4, 0, 0, 0) // r4 = epoch.ctl (LDX_DW)
        .op(0x79, 5, 8, 0, 0)
        .jmp(JNE_X, 4, 5, 0, "pass")
        .op(0x79, 4, 0, 8, 0) // r4 = epoch.dp
        .op(0x79, 5, 8, 8, 0)
        .jmp(JNE_X, 4, 5, 0, "pass")
        .op(LDX_W, 5, 8, 20, 0) // max_len
        .jmp(JGT_X, 9, 5, 0, "pass")
        .op(LDX_W, 5, 8, 16, 0) // pd
        .op(STX_W, FP, 5, -36, 0);
    count_at_fp36(&mut a, counts, "pass");
    a.op(LDX_W, 1, 8, 24, 0) // out_ifindex
        .op(MOV64_K, 2, 0, 0, 0)
        .op(CALL, 0, 0, 0, FN_REDIRECT)
        .op(EXIT, 0, 0, 0, 0)
        .label("pass")
        .op(MOV64_K, 0, 0, 0, XDP_PASS)
        .op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// counts[*(u32 *)(fp - 36)] += (frame length in r9, 1 packet); to `missing` when the index is
/// out of the array. Clobbers r0-r5.
fn count_at_fp36(a: &mut Asm, counts: i32, missing: &'static str) {
    a.ld_map(1, counts)
        .op(MOV64_X, 2, FP, 0, 0)
        .op(ADD64_K, 2, 0, 0, -36)
        .op(CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM)
        .jmp(JEQ_K, 0, 0, 0, missing)
        .op(ATOMIC_DW, 0, 9, 0, 0)
        .op(MOV64_K, 1, 0, 0, 1)
        .op(ATOMIC_DW, 0, 1, 8, 0);
}

#[derive(Clone, Copy)]
struct Recent {
    key: [u8; KEY_SIZE],
    ctl: u64,
    dp: u64,
    at_ns: u64,
}

#[derive(Clone, Copy)]
struct Pending {
    key: [u8; KEY_SIZE],
    value: [u8; VALUE_SIZE],
    /// (ingress, egress) port index.
    ports: (u16, u16),
    slot: usize,
}

/// The fast path of one switch: the program attached to every port, its maps, and the installs
/// the data-plane thread queues during a loop turn.
pub struct FlowCache {
    /// Declared first: detaches the program from the ports before the maps go. One per port, in
    /// port order; None while a port's interface is gone (`detach`).
    links: Vec<Option<OwnedFd>>,
    _prog: OwnedFd,
    flows: OwnedFd,
    epoch: Arc<MapMem>,
    counts: Arc<FastCounts>,
    dp_epoch: u64,
    recent: Box<[Recent]>,
    pending: Vec<Pending>,
    /// Entries written into the kernel's map, and writes it refused (full map, memory).
    pub installs: u64,
    pub install_errors: u64,
}

impl FlowCache {
    /// Creates the maps, loads the program and attaches it to every interface in `ifindexes`.
    /// `pds`: the counts array size. The control epoch is attached to `ctl`.
    pub fn open(ifindexes: &[i32], pds: u32, ctl: &Epoch) -> io::Result<FlowCache> {
        let flows =
            map_create(BPF_MAP_TYPE_LRU_HASH, KEY_SIZE as u32, VALUE_SIZE as u32, FLOW_ENTRIES, 0, "p4netem_flows")?;
        let epoch = Arc::new(MapMem::array(1, 16, "p4netem_epoch")?);
        let counts =
            Arc::new(FastCounts { mem: MapMem::array(pds.max(1), COUNT_STRIDE, "p4netem_fcount")?, pds: pds as usize });
        let prog = prog_load_xdp(&program(flows.as_raw_fd(), epoch.fd(), counts.mem.fd()), "p4netem_fast")?;
        let mut links = Vec::new();
        for &ifindex in ifindexes {
            links.push(Some(attach_link(&prog, ifindex)?));
        }
        ctl.attach(epoch.clone());
        let empty = Recent { key: [0; KEY_SIZE], ctl: 0, dp: 0, at_ns: 0 };
        Ok(FlowCache {
            links,
            _prog: prog,
            flows,
            epoch,
            counts,
            dp_epoch: 0,
            recent: vec![empty; RECENT].into_boxed_slice(),
            pending: Vec::with_capacity(PENDING),
            installs: 0,
            install_errors: 0,
        })
    }

    /// The counts the program keeps, for the counter arrays to add.
    pub fn counts(&self) -> Arc<FastCounts> {
        self.counts.clone()
    }

    /// Takes port `port`'s link off (its interface is gone): an interface moved to another
    /// namespace keeps an attached program, which would refuse the attach of `attach` if it came
    /// back. Dropping the returned link detaches the program, which waits for the kernel (RCU,
    /// tens of ms): the data-plane loop has it closed on the worker of io/reopen.rs.
    pub fn detach(&mut self, port: usize) -> Option<OwnedFd> {
        self.links.get_mut(port).and_then(Option::take)
    }

    /// Attaches the program to port `port`'s interface, `ifindex`, as at start (an interface of
    /// the port's name came back and the port was opened again on it).
    pub fn attach(&mut self, port: usize, ifindex: i32) -> io::Result<()> {
        let link = attach_link(&self._prog, ifindex)?;
        if let Some(l) = self.links.get_mut(port) {
            *l = Some(link);
        }
        Ok(())
    }

    /// Detaches the program from every port at once (io/fan_out.rs), then frees it and the maps.
    pub fn close(mut self) {
        super::fan_out::drop_all(std::mem::take(&mut self.links));
    }

    /// Makes every installed entry stale (a port's MTU changed: entries carry a length bound).
    pub fn invalidate(&mut self) {
        self.dp_epoch += 1;
        self.epoch.u64(1).store(self.dp_epoch, Ordering::SeqCst);
        self.pending.clear();
    }

    /// Queues an entry: frames with `key` (from port index `ports.0`) go to `out_ifindex` (port
    /// index `ports.1`) counted against
    /// `pd`, while the control epoch is `ctl` and the frame is at most `max_len` bytes. Written
    /// into the kernel's map by [`FlowCache::commit`] after the turn's transmit.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn offer(
        &mut self,
        key: [u8; KEY_SIZE],
        ctl: u64,
        pd: u32,
        max_len: u32,
        out_ifindex: i32,
        ports: (u16, u16),
        now: u64,
    ) {
        let slot = slot_of(&key);
        let r = &mut self.recent[slot];
        if r.key == key && r.ctl == ctl && r.dp == self.dp_epoch && now.wrapping_sub(r.at_ns) < RECENT_NS {
            return;
        }
        if self.pending.len() == PENDING {
            return;
        }
        *r = Recent { key, ctl, dp: self.dp_epoch, at_ns: now };
        let mut value = [0u8; VALUE_SIZE];
        value[0..8].copy_from_slice(&ctl.to_ne_bytes());
        value[8..16].copy_from_slice(&self.dp_epoch.to_ne_bytes());
        value[16..20].copy_from_slice(&pd.to_ne_bytes());
        value[20..24].copy_from_slice(&max_len.to_ne_bytes());
        value[24..28].copy_from_slice(&(out_ifindex as u32).to_ne_bytes());
        self.pending.push(Pending { key, value, ports, slot });
    }

    /// Writes the queued entries for which `ready(ingress, egress)` says the data plane holds
    /// nothing that could still be behind (so that a frame the kernel forwards cannot overtake one
    /// of the same flow the data plane still has).
    pub fn commit(&mut self, ready: impl Fn(u16, u16) -> bool) {
        for p in self.pending.drain(..) {
            if !ready(p.ports.0, p.ports.1) {
                self.recent[p.slot].key = [0xff; KEY_SIZE]; // offered again by the flow's next packet
                continue;
            }
            match map_update(&self.flows, &p.key, &p.value) {
                Ok(()) => self.installs += 1,
                Err(e) => {
                    if self.install_errors == 0 {
                        tracing::warn!("fast path: installing a flow entry failed ({e}); its packets stay on the data-plane thread");
                    }
                    self.install_errors += 1;
                }
            }
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The installed entry of `key`, if any: (control epoch, data-plane epoch, pd, max_len,
    /// out ifindex). For tests and diagnostics.
    pub fn lookup(&self, key: &[u8; KEY_SIZE]) -> Option<(u64, u64, u32, u32, i32)> {
        let mut v = [0u8; VALUE_SIZE];
        map_lookup(&self.flows, key, &mut v).ok()?;
        let u64_at = |o: usize| u64::from_ne_bytes(v[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(v[o..o + 4].try_into().unwrap());
        Some((u64_at(0), u64_at(8), u32_at(16), u32_at(20), u32_at(24) as i32))
    }
}

/// The program attached to one interface at the generic hook (the link detaches it when closed).
fn attach_link(prog: &OwnedFd, ifindex: i32) -> io::Result<OwnedFd> {
    link_xdp_generic(prog, ifindex).map_err(|e| io::Error::new(e.kind(), format!("ifindex {ifindex}: {e}")))
}

#[inline]
fn slot_of(key: &[u8; KEY_SIZE]) -> usize {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for c in key.chunks_exact(8) {
        h = (h ^ u64::from_ne_bytes(c.try_into().unwrap())).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    (h as usize) % RECENT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tests::ipv4_udp;

    #[test]
    fn fast_path_mode_parses_and_names_the_allowed_values() {
        assert_eq!("auto".parse::<FastPathMode>(), Ok(FastPathMode::Auto));
        assert_eq!("off".parse::<FastPathMode>(), Ok(FastPathMode::Off));
        let e = "yes".parse::<FastPathMode>().unwrap_err();
        assert!(e.contains("--fast-path") && e.contains("off, on or auto"), "{e}");
    }

    #[test]
    fn key_holds_what_the_classifier_and_l2_tables_read() {
        let f = ipv4_udp(1234, 5201, 10);
        let k = key_of(7, &f).expect("IPv4/UDP has a key");
        assert_eq!(&k[0..4], &7u32.to_ne_bytes());
        assert_eq!(&k[4..16], &f[0..12], "MACs");
        assert_eq!(&k[16..24], &[10, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(&k[24..28], &[0x04, 0xd2, 0x14, 0x51], "ports");
        assert_eq!((k[28], k[29]), (17, 46), "protocol, DSCP (EF)");
        // Any field the pipeline reads changes the key.
        let mut g = f.clone();
        g[15] = 0; // DSCP 0
        assert_ne!(key_of(7, &g), Some(k));
        assert_ne!(key_of(8, &f), Some(k), "ingress port");
        // ECN is not a key field: the unimpaired path does not read it.
        let mut e = f.clone();
        e[15] |= 1;
        assert_eq!(key_of(7, &e), Some(k));
    }

    #[test]
    fn frames_of_other_shapes_have_no_key() {
        let f = ipv4_udp(1, 2, 0);
        let mut opts = f.clone();
        opts[14] = 0x46; // IHL 6
        let mut frag = f.clone();
        frag[21] = 1; // fragment offset 8
        let mut icmp = f.clone();
        icmp[23] = 1;
        let mut vlan = f[..12].to_vec();
        vlan.extend([0x81, 0x00, 0, 5]);
        vlan.extend(&f[12..]);
        for (what, g) in
            [("options", opts), ("later fragment", frag), ("ICMP", icmp), ("VLAN", vlan), ("short", f[..41].to_vec())]
        {
            assert_eq!(key_of(1, &g), None, "{what}");
        }
        // The first fragment (MF set, offset 0) carries the L4 header: it has a key.
        let mut first = f.clone();
        first[20] = 0x20;
        assert!(key_of(1, &first).is_some());
        // TCP needs its whole header.
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(key_of(1, &tcp), None, "42 bytes: short for TCP");
        tcp.extend([0; 12]);
        assert!(key_of(1, &tcp).is_some());
    }

    /// Loads the program into the kernel (the verifier checks it) with real maps; needs root.
    #[test]
    fn the_kernel_verifier_accepts_the_program() {
        let flows =
            map_create(BPF_MAP_TYPE_LRU_HASH, KEY_SIZE as u32, VALUE_SIZE as u32, 64, 0, "t_flows").expect("LRU map");
        let epoch = MapMem::array(1, 16, "t_epoch").expect("epoch map");
        let counts = MapMem::array(8, COUNT_STRIDE, "t_counts").expect("counts map");
        prog_load_xdp(&program(flows.as_raw_fd(), epoch.fd(), counts.fd()), "t_fast").expect("verifier accepts");
        // The epoch written through the mapping is what a map lookup returns.
        let ctl = Epoch::default();
        ctl.bump();
        let m = Arc::new(epoch);
        ctl.attach(m.clone());
        assert_eq!(ctl.bump(), 2);
        let mut v = [0u8; 16];
        map_lookup(&m._fd, &0u32.to_ne_bytes(), &mut v).unwrap();
        assert_eq!(u64::from_ne_bytes(v[0..8].try_into().unwrap()), 2);
    }

    /// The program run by the kernel on frames (BPF_PROG_TEST_RUN, ingress lo): a hit under the
    /// current epochs redirects and counts; a stale epoch, a longer frame, another flow pass.
    #[test]
    fn the_program_redirects_hits_of_the_current_epoch_only() {
        const XDP_REDIRECT: u32 = 4;
        let lo = 1u32;
        let ctl = Epoch::default();
        ctl.bump();
        let mut fc = FlowCache::open(&[], 8, &ctl).expect("maps and program");
        let prog = &fc._prog;
        let f = ipv4_udp(1000, 2000, 100);
        let key = key_of(lo, &f).unwrap();
        assert_eq!(test_run_xdp(prog, &f, lo).unwrap(), XDP_PASS as u32, "miss");
        fc.offer(key, 1, 5, f.len() as u32, 1, (0, 0), 10);
        fc.offer(key, 1, 5, f.len() as u32, 1, (0, 0), 11); // the same flow again: queued once
        assert_eq!(fc.pending.len(), 1);
        fc.commit(|_, _| true);
        assert_eq!(fc.lookup(&key), Some((1, 0, 5, f.len() as u32, 1)));
        let prog = &fc._prog;
        assert_eq!(test_run_xdp(prog, &f, lo).unwrap(), XDP_REDIRECT, "hit");
        assert_eq!(fc.counts.get(5), (f.len() as u64, 1));
        assert_eq!(fc.counts.total(), (f.len() as u64, 1));
        // Another source port: another flow.
        assert_eq!(test_run_xdp(prog, &ipv4_udp(1001, 2000, 100), lo).unwrap(), XDP_PASS as u32);
        // Longer than the entry allows (as a frame the egress MTU would refuse).
        assert_eq!(test_run_xdp(prog, &ipv4_udp(1000, 2000, 101), lo).unwrap(), XDP_PASS as u32);
        // The same frame installed for another ingress port only.
        let g = ipv4_udp(1002, 2000, 100);
        fc.offer(key_of(lo + 1, &g).unwrap(), 1, 5, g.len() as u32, 1, (0, 0), 10);
        fc.commit(|_, _| true);
        let prog = &fc._prog;
        assert_eq!(test_run_xdp(prog, &g, lo).unwrap(), XDP_PASS as u32, "ingress port is in the key");
        // A publish makes it stale at once.
        ctl.bump();
        assert_eq!(test_run_xdp(prog, &f, lo).unwrap(), XDP_PASS as u32, "control epoch bumped");
        fc.offer(key, 2, 5, f.len() as u32, 1, (0, 0), 12);
        fc.commit(|_, _| true);
        assert_eq!(test_run_xdp(&fc._prog, &f, lo).unwrap(), XDP_REDIRECT);
        fc.invalidate();
        assert_eq!(test_run_xdp(&fc._prog, &f, lo).unwrap(), XDP_PASS as u32, "data-plane epoch bumped");
        assert_eq!(fc.counts.get(5), (2 * f.len() as u64, 2), "passes are not counted");
        // A port not ready: nothing installed, and the next offer queues it again.
        fc.offer(key, 2, 5, f.len() as u32, 1, (0, 3), 13);
        fc.commit(|_, out| out != 3);
        assert_eq!(fc.lookup(&key).map(|e| e.1), Some(0), "entry of the old data-plane epoch stays");
        fc.offer(key, 2, 5, f.len() as u32, 1, (0, 3), 14);
        assert_eq!(fc.pending.len(), 1);
    }
}
