/*
 * p4netem: rate stage (contract stage 6).
 *
 * A virtual clock per pd: departure = max(ready, next_free) + wire * ns_per_byte_q16
 * / 2^16, next_free = departure, where ready is the radio's ready time (the arrival
 * time unless the radio stage makes the packet wait; a duplicate's is never before
 * its own pass). A packet waiting for its radio counts in the rate queue. The rate queue holds the admitted packets whose
 * departure is still ahead; a packet that would push it past queue_limit_bytes or
 * queue_limit_pkts is dropped (queue_full) before it touches the clock.
 *
 * On v1model a packet leaves the queue on the first pipeline pass at or after its
 * departure time: the held packet recirculates (P4netemEgress keeps it looping
 * while in_backlog is set) and the PASS_HOLD branch below subtracts it. The queue
 * size is thus late by at most one recirculation; the software target removes
 * packets exactly at their departure time.
 *
 * With aqm = AQM_CODEL, an admitted packet then goes through CoDel at its dequeue
 * instant (codel.p4): dropped (aqm_drop, no link time used), marked CE, or passed.
 * With aqm = AQM_RED, RED (red.p4) decides first, as the packet arrives: dropped
 * (aqm_drop), marked CE, or passed on to the limits.
 * With aqm = AQM_PIE, PIE (pie.p4) decides after the limits, as the packet joins the queue,
 * once its updates due by then have run: one per pass, so a packet with more due waits
 * (pie_wait; egress recirculates it) and is decided on a later pass as of its arrival.
 *
 * With trace_len != 0 the trace's opportunities replace the clock (trace.p4, exact Mahimahi
 * delivery): the dequeue instant is the opportunity of the packet's first byte, the departure
 * that of its last; the limits and the AQM work as on the clock (Mahimahi's mm-link queues are
 * drop-tail or CoDel) and the trace's state is written back only for an admitted packet;
 * ns_per_byte_q16 is not used.
 *
 * With bearer_sched != BEARER_FIFO (and a rate) the profile-direction is a cell with a
 * queue per UE (bearer.p4): admitted packets wait there (counted in backlog_bytes/
 * backlog_pkts until they take the link) and get their departure when the cell's
 * scheduler gives them the link; the AQM does not apply to bearers.
 *
 * With no rate (ns_per_byte_q16 = 0) and no trace the stage does nothing: departure = ready
 * and the queue is always empty.
 *
 * With cell_bytes != 0 (netem's `rate RATE PACKETOVERHEAD CELLSIZE CELLOVERHEAD`) the link
 * time counts cells (service_ns below); the limits and the backlog still count wire bytes.
 */
#ifndef P4NETEM_RATE_P4
#define P4NETEM_RATE_P4

/*
 * A packet's wire bytes: the frame plus overhead_bytes, which is netem's PACKETOVERHEAD and so
 * may be negative (two's complement in its 16 bits; -14 strips the Ethernet header). netem adds
 * it to a u64 length, so a frame shorter than -overhead would wrap to an enormous link time
 * there; here it has 0 wire bytes.
 */
bit<32> wire_bytes(in bit<32> frame, in bit<16> overhead) {
    bit<32> wire = frame + (bit<32>)overhead;
    if (overhead[15:15] == 1) {
        wire = frame |-| (bit<32>)(16w0 - overhead);
    }
    return wire;
}

/*
 * The bytes one cell takes on the link: cell_bytes + cell_overhead_bytes, the overhead signed
 * like overhead_bytes (netem's CELLOVERHEAD may be negative), and never below 0 (the control
 * plane refuses a cell of fewer than 1 byte; a raw write of one gets 0).
 */
bit<64> cell_link_bytes(in impairment_t imp) {
    bit<64> cell = (bit<64>)imp.cell_bytes;
    bit<64> on_link = cell + (bit<64>)imp.cell_overhead_bytes;
    if (imp.cell_overhead_bytes[15:15] == 1) {
        on_link = cell |-| (bit<64>)(16w0 - imp.cell_overhead_bytes);
    }
    return on_link;
}

/*
 * The link time of a packet of `wire` bytes (wire_bytes above): wire * ns_per_byte_q16
 * / 2^16, or with netem's cell framing ceil(wire / cell_bytes) cells of
 * cell_link_bytes each instead of wire (Linux's packet_time_ns). v1model has no run-time
 * division: cell_recip = floor(2^32 / cell_bytes) gives floor(wire / cell_bytes) or one less for
 * any wire below 2^32, one step corrects it, a second rounds up. The product is taken in 128
 * bits, as the software target's, so no rate and size wrap.
 */
