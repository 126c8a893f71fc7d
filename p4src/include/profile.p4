/*
 * p4netem: profile lookup (contract table profile).
 *
 * One table entry per (profile, direction) holds every impairment parameter, so
 * replacing the entry swaps the whole parameter set at once: a packet sees either
 * the old or the new profile, never a mix (one lookup per pass).
 */
#ifndef P4NETEM_PROFILE_P4
#define P4NETEM_PROFILE_P4

control ProfileLookup(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.set_impairment")
    @id(0x01000006)
    action set_impairment(duration_ns_t delay_ns,
                          duration_ns_t jitter_ns,
                          bit<8>        jitter_dist,
                          bit<8>        reorder_mode,
                          prob_t        reorder_prob,
                          prob_t        loss_prob,
                          prob_t        ge_p,
                          prob_t        ge_r,
                          prob_t        ge_loss_good,
                          prob_t        ge_loss_bad,
                          bit<48>       ns_per_byte_q16,
                          bit<16>       overhead_bytes,
                          bit<32>       queue_limit_bytes,
                          bit<32>       queue_limit_pkts,
                          prob_t        dup_prob,
                          prob_t        corrupt_prob,
                          bit<8>        aqm,
                          duration_ns_t codel_target_ns,
                          duration_ns_t codel_interval_ns,
                          bit<1>        ecn,
                          bit<32>       red_min_bytes,
                          bit<32>       red_max_bytes,
                          prob_t        red_max_prob,
                          bit<8>        red_wlog,
                          bit<32>       red_span_bytes,
                          bit<1>        red_gentle,
                          bit<48>       red_idle_q48,
                          prob_t        loss4_p13,
                          prob_t        loss4_p31,
                          prob_t        loss4_p32,
                          prob_t        loss4_p23,
                          prob_t        loss4_p14,
                          duration_ns_t slot_delay_ns,
                          duration_ns_t slot_span_ns,
                          bit<8>        slot_dist,
                          bit<32>       slot_packets,
                          bit<32>       slot_bytes,
                          bit<32>       trace_base,
                          bit<32>       trace_len,
                          bit<32>       trace_ms_base,
                          bit<32>       trace_period_ms,
                          bit<64>       trace_period_recip,
                          bit<8>        bearer_sched,
                          bit<32>       bearer_quantum_bytes,
                          bit<8>        bearer_pf_halflife_log2,
                          prob_t        delay_corr,
                          bit<64>       jitter_mod_recip,
                          prob_t        loss_corr,
                          prob_t        dup_corr,
                          prob_t        corrupt_corr,
                          prob_t        reorder_corr,
                          bit<32>       reorder_gap,
                          bit<1>        loss_ecn,
                          bit<16>       cell_bytes,
                          bit<16>       cell_overhead_bytes,
                          bit<64>       cell_recip,
                          prob_t        onoff_on_prob,
                          bit<64>       onoff_recip,
                          bit<32>       pie_target_ns,
                          bit<32>       pie_tupdate_ns,
                          bit<32>       pie_alpha,
                          bit<32>       pie_beta,
                          bit<32>       pie_max_burst_ns) {
        meta.imp.delay_ns = delay_ns;
        meta.imp.jitter_ns = jitter_ns;
        meta.imp.jitter_dist = jitter_dist;
        meta.imp.reorder_mode = reorder_mode;
        meta.imp.reorder_prob = reorder_prob;
        meta.imp.loss_prob = loss_prob;
        meta.imp.ge_p = ge_p;
        meta.imp.ge_r = ge_r;
        meta.imp.ge_loss_good = ge_loss_good;
        meta.imp.ge_loss_bad = ge_loss_bad;
        meta.imp.ns_per_byte_q16 = ns_per_byte_q16;
        meta.imp.overhead_bytes = overhead_bytes;
        meta.imp.queue_limit_bytes = queue_limit_bytes;
        meta.imp.queue_limit_pkts = queue_limit_pkts;
        meta.imp.dup_prob = dup_prob;
        meta.imp.corrupt_prob = corrupt_prob;
        meta.imp.aqm = aqm;
        meta.imp.codel_target_ns = codel_target_ns;
        meta.imp.codel_interval_ns = codel_interval_ns;
        meta.imp.ecn = ecn;
        meta.imp.red_min_bytes = red_min_bytes;
        meta.imp.red_max_bytes = red_max_bytes;
        meta.imp.red_max_prob = red_max_prob;
        meta.imp.red_wlog = red_wlog;
        meta.imp.red_span_bytes = red_span_bytes;
        meta.imp.red_gentle = red_gentle;
        meta.imp.red_idle_q48 = red_idle_q48;
        meta.imp.loss4_p13 = loss4_p13;
        meta.imp.loss4_p31 = loss4_p31;
        meta.imp.loss4_p32 = loss4_p32;
        meta.imp.loss4_p23 = loss4_p23;
        meta.imp.loss4_p14 = loss4_p14;
        meta.imp.slot_delay_ns = slot_delay_ns;
        meta.imp.slot_span_ns = slot_span_ns;
        meta.imp.slot_dist = slot_dist;
        meta.imp.slot_packets = slot_packets;
        meta.imp.slot_bytes = slot_bytes;
        meta.imp.trace_base = trace_base;
        meta.imp.trace_len = trace_len;
        meta.imp.trace_ms_base = trace_ms_base;
        meta.imp.trace_period_ms = trace_period_ms;
        meta.imp.trace_period_recip = trace_period_recip;
        meta.imp.bearer_sched = bearer_sched;
        meta.imp.bearer_quantum_bytes = bearer_quantum_bytes;
        meta.imp.bearer_pf_halflife_log2 = bearer_pf_halflife_log2;
        meta.imp.delay_corr = delay_corr;
        meta.imp.jitter_mod_recip = jitter_mod_recip;
        meta.imp.loss_corr = loss_corr;
        meta.imp.dup_corr = dup_corr;
        meta.imp.corrupt_corr = corrupt_corr;
        meta.imp.reorder_corr = reorder_corr;
        meta.imp.reorder_gap = reorder_gap;
        meta.imp.loss_ecn = loss_ecn;
        meta.imp.cell_bytes = cell_bytes;
        meta.imp.cell_overhead_bytes = cell_overhead_bytes;
        meta.imp.cell_recip = cell_recip;
        meta.imp.onoff_on_prob = onoff_on_prob;
        meta.imp.onoff_recip = onoff_recip;
        meta.imp.pie_target_ns = pie_target_ns;
        meta.imp.pie_tupdate_ns = pie_tupdate_ns;
        meta.imp.pie_alpha = pie_alpha;
        meta.imp.pie_beta = pie_beta;
        meta.imp.pie_max_burst_ns = pie_max_burst_ns;
    }

    /* A miss means "no impairment": every parameter stays 0. */
    @name(".P4netemIngress.profile")
    @id(0x02000005)
    table profile {
        key = {
            meta.profile_id : exact;
            meta.direction  : exact;
        }
        actions = {
            set_impairment;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = PROFILE_SIZE;
    }

    apply {
        meta.imp.delay_ns = 0;
        meta.imp.jitter_ns = 0;
        meta.imp.jitter_dist = DIST_NONE;
        meta.imp.reorder_mode = REORDER_KEEP_ORDER;
        meta.imp.reorder_prob = 0;
        meta.imp.loss_prob = 0;
        meta.imp.ge_p = 0;
        meta.imp.ge_r = 0;
        meta.imp.ge_loss_good = 0;
        meta.imp.ge_loss_bad = 0;
        meta.imp.ns_per_byte_q16 = 0;
        meta.imp.overhead_bytes = 0;
        meta.imp.queue_limit_bytes = 0;
        meta.imp.queue_limit_pkts = 0;
        meta.imp.dup_prob = 0;
        meta.imp.corrupt_prob = 0;
        meta.imp.aqm = AQM_TAIL_DROP;
        meta.imp.codel_target_ns = 0;
        meta.imp.codel_interval_ns = 0;
        meta.imp.ecn = 0;
        meta.imp.red_min_bytes = 0;
        meta.imp.red_max_bytes = 0;
        meta.imp.red_max_prob = 0;
        meta.imp.red_wlog = 0;
        meta.imp.red_span_bytes = 0;
        meta.imp.red_gentle = 0;
        meta.imp.red_idle_q48 = 0;
        meta.imp.loss4_p13 = 0;
        meta.imp.loss4_p31 = 0;
        meta.imp.loss4_p32 = 0;
        meta.imp.loss4_p23 = 0;
        meta.imp.loss4_p14 = 0;
        meta.imp.slot_delay_ns = 0;
        meta.imp.slot_span_ns = 0;
        meta.imp.slot_dist = SLOT_RANGE;
        meta.imp.slot_packets = 0;
        meta.imp.slot_bytes = 0;
        meta.imp.trace_base = 0;
        meta.imp.trace_len = 0;
        meta.imp.trace_ms_base = 0;
        meta.imp.trace_period_ms = 0;
        meta.imp.trace_period_recip = 0;
        meta.imp.bearer_sched = BEARER_FIFO;
        meta.imp.bearer_quantum_bytes = 0;
        meta.imp.bearer_pf_halflife_log2 = 0;
        meta.imp.delay_corr = 0;
        meta.imp.jitter_mod_recip = 0;
        meta.imp.loss_corr = 0;
        meta.imp.dup_corr = 0;
        meta.imp.corrupt_corr = 0;
        meta.imp.reorder_corr = 0;
        meta.imp.reorder_gap = 0;
        meta.imp.loss_ecn = 0;
        meta.imp.cell_bytes = 0;
        meta.imp.cell_overhead_bytes = 0;
        meta.imp.cell_recip = 0;
        meta.imp.onoff_on_prob = 0;
        meta.imp.onoff_recip = 0;
        meta.imp.pie_target_ns = 0;
        meta.imp.pie_tupdate_ns = 0;
        meta.imp.pie_alpha = 0;
        meta.imp.pie_beta = 0;
        meta.imp.pie_max_burst_ns = 0;
        profile.apply();
    }
}

#endif
