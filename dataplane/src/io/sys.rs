//! Linux ABI constants and structs for AF_PACKET rings and the ethtool ioctl that the libc crate
//! does not export on every version. Values from <linux/if_packet.h> and <linux/ethtool.h>.
#![allow(dead_code)]

pub const SOL_PACKET: libc::c_int = 263;
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_MR_PROMISC: u16 = 1;
pub const PACKET_RX_RING: libc::c_int = 5;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_TX_RING: libc::c_int = 13;
pub const PACKET_LOSS: libc::c_int = 14;
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
pub const TPACKET_V2: libc::c_int = 1;
pub const ETH_P_ALL: u16 = 0x0003;

// rx frame status bits
pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
// tx frame status values
pub const TP_STATUS_AVAILABLE: u32 = 0;
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
pub const TP_STATUS_SENDING: u32 = 2;
pub const TP_STATUS_WRONG_FORMAT: u32 = 4;

/// sll_pkttype of a frame this host sent.
pub const PACKET_OUTGOING: u8 = 4;

#[repr(C)]
pub struct TpacketReq {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
}

/// struct tpacket2_hdr; the sockaddr_ll follows at TPACKET_ALIGN(32) = 32.
#[repr(C)]
pub struct Tpacket2Hdr {
    pub tp_status: u32,
    pub tp_len: u32,
    pub tp_snaplen: u32,
    pub tp_mac: u16,
    pub tp_net: u16,
    pub tp_sec: u32,
    pub tp_nsec: u32,
    pub tp_vlan_tci: u16,
    pub tp_vlan_tpid: u16,
    pub tp_padding: [u8; 4],
}
pub const TPACKET2_HDR_ALIGNED: usize = 32;
/// Offset of sll_pkttype inside the frame (sockaddr_ll at 32, pkttype at +10).
pub const SLL_PKTTYPE_OFFSET: usize = TPACKET2_HDR_ALIGNED + 10;
/// Where a V2 TX frame's data starts: tp_hdrlen - sizeof(sockaddr_ll).
pub const TX_DATA_OFFSET: usize = TPACKET2_HDR_ALIGNED;

#[repr(C)]
pub struct PacketMreq {
    pub mr_ifindex: libc::c_int,
    pub mr_type: u16,
    pub mr_alen: u16,
    pub mr_address: [u8; 8],
}

#[repr(C)]
pub struct TpacketStats {
    pub tp_packets: u32,
    pub tp_drops: u32,
}

pub const ETHTOOL_GRXCSUM: u32 = 0x14;
pub const ETHTOOL_GTXCSUM: u32 = 0x16;
pub const ETHTOOL_GTSO: u32 = 0x1e;
pub const ETHTOOL_GGSO: u32 = 0x23;
pub const ETHTOOL_GGRO: u32 = 0x2b;

#[repr(C)]
pub struct EthtoolValue {
    pub cmd: u32,
    pub data: u32,
}

/// struct ifreq with the ifr_data member of the union.
#[repr(C)]
pub struct IfreqData {
    pub ifr_name: [u8; libc::IFNAMSIZ],
    pub ifr_data: *mut libc::c_void,
    pub _pad: [u8; 16],
}

/// struct ifreq with the ifr_mtu member of the union (SIOCGIFMTU).
#[repr(C)]
pub struct IfreqMtu {
    pub ifr_name: [u8; libc::IFNAMSIZ],
    pub ifr_mtu: libc::c_int,
    pub _pad: [u8; 20],
}

pub const SIOCGIFMTU: libc::c_ulong = 0x8921;
pub const SIOCGIFFLAGS: libc::c_ulong = 0x8913;

/// struct ifreq with the ifr_flags member of the union.
#[repr(C)]
pub struct IfreqFlags {
    pub ifr_name: [u8; libc::IFNAMSIZ],
    pub ifr_flags: libc::c_short,
    pub _pad: [u8; 22],
}

/// The interface flags (IFF_*) of `name` now, asked through `fd` (any socket of this namespace):
/// ENODEV when there is no interface of that name.
pub fn iface_flags(fd: libc::c_int, name: &str) -> std::io::Result<libc::c_int> {
    let mut ifr = IfreqFlags { ifr_name: ifname_bytes(name)?, ifr_flags: 0, _pad: [0; 22] };
    // SAFETY: ifr outlives the call; SIOCGIFFLAGS reads ifr_name and writes ifr_flags.
    cvt(unsafe { libc::ioctl(fd, SIOCGIFFLAGS as _, &mut ifr) })?;
    // The flags are an unsigned short in the kernel (IFF_* below 1 << 16).
    Ok(ifr.ifr_flags as u16 as libc::c_int)
}

/// Up and running: administratively up with a carrier (IFF_UP and IFF_RUNNING).
pub fn link_is_up(flags: libc::c_int) -> bool {
    flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0
}

/// The interface index a packet socket is bound to (getsockname). The kernel sets it to -1 when
/// that interface is unregistered: deleted, or moved to another namespace.
pub fn packet_bound_ifindex(fd: libc::c_int) -> std::io::Result<i32> {
    // SAFETY: a zeroed sockaddr_ll is a valid out-parameter.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: sll and len are live locals of the sizes given.
    cvt(unsafe { libc::getsockname(fd, &mut sll as *mut _ as *mut libc::sockaddr, &mut len) })?;
    Ok(sll.sll_ifindex)
}

pub fn ifname_bytes(name: &str) -> std::io::Result<[u8; libc::IFNAMSIZ]> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
    }
    let mut out = [0u8; libc::IFNAMSIZ];
    out[..b.len()].copy_from_slice(b);
    Ok(out)
}

pub fn cvt(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn setsockopt<T>(fd: libc::c_int, level: libc::c_int, name: libc::c_int, val: &T) -> std::io::Result<()> {
    // SAFETY: val points to a live T of the given size for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Reads and clears a socket's pending error (getsockopt SO_ERROR). A packet socket whose
/// interface goes down, is deleted or moves to another namespace gets ENETDOWN pending, and
/// `poll` reports POLLERR on it until the error is read: a loop that only sleeps in `ppoll` would
/// wake at once, forever. None: no error was pending.
pub fn take_socket_error(fd: libc::c_int) -> std::io::Result<Option<std::io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: err and len are live locals of the sizes given; SO_ERROR writes an int.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| std::io::Error::from_raw_os_error(err)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pollerr(fd: libc::c_int) -> bool {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents & libc::POLLERR != 0
    }

    #[test]
    fn take_socket_error_clears_the_pending_error_that_keeps_poll_returning() {
        // A UDP socket connected to a closed port gets ECONNREFUSED pending (ICMP port
        // unreachable), as a packet socket gets ENETDOWN: poll reports POLLERR until it is read.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(addr).unwrap();
        s.send(b"x").unwrap();
        let fd = s.as_raw_fd();
        let mut waited = 0;
        while !pollerr(fd) && waited < 100 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        assert!(pollerr(fd), "no error pending after the ICMP");
        assert!(pollerr(fd), "POLLERR stays until the error is read");
        let e = take_socket_error(fd).unwrap().expect("an error was pending");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED));
        assert!(!pollerr(fd), "reading SO_ERROR ends POLLERR");
        assert!(take_socket_error(fd).unwrap().is_none());
    }
}
