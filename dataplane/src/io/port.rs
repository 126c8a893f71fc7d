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

    /// Largest frame the path receives whole (longer ones arrive truncated: malformed drops).
    pub fn rx_max_frame(&self) -> usize {
        each!(self, p => p.rx_max_frame())
    }

    /// Largest frame the path sends.
    pub fn tx_max_frame(&self) -> usize {
        each!(self, p => p.tx_max_frame())
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

    /// Whether the kernel unbound the socket from its interface, which it does when the interface
    /// is deleted or moved to another namespace: such a socket never carries a frame again, even
    /// when an interface of the same name comes back (the port must be opened again on it).
    pub fn unbound(&self) -> bool {
        each!(self, p => p.unbound())
    }

    /// Whether the interface this port opened is still there under its name (an interface being
    /// deleted leaves the name before the kernel unbinds the socket; one renamed leaves it too).
    pub fn iface_present(&self) -> bool {
        let Ok(name) = std::ffi::CString::new(self.ifname()) else { return false };
        // SAFETY: name is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        index != 0 && index as i32 == self.ifindex()
    }

    /// Whether the port's interface is gone: its socket unbound, or its name no longer its own.
    pub fn is_gone(&self) -> bool {
        self.unbound() || !self.iface_present()
    }

    /// Whether an interface of this port's name is in this namespace and up with a carrier now
    /// (it need not be the one the port opened). Err: none of that name (ENODEV), or no answer.
    pub fn link_up(&self) -> io::Result<bool> {
        each!(self, p => p.iface_flags()).map(super::sys::link_is_up)
    }

    /// The `--io` mode that opens this port again on the path it chose at start: AF_XDP where it
    /// still works, else the AF_PACKET fallback (logged, as at start); AF_PACKET stays AF_PACKET.
    pub fn reopen_mode(&self) -> IoMode {
        match self {
            PortIo::AfPacket(_) => IoMode::AfPacket,
            PortIo::AfXdp(_) => IoMode::Auto,
        }
    }

    /// Lets go, now, of what the port attached to its interface (AF_XDP: its XDP program), so
    /// that the interface can be opened again if it comes back (io/afxdp.rs `release_xdp`): it is
    /// detached when what this returns is dropped, which waits for the kernel (RCU), so the
    /// data-plane loop has it dropped on the worker of io/reopen.rs.
    pub fn release(&mut self) -> Option<Box<dyn Send>> {
        match self {
            PortIo::AfXdp(x) => x.release_xdp().map(|p| Box::new(p) as Box<dyn Send>),
            PortIo::AfPacket(_) => None,
        }
    }

    /// `--tx-threads`: AF_PACKET only (an AF_XDP flush already batches in the kernel).
    pub fn start_tx_thread(&mut self) -> io::Result<()> {
        match self {
            PortIo::AfPacket(p) => p.start_tx_thread(),
            PortIo::AfXdp(_) => Ok(()),
        }
    }

    /// The heartbeat of the port's TX thread (health.rs); None without one.
    pub fn tx_heartbeat(&self) -> Option<std::sync::Arc<crate::health::Heartbeat>> {
        match self {
            PortIo::AfPacket(p) => p.tx_heartbeat(),
            PortIo::AfXdp(_) => None,
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
    use std::process::Command;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("ip(8) runs");
        assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A veth pair `<name>a`/`<name>b`, both up, and a namespace `<name>n` to move one into;
    /// all deleted on drop (needs root, as the AF_XDP and BPF tests do).
    struct Veth {
        name: String,
    }

    impl Veth {
        fn new() -> Veth {
            static N: AtomicU32 = AtomicU32::new(0);
            let name = format!("p4n-pr-{}{}", std::process::id() % 10_000, N.fetch_add(1, Ordering::Relaxed));
            let v = Veth { name };
            ip(&["netns", "add", &v.end('n')]);
            v.create();
            v
        }
        fn end(&self, e: char) -> String {
            format!("{}{e}", self.name)
        }
        fn create(&self) {
            ip(&["link", "add", &self.end('a'), "type", "veth", "peer", "name", &self.end('b')]);
            ip(&["link", "set", &self.end('a'), "up"]);
            ip(&["link", "set", &self.end('b'), "up"]);
        }
    }

    impl Drop for Veth {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["link", "del", &self.end('a')]).output();
            let _ = Command::new("ip").args(["netns", "del", &self.end('n')]).output();
        }
    }

    /// `cond` within a second (link state follows `ip` at once, carrier may take a moment).
    fn soon(mut cond: impl FnMut() -> bool) -> bool {
        (0..100).any(|_| {
            cond() || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        })
    }

    /// What the data plane's once-a-second check relies on, on both paths: the link's state, a
    /// socket the kernel unbinds when its interface is deleted or moved away (whatever comes back
    /// under the name), and a port opened again on an interface of the same name.
    #[test]
    fn a_port_whose_interface_went_is_unbound_and_opens_again_on_one_of_its_name() {
        let rings = RingConfig { rx_frames: 64, tx_frames: 64, ..RingConfig::default() };
        for mode in [IoMode::AfPacket, IoMode::AfXdp] {
            let v = Veth::new();
            let a = v.end('a');
            let mut io = PortIo::open(&a, &rings, mode).unwrap();
            assert!(soon(|| io.link_up().unwrap()), "{mode:?}: up with a carrier");
            assert!(!io.unbound(), "{mode:?}");
            ip(&["link", "set", &v.end('b'), "down"]);
            assert!(soon(|| !io.link_up().unwrap()), "{mode:?}: the peer down takes the carrier");
            ip(&["link", "set", &v.end('b'), "up"]);
            assert!(soon(|| io.link_up().unwrap()), "{mode:?}");
            assert!(!io.unbound(), "{mode:?}: a link flap leaves the socket bound");

            // Deleted and created again under the same name (a new interface, a new index).
            ip(&["link", "del", &a]);
            assert!(io.link_up().is_err(), "{mode:?}: no interface of the name");
            v.create();
            assert!(io.unbound(), "{mode:?}: the socket stays unbound from the new interface");
            assert!(soon(|| io.link_up().unwrap()), "{mode:?}: the name is back, up");
            io.release();
            let mut io = PortIo::open(&a, &rings, io.reopen_mode()).unwrap();
            let kind = if mode == IoMode::AfXdp { "af_xdp" } else { "af_packet" };
            assert_eq!(io.kind(), kind, "reopened on the path of the start");
            assert!(!io.unbound());

            // Moved to another namespace and back: the kernel may give it its index back, and the
            // XDP program of an AF_XDP port stays attached to it unless released.
            ip(&["link", "set", &a, "netns", &v.end('n')]);
            ip(&["-n", &v.end('n'), "link", "set", &a, "netns", &std::process::id().to_string()]);
            ip(&["link", "set", &a, "up"]);
            assert!(io.unbound(), "{mode:?}: moved away and back");
            io.release();
            let io = PortIo::open(&a, &rings, io.reopen_mode()).unwrap();
            assert_eq!(io.kind(), kind, "reopened on the path of the start after a move");
        }
    }

    #[test]
    fn io_mode_parses_and_names_the_allowed_values() {
        assert_eq!("auto".parse::<IoMode>(), Ok(IoMode::Auto));
        assert_eq!("af_packet".parse::<IoMode>(), Ok(IoMode::AfPacket));
        assert_eq!("af-xdp".parse::<IoMode>(), Ok(IoMode::AfXdp));
        let e = "dpdk".parse::<IoMode>().unwrap_err();
        assert!(e.contains("--io") && e.contains("auto, af_packet or af_xdp"), "{e}");
    }
}
