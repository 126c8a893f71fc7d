//! The parser (parse.rs) against frames built from their fields: every field it reports is the
//! one written; any prefix too short for a header is PacketTooShort; no input panics; a frame
//! with a parser error carries no meta keys; marking CE keeps an IPv4 header checksum valid.
use proptest::prelude::*;

use crate::contract::ParserError;
use crate::parse::*;
use crate::tables::ClassKey;

#[derive(Debug, Clone)]
enum L3 {
    V4 { ihl: u8, dscp_ecn: u8, frag: u16, proto: u8, src: u32, dst: u32 },
    V6 { tc: u8, proto: u8, src: u128, dst: u128 },
    Other(u16),
}

#[derive(Debug, Clone)]
struct Frame {
    dst: [u8; 6],
    src: [u8; 6],
    tags: Vec<u16>, // outer TPIDs (0x8100 / 0x88a8)
    l3: L3,
    sport: u16,
    dport: u16,
    payload: usize,
}

impl Frame {
    fn ethertype(&self) -> u16 {
        match self.l3 {
            L3::V4 { .. } => ETHERTYPE_IPV4,
            L3::V6 { .. } => ETHERTYPE_IPV6,
            L3::Other(et) => et,
        }
    }

    fn proto(&self) -> Option<u8> {
        match self.l3 {
            L3::V4 { proto, .. } | L3::V6 { proto, .. } => Some(proto),
            L3::Other(_) => None,
        }
    }

    /// The bytes, and the length the parser must see in full (every header it extracts).
    fn build(&self) -> (Vec<u8>, usize) {
        let mut f = Vec::with_capacity(128);
        f.extend(self.dst);
        f.extend(self.src);
        for (i, tpid) in self.tags.iter().enumerate() {
            f.extend(tpid.to_be_bytes());
            f.extend((i as u16 + 5).to_be_bytes()); // TCI
        }
        f.extend(self.ethertype().to_be_bytes());
        let l3 = f.len();
        let mut needed = l3;
        let mut l4 = None;
        match self.l3 {
            L3::V4 { ihl, dscp_ecn, frag, proto, src, dst } => {
                f.extend([0x40 | ihl, dscp_ecn, 0, 0, 0, 0]);
                f.extend(frag.to_be_bytes());
                f.extend([64, proto, 0, 0]);
                f.extend(src.to_be_bytes());
                f.extend(dst.to_be_bytes());
                f.extend(std::iter::repeat_n(1u8, (ihl as usize - 5) * 4)); // options (NOPs)
                needed = f.len();
                if frag & 0x1fff == 0 {
                    l4 = Some(f.len());
                }
            }
            L3::V6 { tc, proto, src, dst } => {
                f.extend([0x60 | tc >> 4, tc << 4, 0, 0, 0, 0, proto, 64]);
                f.extend(src.to_be_bytes());
                f.extend(dst.to_be_bytes());
                needed = f.len();
                l4 = Some(f.len());
            }
            L3::Other(_) => {}
        }
        if let (Some(at), Some(proto)) = (l4, self.proto()) {
            let icmp = if matches!(self.l3, L3::V4 { .. }) { IP_PROTO_ICMP } else { IP_PROTO_ICMPV6 };
            let l4_len = match proto {
                IP_PROTO_TCP => 20,
                IP_PROTO_UDP => 8,
                p if p == icmp => 4,
                _ => 0,
            };
            f.extend(self.sport.to_be_bytes());
            f.extend(self.dport.to_be_bytes());
            f.extend(std::iter::repeat_n(0u8, 16));
            needed = at + l4_len;
        }
        f.extend(std::iter::repeat_n(0xa5u8, self.payload));
        (f, needed)
    }
}

fn l3() -> impl Strategy<Value = L3> {
    let proto =
        prop_oneof![Just(IP_PROTO_TCP), Just(IP_PROTO_UDP), Just(IP_PROTO_ICMP), Just(IP_PROTO_ICMPV6), any::<u8>()];
    prop_oneof![
        (
            5u8..=15,
            any::<u8>(),
            prop_oneof![Just(0u16), Just(0x4000), any::<u16>()],
            proto.clone(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(ihl, dscp_ecn, frag, proto, src, dst)| L3::V4 { ihl, dscp_ecn, frag, proto, src, dst }),
        (any::<u8>(), proto, any::<u128>(), any::<u128>()).prop_map(|(tc, proto, src, dst)| L3::V6 {
            tc,
            proto,
            src,
            dst
        }),
        any::<u16>()
            .prop_filter("not IP or a tag", |et| ![ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, ETHERTYPE_QINQ]
                .contains(et))
            .prop_map(L3::Other),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    // Up to two tags: the outer one 802.1Q or 802.1ad, an inner one 802.1Q (what the parser takes).
    let tags = prop_oneof![
        Just(vec![]),
        prop_oneof![Just(ETHERTYPE_VLAN), Just(ETHERTYPE_QINQ)].prop_map(|t| vec![t]),
        prop_oneof![Just(ETHERTYPE_VLAN), Just(ETHERTYPE_QINQ)].prop_map(|t| vec![t, ETHERTYPE_VLAN]),
    ];
    (any::<[u8; 6]>(), any::<[u8; 6]>(), tags, l3(), any::<u16>(), any::<u16>(), 0usize..64)
        .prop_map(|(dst, src, tags, l3, sport, dport, payload)| Frame { dst, src, tags, l3, sport, dport, payload })
}

fn mac_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0, |a, &b| a << 8 | b as u64)
}

