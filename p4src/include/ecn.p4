/*
 * p4netem: ECN (RFC 3168) for the stages that mark instead of dropping: the AQM of the
 * rate queue (codel.p4, red.p4, with set_impairment.ecn) and netem's `ecn` on the loss
 * stage (loss.p4, with set_impairment.loss_ecn).
 */
#ifndef P4NETEM_ECN_P4
#define P4NETEM_ECN_P4

/* ECN-capable transport (ECT(0), ECT(1)) or already CE: a packet that can carry a mark.
 * A frame the parser did not take as IP (non-IP, malformed) is not. */
bool is_ect(in headers_t hdr) {
    return (hdr.ipv4.isValid() && hdr.ipv4.ecn != 0) ||
           (hdr.ipv6.isValid() && hdr.ipv6.traffic_class[1:0] != 0);
}

/*
 * Marks the packet CE (ECN 11). IPv4: the header checksum is updated for the changed
 * first word (RFC 1624, HC' = ~(~HC + ~m + m')), not recomputed, so a corrupted header
 * stays corrupted. IPv6 has no header checksum.
 */
control MarkCe(inout headers_t hdr, inout metadata_t meta) {
    apply {
        if (hdr.ipv4.isValid()) {
            bit<16> old_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
            hdr.ipv4.ecn = 3;
            bit<16> new_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
            bit<32> sum = (bit<32>)(~hdr.ipv4.hdr_checksum) + (bit<32>)(~old_word) + (bit<32>)new_word;
            sum = (sum & 0xFFFF) + (sum >> 16);
            sum = (sum & 0xFFFF) + (sum >> 16);
            hdr.ipv4.hdr_checksum = ~sum[15:0];
        } else if (hdr.ipv6.isValid()) {
            hdr.ipv6.traffic_class[1:0] = 3;
        }
        meta.ecn_marked = 1;
    }
}

#endif
