/*
 * p4netem: bearer queues of a shared cell (contract stage 6, bearer_sched != BEARER_FIFO).
 *
 * With bearers the profile-direction is a cell: each UE (the classifier's ue_id) has its
 * own FIFO, its bearer, index b = ue * 2 + direction (UE ids at or beyond UE_COUNT use UE
 * 0's), with the profile's queue limits applying to each bearer alone; the profile's rate
 * is the cell's capacity, shared between the bearers that have a packet ready to go. A
 * packet is admitted to its bearer on its first pass and leaves it for the link only when
 * it is the bearer's head, its radio can carry it (ready time) and the link is free: the
 * link serves one packet at a time, so a packet waiting for its UE's promotion holds back
 * that UE's later packets only, never other UEs'. The departure is then
 * max(link free time, ready) + wire * ns_per_byte_q16 / 2^16 (the link's virtual clock
 * next_free_ns, as for the FIFO), and the delay stage runs on that pass.
 *
 * Which bearer gets a free link:
 *   BEARER_DRR  deficit round robin by wire bytes (Shreedhar & Varghese): the UE holding the
 *               turn sends while its deficit covers its head packet; a UE taking the turn
 *               adds bearer_quantum_bytes (0: BEARER_DEFAULT_QUANTUM) to its deficit; an emptied bearer's deficit is 0.
 *   BEARER_PF   proportional fair with one channel quality for all UEs: the bearer whose
 *               average served bytes is lowest. The average decays by 2^(-t / 2^w) over t ns,
 *               w = bearer_pf_halflife_log2 (PfDecay below), and grows by each served
 *               packet's wire bytes.
 * On v1model the waiting packets recirculate and only see their own bearer: the turn (DRR)
 * or the lowest average seen while the link was busy (PF) is kept per cell in bearer_turn /
 * bearer_pf_best, and a packet that finds the link free takes it if its UE holds the turn
 * (or the best average), if nobody does, or if the link has stayed free for
 * BEARER_CLAIM_WAIT_NS (the holder has nothing ready); a UE that just gave the turn up
 * (bearer_last_turn) waits that long too. The software target decides with every bearer in
 * view at the instant the link becomes free; both give the same shares.
 */
#ifndef P4NETEM_BEARER_P4
#define P4NETEM_BEARER_P4

/*
 * The average served bytes of a PF bearer, decayed from `at` to `now`: avg * 2^(-dt / 2^w),
 * a half-life of 2^w ns however dt is split between packets (Exp2Neg, exp2.p4: effective
 * half-life at most 0.14 % short, dt = 0 changes nothing). p4netem-switch computes the same
 * bits (pf_decay).
 */
control PfDecay(in bit<64> avg, in time_ns_t at, in time_ns_t now, in bit<8> wlog, out bit<64> decayed) {
    Exp2Neg() exp2neg;

    apply {
        time_ns_t dt = 0;
        if (now > at) {
            dt = now - at;
        }
        bit<8> w = wlog;
        if (w > 63) {
            w = 63;
        }
        time_ns_t halvings = dt >> w;
        time_ns_t rest = dt & (((time_ns_t)1 << w) - 1);
        bit<64> f56;
        if (w <= 56) {
            f56 = rest << (56 - w);
        } else {
            f56 = rest >> (w - 56);
        }
        exp2neg.apply(avg, halvings, f56, decayed);
    }
}

