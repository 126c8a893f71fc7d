//! Offload check: segmentation/receive offloads and checksum offloads make raw-socket forwarding
//! wrong (GRO/GSO/TSO hand us frames larger than the wire's, checksum offload leaves checksums
//! for a NIC that never computes them), so the switch refuses to start while any is on.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::sys::*;

/// (ethtool -K name, get command) of the offloads that must be off.
const CHECKED: &[(&str, u32)] = &[
    ("tx", ETHTOOL_GTXCSUM),
    ("rx", ETHTOOL_GRXCSUM),
    ("gso", ETHTOOL_GGSO),
    ("tso", ETHTOOL_GTSO),
    ("gro", ETHTOOL_GGRO),
];

/// The `ethtool -K` names of the offloads that are on for `ifname`. A device that does not
/// support a query (EOPNOTSUPP) has that offload off.
pub fn offloads_on(ifname: &str) -> std::io::Result<Vec<&'static str>> {
    let name = ifname_bytes(ifname)?;
    // SAFETY: plain socket creation; ownership taken immediately.
    let fd =
        unsafe { OwnedFd::from_raw_fd(cvt(libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?) };
    let mut on = Vec::new();
    for &(flag, cmd) in CHECKED {
        let mut v = EthtoolValue { cmd, data: 0 };
        let mut ifr = IfreqData { ifr_name: name, ifr_data: &mut v as *mut _ as *mut libc::c_void, _pad: [0; 16] };
        // SAFETY: ifr and v outlive the call; SIOCETHTOOL reads ifr_name and writes v.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => continue,
                Some(libc::ENODEV) => {
                    return Err(std::io::Error::new(e.kind(), format!("no interface named {ifname}")));
                }
                _ => return Err(e),
            }
        }
        if v.data != 0 {
            on.push(flag);
        }
    }
    Ok(on)
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// Whether `ifname` is a loopback interface (IFF_LOOPBACK): it cannot be a port (a frame sent on
/// it comes back in on it, and its checksum offloads cannot be turned off).
pub fn is_loopback(ifname: &str) -> std::io::Result<bool> {
    // SAFETY: plain socket creation; ownership taken immediately.
    let fd =
        unsafe { OwnedFd::from_raw_fd(cvt(libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?) };
    Ok(iface_flags(fd.as_raw_fd(), ifname)? & libc::IFF_LOOPBACK != 0)
}

/// The index of the interface named `ifname` (one of its alternative names too), 0 when there is
/// none.
pub fn ifindex(ifname: &str) -> i32 {
    let Ok(name) = std::ffi::CString::new(ifname) else { return 0 };
    // SAFETY: name is a valid NUL-terminated string.
    unsafe { libc::if_nametoindex(name.as_ptr()) as i32 }
}

/// `ifname`'s MTU now (SIOCGIFMTU), read at start to size the rings and buffers before any port
/// opens.
pub fn mtu(ifname: &str) -> std::io::Result<u32> {
    // SAFETY: plain socket creation; ownership taken immediately.
    let fd =
        unsafe { OwnedFd::from_raw_fd(cvt(libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?) };
    let mut ifr = IfreqMtu { ifr_name: ifname_bytes(ifname)?, ifr_mtu: 0, _pad: [0; 20] };
    // SAFETY: ifr outlives the call; SIOCGIFMTU reads ifr_name and writes ifr_mtu.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), SIOCGIFMTU as _, &mut ifr) })?;
    Ok(ifr.ifr_mtu.max(0) as u32)
}

/// What is wrong with `ifname`'s offloads ([`offload_error`]), or None when they are all off: the
/// check a port passes at start and again before it is reopened on an interface that came back.
pub fn offload_problem(ifname: &str) -> std::io::Result<Option<String>> {
    let on = offloads_on(ifname)?;
    Ok((!on.is_empty()).then(|| offload_error(ifname, &on)))
}

/// The error text for an interface with offloads on: names it and gives the exact command.
pub fn offload_error(ifname: &str, on: &[&str]) -> String {
    let args: Vec<String> = on.iter().map(|f| format!("{f} off")).collect();
    format!(
        "interface {ifname} has offloads on ({}), which break raw-socket forwarding; turn them off with:\n    ethtool -K {ifname} {}\n(and on the peer of a veth pair as well)",
        on.join(", "),
        args.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_query_works_and_unknown_interface_is_named() {
        // lo exists in every namespace; the query must succeed whatever its settings.
        assert!(offloads_on("lo").is_ok());
        assert!(is_loopback("lo").unwrap());
        assert!(is_loopback("p4nnosuchif0").is_err());
        let e = offloads_on("p4nnosuchif0").unwrap_err();
        assert!(e.to_string().contains("p4nnosuchif0"), "{e}");
        let msg = offload_error("veth1", &["tx", "gro"]);
        assert!(msg.contains("ethtool -K veth1 tx off gro off"), "{msg}");
    }
}
