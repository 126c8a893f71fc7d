//! One data-plane port: an AF_PACKET socket bound to one interface with a TPACKET_V2 RX ring and
//! TX ring mapped into our memory.
//!
//! V2 rather than V3 because V3 hands over whole blocks, which close on a millisecond timer at low
//! rates: that alone would break the 100 us delay-accuracy bar. V2 hands over every frame as soon
//! as the kernel has written it. TX frames are written into the mapped ring and sent in one
//! `sendto` per batch; PACKET_QDISC_BYPASS skips the qdisc layer (nothing to shape there: we are
//! the shaper). Frames the host itself sends on the interface (PACKET_OUTGOING) are ignored so
//! they are never forwarded back.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys::*;
use crate::mapping::Mapping;

/// Ring geometry. The ring frame size is chosen at start from the ports' largest MTU
/// ([`ring_frame_size`]): 2048 bytes (this constant) unless a port has a jumbo MTU. 2048-byte
/// frames hold a 1518-byte frame (1522 with a re-inserted VLAN tag) after the V2 header; blocks of
/// at least 64 KiB, a whole number of frames each, keep frames contiguous (frame i at i * frame
/// size: no frame straddles a block, and every size is a power of two, so TPACKET_ALIGNMENT holds).
pub const FRAME_SIZE: usize = 2048;
const BLOCK_SIZE: usize = 1 << 16;
/// Largest ring frame size (a port MTU up to 65535 needs 128 KiB frames).
pub const MAX_RING_FRAME_SIZE: usize = 1 << 17;
/// Where the kernel puts a received frame in an RX ring frame: tp_mac = 66 (V2 header and
/// sockaddr_ll, 52, plus 16 for a link header, aligned to 16, minus the 14-byte Ethernet header).
const RX_MAC_OFFSET: usize = 66;
/// Largest frame the TX ring of 2048-byte frames takes.
pub const TX_MAX_FRAME: usize = tx_max_frame(FRAME_SIZE);
/// Largest frame the RX ring of 2048-byte frames holds whole. Longer frames arrive truncated and
/// are dropped as malformed; the AF_XDP path (4 KiB UMEM chunks) has the same bound.
pub const RX_MAX_FRAME: usize = rx_max_frame(FRAME_SIZE);

/// Largest frame a TX ring of `frame_size`-byte frames takes (data after the V2 header).
pub const fn tx_max_frame(frame_size: usize) -> usize {
    frame_size - TX_DATA_OFFSET
}

/// Largest frame an RX ring of `frame_size`-byte frames holds whole (a VLAN tag the kernel
/// stripped into the header does not count).
pub const fn rx_max_frame(frame_size: usize) -> usize {
    frame_size - RX_MAC_OFFSET
}

/// The ring frame size for ports whose largest MTU is `mtu`: 2048 bytes when an untagged frame
/// of MTU + 14 bytes fits it (every MTU up to 1968: memory and speed as they always were), else
/// the smallest power of two that holds MTU + 14 on RX and MTU + 18 (a tag put back) on TX, up to
/// [`MAX_RING_FRAME_SIZE`] (None above).
pub fn ring_frame_size(mtu: usize) -> Option<usize> {
    if mtu + 14 <= RX_MAX_FRAME {
        return Some(FRAME_SIZE);
    }
    let need = (mtu + 14 + RX_MAC_OFFSET).max(mtu + 18 + TX_DATA_OFFSET).next_power_of_two();
    (need <= MAX_RING_FRAME_SIZE).then_some(need)
}

/// RX status bits the data plane looks at.
pub const VLAN_VALID: u32 = TP_STATUS_VLAN_VALID;
pub const VLAN_TPID_VALID: u32 = TP_STATUS_VLAN_TPID_VALID;
pub const CSUM_NOT_READY: u32 = TP_STATUS_CSUMNOTREADY;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    pub rx_frames: usize,
    pub tx_frames: usize,
    /// Bytes per ring frame: [`FRAME_SIZE`], or a larger power of two ([`ring_frame_size`]).
    pub frame_size: usize,
}

impl RingConfig {
    pub const DEFAULT: RingConfig = RingConfig { rx_frames: 4096, tx_frames: 2048, frame_size: FRAME_SIZE };
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig::DEFAULT
    }
}

struct Ring {
    base: *mut u8,
    frames: usize,
    frame_size: usize,
    head: usize,
}

