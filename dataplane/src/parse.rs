//! Parser: Ethernet, up to two VLAN tags (802.1Q / 802.1ad), IPv4 (with options), IPv6, TCP, UDP,
//! ICMP/ICMPv6 into the classifier key, mirroring `p4src/include/parser.p4` state by state.
//!
//! Error classes are v1model's: extracting past the end of the frame is `PacketTooShort`, a version
//! field that selects no state is `NoMatch`, an IPv4 IHL below 5 is `HeaderTooShort`. A frame with
//! a parser error is classified with every `meta` key 0 and forwarded by port_map alone
//! (contract). The parser reads only through bounds-checked slices, so no input can make it panic.
use crate::contract::ParserError;
use crate::tables::ClassKey;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
pub const IP_PROTO_ICMP: u8 = 1;
pub const IP_PROTO_TCP: u8 = 6;
pub const IP_PROTO_UDP: u8 = 17;
pub const IP_PROTO_ICMPV6: u8 = 58;
pub const ETH_HDR_BYTES: usize = 14;

/// What the pipeline needs from a frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Classifier key; `ingress_port` is always set, the `meta` fields only without error.
    pub key: ClassKey,
    /// The IP header, for ECN (None: not IP, or a parser error).
    pub ip: Option<IpHdr>,
    pub dst_mac: u64,
    pub src_mac: u64,
    pub error: Option<ParserError>,
}

impl Parsed {
    /// The L2 tables (l2_learn, l2_fwd) apply only to well-formed frames (forwarding.p4).
    #[inline]
    pub fn l2_usable(&self) -> bool {
        self.error.is_none()
    }
}

/// Where a frame's IPv4/IPv6 header is and its ECN field (the AQM marks CE there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHdr {
    pub off: u16,
    pub v4: bool,
    pub ecn: u8,
}

impl IpHdr {
    /// ECN-capable transport (ECT(0), ECT(1)) or already CE.
    #[inline]
    pub fn ect(&self) -> bool {
        self.ecn != 0
    }

