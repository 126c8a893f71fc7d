/*
 * p4netem: checksum controls.
 *
 * Neither control does anything, on purpose:
 *  - Verification: an emulator forwards what it receives. A frame with a bad
 *    checksum is the endpoints' business (and v1model would only set a flag).
 *  - Update: no stage rewrites a header field that a checksum covers, except
 *    CorruptionStage, whose flipped bit must stay visible to the receiver as a
 *    checksum failure, exactly like netem's corrupt. Recomputing the IPv4 header
 *    checksum here would hide corruption that lands in the IPv4 header.
 */
#ifndef P4NETEM_CHECKSUMS_P4
#define P4NETEM_CHECKSUMS_P4

control P4netemVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control P4netemComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

#endif
