/*
 * p4netem: loss stage (contract stage 3).
 *
 * Gilbert-Elliott when ge_p != 0: the per-pd state moves first (good->bad with
 * ge_p, bad->good with ge_r), then the packet is lost with the new state's loss
 * probability (reason loss_burst, whichever the state). Otherwise Bernoulli with
 * loss_prob (reason loss_random). Duplicates never pass here: the copy is made
 * after this stage, from a packet that was not lost.
 */
#ifndef P4NETEM_LOSS_P4
#define P4NETEM_LOSS_P4

control LossStage(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* 0 good, 1 bad; any other value written by the controller reads as bad. */
    @name(".P4netemIngress.ge_state")
    @id(0x16000003)
    register<bit<8>>(PD_COUNT) ge_state;

    apply {
        if (meta.pass_kind == PASS_FIRST) {
            bit<32> draw;
            if (meta.imp.ge_p != 0) {
                bit<8> ge;
                ge_state.read(ge, meta.pd);
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                if (ge == GE_GOOD) {
                    if (chance(draw, meta.imp.ge_p)) {
                        ge = GE_BAD;
                    }
                } else {
                    ge = GE_BAD;
                    if (chance(draw, meta.imp.ge_r)) {
                        ge = GE_GOOD;
                    }
                }
                ge_state.write(meta.pd, ge);

                prob_t loss_p = meta.imp.ge_loss_bad;
                if (ge == GE_GOOD) {
                    loss_p = meta.imp.ge_loss_good;
                }
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                if (chance(draw, loss_p)) {
                    meta.drop = 1;
                    meta.drop_reason = DROP_LOSS_BURST;
                }
            } else if (meta.imp.loss_prob != 0) {
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                if (chance(draw, meta.imp.loss_prob)) {
                    meta.drop = 1;
                    meta.drop_reason = DROP_LOSS_RANDOM;
                }
            }
        }
    }
}

#endif
