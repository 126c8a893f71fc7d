//! Packet I/O: AF_PACKET rings per port, offload checks, pcap capture, the wake-up eventfd.
pub mod wake;
