/*
 * p4netem: loss stage (contract stage 3).
 *
 * Gilbert-Elliott when ge_p != 0: the per-pd state moves first (good->bad with
 * ge_p, bad->good with ge_r), then the packet is lost with the new state's loss
 * probability (reason loss_burst, whichever the state). Otherwise netem's 4-state
 * model when loss4_p13 or loss4_p14 is non-zero: one draw moves the per-pd state exactly
 * as Linux's loss_4state does (its strict comparisons, 32-bit sums), and the packet is
 * lost when the new state is LOST_IN_GAP (reason loss_random) or LOST_IN_BURST (reason
 * loss_burst). Otherwise Bernoulli with loss_prob (reason loss_random), its draws correlated as
 * netem's with loss_corr (netem correlates only this model). Duplicates never pass here: the copy is made
 * after this stage, from a packet that was not lost.
 *
 * With loss_ecn (netem's `ecn`), a lost packet that is ECN-capable (ECT(0), ECT(1) or CE) is
 * marked CE and goes on instead (counted in profile_ecn_mark, not in drops), as Linux's
 * netem_enqueue does on any loss event of any model; a packet that is not is dropped as
 * before. The model's state moves the same either way.
 *
 * First of all, with onoff_recip != 0, the on/off link (onoff.p4, Mahimahi's mm-onoff): a
 * packet that finds it off is dropped (reason link_off, never marked: an outage is not a loss
 * event) and the loss models do not see it, so their state does not move.
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

    /* netem's 4-state model: LOSS4_* (0, never written, reads as TX_IN_GAP). */
    @name(".P4netemIngress.loss4_state")
    @id(0x16000019)
    register<bit<8>>(PD_COUNT) loss4_state;

    /* netem's `last` for the Bernoulli loss's correlated draws (probability.p4 corr_next). */
    @name(".P4netemIngress.loss_corr_last")
    @id(0x16000051)
    register<bit<33>>(PD_COUNT) loss_corr_last;

    MarkCe() mark_ce;
    OnOffLink() onoff;

    apply {
        if (meta.pass_kind == PASS_FIRST) {
            bit<32> draw;
            bool lost = false;
            bit<4> reason = DROP_LOSS_RANDOM;
            bool link_off = false;
            if (meta.imp.onoff_recip != 0) {
                onoff.apply(meta, (time_ns_t)standard_metadata.ingress_global_timestamp * NS_PER_US, link_off);
            }
            if (link_off) {
                lost = true;
                reason = DROP_LINK_OFF;
            } else if (meta.imp.ge_p != 0) {
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
                    lost = true;
                    reason = DROP_LOSS_BURST;
                }
            } else if (meta.imp.loss4_p13 != 0 || meta.imp.loss4_p14 != 0) {
                bit<8> st;
                loss4_state.read(st, meta.pd);
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                bit<8> next = st;
                reason = DROP_LOSS_BURST;
                if (st == LOSS4_TX_IN_BURST) {
                    if (draw < meta.imp.loss4_p23) {
                        next = LOSS4_LOST_IN_BURST;
                        lost = true;
                    }
                } else if (st == LOSS4_LOST_IN_BURST) {
                    if (draw < meta.imp.loss4_p32) {
                        next = LOSS4_TX_IN_BURST;
                    } else if (meta.imp.loss4_p32 < draw &&
                               draw < meta.imp.loss4_p31 + meta.imp.loss4_p32) {
                        next = LOSS4_TX_IN_GAP;
                    } else if (meta.imp.loss4_p31 + meta.imp.loss4_p32 < draw) {
                        lost = true;
                    }
                } else if (st == LOSS4_LOST_IN_GAP) {
                    next = LOSS4_TX_IN_GAP;
                } else {
                    next = LOSS4_TX_IN_GAP;
                    if (draw < meta.imp.loss4_p14) {
                        next = LOSS4_LOST_IN_GAP;
                        lost = true;
                        reason = DROP_LOSS_RANDOM;
                    } else if (meta.imp.loss4_p14 < draw &&
                               draw < meta.imp.loss4_p13 + meta.imp.loss4_p14) {
                        next = LOSS4_LOST_IN_BURST;
                        lost = true;
                    }
                }
                loss4_state.write(meta.pd, next);
            } else if (meta.imp.loss_prob != 0) {
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                if (meta.imp.loss_corr != 0) {
                    bit<33> cell;
                    bit<32> fresh;
                    loss_corr_last.read(cell, meta.pd);
                    random<bit<32>>(fresh, 0, 0xFFFFFFFF);
                    cell = corr_next(draw, fresh, cell, meta.imp.loss_corr);
                    loss_corr_last.write(meta.pd, cell);
                    draw = cell[31:0];
                }
                if (chance(draw, meta.imp.loss_prob)) {
                    lost = true;
                }
            }
            if (lost) {
                if (meta.imp.loss_ecn == 1 && !link_off && is_ect(hdr)) {
                    mark_ce.apply(hdr, meta);
                } else {
                    meta.drop = 1;
                    meta.drop_reason = reason;
                }
            }
        }
    }
}

#endif
