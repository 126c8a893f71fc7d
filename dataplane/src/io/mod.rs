//! Packet I/O: per port AF_XDP (with its XDP program) or AF_PACKET rings, offload checks, pcap
//! capture, the wake-up eventfd.
pub mod afpacket;
pub mod afxdp;
pub mod ethtool;
mod kicker;
pub mod port;
pub mod pcap;
mod sys;
pub mod wake;
mod xdp_prog;
mod bpf;
pub mod flow_cache;

pub use afpacket::{AfPacket, RingConfig, RxFrame};
pub use port::{IoMode, PortIo};
