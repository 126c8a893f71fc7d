/*
 * p4netem: delay stage (contract stage 7).
 *
 * Computes the release time; holding the packet until then is P4netemEgress's job
 * (recirculation on v1model, a timing wheel on the software target).
 *
 *   with reorder_prob:  release = departure, last_release untouched (the packet
 *                       skips the delay line and may overtake others);
 *   otherwise:          release = departure + max(0, delay_ns + jitter), then, if
 *                       reorder_mode == 0, release = max(release, last_release);
 *                       last_release = release.
 *
 * Jitter is kept as sign and magnitude so that all arithmetic stays unsigned and
 * table samples scale like C integer division (truncation toward zero):
 *   uniform (1):      uniform integer in [-jitter_ns, +jitter_ns];
 *   tables (2..5):    dist_table[(dist-2)*4096 + u] * jitter_ns / 8192, u uniform
 *                     in [0, 4096), samples int16 in units of sigma/8192 (netem).
 * Any other jitter_dist means no jitter.
 *
 * netem's correlation and gap (probability.p4 corr_next): with delay_corr the jitter's draw
 * is netem's correlated number a, used as tabledist uses it: uniform jitter (a mod 2*jitter_ns)
 * - jitter_ns (the modulo through jitter_mod_recip = floor(2^64 / (2*jitter_ns)), one
 * correction step: v1model has no run-time division), table cell a mod 4096. With
 * reorder_gap > 1 the first reorder_gap - 1 packets after each one that skipped the line (and
 * from the start) take the line without a draw (netem's counter, reorder_count); with
 * reorder_corr the skip draw is correlated.
 *
 * A packet on the delay line then waits for its slot (slot.p4, netem's `slot`); one that
 * skipped the line does not (netem puts it at the head of its queue, outside the slots).
 */
#ifndef P4NETEM_DELAY_P4
#define P4NETEM_DELAY_P4

