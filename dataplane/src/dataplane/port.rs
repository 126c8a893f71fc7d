//! One port as the loop holds it: its I/O path, TX backlog and pcap writers, the largest frames it
//! sends and receives whole, and what its checks keep (link, gone, warnings logged once). Its
//! fields are the loop's own data, read and written by the packet path and the port lifecycle
//! (hence `pub(super)`); apart so that what a port is can be read in one place.
use std::collections::VecDeque;

use super::ETH_HEADER;
use crate::io::pcap::PcapWriter;
use crate::io::PortIo;
use crate::pool::Handle;

pub(super) struct Port {
    pub(super) io: PortIo,
    pub(super) number: u16,
    /// Packets waiting for TX ring space, in order (pool handles).
    pub(super) backlog: VecDeque<Handle>,
    pub(super) pcap_in: Option<PcapWriter>,
    pub(super) pcap_out: Option<PcapWriter>,
    pub(super) warned_truncated: bool,
    pub(super) warned_csum: bool,
    pub(super) warned_mtu: bool,
    pub(super) tx_failing: bool,
    /// The interface is up and has a carrier, as last seen (each change is logged).
    pub(super) link_up: bool,
    /// The interface was deleted or moved to another namespace: the port drops what it would send
    /// (tx_error) until an interface of its name is back and it is opened again on it
    /// (`DataPlane::install_reopened`).
    pub(super) is_gone: bool,
    /// While gone: what kept the last attempt to open it again from succeeding (logged once each).
    pub(super) reopen_blocked: Option<String>,
    /// Every frame of this port's last turn with any went to a backlogged rate queue (or was
    /// dropped): nothing of theirs needs the loop before the next coalesced release, so a batching
    /// sleep leaves this port out of its poll (wait.rs `plan`).
    pub(super) rx_backlogged: bool,
    /// Largest frame (as the ring holds it: a tag the kernel strips does not count) this port
    /// receives whole: its path's ring, and a packet buffer with room for a tag put back. Longer
    /// ones are malformed drops. Set when the port opens; an MTU raised above it later has the
    /// port opened again with rings (and packet buffers) for it (`DataPlane::resize_for_mtu`).
    pub(super) rx_limit: usize,
    /// MTU + Ethernet header, as last read (at open, then once a second).
    pub(super) mtu_frame: usize,
    /// The `mtu_frame` the port was last opened again for (`resize_for_mtu`), or found at open:
    /// each MTU is acted on (or warned about) once.
    pub(super) resized_for: usize,
    /// Largest untagged frame the interface sends: MTU + Ethernet header. Linux drops longer
    /// ones silently (AF_PACKET TX ring with PACKET_LOSS, or the veth peer), so they are counted
    /// here as tx_error drops instead of as sent.
    pub(super) max_frame: usize,
}

impl Port {
    /// Whether Linux will send `frame` on this port: at most MTU + 14 bytes, 4 more when it
    /// carries a VLAN tag (the kernel's packet_extra_vlan_len_allowed).
    #[inline]
    pub(super) fn fits(&self, frame: &[u8]) -> bool {
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
    pub(super) fn socket_error(&mut self) -> bool {
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
    pub(super) fn check(&mut self) -> bool {
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
    pub(super) fn refresh_mtu(&mut self) -> bool {
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

/// The largest untagged frame port `io` sends, for an MTU + 14 of `frame`: bounded by what its TX
/// ring takes with a tag (an MTU raised above what the switch was sized for at start must not
/// have its frames cut short at the ring: they are tx_error drops, `Port::fits`).
pub(super) fn sendable(frame: usize, io: &PortIo) -> usize {
    frame.min(io.tx_max_frame() - 4)
}
