//! One data-plane port as an AF_XDP socket (copy mode): a UMEM of 4 KiB chunks shared with the
//! kernel, its fill and completion rings, and the socket's RX and TX descriptor rings, with the
//! XDP program of `xdp_prog.rs` redirecting the interface's frames to it.
//!
//! Why copy mode: veth has no zero-copy AF_XDP; in copy mode the kernel copies a received frame
//! from the (generic) XDP hook into a UMEM chunk, before packet taps and the IP layer see it, and
//! sends a TX descriptor with one skb built from the chunk. RX
//! needs no syscall (the ring is polled, `ppoll` waits on the socket); TX needs one `sendto` per
//! flush, which the kernel serves 32 frames at a time (`TX_BATCH_SIZE`), so a flush loops.
//!
//! Frame ownership: every chunk is in exactly one place. RX chunks: in the fill ring, in the
//! kernel, in the RX ring, or the one `rx_peek` returned (given back to the fill ring by
//! `rx_release`). TX chunks: on the free stack, in the TX ring, in the kernel, or in the
//! completion ring (reaped back to the free stack). Both rings of a pair are as large as the
//! chunks they cycle, so a put can never find its ring full.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::afpacket::{RingConfig, RxFrame, RX_MAX_FRAME, TX_MAX_FRAME};
use super::sys::*;
use super::xdp_prog::XdpRedirect;
use crate::mapping::{Mapping, Pages};

/// UMEM chunk. 4 KiB (a page): the kernel puts a received frame 256 bytes in (XDP headroom), and
/// 4096 - 256 holds the largest frame the AF_PACKET path accepts whole, so both paths truncate
/// (and count as malformed) exactly the same frames.
const CHUNK: usize = 4096;
/// Largest port MTU this path carries: its frames (MTU + 14) within [`RX_MAX_FRAME`], as on the
/// AF_PACKET path with 2048-byte ring frames.
pub const MAX_MTU: usize = RX_MAX_FRAME - 14;
/// Where the XDP program's receive timestamp sits: the 8 bytes before the frame.
const META_TS: usize = 8;

/// A mapped ring: producer and consumer indexes shared with the kernel, and its entries.
struct XRing<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    /// Our copy of the index we own (producer of a producer ring, consumer of a consumer ring).
    local: u32,
    /// The kernel's index as last read.
    cached: u32,
    /// Holds the indexes and entries above.
    _map: Mapping,
}

impl<T: Copy> XRing<T> {
    fn map(fd: RawFd, off: &libc::xdp_ring_offset, size: u32, pgoff: u64) -> io::Result<XRing<T>> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // The ring the kernel set up for this socket, at its documented page offset.
        let map = Mapping::shared(fd, map_len, pgoff)?;
        let base = map.as_ptr();
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            let producer = base.add(off.producer as usize) as *const AtomicU32;
            let consumer = base.add(off.consumer as usize) as *const AtomicU32;
            // A fresh socket's rings start with both indexes at 0.
            Ok(XRing {
                producer,
                consumer,
                descs: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                local: 0,
                cached: 0,
                _map: map,
            })
        }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    #[inline]
    fn slot(&self, i: u32) -> *mut T {
        // SAFETY: masked index into the mapped descriptor array.
        unsafe { self.descs.add((i & self.mask) as usize) }
    }

    // --- as producer (fill, TX): local = our producer, cached = kernel's consumer ---
    #[inline]
    fn free(&mut self) -> u32 {
        let free = self.size() - self.local.wrapping_sub(self.cached);
        if free > 0 {
            return free;
        }
        // SAFETY: the consumer index is a live u32 in the mapping.
        self.cached = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.size() - self.local.wrapping_sub(self.cached)
    }
    #[inline]
    fn produce(&mut self, v: T) {
        // SAFETY: the caller checked free() > 0, so the slot is ours.
        unsafe { self.slot(self.local).write(v) };
        self.local = self.local.wrapping_add(1);
        // SAFETY: producer index in the mapping; Release publishes the entry written above.
        unsafe { (*self.producer).store(self.local, Ordering::Release) };
    }
    /// Entries produced that the kernel has not consumed yet.
    #[inline]
    fn outstanding(&mut self) -> u32 {
        // SAFETY: as in free().
        self.cached = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.local.wrapping_sub(self.cached)
    }

    // --- as consumer (RX, completion): local = our consumer, cached = kernel's producer ---
    #[inline]
    fn peek(&mut self) -> Option<T> {
        if self.cached == self.local {
            // SAFETY: producer index in the mapping; Acquire makes the entries visible.
            self.cached = unsafe { (*self.producer).load(Ordering::Acquire) };
            if self.cached == self.local {
                return None;
            }
        }
        // SAFETY: local != producer: the entry is written and ours until we release it.
        Some(unsafe { self.slot(self.local).read() })
    }
    #[inline]
    fn release(&mut self) {
        self.local = self.local.wrapping_add(1);
        // SAFETY: consumer index in the mapping; Release hands the slot back after our reads.
        unsafe { (*self.consumer).store(self.local, Ordering::Release) };
    }
}