control DelayStage(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.last_release_ns")
    @id(0x16000002)
    register<time_ns_t>(PD_COUNT) last_release_ns;

    /* Four tables of DIST_TABLE_LEN int16 samples (two's complement in bit<16>):
     * normal, pareto, paretonormal, user. Loaded by the controller. */
    @name(".P4netemIngress.dist_table")
    @id(0x16000006)
    register<bit<16>>(DIST_TABLE_SIZE) dist_table;

    /* netem's `last` of the jitter's and of the reorder's correlated draws, and netem's
     * reorder counter (packets that took the line since the last one that skipped it). */
    @name(".P4netemIngress.delay_corr_last")
    @id(0x16000050)
    register<bit<33>>(PD_COUNT) delay_corr_last;

    @name(".P4netemIngress.reorder_corr_last")
    @id(0x16000054)
    register<bit<33>>(PD_COUNT) reorder_corr_last;

    @name(".P4netemIngress.reorder_count")
    @id(0x16000055)
    register<bit<32>>(PD_COUNT) reorder_count;

    SlotGate() slot_gate;

    apply {
        /* A packet in a bearer gets its release time on the pass that gives it the link, one
         * waiting for its PIE updates on the pass that admits it. */
        if ((meta.pass_kind != PASS_HOLD && meta.in_bearer == 0 && meta.pie_wait == 0) ||
            meta.bearer_served == 1 || meta.pie_admitted == 1) {
            bool skip_line = false;
            if (meta.imp.reorder_prob != 0) {
                bit<32> count;
                reorder_count.read(count, meta.pd);
                if (meta.imp.reorder_gap <= 1 || count >= meta.imp.reorder_gap - 1) {
                    bit<32> draw;
                    random<bit<32>>(draw, 0, 0xFFFFFFFF);
                    if (meta.imp.reorder_corr != 0) {
                        bit<33> cell;
                        bit<32> fresh;
                        reorder_corr_last.read(cell, meta.pd);
                        random<bit<32>>(fresh, 0, 0xFFFFFFFF);
                        cell = corr_next(draw, fresh, cell, meta.imp.reorder_corr);
                        reorder_corr_last.write(meta.pd, cell);
                        draw = cell[31:0];
                    }
                    skip_line = chance(draw, meta.imp.reorder_prob);
                }
                if (skip_line) {
                    count = 0;
                } else {
                    count = count + 1;
                }
                reorder_count.write(meta.pd, count);
            }

            if (skip_line) {
                meta.release_ns = meta.departure_ns;
            } else {
                time_ns_t scale = (time_ns_t)meta.imp.jitter_ns;
                time_ns_t jitter_mag = 0;
                bool jitter_neg = false;

                /* netem's correlated number for this packet's jitter, when delay_corr is set. */
                bit<32> corr_draw = 0;
                if (meta.imp.delay_corr != 0 && meta.imp.jitter_dist >= DIST_UNIFORM &&
                        meta.imp.jitter_dist <= DIST_USER) {
                    bit<32> value;
                    bit<32> fresh;
                    bit<33> cell;
                    random<bit<32>>(value, 0, 0xFFFFFFFF);
                    random<bit<32>>(fresh, 0, 0xFFFFFFFF);
                    delay_corr_last.read(cell, meta.pd);
                    cell = corr_next(value, fresh, cell, meta.imp.delay_corr);
                    delay_corr_last.write(meta.pd, cell);
                    corr_draw = cell[31:0];
                }

                if (meta.imp.jitter_dist == DIST_UNIFORM) {
                    time_ns_t u;
                    if (meta.imp.delay_corr != 0) {
                        /* u = corr_draw mod 2*jitter_ns, in [0, 2*jitter_ns) as netem's */
                        bit<64> m = (bit<64>)scale << 1;
                        bit<64> a = (bit<64>)corr_draw;
                        bit<64> q = (bit<64>)(((bit<128>)a * (bit<128>)meta.imp.jitter_mod_recip) >> 64);
                        bit<64> r = a - q * m;
                        if (r >= m) {
                            r = r - m;
                        }
                        u = (time_ns_t)r;
                    } else {
                        random<time_ns_t>(u, 0, scale << 1);
                    }
                    if (u >= scale) {
                        jitter_mag = u - scale;
                    } else {
                        jitter_neg = true;
                        jitter_mag = scale - u;
                    }
                } else if (meta.imp.jitter_dist >= DIST_NORMAL && meta.imp.jitter_dist <= DIST_USER) {
                    bit<32> slot;
                    if (meta.imp.delay_corr != 0) {
                        slot = corr_draw & (DIST_TABLE_LEN - 1);
                    } else {
                        random<bit<32>>(slot, 0, DIST_TABLE_LEN - 1);
                    }
                    bit<32> table_base = (bit<32>)(meta.imp.jitter_dist - DIST_NORMAL) << DIST_INDEX_BITS;
                    bit<16> sample;
                    dist_table.read(sample, table_base + slot);
                    bit<16> sample_mag = sample;
                    if (sample[15:15] == 1) {
                        jitter_neg = true;
                        sample_mag = 0 - sample;
                    }
                    jitter_mag = ((time_ns_t)sample_mag * scale) >> NETEM_DIST_SCALE_SHIFT;
                }

                time_ns_t added = (time_ns_t)meta.imp.delay_ns;
                if (jitter_neg) {
                    if (added > jitter_mag) {
                        added = added - jitter_mag;
                    } else {
                        added = 0;
                    }
                } else {
                    added = added + jitter_mag;
                }

                time_ns_t release = meta.departure_ns + added;
                time_ns_t last;
                last_release_ns.read(last, meta.pd);
                if (meta.imp.reorder_mode == REORDER_KEEP_ORDER && last > release) {
                    release = last;
                }
                last_release_ns.write(meta.pd, release);
                meta.release_ns = release;

                /* The slot stage may open up to two slots for this packet (one it starts, one
                 * after it uses a slot up); their table samples are read here, with the table. */
                bit<16> sample_open = 0;
                bit<16> sample_next = 0;
                if (meta.imp.slot_dist >= DIST_NORMAL && meta.imp.slot_dist <= DIST_USER) {
                    bit<32> slot_base = (bit<32>)(meta.imp.slot_dist - DIST_NORMAL) << DIST_INDEX_BITS;
                    bit<32> at;
                    random<bit<32>>(at, 0, DIST_TABLE_LEN - 1);
                    dist_table.read(sample_open, slot_base + at);
                    random<bit<32>>(at, 0, DIST_TABLE_LEN - 1);
                    dist_table.read(sample_next, slot_base + at);
                }
                slot_gate.apply(meta, standard_metadata.packet_length, sample_open, sample_next);
            }
        }
    }
}

#endif
