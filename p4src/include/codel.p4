/*
 * p4netem: CoDel (RFC 8289) on the rate queue (set_impairment.aqm = AQM_CODEL).
 *
 * The rate queue is a FIFO served at a known rate, so a packet's dequeue instant
 * (when its serialisation starts, begin) is known when it is admitted, and packets
 * are dequeued in arrival order. This control runs CoDel's dequeue-side state machine
 * for the packet at that instant, at ingress: a dropped packet takes no link time, so
 * the next queued packet is dequeued at the same instant and is checked there (the
 * RFC's drop loop, the CODEL_RECHECK_* bits); one arriving only later found the queue
 * empty. The backlog in the "at most one MTU queued" check is the bytes queued ahead of
 * the packet (arrivals after it are not known yet). The arithmetic is Linux's
 * (codel_impl.h): count, a Newton step of 1/sqrt(count) in 16 bits per drop, the
 * control law t + interval * rec_inv_sqrt. With ecn on, an ECN-capable packet is
 * marked CE instead of dropped (IPv4 header checksum updated incrementally, RFC 1624).
 * docs/pipeline-contract.md, stage 6, states the same steps.
 */
#ifndef P4NETEM_CODEL_P4
#define P4NETEM_CODEL_P4

#define CODEL_PASS 0
#define CODEL_MARK 1
#define CODEL_DROP 2

control CodelAqm(inout headers_t hdr,
                 inout metadata_t meta,
                 in time_ns_t now,
                 in time_ns_t sojourn,
                 in bit<32> backlog,
                 in bool queued_at_recheck,
                 out bit<2> decision) {

    @name(".P4netemIngress.codel_first_above_ns")
    @id(0x16000010)
    register<time_ns_t>(PD_COUNT) codel_first_above_ns;

    @name(".P4netemIngress.codel_drop_next_ns")
    @id(0x16000011)
    register<time_ns_t>(PD_COUNT) codel_drop_next_ns;

    @name(".P4netemIngress.codel_count")
    @id(0x16000012)
    register<bit<32>>(PD_COUNT) codel_count;

    @name(".P4netemIngress.codel_lastcount")
    @id(0x16000013)
    register<bit<32>>(PD_COUNT) codel_lastcount;

    @name(".P4netemIngress.codel_rec_inv_sqrt")
    @id(0x16000014)
    register<bit<16>>(PD_COUNT) codel_rec_inv_sqrt;

    @name(".P4netemIngress.codel_state")
    @id(0x16000015)
    register<bit<8>>(PD_COUNT) codel_state;

    apply {
        time_ns_t first_above;
        time_ns_t drop_next;
        bit<32> count;
        bit<32> lastcount;
        bit<16> rec;
        bit<8> st;
        codel_first_above_ns.read(first_above, meta.pd);
        codel_drop_next_ns.read(drop_next, meta.pd);
        codel_count.read(count, meta.pd);
        codel_lastcount.read(lastcount, meta.pd);
        codel_rec_inv_sqrt.read(rec, meta.pd);
        codel_state.read(st, meta.pd);

        time_ns_t interval = (time_ns_t)meta.imp.codel_interval_ns;
        bool can_mark = meta.imp.ecn == 1 && is_ect(hdr);
        decision = CODEL_PASS;

        bit<8> recheck = st & (CODEL_RECHECK_DROPPING | CODEL_RECHECK_FIRST);
        st = st & ~(bit<8>)(CODEL_RECHECK_DROPPING | CODEL_RECHECK_FIRST);
        if (recheck != 0 && !queued_at_recheck) {
            /* The queue was empty right after the last drop: CoDel's dequeue found nothing. */
            first_above = 0;
            if (recheck == CODEL_RECHECK_DROPPING) {
                st = st & ~(bit<8>)CODEL_DROPPING;
            }
            recheck = 0;
        }

        /* should_drop */
        bool ok = false;
        if (sojourn < (time_ns_t)meta.imp.codel_target_ns || backlog <= CODEL_MTU_BYTES) {
            first_above = 0;
        } else if (first_above == 0) {
            first_above = now + interval;
        } else {
            ok = now > first_above;
        }

        bool run_loop = false;
        bool enter = false;
        if (recheck == CODEL_RECHECK_FIRST) {
            /* Dequeued right after the first drop of an episode: it leaves. */
        } else if (recheck == CODEL_RECHECK_DROPPING) {
            if (!ok) {
                st = st & ~(bit<8>)CODEL_DROPPING;
            } else {
                drop_next = drop_next + (((time_ns_t)(bit<32>)interval *
                            (time_ns_t)(((bit<32>)rec) << CODEL_REC_INV_SQRT_SHIFT)) >> 32);
                run_loop = true;
            }
        } else if ((st & CODEL_DROPPING) != 0) {
            if (!ok) {
                st = st & ~(bit<8>)CODEL_DROPPING;
            } else {
                run_loop = true;
            }
        } else if (ok) {
            enter = true;
        }

        bool fire = run_loop && now >= drop_next;
        bool step = false;
        if (fire) {
            count = count + 1;
            step = true;
        }
        if (enter) {
            bit<32> delta = count - lastcount;
            if (delta > 1 && (now < drop_next || now - drop_next < 16 * interval)) {
                count = delta;
                step = true;
            } else {
                count = 1;
                rec = 0xFFFF;
            }
        }
        if (step) {
            /* Newton step of rec_inv_sqrt toward 1/sqrt(count) (Q0.32 arithmetic). */
            bit<32> invsqrt = ((bit<32>)rec) << CODEL_REC_INV_SQRT_SHIFT;
            bit<32> invsqrt2 = (bit<32>)(((bit<64>)invsqrt * (bit<64>)invsqrt) >> 32);
            bit<64> val = (64w3 << 32) - ((bit<64>)count * (bit<64>)invsqrt2);
            val = val >> 2;
            val = (val * (bit<64>)invsqrt) >> 31;
            rec = (bit<16>)(val >> CODEL_REC_INV_SQRT_SHIFT);
        }
        if (enter) {
            lastcount = count;
            st = st | CODEL_DROPPING;
            drop_next = now + (((time_ns_t)(bit<32>)interval *
                        (time_ns_t)(((bit<32>)rec) << CODEL_REC_INV_SQRT_SHIFT)) >> 32);
        }
        if (fire || enter) {
            if (can_mark) {
                decision = CODEL_MARK;
                if (fire) {
                    drop_next = drop_next + (((time_ns_t)(bit<32>)interval *
                                (time_ns_t)(((bit<32>)rec) << CODEL_REC_INV_SQRT_SHIFT)) >> 32);
                }
            } else {
                decision = CODEL_DROP;
                if (fire) {
                    st = st | CODEL_RECHECK_DROPPING;
                } else {
                    st = st | CODEL_RECHECK_FIRST;
                }
            }
        }

        codel_first_above_ns.write(meta.pd, first_above);
        codel_drop_next_ns.write(meta.pd, drop_next);
        codel_count.write(meta.pd, count);
        codel_lastcount.write(meta.pd, lastcount);
        codel_rec_inv_sqrt.write(meta.pd, rec);
        codel_state.write(meta.pd, st);
    }
}

#endif