pub struct AfXdp {
    /// Declared first: detaches the program before the socket and UMEM go away. None once
    /// released (`release_xdp`).
    _xdp: Option<XdpRedirect>,
    fd: OwnedFd,
    /// A UDP socket for interface ioctls (an AF_XDP socket has none).
    ctl: OwnedFd,
    pub ifname: String,
    pub ifindex: i32,
    fill: XRing<u64>,
    comp: XRing<u64>,
    rx: XRing<libc::xdp_desc>,
    tx: XRing<libc::xdp_desc>,
    /// TX chunks not in the kernel's hands (addresses), a stack of fixed capacity.
    tx_free: Vec<u64>,
    /// Frames put in the TX ring since the last flush.
    tx_queued: usize,
    /// The RX descriptor `rx_peek` returned, until `rx_release`.
    rx_current: u64,
    /// Frames received since the last `rx_stats`, and the kernel's drop counters at that time.
    rx_count: u32,
    last_drops: u64,
    /// The frames' memory. Declared last, so it is unmapped after the socket and its rings are
    /// gone (the kernel pinned its pages at XDP_UMEM_REG until then anyway).
    umem: Mapping,
}

// SAFETY: the mappings are owned by this value and only touched by the one thread that owns it.
unsafe impl Send for AfXdp {}

fn ring_size(n: usize) -> u32 {
    n.clamp(64, 1 << 16).next_power_of_two() as u32
}