control BearerQueues(inout headers_t hdr,
                     inout metadata_t meta,
                     in time_ns_t now,
                     in bit<32> wire,
                     in time_ns_t free_at,
                     out bool served,
                     out time_ns_t begin_ns) {

    /* Per bearer (ue * 2 + direction): bytes and packets waiting, the DRR deficit, the
     * sequence numbers of its head and of the next packet admitted, the PF average and
     * when it was last updated. */
    @name(".P4netemIngress.bearer_backlog_bytes")
    @id(0x16000040)
    register<bit<32>>(BEARER_SIZE) bearer_backlog_bytes;

    @name(".P4netemIngress.bearer_backlog_pkts")
    @id(0x16000041)
    register<bit<32>>(BEARER_SIZE) bearer_backlog_pkts;

    @name(".P4netemIngress.bearer_deficit")
    @id(0x16000042)
    register<bit<32>>(BEARER_SIZE) bearer_deficit;

    @name(".P4netemIngress.bearer_head_seq")
    @id(0x16000043)
    register<bit<32>>(BEARER_SIZE) bearer_head_seq;

    @name(".P4netemIngress.bearer_tail_seq")
    @id(0x16000044)
    register<bit<32>>(BEARER_SIZE) bearer_tail_seq;

    @name(".P4netemIngress.bearer_pf_avg")
    @id(0x16000045)
    register<bit<64>>(BEARER_SIZE) bearer_pf_avg;

    @name(".P4netemIngress.bearer_pf_at_ns")
    @id(0x16000046)
    register<time_ns_t>(BEARER_SIZE) bearer_pf_at_ns;

    /* Per cell (pd), v1model's arbitration between recirculating heads: the UE + 1 holding the
     * turn (DRR) or with the lowest average seen while the link was busy (PF), 0 = nobody;
     * the UE + 1 that last gave the turn up; that lowest average. */
    @name(".P4netemIngress.bearer_turn")
    @id(0x16000047)
    register<bit<32>>(PD_COUNT) bearer_turn;

    @name(".P4netemIngress.bearer_last_turn")
    @id(0x16000048)
    register<bit<32>>(PD_COUNT) bearer_last_turn;

    @name(".P4netemIngress.bearer_pf_best")
    @id(0x16000049)
    register<bit<64>>(PD_COUNT) bearer_pf_best;

    PfDecay() pf_decay;

    apply {
        served = false;
        begin_ns = free_at;
        bit<32> ue = meta.ue_id;
        if (ue >= UE_COUNT) {
            ue = 0;
        }
        bit<32> b = ue * 2 + (bit<32>)meta.direction;
        bit<32> me = ue + 1;
        bit<32> q_bytes;
        bit<32> q_pkts;
        bearer_backlog_bytes.read(q_bytes, b);
        bearer_backlog_pkts.read(q_pkts, b);

        if (meta.in_bearer == 0) {
            /* Admission (first or duplicate pass): the bearer's own limits. */
            bool bytes_full = meta.imp.queue_limit_bytes != 0 &&
                (bit<64>)q_bytes + (bit<64>)wire > (bit<64>)meta.imp.queue_limit_bytes;
            bool pkts_full = meta.imp.queue_limit_pkts != 0 && q_pkts >= meta.imp.queue_limit_pkts;
            if (bytes_full || pkts_full) {
                meta.drop = 1;
                meta.drop_reason = DROP_QUEUE_FULL;
            } else {
                bit<32> tail;
                bearer_tail_seq.read(tail, b);
                bearer_tail_seq.write(b, tail + 1);
                bearer_backlog_bytes.write(b, q_bytes + wire);
                bearer_backlog_pkts.write(b, q_pkts + 1);
                meta.bearer_seq = tail;
                meta.wire_len = wire;
                meta.in_bearer = 1;
            }
        } else {
            /* A waiting packet's pass: may it take the link? */
            bit<32> head;
            bearer_head_seq.read(head, b);
            time_ns_t ready = meta.radio_ready_ns;
            bit<32> turn;
            bit<32> last;
            bearer_turn.read(turn, meta.pd);
            bearer_last_turn.read(last, meta.pd);
            bit<64> avg;
            time_ns_t avg_at;
            bearer_pf_avg.read(avg, b);
            bearer_pf_at_ns.read(avg_at, b);
            bit<64> mine;
            pf_decay.apply(avg, avg_at, now, meta.imp.bearer_pf_halflife_log2, mine);
            bit<32> deficit;
            bearer_deficit.read(deficit, b);

            if (head == meta.bearer_seq && ready <= now) {
                bool stale = now >= free_at && now - free_at >= BEARER_CLAIM_WAIT_NS;
                if (free_at > now) {
                    /* Link busy: a PF head records itself if its average is the lowest. */
                    if (meta.imp.bearer_sched == BEARER_PF) {
                        bit<64> best;
                        bearer_pf_best.read(best, meta.pd);
                        if (turn == 0 || mine < best) {
                            bearer_turn.write(meta.pd, me);
                            bearer_pf_best.write(meta.pd, mine);
                        }
                    }
                } else if (meta.imp.bearer_sched == BEARER_PF) {
                    if (turn == me || turn == 0 || stale) {
                        served = true;
                        bearer_turn.write(meta.pd, 0);
                        bearer_pf_avg.write(b, mine + (bit<64>)wire);
                        bearer_pf_at_ns.write(b, now);
                    }
                } else {
                    /* DRR. */
                    bool mine_turn = turn == me;
                    if (!mine_turn && (turn == 0 || stale) && (last != me || stale)) {
                        mine_turn = true;
                        bit<32> quantum = meta.imp.bearer_quantum_bytes;
                        if (quantum == 0) {
                            quantum = BEARER_DEFAULT_QUANTUM;
                        }
                        deficit = deficit + quantum;
                    }
                    if (mine_turn) {
                        if (deficit >= wire) {
                            served = true;
                            deficit = deficit - wire;
                            bearer_turn.write(meta.pd, me);
                        } else {
                            /* Turn over: the deficit is kept for the next one. */
                            bearer_turn.write(meta.pd, 0);
                            bearer_last_turn.write(meta.pd, me);
                        }
                    }
                }
            }

            if (served) {
                bearer_head_seq.write(b, head + 1);
                /* Saturating: the controller may have reset the registers meanwhile. */
                bearer_backlog_bytes.write(b, q_bytes |-| wire);
                bearer_backlog_pkts.write(b, q_pkts |-| 1);
                if (q_pkts == 1) {
                    /* Emptied: no deficit carried over, and the turn passes on. */
                    deficit = 0;
                    if (meta.imp.bearer_sched != BEARER_PF) {
                        bearer_turn.write(meta.pd, 0);
                        bearer_last_turn.write(meta.pd, me);
                    }
                }
                begin_ns = free_at;
                if (ready > free_at) {
                    begin_ns = ready;
                }
                meta.in_bearer = 0;
                meta.bearer_served = 1;
            }
            bearer_deficit.write(b, deficit);
        }
    }
}

#endif
