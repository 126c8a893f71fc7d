/*
 * p4netem: RED (Floyd & Jacobson 1993; Linux's sch_red arithmetic) and gentle RED on the
 * rate queue (set_impairment.aqm = AQM_RED).
 *
 * Decided at enqueue, as RED is, for a packet about to join the queue behind `backlog`
 * bytes (the tail-drop limits have already admitted it):
 *   - the average queue, kept scaled by 2^red_wlog in red_qavg (Linux: qavg), moves
 *     toward the backlog: qavg = qavg + backlog - (qavg >> wlog); after an idle period
 *     (the queue was empty and the link free since `idle_ns`) it first decays by
 *     ((idle_ns >> 10) * red_idle_q48) >> 48 halvings, the control plane's (1 - W)^m with m the
 *     idle time in average-packet transmission times (Linux looks the same up in tc's
 *     Stab table);
 *   - below red_min_bytes: pass (red_count = 0, Linux's qcount -1);
 *   - between min and max: Linux's uniform spacing of marks: after each mark a draw
 *     red_qr uniform in [0, red_span_bytes) (span = (max - min) / max_p), and the
 *     packet is marked when (avg - min) * qcount >= qr, qcount counting packets since;
 *   - gentle (red_gentle = 1) and max <= avg < 2 max: marked with probability
 *     max_p + (1 - max_p) (avg - max) / max, drawn per packet (compared without a
 *     division: draw * max < max_p * max + (avg - max) * (2^32 - max_p));
 *   - above (max, or 2 max when gentle): always marked (Linux's hard mark).
 * "Marked" is CE for an ECN-capable packet with ecn on (Linux: without harddrop, also
 * above max), a drop (aqm_drop) otherwise. docs/pipeline-contract.md, stage 6.
 */
#ifndef P4NETEM_RED_P4
#define P4NETEM_RED_P4

control RedAqm(inout headers_t hdr,
               inout metadata_t meta,
               in bit<32> backlog,
               in bool idle,
               in time_ns_t idle_ns,
               out bit<2> decision) {

    @name(".P4netemIngress.red_qavg")
    @id(0x16000016)
    register<bit<64>>(PD_COUNT) red_qavg;

    @name(".P4netemIngress.red_count")
    @id(0x16000017)
    register<bit<32>>(PD_COUNT) red_count;

    @name(".P4netemIngress.red_qr")
    @id(0x16000018)
    register<bit<32>>(PD_COUNT) red_qr;

    apply {
        bit<64> qavg;
        bit<32> count;
        bit<32> qr;
        red_qavg.read(qavg, meta.pd);
        red_count.read(count, meta.pd);
        red_qr.read(qr, meta.pd);
        bit<8> wlog = meta.imp.red_wlog;

        if (idle) {
            bit<128> halvings = ((bit<128>)(idle_ns >> 10) * (bit<128>)meta.imp.red_idle_q48) >> 48;
            if (halvings >= 64) {
                qavg = 0;
            } else {
                qavg = qavg >> (bit<8>)halvings;
            }
        }
        qavg = qavg + (bit<64>)backlog - (qavg >> wlog);
        bit<64> avg = qavg >> wlog;

        bool ect = is_ect(hdr);
        bool mark = false;
        bit<64> min_b = (bit<64>)meta.imp.red_min_bytes;
        bit<64> max_b = (bit<64>)meta.imp.red_max_bytes;
        bit<32> draw;
        if (avg < min_b) {
            count = 0;
        } else if (avg < max_b) {
            count = count + 1;
            if (count == 1) {
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                qr = (bit<32>)(((bit<64>)draw * (bit<64>)meta.imp.red_span_bytes) >> 32);
            } else if ((avg - min_b) * (bit<64>)(count - 1) >= (bit<64>)qr) {
                mark = true;
                count = 1;
                random<bit<32>>(draw, 0, 0xFFFFFFFF);
                qr = (bit<32>)(((bit<64>)draw * (bit<64>)meta.imp.red_span_bytes) >> 32);
            }
        } else if (meta.imp.red_gentle == 1 && avg < (max_b << 1)) {
            count = 0;
            random<bit<32>>(draw, 0, 0xFFFFFFFF);
            bit<64> p = (bit<64>)meta.imp.red_max_prob;
            mark = (bit<64>)draw * max_b < p * max_b + (avg - max_b) * ((64w1 << 32) - p);
        } else {
            count = 0;
            mark = true;
        }

        decision = CODEL_PASS;
        if (mark) {
            if (meta.imp.ecn == 1 && ect) {
                decision = CODEL_MARK;
            } else {
                decision = CODEL_DROP;
            }
        }
        red_qavg.write(meta.pd, qavg);
        red_count.write(meta.pd, count);
        red_qr.write(meta.pd, qr);
    }
}

#endif
