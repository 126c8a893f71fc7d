/*
 * p4netem: PIE (RFC 8033, with Linux sch_pie's arithmetic and constants) on the rate queue
 * (set_impairment.aqm = AQM_PIE). docs/pipeline-contract.md, stage 6, states the same steps.
 *
 * PIE updates a drop probability every pie_tupdate_ns from the queue delay; packets are
 * dropped (or marked CE) at enqueue with that probability. Linux runs the update from a timer;
 * v1model has no timer, so the updates that fell due since the pd's last packet are run, in
 * order and at their own times, when its next packet arrives, before that packet is decided:
 * the state a packet sees is the one Linux's timer would have left. One update per pipeline
 * pass: a packet with more due waits (the rate stage holds it, egress recirculates it) until
 * they are all run, then is decided as of its arrival time. A pd whose PIE has settled
 * (probability 0, no delay in two updates: every later update would change nothing) stops its
 * clock; its next packet restarts it, the first update one period later.
 *
 * The queue delay of an update at T is max(0, next_free_ns - T): exactly how long a packet
 * arriving at T would wait (RFC 8033's backlog / drain rate, with the drain rate known). Linux
 * by default uses the sojourn of the last packet dequeued instead.
 */
#ifndef P4NETEM_PIE_P4
#define P4NETEM_PIE_P4

control PieAqm(inout headers_t hdr,
               inout metadata_t meta,
               in time_ns_t t,
               in time_ns_t free_at,
               in bit<32> backlog,
               in bool queue_full,
               out bool wait,
               out bit<2> decision) {

    @name(".P4netemIngress.pie_prob")
    @id(0x16000058)
    register<bit<64>>(PD_COUNT) pie_prob;

    @name(".P4netemIngress.pie_qdelay_old_ns")
    @id(0x16000059)
    register<bit<64>>(PD_COUNT) pie_qdelay_old_ns;

    @name(".P4netemIngress.pie_burst_ns")
    @id(0x1600005A)
    register<bit<64>>(PD_COUNT) pie_burst_ns;

    @name(".P4netemIngress.pie_accu_prob")
    @id(0x1600005B)
    register<bit<64>>(PD_COUNT) pie_accu_prob;

    @name(".P4netemIngress.pie_next_ns")
    @id(0x1600005C)
    register<bit<64>>(PD_COUNT) pie_next_ns;

    apply {
        bit<64> p;
        bit<64> qold;
        bit<64> burst;
        bit<64> accu;
        bit<64> next;
        pie_prob.read(p, meta.pd);
        pie_qdelay_old_ns.read(qold, meta.pd);
        pie_burst_ns.read(burst, meta.pd);
        pie_accu_prob.read(accu, meta.pd);
        pie_next_ns.read(next, meta.pd);

        bit<64> period = (bit<64>)meta.imp.pie_tupdate_ns;
        bit<64> target = (bit<64>)meta.imp.pie_target_ns;
        bit<16> n = meta.pie_updates;
        wait = false;
        decision = CODEL_PASS;

        /* The clock: start it, or run the next update that fell due (at its own time). */
        if (period != 0) {
            if (next == 0) {
                next = t + period;
                burst = (bit<64>)meta.imp.pie_max_burst_ns;
            } else if (next <= t) {
                if (n == PIE_MAX_CATCHUP) {
                    next = t + period;
                } else {
                    /* One update at T = next. */
                    bit<64> q = 0;
                    if (free_at > next) {
                        q = free_at - next;
                    }
                    bit<128> a = (bit<128>)meta.imp.pie_alpha;
                    bit<128> b = (bit<128>)meta.imp.pie_beta;
                    if (p < PIE_PROB_10PCT) {
                        a = a >> 1;
                        b = b >> 1;
                        if (p < PIE_PROB_1PCT) { a = a >> 2; b = b >> 2; }
                        if (p < PIE_PROB_1E3) { a = a >> 2; b = b >> 2; }
                        if (p < PIE_PROB_1E4) { a = a >> 2; b = b >> 2; }
                        if (p < PIE_PROB_1E5) { a = a >> 2; b = b >> 2; }
                        if (p < PIE_PROB_1E6) { a = a >> 2; b = b >> 2; }
                    }
                    bit<128> inc = a * (bit<128>)q + b * (bit<128>)q;
                    bit<128> dec = a * (bit<128>)target + b * (bit<128>)qold;
                    /* delta = inc - dec, as a sign (up) and a magnitude. */
                    bool up = inc >= dec;
                    bit<128> mag = inc - dec;
                    if (!up) {
                        mag = dec - inc;
                    }
                    if (up && mag > PIE_STEP_2PCT && p >= PIE_PROB_10PCT) {
                        mag = PIE_CLAMP_2PCT;
                    }
                    if (q > PIE_QDELAY_BOOST_NS) {
                        if (up) {
                            mag = mag + PIE_STEP_2PCT;
                        } else if (mag > PIE_STEP_2PCT) {
                            mag = mag - PIE_STEP_2PCT;
                        } else {
                            mag = PIE_STEP_2PCT - mag;
                            up = true;
                        }
                    }
                    bool update_prob = true;
                    bit<128> np = 0;
                    if (up) {
                        np = (bit<128>)p + mag;
                        if (np > PIE_MAX_PROB) {
                            np = PIE_MAX_PROB;
                            update_prob = false;
                        }
                    } else if (mag < (bit<128>)p) {
                        np = (bit<128>)p - mag;
                    }
                    p = (bit<64>)np;
                    if (q == 0 && qold == 0 && update_prob) {
                        p = p - (p >> 6);
                    }
                    if (burst > period) {
                        burst = burst - period;
                    } else {
                        burst = 0;
                    }
                    bool settled = false;
                    if (q < (target >> 1) && qold < (target >> 1) && p == 0) {
                        burst = (bit<64>)meta.imp.pie_max_burst_ns;
                        accu = 0;
                        settled = q == 0 && qold == 0;
                    }
                    qold = q;
                    n = n + 1;
                    if (settled) {
                        /* Stopped; this packet restarts it. */
                        next = t + period;
                    } else {
                        next = next + period;
                    }
                    wait = next <= t;
                }
            }
        }

        /* The decision, once the updates are caught up (Linux: after the limit). */
        if (!wait) {
            n = 0;
            if (queue_full) {
                accu = 0;
            } else if (burst == 0 && !(qold < (target >> 1) && p < PIE_PROB_20PCT) &&
                       backlog >= PIE_TWO_MTU_BYTES) {
                if (p == 0) {
                    accu = 0;
                } else {
                    accu = accu + p;
                }
                bool drop = false;
                if (accu >= PIE_ACCU_HIGH) {
                    drop = true;
                } else if (accu >= PIE_ACCU_LOW) {
                    bit<64> r;
                    random<bit<64>>(r, 0, PIE_MAX_PROB);
                    if (r < p) {
                        accu = 0;
                        drop = true;
                    }
                }
                if (drop) {
                    if (meta.imp.ecn == 1 && p <= PIE_PROB_10PCT && is_ect(hdr)) {
                        decision = CODEL_MARK;
                    } else {
                        decision = CODEL_DROP;
                        accu = 0;
                    }
                }
            }
        }
        meta.pie_updates = n;

        pie_prob.write(meta.pd, p);
        pie_qdelay_old_ns.write(meta.pd, qold);
        pie_burst_ns.write(meta.pd, burst);
        pie_accu_prob.write(meta.pd, accu);
        pie_next_ns.write(meta.pd, next);
    }
}

#endif
