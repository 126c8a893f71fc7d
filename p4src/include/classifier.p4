/*
 * p4netem: classification stage (contract table classifier).
 *
 * Fills the classifier keys from the parsed headers, then maps the packet to a
 * profile, a direction and a UE id. The keys are metadata copies, not header
 * fields, so that an absent header reads as 0 instead of being undefined.
 */
#ifndef P4NETEM_CLASSIFIER_P4
#define P4NETEM_CLASSIFIER_P4

control Classify(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.set_profile")
    @id(0x01000005)
    action set_profile(profile_id_t profile_id, direction_t direction, ue_id_t ue_id) {
        meta.profile_id = profile_id;
        meta.direction = direction;
        meta.ue_id = ue_id;
    }

    /* One entry for many hosts, each its own UE (and radio): ue_id = ue_base + (IPv4 source,
     * or destination with ue_from_dst, & ue_mask). Branch-free: `pick` is all ones for dst. */
    @name(".P4netemIngress.set_profile_ue_by_addr")
    @id(0x01000008)
    action set_profile_ue_by_addr(profile_id_t profile_id, direction_t direction, ue_id_t ue_base,
                                  bit<32> ue_mask, bit<1> ue_from_dst) {
        meta.profile_id = profile_id;
        meta.direction = direction;
        bit<32> pick = (bit<32>)0 - (bit<32>)ue_from_dst;
        bit<32> addr = (meta.ipv4_src & ~pick) | (meta.ipv4_dst & pick);
        meta.ue_id = ue_base + (addr & ue_mask);
    }

    @name(".P4netemIngress.classifier")
    @id(0x02000004)
    table classifier {
        key = {
            standard_metadata.ingress_port : ternary;
            meta.ether_type                : ternary;
            meta.ipv4_src                  : ternary;
            meta.ipv4_dst                  : ternary;
            meta.ipv6_src                  : ternary;
            meta.ipv6_dst                  : ternary;
            meta.ip_proto                  : ternary;
            meta.l4_src_port               : range;
            meta.l4_dst_port               : range;
            meta.dscp                      : ternary;
        }
        actions = {
            set_profile;
            set_profile_ue_by_addr;
        }
        default_action = set_profile(0, 0, 0);
        size = CLASSIFIER_SIZE;
    }

    apply {
        meta.ether_type = 0;
        meta.ipv4_src = 0;
        meta.ipv4_dst = 0;
        meta.ipv6_src = 0;
        meta.ipv6_dst = 0;
        meta.ip_proto = 0;
        meta.l4_src_port = 0;
        meta.l4_dst_port = 0;
        meta.dscp = 0;

        /* A malformed frame keeps every key at 0 (contract): whatever the parser
         * extracted before the error is not trusted. */
        if (standard_metadata.parser_error == error.NoError) {
            /* The innermost EtherType: the one that names the payload. */
            if (hdr.vlan_inner.isValid()) {
                meta.ether_type = hdr.vlan_inner.ether_type;
            } else if (hdr.vlan_outer.isValid()) {
                meta.ether_type = hdr.vlan_outer.ether_type;
            } else if (hdr.ethernet.isValid()) {
                meta.ether_type = hdr.ethernet.ether_type;
            }

            if (hdr.ipv4.isValid()) {
                meta.ipv4_src = hdr.ipv4.src_addr;
                meta.ipv4_dst = hdr.ipv4.dst_addr;
                meta.ip_proto = hdr.ipv4.protocol;
                meta.dscp = hdr.ipv4.dscp;
            } else if (hdr.ipv6.isValid()) {
                meta.ipv6_src = hdr.ipv6.src_addr;
                meta.ipv6_dst = hdr.ipv6.dst_addr;
                meta.ip_proto = hdr.ipv6.next_hdr;
                meta.dscp = hdr.ipv6.traffic_class[7:2];
            }

            if (hdr.tcp.isValid()) {
                meta.l4_src_port = hdr.tcp.src_port;
                meta.l4_dst_port = hdr.tcp.dst_port;
            } else if (hdr.udp.isValid()) {
                meta.l4_src_port = hdr.udp.src_port;
                meta.l4_dst_port = hdr.udp.dst_port;
            }
        }

        classifier.apply();

        /* Registers and counters hold PD_COUNT profile-directions; a profile id the
         * arrays cannot index is treated as the default profile rather than read
         * out of bounds (the control plane rejects such ids in the first place). */
        if (meta.profile_id >= MAX_PROFILES) {
            meta.profile_id = DEFAULT_PROFILE;
        }
        meta.pd = ((bit<32>)meta.profile_id << 1) | (bit<32>)meta.direction;
    }
}

#endif