    /// Sets ECN to CE (11) in `frame`: IPv4 with the header checksum updated incrementally
    /// (RFC 1624: HC' = ~(~HC + ~m + m')), not recomputed, so a corrupted header stays corrupted
    /// (as p4src's MarkCe). IPv6 has no header checksum.
    pub fn mark_ce(&self, frame: &mut [u8]) {
        let o = self.off as usize;
        if self.v4 {
            let Some(h) = frame.get_mut(o..o + 12) else { return };
            let old = u16::from_be_bytes([h[0], h[1]]);
            h[1] |= 0x03;
            let new = u16::from_be_bytes([h[0], h[1]]);
            let hc = u16::from_be_bytes([h[10], h[11]]);
            let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        } else if let Some(b) = frame.get_mut(o + 1) {
            *b |= 0x30; // traffic class bits 1..0 are bits 5..4 of the second byte
        }
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

#[inline]
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[inline]
fn be128(b: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(b.get(at..at + 16)?.try_into().ok()?))
}

#[inline]
fn mac(b: &[u8], at: usize) -> u64 {
    b[at..at + 6].iter().fold(0u64, |acc, &x| acc << 8 | x as u64)
}

pub fn parse(frame: &[u8], ingress_port: u16) -> Parsed {
    let mut p = Parsed::default();
    p.key.ingress_port = ingress_port;
    if frame.len() < ETH_HDR_BYTES {
        p.error = Some(ParserError::PacketTooShort);
        return p;
    }
    p.dst_mac = mac(frame, 0);
    p.src_mac = mac(frame, 6);
    let mut k = ClassKey { ingress_port, ..ClassKey::default() };
    let mut ip = None;
    match parse_l3(frame, &mut k, &mut ip) {
        Ok(()) => {
            p.key = k;
            p.ip = ip;
        }
        Err(e) => p.error = Some(e),
    }
    p
}

fn parse_l3(f: &[u8], k: &mut ClassKey, ip: &mut Option<IpHdr>) -> Result<(), ParserError> {
    let short = ParserError::PacketTooShort;
    let mut off = 12;
    let mut et = be16(f, off).ok_or(short)?;
    off += 2;
    if et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ {
        et = be16(f, off + 2).ok_or(short)?;
        off += 4;
        if et == ETHERTYPE_VLAN {
            et = be16(f, off + 2).ok_or(short)?;
            off += 4;
            // A third tag is not parsed: the frame is non-IP with EtherType 0x8100.
            if et != ETHERTYPE_IPV4 && et != ETHERTYPE_IPV6 {
                k.ether_type = et;
                return Ok(());
            }
        }
    }
    k.ether_type = et;
    let (proto, l4) = match et {
        ETHERTYPE_IPV4 => {
            let h = f.get(off..off + 20).ok_or(short)?;
            if h[0] >> 4 != 4 {
                return Err(ParserError::NoMatch);
            }
            let ihl = (h[0] & 0x0f) as usize;
            if ihl < 5 {
                return Err(ParserError::HeaderTooShort);
            }
            if f.len() < off + ihl * 4 {
                return Err(short);
            }
            let frag_offset = be16(h, 6).ok_or(short)? & 0x1fff;
            k.dscp = h[1] >> 2;
            *ip = Some(IpHdr { off: off as u16, v4: true, ecn: h[1] & 0x03 });
            k.ip_proto = h[9];
            k.ipv4_src = be32(h, 12).ok_or(short)?;
            k.ipv4_dst = be32(h, 16).ok_or(short)?;
            if frag_offset != 0 {
                return Ok(()); // later fragments carry no L4 header
            }
            (h[9], off + ihl * 4)
        }
        ETHERTYPE_IPV6 => {
            let h = f.get(off..off + 40).ok_or(short)?;
            if h[0] >> 4 != 6 {
                return Err(ParserError::NoMatch);
            }
            let tc = (be16(h, 0).ok_or(short)? >> 4) as u8;
            k.dscp = tc >> 2;
            *ip = Some(IpHdr { off: off as u16, v4: false, ecn: tc & 0x03 });
            k.ip_proto = h[6];
            k.ipv6_src = be128(h, 8).ok_or(short)?;
            k.ipv6_dst = be128(h, 24).ok_or(short)?;
            (h[6], off + 40)
        }
        _ => return Ok(()),
    };
    let icmp = if et == ETHERTYPE_IPV4 { IP_PROTO_ICMP } else { IP_PROTO_ICMPV6 };
    match proto {
        IP_PROTO_TCP => {
            f.get(l4..l4 + 20).ok_or(short)?;
            k.l4_src_port = be16(f, l4).ok_or(short)?;
            k.l4_dst_port = be16(f, l4 + 2).ok_or(short)?;
        }
        IP_PROTO_UDP => {
            f.get(l4..l4 + 8).ok_or(short)?;
            k.l4_src_port = be16(f, l4).ok_or(short)?;
            k.l4_dst_port = be16(f, l4 + 2).ok_or(short)?;
        }
        p if p == icmp => {
            f.get(l4..l4 + 4).ok_or(short)?;
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rng::Prng;

    pub fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        f.extend(ethertype.to_be_bytes());
        f
    }

    pub fn ipv4_udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
        let mut f = eth(ETHERTYPE_IPV4);
        let total = 20 + 8 + payload;
        f.extend([0x45, 0xb8]); // DSCP 46 (EF)
        f.extend((total as u16).to_be_bytes());
        f.extend([0, 0, 0x40, 0, 64, IP_PROTO_UDP, 0, 0]);
        f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend(sport.to_be_bytes());
        f.extend(dport.to_be_bytes());
        f.extend(((8 + payload) as u16).to_be_bytes());
        f.extend([0, 0]);
        f.extend(std::iter::repeat_n(0xab, payload));
        f
    }

    #[test]
    fn ipv4_udp_fields() {
        let p = parse(&ipv4_udp(1234, 5201, 10), 3);
        assert_eq!(p.error, None);
        assert_eq!(p.dst_mac, 0x0200_0000_0002);
        assert_eq!(p.src_mac, 0x0200_0000_0001);
        let k = p.key;
        assert_eq!((k.ingress_port, k.ether_type, k.ip_proto, k.dscp), (3, 0x0800, 17, 46));
        assert_eq!((k.ipv4_src, k.ipv4_dst), (0x0a00_0001, 0x0a00_0002));
        assert_eq!((k.l4_src_port, k.l4_dst_port), (1234, 5201));
    }

    #[test]
    fn vlan_and_qinq_give_inner_ethertype() {
        let inner = ipv4_udp(1, 2, 0);
        let mut f = inner[..12].to_vec();
        f.extend([0x88, 0xa8, 0, 5, 0x81, 0x00, 0, 7]);
        f.extend(&inner[12..]);
        let p = parse(&f, 1);
        assert_eq!(p.error, None);
        assert_eq!((p.key.ether_type, p.key.l4_dst_port), (0x0800, 2));
        // Three tags: third one not parsed.
        let mut g = inner[..12].to_vec();
        g.extend([0x81, 0x00, 0, 5, 0x81, 0x00, 0, 7, 0x81, 0x00, 0, 9]);
        g.extend(&inner[12..]);
        let q = parse(&g, 1);
        assert_eq!((q.error, q.key.ether_type, q.key.ipv4_src), (None, 0x8100, 0));
    }

    #[test]
    fn ipv6_tcp_fields() {
        let mut f = eth(ETHERTYPE_IPV6);
        f.extend([0x6b, 0x80, 0, 0, 0, 20, IP_PROTO_TCP, 64]); // traffic class 0xb8
        f.extend([0x20, 0x01, 0x0d, 0xb8]);
        f.extend([0u8; 11]);
        f.push(1);
        f.extend([0x20, 0x01, 0x0d, 0xb8]);
        f.extend([0u8; 11]);
        f.push(2);
        f.extend(443u16.to_be_bytes());
        f.extend(50000u16.to_be_bytes());
        f.extend([0u8; 16]);
        let p = parse(&f, 2);
        assert_eq!(p.error, None);
        assert_eq!((p.key.ip_proto, p.key.dscp, p.key.l4_src_port, p.key.l4_dst_port), (6, 46, 443, 50000));
        assert_eq!(p.key.ipv6_dst & 0xff, 2);
        assert_eq!(p.key.ipv6_src >> 96, 0x2001_0db8);
    }

    #[test]
    fn error_classes() {
        assert_eq!(parse(&[0u8; 13], 0).error, Some(ParserError::PacketTooShort));
        let mut f = ipv4_udp(1, 2, 0);
        f[14] = 0x65; // version 6 under EtherType IPv4
        assert_eq!(parse(&f, 0).error, Some(ParserError::NoMatch));
        f[14] = 0x44; // IHL 4
        assert_eq!(parse(&f, 0).error, Some(ParserError::HeaderTooShort));
        f[14] = 0x4f; // IHL 15: options past the end
        assert_eq!(parse(&f, 0).error, Some(ParserError::PacketTooShort));
        let g = ipv4_udp(1, 2, 0);
        let p = parse(&g[..g.len() - 3], 7); // truncated UDP header
        assert_eq!(p.error, Some(ParserError::PacketTooShort));
        // Keys read as 0 except the ingress port.
        assert_eq!(p.key, ClassKey { ingress_port: 7, ..ClassKey::default() });
        // Later fragments: no L4 parse, no error.
        let mut h = ipv4_udp(1, 2, 0);
        h[20] = 0x00;
        h[21] = 0x10;
        let q = parse(&h[..34], 0);
        assert_eq!((q.error, q.key.l4_src_port, q.key.ip_proto), (None, 0, 17));
    }

    #[test]
    fn garbage_and_truncations_never_panic() {
        let mut r = Prng::new(11);
        let base = ipv4_udp(1000, 2000, 40);
        for cut in 0..base.len() {
            let _ = parse(&base[..cut], 1);
        }
        let mut buf = [0u8; 200];
        for _ in 0..200_000 {
            let len = r.up_to(120) as usize;
            for b in buf.iter_mut().take(len) {
                *b = r.next_u32() as u8;
            }
            // Bias towards interesting EtherTypes and versions.
            if len > 18 && r.chance(u32::MAX / 2) {
                let et = [0x0800u16, 0x86dd, 0x8100, 0x88a8][r.up_to(3) as usize];
                buf[12..14].copy_from_slice(&et.to_be_bytes());
                buf[14] = [0x45u8, 0x60, 0x4f, 0x41][r.up_to(3) as usize];
            }
            let p = parse(&buf[..len], 5);
            if p.error.is_some() {
                assert_eq!(p.key.ipv4_src, 0);
                assert_eq!(p.key.ingress_port, 5);
            }
        }
    }
}
