/*
 * p4netem: slotted delivery (contract stage 7a), netem's `slot` (tc-netem(8), Linux sch_netem.c).
 *
 * netem holds packets whose time to send has come until the current slot opens (slot_next),
 * then releases them together, at most slot_packets packets and slot_bytes bytes per slot
 * (0 = unlimited); a slot that reaches either limit is over and the next one opens one slot
 * delay after it (get_slot_next at the dequeue that used it up). A packet that becomes due only
 * after the current slot opened does not join it: netem starts a new slot one delay after
 * that packet's due time. So for a packet due at t (its release time from the delay stage):
 *
 *   if slot_next_ns == 0 or slot_next_ns < t:  slot_next_ns = t + draw; a fresh slot (used counts 0)
 *   release = slot_next_ns; slot_used_pkts += 1; slot_used_bytes += len
 *   if a limit is reached: slot_next_ns += draw; a fresh slot
 *
 * The registers start at 0, so the first packet opens a slot one delay after it, as netem's
 * first packet after `tc qdisc change` does. The release times are computed as packets arrive,
 * which is exact while they reach this stage in order of their due times (no jitter that
 * reorders); the slot grid is the ideal one (netem's drifts by its timer's lateness).
 *
 * A draw (get_slot_next's next_delay) is uniform in [slot_delay_ns, slot_delay_ns +
 * slot_span_ns] for the range form (slot_dist 0, `slot MIN MAX`: MIN + (MAX - MIN) * r / 2^32),
 * else slot_delay_ns plus a jitter of scale slot_span_ns drawn as the delay stage draws its own
 * (1 uniform in [-span, +span]; 2..5 a dist_table sample * span / 8192), never below 0.
 */
#ifndef P4NETEM_SLOT_P4
#define P4NETEM_SLOT_P4

/* One slot delay from a uniform 32-bit draw r, a uniform draw u in [0, 2 span] and a table
 * sample (two's complement int16, units of span / 8192). */
time_ns_t slot_delay(in impairment_t imp, in bit<32> r, in time_ns_t u, in bit<16> sample) {
    time_ns_t mu = (time_ns_t)imp.slot_delay_ns;
    time_ns_t span = (time_ns_t)imp.slot_span_ns;
    if (imp.slot_dist == SLOT_RANGE) {
        /* 48 x 32 bits: the product needs 80 (the kernel's mul_u64_u32_shr). */
        return mu + (time_ns_t)(((bit<96>)span * (bit<96>)r) >> 32);
    }
    bool neg = false;
    time_ns_t mag = 0;
    if (imp.slot_dist == DIST_UNIFORM) {
        if (u >= span) {
            mag = u - span;
        } else {
            neg = true;
            mag = span - u;
        }
    } else if (imp.slot_dist >= DIST_NORMAL && imp.slot_dist <= DIST_USER) {
        bit<16> m = sample;
        if (sample[15:15] == 1) {
            neg = true;
            m = 0 - sample;
        }
        mag = ((time_ns_t)m * span) >> NETEM_DIST_SCALE_SHIFT;
    }
    if (neg) {
        if (mu > mag) {
            return mu - mag;
        }
        return 0;
    }
    return mu + mag;
}

control SlotGate(inout metadata_t meta,
                 in bit<32> len,
                 in bit<16> sample_open,
                 in bit<16> sample_next) {

    @name(".P4netemIngress.slot_next_ns")
    @id(0x16000030)
    register<time_ns_t>(PD_COUNT) slot_next_ns;

    @name(".P4netemIngress.slot_used_pkts")
    @id(0x16000031)
    register<bit<32>>(PD_COUNT) slot_used_pkts;

    @name(".P4netemIngress.slot_used_bytes")
    @id(0x16000032)
    register<bit<32>>(PD_COUNT) slot_used_bytes;

    apply {
        /* netem's slotting is on when MIN, MAX or the distribution's jitter is non-zero. */
        if (meta.imp.slot_delay_ns != 0 || meta.imp.slot_span_ns != 0) {
            time_ns_t next;
            bit<32> pkts;
            bit<32> bytes;
            slot_next_ns.read(next, meta.pd);
            slot_used_pkts.read(pkts, meta.pd);
            slot_used_bytes.read(bytes, meta.pd);
            bit<32> r;
            time_ns_t u;
            time_ns_t span2 = (time_ns_t)meta.imp.slot_span_ns << 1;

            if (next == 0 || next < meta.release_ns) {
                random<bit<32>>(r, 0, 0xFFFFFFFF);
                random<time_ns_t>(u, 0, span2);
                next = meta.release_ns + slot_delay(meta.imp, r, u, sample_open);
                pkts = 0;
                bytes = 0;
            }
            meta.release_ns = next;
            pkts = pkts |+| 1;
            bytes = bytes |+| len;
            if ((meta.imp.slot_packets != 0 && pkts >= meta.imp.slot_packets) ||
                (meta.imp.slot_bytes != 0 && bytes >= meta.imp.slot_bytes)) {
                /* This packet used the slot up: the next opens one delay later. */
                random<bit<32>>(r, 0, 0xFFFFFFFF);
                random<time_ns_t>(u, 0, span2);
                next = next + slot_delay(meta.imp, r, u, sample_next);
                pkts = 0;
                bytes = 0;
            }
            slot_next_ns.write(meta.pd, next);
            slot_used_pkts.write(meta.pd, pkts);
            slot_used_bytes.write(meta.pd, bytes);
        }
    }
}

#endif