time_ns_t service_ns(in bit<32> wire, in impairment_t imp) {
    bit<64> bytes = (bit<64>)wire;
    if (imp.cell_bytes != 0) {
        bit<64> cell = (bit<64>)imp.cell_bytes;
        bit<64> cells = ((bit<64>)wire * imp.cell_recip) >> 32;
        if ((bit<64>)wire - cells * cell >= cell) {
            cells = cells + 1;
        }
        if ((bit<64>)wire > cells * cell) {
            cells = cells + 1;
        }
        bytes = cells * cell_link_bytes(imp);
    }
    return (time_ns_t)(((bit<128>)bytes * (bit<128>)imp.ns_per_byte_q16) >> RATE_FRACTION_BITS);
}

control RateStage(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.next_free_ns")
    @id(0x16000001)
    register<time_ns_t>(PD_COUNT) next_free_ns;

    @name(".P4netemIngress.backlog_bytes")
    @id(0x16000004)
    register<bit<32>>(PD_COUNT) backlog_bytes;

    @name(".P4netemIngress.backlog_pkts")
    @id(0x16000005)
    register<bit<32>>(PD_COUNT) backlog_pkts;

    /* The trace's per-pd state (trace.p4): here, so that only an admitted packet writes it. */
    @name(".P4netemIngress.trace_cycle_ns")
    @id(0x1600003A)
    register<time_ns_t>(PD_COUNT) trace_cycle_ns;

    @name(".P4netemIngress.trace_pos")
    @id(0x1600003B)
    register<bit<32>>(PD_COUNT) trace_pos;

    @name(".P4netemIngress.trace_left")
    @id(0x1600003C)
    register<bit<32>>(PD_COUNT) trace_left;

    BearerQueues() bearers;
    CodelAqm() codel;
    PieAqm() pie;
    TraceSchedule() trace_schedule;
    RedAqm() red;
    MarkCe() mark_ce;

    apply {
        time_ns_t now = (time_ns_t)standard_metadata.ingress_global_timestamp * NS_PER_US;
        bit<32> queued_bytes;
        bit<32> queued_pkts;

        bool cell = meta.in_bearer == 1 || (meta.pass_kind != PASS_HOLD &&
            meta.imp.ns_per_byte_q16 != 0 && meta.imp.trace_len == 0 && meta.imp.bearer_sched != BEARER_FIFO);
        if (cell) {
            /* A cell (bearer.p4): the first pass puts the packet into its UE's bearer, a later
             * one gives it the link when the cell's scheduler lets it. */
            bit<1> was_waiting = meta.in_bearer;
            bit<32> wire = meta.wire_len;
            if (was_waiting == 0) {
                wire = wire_bytes(standard_metadata.packet_length, meta.imp.overhead_bytes);
                meta.in_backlog = 0;
            }
            time_ns_t free_at;
            next_free_ns.read(free_at, meta.pd);
            bool served;
            time_ns_t begin_ns;
            bearers.apply(hdr, meta, now, wire, free_at, served, begin_ns);
            backlog_bytes.read(queued_bytes, meta.pd);
            backlog_pkts.read(queued_pkts, meta.pd);
            if (served) {
                /* Saturating: the controller may have reset the registers meanwhile. */
                backlog_bytes.write(meta.pd, queued_bytes |-| wire);
                backlog_pkts.write(meta.pd, queued_pkts |-| 1);
                meta.departure_ns = begin_ns + service_ns(wire, meta.imp);
                next_free_ns.write(meta.pd, meta.departure_ns);
            } else if (was_waiting == 0 && meta.drop == 0) {
                backlog_bytes.write(meta.pd, queued_bytes + wire);
                backlog_pkts.write(meta.pd, queued_pkts + 1);
            }
        } else if (meta.pass_kind == PASS_HOLD && meta.pie_wait == 0) {
            if (meta.in_backlog == 1 && now >= meta.departure_ns) {
                backlog_bytes.read(queued_bytes, meta.pd);
                backlog_pkts.read(queued_pkts, meta.pd);
                /* Saturate: the controller may have reset the registers meanwhile. */
                if (queued_bytes > meta.wire_len) {
                    queued_bytes = queued_bytes - meta.wire_len;
                } else {
                    queued_bytes = 0;
                }
                if (queued_pkts > 0) {
                    queued_pkts = queued_pkts - 1;
                }
                backlog_bytes.write(meta.pd, queued_bytes);
                backlog_pkts.write(meta.pd, queued_pkts);
                meta.in_backlog = 0;
            }
        } else {
            /* A packet joining the queue: on its first pass (a duplicate's), or on a hold pass
             * while its PIE updates are caught up (pie_wait: departure_ns keeps its arrival). */
            time_ns_t arrival = now;
            if (meta.pie_wait == 1) {
                arrival = meta.departure_ns;
                /* Decided on this pass unless it must wait again: then the delay stage runs now. */
                meta.pie_admitted = 1;
            }
            meta.pie_wait = 0;
            time_ns_t ready = meta.radio_ready_ns;
            if (ready < arrival) {
                ready = arrival;
            }
            meta.departure_ns = ready;
            meta.in_backlog = 0;
            if (meta.imp.ns_per_byte_q16 != 0 || meta.imp.trace_len != 0) {
                bit<32> wire = wire_bytes(standard_metadata.packet_length, meta.imp.overhead_bytes);
                backlog_bytes.read(queued_bytes, meta.pd);
                backlog_pkts.read(queued_pkts, meta.pd);

                /* 64-bit sum: a limit near 2^32 must not wrap the comparison. */
                bool bytes_full = meta.imp.queue_limit_bytes != 0 &&
                    (bit<64>)queued_bytes + (bit<64>)wire > (bit<64>)meta.imp.queue_limit_bytes;
                bool pkts_full = meta.imp.queue_limit_pkts != 0 &&
                    queued_pkts >= meta.imp.queue_limit_pkts;

                time_ns_t free_at;
                next_free_ns.read(free_at, meta.pd);
                time_ns_t begin_ns = ready;
                if (free_at > ready) {
                    begin_ns = free_at;
                }
                bit<2> aqm = CODEL_PASS;
                bool pie_wait = false;
                if (meta.imp.aqm == AQM_RED) {
                    /* RED decides as the packet arrives, before the limits (Linux: sch_red
                     * before its child fifo); the link was idle since free_at if it is free. */
                    red.apply(hdr, meta, queued_bytes, free_at <= ready, ready - free_at, aqm);
                } else if (meta.imp.aqm == AQM_PIE) {
                    /* PIE decides as the packet joins the queue, after the limits (Linux's
                     * order), once the updates due by then have run (pie.p4). */
                    pie.apply(hdr, meta, ready, free_at, queued_bytes, bytes_full || pkts_full,
                              pie_wait, aqm);
                }
                if (pie_wait) {
                    /* More PIE updates are due than one pass runs: the packet waits, egress
                     * recirculates it, and a later pass runs the next one. */
                    meta.pie_wait = 1;
                    meta.pie_admitted = 0;
                    meta.departure_ns = arrival;
                } else if (aqm == CODEL_DROP) {
                    /* Dropped before the queue: it takes no link time and leaves no backlog. */
                    meta.drop = 1;
                    meta.drop_reason = DROP_AQM_DROP;
                } else if (bytes_full || pkts_full) {
                    meta.drop = 1;
                    meta.drop_reason = DROP_QUEUE_FULL;
                } else {
                    /* When the packet takes the link (its dequeue instant, begin_ns) and leaves
                     * it: on the clock, or at the trace's opportunities (trace.p4). */
                    time_ns_t departure;
                    time_ns_t cycle = 0;
                    bit<32> pos = 0;
                    bit<32> left = 0;
                    if (meta.imp.trace_len != 0) {
                        trace_cycle_ns.read(cycle, meta.pd);
                        trace_pos.read(pos, meta.pd);
                        trace_left.read(left, meta.pd);
                        trace_schedule.apply(meta, ready, standard_metadata.packet_length,
                                             cycle, pos, left, begin_ns, departure);
                    } else {
                        departure = begin_ns + service_ns(wire, meta.imp);
                    }
                    if (meta.imp.aqm == AQM_CODEL) {
                        /* At the packet's dequeue instant (begin_ns), after begin - ready in the
                         * queue behind queued_bytes; it was queued when the last drop happened if
                         * it was waiting then (ready <= free_at). */
                        codel.apply(hdr, meta, begin_ns, begin_ns - ready, queued_bytes,
                                    ready <= free_at, aqm);
                        if (aqm == CODEL_DROP) {
                            /* Dropped at dequeue: it takes no link time and leaves no backlog. */
                            meta.drop = 1;
                            meta.drop_reason = DROP_AQM_DROP;
                        }
                    }
                    if (meta.drop == 0 && aqm == CODEL_MARK) {
                        mark_ce.apply(hdr, meta);
                    }
                    if (meta.drop == 0) {
                        if (meta.imp.trace_len != 0) {
                            trace_cycle_ns.write(meta.pd, cycle);
                            trace_pos.write(meta.pd, pos);
                            trace_left.write(meta.pd, left);
                        }
                        next_free_ns.write(meta.pd, departure);
                        meta.departure_ns = departure;
                        if (departure > now) {
                            backlog_bytes.write(meta.pd, queued_bytes + wire);
                            backlog_pkts.write(meta.pd, queued_pkts + 1);
                            meta.wire_len = wire;
                            meta.in_backlog = 1;
                        }
                    }
                }
            }
        }
    }
}

#endif
