//! A port's packet I/O path, chosen at start: AF_XDP (copy mode) where the kernel and interface
//! allow it, else AF_PACKET's TPACKET_V2 rings, the long-standing path and the fallback.
//!
//! Both give the data plane the same five operations (peek/release a received frame in place,
//! push a frame into the TX ring, flush, MTU) with the same semantics, so the loop is written
//! once. Dispatch is a `match` on a two-variant enum: one predictable branch per call, no
//! virtual call, no allocation.
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use super::afpacket::{AfPacket, RingConfig, RxFrame};
use super::afxdp::AfXdp;

/// What `--io` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// AF_XDP, falling back to AF_PACKET (logged) where it cannot be set up.
    Auto,
    /// The default (see main.rs --io for the measurement behind it).
    #[default]
    AfPacket,
    AfXdp,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "af_packet" | "af-packet" | "afpacket" => Ok(IoMode::AfPacket),
            "af_xdp" | "af-xdp" | "afxdp" => Ok(IoMode::AfXdp),
            _ => Err(format!("--io must be auto, af_packet or af_xdp, got {s:?}")),
        }
    }
}

pub enum PortIo {
    AfPacket(AfPacket),
    AfXdp(AfXdp),
}

macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            PortIo::AfPacket($p) => $e,
            PortIo::AfXdp($p) => $e,
        }
    };
}

impl PortIo {
    /// Opens `ifname` on the path `mode` asks for. `Auto` tries AF_XDP and, when that fails,
    /// opens AF_PACKET and logs why; a forced mode fails with its own error.
    pub fn open(ifname: &str, cfg: &RingConfig, mode: IoMode) -> io::Result<PortIo> {
        match mode {
            IoMode::AfPacket => AfPacket::open(ifname, cfg).map(PortIo::AfPacket),
            IoMode::AfXdp => AfXdp::open(ifname, cfg).map(PortIo::AfXdp),
            IoMode::Auto => match AfXdp::open(ifname, cfg) {
                Ok(x) => Ok(PortIo::AfXdp(x)),
                Err(e) => {
                    tracing::warn!(iface = ifname, "AF_XDP unavailable ({e}): using AF_PACKET");
                    AfPacket::open(ifname, cfg).map(PortIo::AfPacket)
                }
            },
        }
    }

    /// The path's name as reported (log, metrics): "af_xdp" or "af_packet".
    pub fn kind(&self) -> &'static str {
        match self {
            PortIo::AfPacket(_) => "af_packet",
            PortIo::AfXdp(_) => "af_xdp",
        }
    }

    /// How the path attaches, for the log line.
    pub fn detail(&self) -> &'static str {
        match self {
            PortIo::AfPacket(_) => "TPACKET_V2 RX/TX rings",
            PortIo::AfXdp(_) => "copy mode, generic XDP hook",
        }
    }

    pub fn ifname(&self) -> &str {
        each!(self, p => &p.ifname)
    }

    pub fn ifindex(&self) -> i32 {
        each!(self, p => p.ifindex)
    }

    #[inline]
    pub fn rx_peek(&mut self) -> Option<RxFrame> {
        each!(self, p => p.rx_peek())
    }

    #[inline]
    pub fn rx_release(&mut self) {
        each!(self, p => p.rx_release())
    }

    #[inline]
    pub fn tx_push(&mut self, frame: &[u8], edit: impl FnOnce(&mut [u8])) -> bool {
        each!(self, p => p.tx_push(frame, edit))
    }

    #[inline]
    pub fn tx_flush(&mut self) -> io::Result<()> {
        each!(self, p => p.tx_flush())
    }

    pub fn mtu(&self) -> io::Result<u32> {
        each!(self, p => p.mtu())
    }

    /// (received, dropped by the kernel for want of ring space) since the last call.
    pub fn rx_stats(&mut self) -> (u32, u32) {
        each!(self, p => p.rx_stats())
    }

    /// Reads and clears the socket's pending error (io/sys.rs `take_socket_error`): ENETDOWN
    /// after the interface went down, was deleted or moved to another namespace.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        super::sys::take_socket_error(self.as_raw_fd())
    }

    /// Whether the interface this port opened is still there, under its name, in this namespace
    /// (a deleted or moved interface never comes back to the socket: its binding is gone).
    pub fn iface_present(&self) -> bool {
        let Ok(name) = std::ffi::CString::new(self.ifname()) else { return false };
        // SAFETY: name is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        index != 0 && index as i32 == self.ifindex()
    }

    /// `--tx-threads`: AF_PACKET only (an AF_XDP flush already batches in the kernel).
    pub fn start_tx_thread(&mut self) -> io::Result<()> {
        match self {
            PortIo::AfPacket(p) => p.start_tx_thread(),
            PortIo::AfXdp(_) => Ok(()),
        }
    }
}

impl AsRawFd for PortIo {
    fn as_raw_fd(&self) -> RawFd {
        each!(self, p => p.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_mode_parses_and_names_the_allowed_values() {
        assert_eq!("auto".parse::<IoMode>(), Ok(IoMode::Auto));
        assert_eq!("af_packet".parse::<IoMode>(), Ok(IoMode::AfPacket));
        assert_eq!("af-xdp".parse::<IoMode>(), Ok(IoMode::AfXdp));
        let e = "dpdk".parse::<IoMode>().unwrap_err();
        assert!(e.contains("--io") && e.contains("auto, af_packet or af_xdp"), "{e}");
    }
}