impl Ring {
    #[inline]
    fn frame(&self, i: usize) -> *mut u8 {
        // SAFETY: i < frames, and the ring spans frames * frame_size mapped bytes.
        unsafe { self.base.add(i * self.frame_size) }
    }
    #[inline]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned field of every frame; the kernel and we
        // hand frames over through it, so it is accessed atomically.
        unsafe { &*(self.frame(i) as *const AtomicU32) }
    }
}

/// A received frame, still in the RX ring until [`AfPacket::rx_release`].
pub struct RxFrame {
    pub data: *const u8,
    pub snaplen: usize,
    /// Length on the wire (larger than snaplen when the frame was truncated to fit the ring).
    pub len: usize,
    pub status: u32,
    pub vlan_tci: u16,
    pub vlan_tpid: u16,
    /// Kernel receive time in ns (0: none): CLOCK_REALTIME, or CLOCK_MONOTONIC when `monotonic`.
    pub timestamp_ns: u64,
    pub monotonic: bool,
}

pub struct AfPacket {
    fd: OwnedFd,
    pub ifname: String,
    pub ifindex: i32,
    rx: Ring,
    tx: Ring,
    /// Frames committed to the TX ring since the last `tx_flush`.
    tx_queued: usize,
    /// Largest frame the TX ring takes (`tx_max_frame` of the ring frame size).
    tx_max: usize,
    /// The TX thread doing the `sendto`s, if any (stopped in `drop`, before the fields it uses).
    kicker: Option<super::kicker::Kicker>,
    /// The rings the kernel shares (RX, then TX): `rx` and `tx` point into it.
    _map: Mapping,
}

// SAFETY: the mapping is owned by this value and only touched through &mut self / &self by the
// one thread that owns the port.
unsafe impl Send for AfPacket {}

