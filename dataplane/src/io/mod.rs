//! Packet I/O: per port AF_XDP (with its XDP program) or AF_PACKET rings, offload checks, pcap
//! capture, the wake-up eventfd, the lock that keeps a second switch off a port's interface, and
//! the threads that open and close many ports at once, and that open ports again off the data-plane
//! thread.
pub mod afpacket;
pub mod afxdp;
mod bpf;
pub mod ethtool;
pub mod fan_out;
pub mod flow_cache;
mod kicker;
pub mod pcap;
pub mod port;
pub mod port_lock;
pub mod reopen;
mod sys;
pub mod wake;
mod xdp_prog;

pub use afpacket::{AfPacket, RingConfig, RxFrame};
pub use port::{IoMode, PortIo};