impl AfXdp {
    pub fn open(ifname: &str, cfg: &RingConfig) -> io::Result<AfXdp> {
        let with = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{ifname}: AF_XDP {what}: {e}"));
        let cname = std::ffi::CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface named {ifname}")));
        }
        // One socket serves queue 0; with more receive queues some frames would bypass it.
        let queues = std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
            .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
            .unwrap_or(1);
        if queues != 1 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{ifname}: {queues} receive queues (AF_XDP path binds one)"),
            ));
        }
        // SAFETY: plain socket creation; ownership taken immediately.
        let fd = unsafe {
            OwnedFd::from_raw_fd(
                cvt(libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0))
                    .map_err(|e| with(e, "socket"))?,
            )
        };
        // SAFETY: as above.
        let ctl = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?)
        };
        // A chunk is a page: a frame longer than that needs multi-buffer AF_XDP (XDP_USE_SG),
        // which this path does not do, and the kernel would drop it before we see it. A port whose
        // MTU lets longer frames in is refused here, so that `--io auto` opens AF_PACKET (whose
        // ring is sized for the MTU) and logs why, instead of losing the frames unseen.
        let mut ifr = IfreqMtu { ifr_name: ifname_bytes(ifname)?, ifr_mtu: 0, _pad: [0; 20] };
        // SAFETY: ifr outlives the call; SIOCGIFMTU reads ifr_name and writes ifr_mtu.
        cvt(unsafe { libc::ioctl(ctl.as_raw_fd(), SIOCGIFMTU as _, &mut ifr) }).map_err(|e| with(e, "MTU query"))?;
        let mtu = ifr.ifr_mtu.max(0) as usize;
        if mtu > MAX_MTU {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{ifname}: MTU {mtu} is above the largest the AF_XDP path carries ({MAX_MTU}: one page per frame)"
                ),
            ));
        }
        let raw = fd.as_raw_fd();
        let (rx_n, tx_n) = (ring_size(cfg.rx_frames), ring_size(cfg.tx_frames));
        let chunks = (rx_n + tx_n) as usize;
        let umem_len = chunks * CHUNK;
        // Owned by the returned value; an error return below unmaps it.
        let umem = Mapping::zeroed(umem_len, Pages::Now).map_err(|e| with(e, "UMEM mmap"))?;
        // SAFETY: zeroed is a valid xdp_umem_reg; fields set below.
        let mut reg: libc::xdp_umem_reg = unsafe { std::mem::zeroed() };
        reg.addr = umem.as_ptr() as u64;
        reg.len = umem_len as u64;
        reg.chunk_size = CHUNK as u32;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(|e| with(e, "UMEM_REG"))?;
        for (opt, n) in [
            (libc::XDP_UMEM_FILL_RING, rx_n),
            (libc::XDP_UMEM_COMPLETION_RING, tx_n),
            (libc::XDP_RX_RING, rx_n),
            (libc::XDP_TX_RING, tx_n),
        ] {
            setsockopt(raw, libc::SOL_XDP, opt, &n).map_err(|e| with(e, "ring setup"))?;
        }
        // SAFETY: zeroed offsets are a valid out-parameter.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: off/len are valid for the kernel to write.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut _ as *mut libc::c_void,
                &mut len,
            )
        })
        .map_err(|e| with(e, "MMAP_OFFSETS"))?;
        let rings = (|| -> io::Result<_> {
            let fill: XRing<u64> = XRing::map(raw, &off.fr, rx_n, libc::XDP_UMEM_PGOFF_FILL_RING)?;
            let comp: XRing<u64> = XRing::map(raw, &off.cr, tx_n, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
            let rx: XRing<libc::xdp_desc> = XRing::map(raw, &off.rx, rx_n, libc::XDP_PGOFF_RX_RING as u64)?;
            let tx: XRing<libc::xdp_desc> = XRing::map(raw, &off.tx, tx_n, libc::XDP_PGOFF_TX_RING as u64)?;
            Ok((fill, comp, rx, tx))
        })();
        let (mut fill, comp, rx, tx) = rings.map_err(|e| with(e, "ring mmap"))?;
        for i in 0..rx_n as u64 {
            fill.produce(i * CHUNK as u64);
        }
        let tx_free: Vec<u64> = (rx_n as u64..(rx_n + tx_n) as u64).map(|i| i * CHUNK as u64).collect();
        // SAFETY: zeroed sockaddr_xdp is valid; fields set below.
        let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sxdp.sxdp_family = libc::AF_XDP as u16;
        sxdp.sxdp_flags = libc::XDP_COPY;
        sxdp.sxdp_ifindex = ifindex as u32;
        sxdp.sxdp_queue_id = 0;
        // SAFETY: sxdp is a valid sockaddr_xdp of the given size.
        cvt(unsafe {
            libc::bind(
                raw,
                &sxdp as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as u32,
            )
        })
        .map_err(|e| with(e, "bind (copy mode)"))?;
        let xdp = XdpRedirect::attach(ifindex, raw).map_err(|e| with(e, "XDP program"))?;
        Ok(AfXdp {
            _xdp: Some(xdp),
            fd,
            ctl,
            ifname: ifname.to_string(),
            ifindex,
            fill,
            comp,
            rx,
            tx,
            tx_free,
            tx_queued: 0,
            rx_current: 0,
            rx_count: 0,
            last_drops: 0,
            umem,
        })
    }

    /// The next received frame, if any (stays in its UMEM chunk until [`AfXdp::rx_release`]).
    #[inline]
    pub fn rx_peek(&mut self) -> Option<RxFrame> {
        let d = self.rx.peek()?;
        self.rx_current = d.addr;
        self.rx_count = self.rx_count.wrapping_add(1);
        let len = d.len as usize;
        // SAFETY: the kernel wrote the frame at addr inside the UMEM; the program's timestamp sits
        // in the 8 bytes before it (inside the chunk's 256-byte headroom).
        let (data, ts) = unsafe {
            let data = self.umem.as_ptr().add(d.addr as usize);
            let ts_ptr = data.sub(META_TS) as *mut u64;
            let ts = ts_ptr.read_unaligned();
            // Cleared so that a frame without metadata never shows a stale stamp.
            ts_ptr.write_unaligned(0);
            (data as *const u8, ts)
        };
        Some(RxFrame {
            data,
            // Frames longer than the AF_PACKET ring takes are handed on truncated there; the same here.
            snaplen: len.min(RX_MAX_FRAME),
            len,
            status: 0,
            vlan_tci: 0,
            vlan_tpid: 0,
            timestamp_ns: ts,
            monotonic: true,
        })
    }

    /// Gives the chunk of the frame returned by the last `rx_peek` back to the kernel.
    #[inline]
    pub fn rx_release(&mut self) {
        self.rx.release();
        // The fill ring holds every RX chunk: there is always room.
        let _ = self.fill.free();
        self.fill.produce(self.rx_current & !(CHUNK as u64 - 1));
    }

    /// Takes chunks the kernel has finished sending back onto the free stack.
    #[inline]
    fn reap(&mut self) {
        while let Some(addr) = self.comp.peek() {
            self.comp.release();
            self.tx_free.push(addr & !(CHUNK as u64 - 1));
        }
    }

    /// Writes one frame into the TX ring. Returns false (nothing written) when the ring is full.
    /// The frame leaves at the next [`AfXdp::tx_flush`].
    #[inline]
    pub fn tx_push(&mut self, frame: &[u8], edit: impl FnOnce(&mut [u8])) -> bool {
        if self.tx_free.is_empty() {
            self.reap();
        }
        if self.tx_free.is_empty() || self.tx.free() == 0 {
            return false;
        }
        let Some(addr) = self.tx_free.pop() else { return false };
        let len = frame.len().min(TX_MAX_FRAME);
        // SAFETY: the chunk is ours (it was on the free stack) and CHUNK >= TX_MAX_FRAME bytes.
        unsafe {
            let data = std::slice::from_raw_parts_mut(self.umem.as_ptr().add(addr as usize), len);
            data.copy_from_slice(&frame[..len]);
            edit(data);
        }
        self.tx.produce(libc::xdp_desc { addr, len: len as u32, options: 0 });
        self.tx_queued += 1;
        true
    }

    /// Asks the kernel to send what the TX ring holds. Copy mode sends at most 32 frames per call
    /// (and says EAGAIN when more remain), so this calls again while the kernel makes progress.
    #[inline]
    pub fn tx_flush(&mut self) -> io::Result<()> {
        if self.tx_queued == 0 {
            return Ok(());
        }
        let mut pending = self.tx.outstanding();
        while pending > 0 {
            // SAFETY: sendto with no buffer on an AF_XDP socket transmits its TX ring.
            let r = unsafe { libc::sendto(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
            let left = self.tx.outstanding();
            if r < 0 {
                let e = io::Error::last_os_error();
                // EAGAIN: more than one batch, or the device queue was busy; go on while the kernel
                // makes progress. Anything else is a failure of the port (logged by the loop).
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)) {
                    self.tx_queued = left as usize;
                    return Err(e);
                }
            }
            if left >= pending {
                break; // no progress: what is left goes with the next flush
            }
            pending = left;
        }
        // Frames still in the ring keep the next flush from returning early.
        self.tx_queued = pending as usize;
        self.reap();
        Ok(())
    }

    /// The interface's MTU now.
    /// Largest frame this path receives whole.
    pub fn rx_max_frame(&self) -> usize {
        RX_MAX_FRAME
    }

    /// Largest frame this path sends.
    pub fn tx_max_frame(&self) -> usize {
        TX_MAX_FRAME
    }

    pub fn mtu(&self) -> io::Result<u32> {
        let mut ifr = IfreqMtu { ifr_name: ifname_bytes(&self.ifname)?, ifr_mtu: 0, _pad: [0; 20] };
        // SAFETY: ifr outlives the call; SIOCGIFMTU reads ifr_name and writes ifr_mtu.
        cvt(unsafe { libc::ioctl(self.ctl.as_raw_fd(), SIOCGIFMTU as _, &mut ifr) })?;
        Ok(ifr.ifr_mtu.max(0) as u32)
    }

    /// The interface's flags now (SIOCGIFFLAGS by name).
    pub fn iface_flags(&self) -> io::Result<libc::c_int> {
        iface_flags(self.ctl.as_raw_fd(), &self.ifname)
    }

    /// Whether the interface this socket was bound to is gone (deleted, or moved to another
    /// namespace). The kernel unbinds the socket then and leaves ENETDOWN as its error, and only
    /// then (xsk_notifier): an AF_XDP socket has no link-down error, and poll reports none, so
    /// this reads the error (once a second). Reading clears it: the caller keeps the answer.
    pub fn unbound(&self) -> bool {
        take_socket_error(self.fd.as_raw_fd()).is_ok_and(|e| e.is_some())
    }

    /// Lets go of the XDP program now rather than when the port is dropped: after the interface
    /// moved to another namespace the program stays attached to it, and would make a new attach
    /// fail (EBUSY) if it came back. Dropping what this returns detaches it (which waits for the
    /// kernel: the caller may do it on another thread, io/reopen.rs).
    pub fn release_xdp(&mut self) -> Option<XdpRedirect> {
        self._xdp.take()
    }

    /// (received, dropped by the kernel before the switch saw them) since the last call: drops
    /// are the socket's "RX ring full" and "no free chunk" counts (XDP_STATISTICS, cumulative).
    pub fn rx_stats(&mut self) -> (u32, u32) {
        let rx = std::mem::take(&mut self.rx_count);
        // SAFETY: zeroed statistics are a valid out-parameter.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: st/len are valid for the kernel to write.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return (rx, 0);
        }
        let total = st.rx_dropped + st.rx_ring_full;
        let drops = total.saturating_sub(self.last_drops);
        self.last_drops = total;
        (rx.wrapping_add(drops as u32), drops as u32)
    }
}

impl AsRawFd for AfXdp {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