impl AfPacket {
    pub fn open(ifname: &str, cfg: &RingConfig) -> io::Result<AfPacket> {
        let with = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"));
        let cname = std::ffi::CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface named {ifname}")));
        }
        // Protocol 0: receive nothing until the rings exist and bind() names ETH_P_ALL.
        // SAFETY: plain socket creation; ownership taken immediately.
        let fd = unsafe {
            OwnedFd::from_raw_fd(
                cvt(libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0))
                    .map_err(|e| with(e, "AF_PACKET socket (needs CAP_NET_RAW)"))?,
            )
        };
        let raw = fd.as_raw_fd();
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V2).map_err(|e| with(e, "PACKET_VERSION"))?;
        // Drop malformed TX frames instead of stalling the ring on them.
        setsockopt(raw, SOL_PACKET, PACKET_LOSS, &1i32).map_err(|e| with(e, "PACKET_LOSS"))?;
        let frame_size = cfg.frame_size;
        if !frame_size.is_power_of_two() || !(FRAME_SIZE..=MAX_RING_FRAME_SIZE).contains(&frame_size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{ifname}: ring frame size {frame_size} is not a power of two in {FRAME_SIZE}..={MAX_RING_FRAME_SIZE}"),
            ));
        }
        // A block holds a whole number of frames (the kernel never lets a frame straddle blocks;
        // with both powers of two none is left over, so frame i sits at i * frame_size).
        let block_size = BLOCK_SIZE.max(frame_size);
        let per_block = block_size / frame_size;
        let req = |frames: usize| {
            let blocks = frames.div_ceil(per_block).max(1);
            TpacketReq {
                tp_block_size: block_size as u32,
                tp_block_nr: blocks as u32,
                tp_frame_size: frame_size as u32,
                tp_frame_nr: (blocks * per_block) as u32,
            }
        };
        let rxr = req(cfg.rx_frames);
        let txr = req(cfg.tx_frames);
        setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &rxr).map_err(|e| with(e, "PACKET_RX_RING"))?;
        setsockopt(raw, SOL_PACKET, PACKET_TX_RING, &txr).map_err(|e| with(e, "PACKET_TX_RING"))?;
        let rx_len = rxr.tp_block_nr as usize * block_size;
        let tx_len = txr.tp_block_nr as usize * block_size;
        // The rings just configured on this socket: RX first, then TX (the kernel's layout).
        let map = Mapping::shared(raw, rx_len + tx_len, 0).map_err(|e| with(e, "mmap of the rings"))?;
        let base = map.as_ptr();
        let port = AfPacket {
            fd,
            ifname: ifname.to_string(),
            ifindex,
            rx: Ring { base, frames: rxr.tp_frame_nr as usize, frame_size, head: 0 },
            // SAFETY: rx_len < the mapping's length.
            tx: Ring { base: unsafe { base.add(rx_len) }, frames: txr.tp_frame_nr as usize, frame_size, head: 0 },
            tx_queued: 0,
            tx_max: tx_max_frame(frame_size),
            kicker: None,
            _map: map,
        };
        if let Err(e) = setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1i32) {
            tracing::warn!(iface = ifname, "PACKET_QDISC_BYPASS unavailable ({e}); transmitting through the qdisc");
        }
        if let Err(e) = setsockopt(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32) {
            // Older kernels: the per-frame sll_pkttype check below still filters them.
            tracing::debug!(iface = ifname, "PACKET_IGNORE_OUTGOING unavailable ({e})");
        }
        // SAFETY: zeroed sockaddr_ll is a valid starting value; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll of the given size.
        cvt(unsafe {
            libc::bind(raw, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
        })
        .map_err(|e| with(e, "bind"))?;
        let mreq = PacketMreq { mr_ifindex: ifindex, mr_type: PACKET_MR_PROMISC, mr_alen: 0, mr_address: [0; 8] };
        // Membership is reference-counted by the kernel and undone when the socket closes.
        setsockopt(raw, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq).map_err(|e| with(e, "promiscuous mode"))?;
        Ok(port)
    }

    /// The next received frame, if any. Frames the host sent (PACKET_OUTGOING) are skipped.
    #[inline]
    pub fn rx_peek(&mut self) -> Option<RxFrame> {
        loop {
            let i = self.rx.head;
            let status = self.rx.status(i).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                return None;
            }
            let f = self.rx.frame(i);
            // SAFETY: the frame is ours (TP_STATUS_USER) and starts with a tpacket2_hdr; the
            // sockaddr_ll follows it inside the frame.
            let (h, pkttype) = unsafe { (&*(f as *const Tpacket2Hdr), *f.add(SLL_PKTTYPE_OFFSET)) };
            if pkttype == PACKET_OUTGOING {
                self.rx_release();
                continue;
            }
            let fs = self.rx.frame_size;
            let mac = (h.tp_mac as usize).min(fs);
            let snaplen = (h.tp_snaplen as usize).min(fs - mac);
            return Some(RxFrame {
                // SAFETY: mac <= the frame size, within this frame.
                data: unsafe { f.add(mac) },
                snaplen,
                len: h.tp_len as usize,
                status,
                vlan_tci: h.tp_vlan_tci,
                vlan_tpid: h.tp_vlan_tpid,
                timestamp_ns: h.tp_sec as u64 * 1_000_000_000 + h.tp_nsec as u64,
                monotonic: false,
            });
        }
    }

    /// Hands the frame returned by the last `rx_peek` back to the kernel.
    #[inline]
    pub fn rx_release(&mut self) {
        self.rx.status(self.rx.head).store(TP_STATUS_KERNEL, Ordering::Release);
        self.rx.head = (self.rx.head + 1) % self.rx.frames;
    }

    /// Whether a TX slot is free.
    #[inline]
    pub fn tx_ready(&self) -> bool {
        let s = self.tx.status(self.tx.head).load(Ordering::Acquire);
        s == TP_STATUS_AVAILABLE || s == TP_STATUS_WRONG_FORMAT
    }

    /// Writes one frame into the TX ring. Returns false (nothing written) when the ring is full.
    /// The frame leaves at the next [`AfPacket::tx_flush`].
    #[inline]
    pub fn tx_push(&mut self, frame: &[u8], edit: impl FnOnce(&mut [u8])) -> bool {
        if !self.tx_ready() {
            return false;
        }
        let len = frame.len().min(self.tx_max);
        let f = self.tx.frame(self.tx.head);
        // SAFETY: the slot is ours (AVAILABLE); data area is tx_max bytes after the header.
        unsafe {
            let data = std::slice::from_raw_parts_mut(f.add(TX_DATA_OFFSET), len);
            data.copy_from_slice(&frame[..len]);
            edit(data);
            let h = &mut *(f as *mut Tpacket2Hdr);
            h.tp_len = len as u32;
            h.tp_snaplen = len as u32;
        }
        self.tx.status(self.tx.head).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx.head = (self.tx.head + 1) % self.tx.frames;
        self.tx_queued += 1;
        true
    }

    pub fn tx_queued(&self) -> usize {
        self.tx_queued
    }

    /// Largest frame the RX ring holds whole.
    pub fn rx_max_frame(&self) -> usize {
        rx_max_frame(self.rx.frame_size)
    }

    /// Largest frame the TX ring takes.
    pub fn tx_max_frame(&self) -> usize {
        self.tx_max
    }

    /// Moves this port's `sendto` to a thread of its own (see `kicker.rs`).
    pub fn start_tx_thread(&mut self) -> io::Result<()> {
        self.kicker = Some(super::kicker::Kicker::start(self.fd.as_raw_fd(), &self.ifname)?);
        Ok(())
    }

    /// The heartbeat of the port's TX thread, if it has one.
    pub fn tx_heartbeat(&self) -> Option<std::sync::Arc<crate::health::Heartbeat>> {
        self.kicker.as_ref().map(|k| k.heartbeat())
    }

    /// Asks the kernel to send every frame committed since the last flush: one `sendto`, or one
    /// eventfd write to the port's TX thread.
    #[inline]
    pub fn tx_flush(&mut self) -> io::Result<()> {
        if self.tx_queued == 0 {
            return Ok(());
        }
        if let Some(k) = &self.kicker {
            k.kick();
            self.tx_queued = 0;
            return Ok(());
        }
        // SAFETY: sendto with no buffer on a TX-ring socket sends the ring's pending frames.
        let r = unsafe { libc::sendto(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // Frames stay SEND_REQUEST and go with the next flush.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(()),
                _ => Err(e),
            };
        }
        self.tx_queued = 0;
        Ok(())
    }

    /// The interface's MTU now (SIOCGIFMTU on this socket).
    pub fn mtu(&self) -> io::Result<u32> {
        let mut ifr = IfreqMtu { ifr_name: ifname_bytes(&self.ifname)?, ifr_mtu: 0, _pad: [0; 20] };
        // SAFETY: ifr outlives the call; SIOCGIFMTU reads ifr_name and writes ifr_mtu.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCGIFMTU as _, &mut ifr) })?;
        Ok(ifr.ifr_mtu.max(0) as u32)
    }

    /// The interface's flags now (SIOCGIFFLAGS by name on this socket).
    pub fn iface_flags(&self) -> io::Result<libc::c_int> {
        iface_flags(self.fd.as_raw_fd(), &self.ifname)
    }

    /// Whether the interface this socket was bound to is gone (deleted, or moved to another
    /// namespace): the kernel then unbinds the socket for good, and no frame crosses it again.
    pub fn unbound(&self) -> bool {
        packet_bound_ifindex(self.fd.as_raw_fd()).is_ok_and(|i| i != self.ifindex)
    }

    /// (received, dropped by the kernel because the RX ring was full) since the last call.
    pub fn rx_stats(&self) -> (u32, u32) {
        let mut st = TpacketStats { tp_packets: 0, tp_drops: 0 };
        let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: st and len are valid for the kernel to write.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            (0, 0)
        } else {
            (st.tp_packets, st.tp_drops)
        }
    }
}

impl AsRawFd for AfPacket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for AfPacket {
    fn drop(&mut self) {
        // Stop the TX thread before the mapping and the socket go away (the fields drop after this).
        self.kicker = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_frame_size_follows_the_mtu() {
        // Up to MTU 1968, the ring is what it always was.
        assert_eq!(ring_frame_size(1500), Some(FRAME_SIZE));
        assert_eq!(ring_frame_size(1968), Some(FRAME_SIZE));
        assert_eq!(rx_max_frame(FRAME_SIZE), 1982);
        assert_eq!(ring_frame_size(1969), Some(4096));
        // Jumbo frames: 9014 bytes (9018 tagged) in 16 KiB frames.
        let fs = ring_frame_size(9000).unwrap();
        assert_eq!(fs, 16384);
        assert!(rx_max_frame(fs) >= 9014 && tx_max_frame(fs) >= 9018);
        assert_eq!(ring_frame_size(65535), Some(MAX_RING_FRAME_SIZE));
        assert_eq!(ring_frame_size(MAX_RING_FRAME_SIZE), None);
    }
}
