/*
 * p4netem: corruption stage (contract stage 5).
 *
 * With corrupt_prob, one bit chosen uniformly in bytes [14, len) is flipped. A
 * P4 program can only change bytes it has parsed, and the first-pass parse stops
 * at L4, so the flip happens in two steps:
 *   decide (PASS_FIRST / PASS_DUP): draw the bit, count, set corrupt_pending;
 *   flip   (next PASS_HOLD): the parser cut the frame around the target byte
 *          (parse_corrupt_target), the byte is XORed, the deparser re-joins it.
 * The flip lands before the packet leaves, and rate/delay only depend on the
 * frame length, so the observable result is the one of stage 5.
 */
#ifndef P4NETEM_CORRUPTION_P4
#define P4NETEM_CORRUPTION_P4

control CorruptionStage(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.profile_corrupt")
    @id(0x12000006)
    counter(PD_COUNT, CounterType.packets_and_bytes) profile_corrupt;

    /* netem's `last` for corrupt_corr's correlated draws (probability.p4 corr_next). */
    @name(".P4netemIngress.corrupt_corr_last")
    @id(0x16000053)
    register<bit<33>>(PD_COUNT) corrupt_corr_last;

    apply {
        if (meta.pass_kind == PASS_HOLD) {
            if (meta.corrupt_pending == 1) {
                /* Invalid only if the re-parse failed (frame shorter than at
                 * decision time, which recirculation does not do). */
                if (hdr.corrupt_byte.isValid()) {
                    hdr.corrupt_byte.value = hdr.corrupt_byte.value ^ meta.corrupt_mask;
                }
                meta.corrupt_pending = 0;
            }
        } else if (meta.imp.corrupt_prob != 0 && standard_metadata.packet_length > ETH_HDR_BYTES) {
            bit<32> draw;
            random<bit<32>>(draw, 0, 0xFFFFFFFF);
            if (meta.imp.corrupt_corr != 0) {
                bit<33> cell;
                bit<32> fresh;
                corrupt_corr_last.read(cell, meta.pd);
                random<bit<32>>(fresh, 0, 0xFFFFFFFF);
                cell = corr_next(draw, fresh, cell, meta.imp.corrupt_corr);
                corrupt_corr_last.write(meta.pd, cell);
                draw = cell[31:0];
            }
            if (chance(draw, meta.imp.corrupt_prob)) {
                bit<32> end_byte = standard_metadata.packet_length;
                if (end_byte > MAX_FRAME_BYTES) {
                    end_byte = MAX_FRAME_BYTES;
                }
                bit<32> bit_index;
                random<bit<32>>(bit_index, ETH_HDR_BYTES * 8, end_byte * 8 - 1);
                meta.corrupt_byte = bit_index >> 3;
                meta.corrupt_mask = 8w1 << bit_index[2:0];
                meta.corrupt_pending = 1;
                profile_corrupt.count(meta.pd);
            }
        }
    }
}

#endif
