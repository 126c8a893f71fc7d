/*
 * p4netem: duplication stage (contract stage 4).
 *
 * v1model has one standard way to turn one packet into two: clone. resubmit and
 * recirculate replace the packet instead of copying it, and multicast needs a
 * group per egress port. An ingress-to-egress clone (clone_preserving_field_list,
 * CloneType.I2E) carries the original frame plus the preserved metadata (pd,
 * profile, egress port) to egress, where P4netemEgress recirculates it as
 * PASS_DUP: the copy then runs the corruption, rate and delay stages as a packet
 * of its own, so it uses link capacity and its own delay sample. A copy is never
 * duplicated again because duplication only runs on PASS_FIRST.
 *
 * bmv2 only makes the clone if the controller has created clone session
 * DUP_CLONE_SESSION (any replica port; the copy never leaves from it).
 */
#ifndef P4NETEM_DUPLICATION_P4
#define P4NETEM_DUPLICATION_P4

control DuplicationStage(inout headers_t hdr,
                         inout metadata_t meta,
                         inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.profile_dup")
    @id(0x12000005)
    counter(PD_COUNT, CounterType.packets_and_bytes) profile_dup;

    /* netem's `last` for dup_corr's correlated draws (probability.p4 corr_next). */
    @name(".P4netemIngress.dup_corr_last")
    @id(0x16000052)
    register<bit<33>>(PD_COUNT) dup_corr_last;

    apply {
        if (meta.pass_kind == PASS_FIRST && meta.imp.dup_prob != 0) {
            bit<32> draw;
            random<bit<32>>(draw, 0, 0xFFFFFFFF);
            if (meta.imp.dup_corr != 0) {
                bit<33> cell;
                bit<32> fresh;
                dup_corr_last.read(cell, meta.pd);
                random<bit<32>>(fresh, 0, 0xFFFFFFFF);
                cell = corr_next(draw, fresh, cell, meta.imp.dup_corr);
                dup_corr_last.write(meta.pd, cell);
                draw = cell[31:0];
            }
            if (chance(draw, meta.imp.dup_prob)) {
                clone_preserving_field_list(CloneType.I2E, DUP_CLONE_SESSION, PRESERVE_FL);
                profile_dup.count(meta.pd);
            }
        }
    }
}

#endif
