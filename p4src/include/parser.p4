/*
 * p4netem: parser and deparser.
 *
 * A packet can enter the parser several times on v1model (see docs/p4-pipeline.md):
 *   PASS_FIRST  arrived on a port (or from the CPU): full parse.
 *   PASS_DUP    a duplicate coming back from egress: nothing to parse, the frame
 *               travels as payload and is re-emitted byte for byte.
 *   PASS_HOLD   waiting for its release time: likewise, unless a bit flip is pending,
 *               in which case the frame is cut around the target byte.
 * Parser errors do not drop the packet on v1model; ingress counts them on the first
 * pass and treats the frame as non-IP (contract: malformed packets).
 */
#ifndef P4NETEM_PARSER_P4
#define P4NETEM_PARSER_P4

parser P4netemParser(packet_in packet,
                     out headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    state start {
        transition select(meta.pass_kind, meta.corrupt_pending) {
            (PASS_FIRST, 0): parse_first_pass;
            (PASS_HOLD, 1):  parse_corrupt_target;
            default:         accept;
        }
    }

    state parse_first_pass {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default:  parse_ethernet;
        }
    }

    /* A PacketOut is sent unchanged: only its controller header is consumed. */
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition accept;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan_outer;
            ETHERTYPE_QINQ: parse_vlan_outer;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default:        accept;
        }
    }

    state parse_vlan_outer {
        packet.extract(hdr.vlan_outer);
        transition select(hdr.vlan_outer.ether_type) {
            ETHERTYPE_VLAN: parse_vlan_inner;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default:        accept;
        }
    }

    /* A third tag is not parsed: the frame is classified as non-IP with EtherType 0x8100. */
    state parse_vlan_inner {
        packet.extract(hdr.vlan_inner);
        transition select(hdr.vlan_inner.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default:        accept;
        }
    }

    /* EtherType IPv4 with another version number is malformed: no default, so NoMatch. */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.version) {
            4: parse_ipv4_ihl;
        }
    }

    /* An IHL below 5 words cannot hold the fixed header. */
    state parse_ipv4_ihl {
        verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
        transition select(hdr.ipv4.ihl) {
            5:       parse_ipv4_payload;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) * 32);
        transition parse_ipv4_payload;
    }

    /* Only the first fragment carries the L4 header; later fragments keep ports at 0. */
    state parse_ipv4_payload {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_TCP):  parse_tcp;
            (0, IP_PROTO_UDP):  parse_udp;
            (0, IP_PROTO_ICMP): parse_icmp;
            default:            accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.version) {
            6: parse_ipv6_payload;
        }
    }

    /* Extension headers are not walked: ip_proto is the first next-header value. */
    state parse_ipv6_payload {
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_TCP:    parse_tcp;
            IP_PROTO_UDP:    parse_udp;
            IP_PROTO_ICMPV6: parse_icmp;
            default:         accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }

    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }

    /* meta.corrupt_byte is in [ETH_HDR_BYTES, frame length), chosen by CorruptionStage. */
    state parse_corrupt_target {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.corrupt_skip, (meta.corrupt_byte - ETH_HDR_BYTES) * 8);
        packet.extract(hdr.corrupt_byte);
        transition accept;
    }
}

/*
 * Emits whatever the parser extracted, in wire order; the unparsed rest of the frame
 * follows as payload. packet_out is never emitted (ingress invalidates it) and
 * packet_in only on the final pass of a frame bound for the CPU port.
 */
control P4netemDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.corrupt_skip);
        packet.emit(hdr.corrupt_byte);
        packet.emit(hdr.vlan_outer);
        packet.emit(hdr.vlan_inner);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.icmp);
    }
}

#endif
