/*
 * p4netem: exact trace delivery (contract stage 6, trace_len != 0): a Mahimahi mm-link trace
 * played by the rate queue itself (dataplane/src/stage/trace.rs states the same steps).
 *
 * A trace is a list of millisecond timestamps, one per delivery opportunity of TRACE_OPPORTUNITY
 * bytes (a 1500-byte IP packet with the 4-byte header of Mahimahi's TUN frames), repeating with
 * the period of its last timestamp. Mahimahi's link queue serves its FIFO at each opportunity: the
 * bytes of one go to the packets queued by then, several small packets share one, a packet that
 * does not fit finishes in the next (it leaves with its last byte), and bytes no queued packet can
 * use are lost. A frame counts len - TRACE_FRAME_ADJUST bytes (no Ethernet header, plus the TUN
 * header's 4), at least 1 and at most one opportunity.
 *
 * The controller fills trace_opportunity_ms (the timestamps: trace_len cells from trace_base) and
 * trace_first_at (for each millisecond m of the period, trace_period_ms + 1 cells from
 * trace_ms_base: the index of the first opportunity at or after m), so that finding the first
 * opportunity after an idle time is one lookup. Per pd (RateStage's registers, passed in and
 * out): trace_cycle_ns (when the current period
 * began; 0: not started), trace_pos (the current opportunity), trace_left (its unused bytes). The
 * queue is a FIFO, so the departure computed at arrival is exact. For a packet ready at t:
 *
 *   cur = cycle + ms[pos] * 1e6
 *   if cycle == 0:             cycle = t, then as "cur < t"
 *   if left > 0 and cur >= t:  share the current opportunity (the packet was queued by then)
 *   elif cur >= t:             the next opportunity (pos + 1, wrapping into the next period), left full
 *   else (cur < t):            skip whole periods, pos = first_at[ceil((t - cycle) / 1e6)], left full
 *   if left >= size: left -= size, else the rest goes into the next opportunity (left = full - rest)
 *   departure = cycle + ms[pos] * 1e6
 *   begin = max(begin, t), departure = max(departure, begin)
 *
 * The last line changes nothing for a trace as the controller loads it (ascending timestamps,
 * trace_first_at their index, trace_period_recip the period's reciprocal: t <= begin <= departure
 * by construction). Registers that hold no such trace (never loaded: zeros; written by another
 * P4Runtime client; a wrong reciprocal) can give an opportunity before t: the packet then leaves
 * when it is ready, so the delay stage still adds the profile's whole delay (a departure in the
 * past would absorb it) and CoDel's sojourn (begin - t) is never negative.
 *
 * Divisions are reciprocal multiplications with one correction each (no division on v1model):
 * whole periods with the controller's trace_period_recip = floor(2^64 / period in ns), ms with
 * TRACE_RECIP_MS = floor(2^64 / 10^6).
 *
 * The opportunity chosen before the size is fitted (begin) is where the packet's first byte goes:
 * Mahimahi's LinkQueue dequeues it there, so that is where the AQM decides (CoDel at its dequeue
 * instant, as on the rate's clock). TraceSchedule only computes: the per-pd state comes in and
 * goes out, and RateStage writes it back when it admits the packet, so a packet the AQM or the
 * limits drop uses no bytes of the trace (Mahimahi drops it before it takes any).
 */
#ifndef P4NETEM_TRACE_P4
#define P4NETEM_TRACE_P4

control TraceSchedule(inout metadata_t meta,
                      in time_ns_t t,
                      in bit<32> len,
                      inout time_ns_t cycle,
                      inout bit<32> pos,
                      inout bit<32> left,
                      out time_ns_t begin,
                      out time_ns_t departure) {

    @name(".P4netemIngress.trace_opportunity_ms")
    @id(0x16000038)
    register<bit<32>>(TRACE_CELLS) trace_opportunity_ms;

    @name(".P4netemIngress.trace_first_at")
    @id(0x16000039)
    register<bit<32>>(TRACE_MS_CELLS) trace_first_at;

    apply {
        time_ns_t period = (time_ns_t)meta.imp.trace_period_ms * NS_PER_MS;
        bit<32> size = 1;
        if (len > TRACE_FRAME_ADJUST + 1) {
            size = len - TRACE_FRAME_ADJUST;
        }
        if (size > TRACE_OPPORTUNITY) {
            size = TRACE_OPPORTUNITY;
        }

        bool fresh = cycle == 0;
        if (fresh) {
            cycle = t;
        }
        bit<32> at_ms;
        trace_opportunity_ms.read(at_ms, meta.imp.trace_base + pos);
        time_ns_t cur = cycle + (time_ns_t)at_ms * NS_PER_MS;
        if (!fresh && left > 0 && cur >= t) {
            /* Shares the opportunity the packet before it left in: it was queued by then. */
        } else if (!fresh && cur >= t) {
            pos = pos + 1;
            if (pos >= meta.imp.trace_len) {
                pos = 0;
                cycle = cycle + period;
            }
            left = TRACE_OPPORTUNITY;
        } else {
            /* The link was idle (or never used): the first opportunity at or after t. */
            time_ns_t d = t - cycle;
            if (d >= period && period != 0) {
                time_ns_t k = (time_ns_t)(((bit<128>)d * (bit<128>)meta.imp.trace_period_recip) >> 64);
                time_ns_t kp = k * period;
                if (kp > d) {
                    kp = d;
                }
                if (d - kp >= period) {
                    kp = kp + period;
                    if (kp > d) {
                        kp = d;
                    }
                }
                cycle = cycle + kp;
                d = d - kp;
            }
            time_ns_t q = (time_ns_t)(((bit<128>)d * (bit<128>)TRACE_RECIP_MS) >> 64);
            if (d - q * NS_PER_MS >= NS_PER_MS) {
                q = q + 1;
            }
            if (q * NS_PER_MS < d) {
                q = q + 1;
            }
            trace_first_at.read(pos, meta.imp.trace_ms_base + (bit<32>)q);
            left = TRACE_OPPORTUNITY;
        }
        trace_opportunity_ms.read(at_ms, meta.imp.trace_base + pos);
        begin = cycle + (time_ns_t)at_ms * NS_PER_MS;
        if (begin < t) {
            begin = t;
        }
        if (left >= size) {
            left = left - size;
        } else {
            bit<32> rest = size - left;
            pos = pos + 1;
            if (pos >= meta.imp.trace_len) {
                pos = 0;
                cycle = cycle + period;
            }
            left = TRACE_OPPORTUNITY - rest;
        }
        trace_opportunity_ms.read(at_ms, meta.imp.trace_base + pos);
        departure = cycle + (time_ns_t)at_ms * NS_PER_MS;
        if (departure < begin) {
            departure = begin;
        }
    }
}

#endif