fn ipv4_header_checksum_ok(h: &[u8]) -> bool {
    let ihl = (h[0] & 0x0f) as usize * 4;
    let mut sum: u32 = h[..ihl].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

fn set_ipv4_checksum(h: &mut [u8]) {
    let ihl = (h[0] & 0x0f) as usize * 4;
    h[10] = 0;
    h[11] = 0;
    let mut sum: u32 = h[..ihl].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// A complete frame parses without error into exactly the fields it was built from.
    #[test]
    fn fields_round_trip(fr in frame(), port in any::<u16>()) {
        let (bytes, _) = fr.build();
        let p = parse(&bytes, port);
        prop_assert_eq!(p.error, None);
        prop_assert_eq!((p.dst_mac, p.src_mac), (mac_u64(fr.dst), mac_u64(fr.src)));
        let k = p.key;
        prop_assert_eq!(k.ingress_port, port);
        prop_assert_eq!(k.ether_type, fr.ethertype());
        let l4_parsed = |proto: u8, v4: bool| {
            proto == IP_PROTO_TCP || proto == IP_PROTO_UDP || proto == if v4 { IP_PROTO_ICMP } else { IP_PROTO_ICMPV6 }
        };
        match fr.l3 {
            L3::V4 { dscp_ecn, frag, proto, src, dst, .. } => {
                prop_assert_eq!((k.ipv4_src, k.ipv4_dst, k.ip_proto, k.dscp), (src, dst, proto, dscp_ecn >> 2));
                prop_assert_eq!(p.ip.map(|h| (h.v4, h.ecn)), Some((true, dscp_ecn & 3)));
                let ports = frag & 0x1fff == 0 && (proto == IP_PROTO_TCP || proto == IP_PROTO_UDP);
                prop_assert_eq!((k.l4_src_port, k.l4_dst_port), if ports { (fr.sport, fr.dport) } else { (0, 0) });
                let _ = l4_parsed;
            }
            L3::V6 { tc, proto, src, dst } => {
                prop_assert_eq!((k.ipv6_src, k.ipv6_dst, k.ip_proto, k.dscp), (src, dst, proto, tc >> 2));
                prop_assert_eq!(p.ip.map(|h| (h.v4, h.ecn)), Some((false, tc & 3)));
                let ports = proto == IP_PROTO_TCP || proto == IP_PROTO_UDP;
                prop_assert_eq!((k.l4_src_port, k.l4_dst_port), if ports { (fr.sport, fr.dport) } else { (0, 0) });
            }
            L3::Other(_) => {
                prop_assert_eq!(p.ip, None);
                prop_assert_eq!((k.ipv4_src, k.ipv6_src, k.ip_proto, k.l4_dst_port), (0, 0, 0, 0));
            }
        }
    }

    /// Cut anywhere inside the headers the parser extracts: PacketTooShort and no meta keys; cut
    /// after them (payload only): the same result as the whole frame.
    #[test]
    fn truncation_is_packet_too_short(fr in frame(), cut in any::<prop::sample::Index>()) {
        let (bytes, needed) = fr.build();
        let at = cut.index(bytes.len() + 1);
        let p = parse(&bytes[..at], 9);
        if at < needed {
            prop_assert_eq!(p.error, Some(ParserError::PacketTooShort));
            prop_assert_eq!(p.key, ClassKey { ingress_port: 9, ..ClassKey::default() });
            prop_assert_eq!(p.ip, None);
        } else {
            prop_assert_eq!(p, parse(&bytes, 9));
        }
    }

    /// Any bytes at all: no panic; an error leaves only the ingress port in the key, and no IP header.
    #[test]
    fn any_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), port in any::<u16>()) {
        let p = parse(&bytes, port);
        if p.error.is_some() {
            prop_assert_eq!(p.key, ClassKey { ingress_port: port, ..ClassKey::default() });
            prop_assert_eq!(p.ip, None);
        }
        prop_assert_eq!(p.key.ingress_port, port);
    }

    /// The same with a frame's structure kept and its bytes mutated (reaches deeper states than
    /// random bytes do).
    #[test]
    fn mutated_frames_never_panic(fr in frame(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let (mut bytes, _) = fr.build();
        for (i, x) in flips {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        let p = parse(&bytes, 1);
        if p.error.is_some() {
            prop_assert_eq!(p.key, ClassKey { ingress_port: 1, ..ClassKey::default() });
        }
    }

    /// Marking CE: ECN becomes 11, nothing but the ECN bits and the IPv4 checksum changes, and a
    /// valid IPv4 header checksum stays valid (RFC 1624 incremental update).
    #[test]
    fn mark_ce_keeps_the_checksum_valid(fr in frame()) {
        let (mut bytes, _) = fr.build();
        let Some(ip) = parse(&bytes, 1).ip else { return Ok(()) };
        let o = ip.off as usize;
        if ip.v4 {
            set_ipv4_checksum(&mut bytes[o..]);
        }
        let before = bytes.clone();
        ip.mark_ce(&mut bytes);
        let after = parse(&bytes, 1);
        prop_assert_eq!(after.ip.map(|h| h.ecn), Some(3));
        if ip.v4 {
            prop_assert!(ipv4_header_checksum_ok(&bytes[o..]));
            let changed: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != before[i]).collect();
            prop_assert!(changed.iter().all(|&i| i == o + 1 || i == o + 10 || i == o + 11), "{:?}", changed);
        } else {
            let changed: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != before[i]).collect();
            prop_assert!(changed.iter().all(|&i| i == o + 1), "{:?}", changed);
        }
    }
}
