//! Ring and packet-buffer sizes: chosen at start from the ports' largest MTU and the flags given
//! (`Sizing`), scaled for a port whose MTU is raised later (port_lifecycle.rs), and the warning
//! for an MTU the rings cannot carry. Apart because it is arithmetic on sizes, with no port or
//! loop state, tested on its own.
use super::ETH_HEADER;
use crate::io::afpacket::{ring_frame_size, tx_max_frame, FRAME_SIZE, MAX_RING_FRAME_SIZE};
use crate::io::RingConfig;

/// A port whose MTU lets its hosts send frames longer than the switch receives whole (`rx_limit`):
/// said at start and when the MTU changes, before any traffic, because the frames are then dropped
/// (`malformed`) with no ICMP "too big" going back, so TCP with a larger MSS stalls after its
/// handshake. The rings and buffers are sized at start from the ports' largest MTU (`Sizing`); an
/// AF_PACKET port whose MTU is raised later is opened again with rings for it
/// (`DataPlane::resize_for_mtu`), so this is said for what that cannot fix (AF_XDP's frames, an
/// MTU no ring holds), where a restart or a lower MTU does. An untagged frame of MTU + 14 bytes
/// must fit (a VLAN tag does not count: the kernel hands it over beside the frame).
pub(super) fn warn_mtu_above_ring(number: u16, ifname: &str, max_frame: usize, rx_limit: usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
