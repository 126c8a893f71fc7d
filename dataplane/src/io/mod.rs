//! Packet I/O: AF_PACKET rings per port, offload checks, pcap capture, the wake-up eventfd.
pub mod afpacket;
pub mod ethtool;
mod kicker;
pub mod pcap;
mod sys;
pub mod wake;

pub use afpacket::{AfPacket, RingConfig, RxFrame};
