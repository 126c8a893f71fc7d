/*
 * p4netem: radio (RRC) stage (contract stage "radio", between classification and loss).
 *
 * One radio state machine per UE (the classifier's UE id), shared by both directions, in the
 * per-UE registers below; the model and its parameters come from the profile (radio_profile).
 * The stage gives the packet its ready time (meta.radio_ready_ns): when the radio can carry it.
 * Rate and delay start from there, and egress holds the packet until release as for any delay.
 * The semantics (dataplane/src/stage/radio.rs says the same, and computes the same integers):
 *
 *   - no timers run: the timers that fired since the UE's last packet are replayed when its next
 *     packet arrives (RadioTimerStep, four times: the longest chain is PROMOTING -> CONNECTED ->
 *     SHORT_DRX -> LONG_DRX -> IDLE), each change at the time it fired;
 *   - a packet finding the radio IDLE (GPRS: or STANDBY) starts a promotion (base delay +
 *     uniform[0, promo_spread_ns]) and waits for its completion; packets arriving during it wait
 *     for the same completion (at most promo_queue_pkts, 0 = unlimited; more: drop, reason radio);
 *   - UMTS FACH: a packet goes at the FACH rate (virtual clock per UE and direction,
 *     radio_fach_free_ns) unless the direction's RLC buffer (what is still to send at that
 *     rate, plus the packet, compared in time because P4 cannot divide) exceeds its threshold:
 *     then a FACH -> DCH promotion;
 *   - LTE DRX: a downlink packet waits for the next on-duration (cycles from radio_drx_ref_ns);
 *     uplink does not wait; either returns the radio to CONNECTED;
 *   - timers count inactivity (UMTS/GPRS within the state, LTE from the last activity); 0 never
 *     fires. The activity time of a packet is its ready time.
 *
 * Every change is reported with radio_state_digest_t, carrying the time it takes effect; a
 * promotion reports both its start and its completion when it starts. v1model sends one digest
 * per ingress pass, so the changes wait in meta.radio_ev* slots and leave one per pass (egress
 * recirculates the packet until they are out; a dropped packet is kept for that, then dropped).
 * Times: ingress_global_timestamp (microseconds on bmv2) in ns.
 */
#ifndef P4NETEM_RADIO_P4
#define P4NETEM_RADIO_P4

/* r = x mod d (d != 0) by restoring division: P4 has no division by a run-time value. One step
 * per bit of the quotient; (r >> i) >= d  <=>  r >= d << i, and then d << i cannot overflow. */
control RadioRemainder(in time_ns_t x, in time_ns_t d, out time_ns_t r) {
    apply {
        r = x;
        if ((r >> 63) >= d) { r = r - (d << 63); }
        if ((r >> 62) >= d) { r = r - (d << 62); }
        if ((r >> 61) >= d) { r = r - (d << 61); }
        if ((r >> 60) >= d) { r = r - (d << 60); }
        if ((r >> 59) >= d) { r = r - (d << 59); }
        if ((r >> 58) >= d) { r = r - (d << 58); }
        if ((r >> 57) >= d) { r = r - (d << 57); }
        if ((r >> 56) >= d) { r = r - (d << 56); }
        if ((r >> 55) >= d) { r = r - (d << 55); }
        if ((r >> 54) >= d) { r = r - (d << 54); }
        if ((r >> 53) >= d) { r = r - (d << 53); }
        if ((r >> 52) >= d) { r = r - (d << 52); }
        if ((r >> 51) >= d) { r = r - (d << 51); }
        if ((r >> 50) >= d) { r = r - (d << 50); }
        if ((r >> 49) >= d) { r = r - (d << 49); }
        if ((r >> 48) >= d) { r = r - (d << 48); }
        if ((r >> 47) >= d) { r = r - (d << 47); }
        if ((r >> 46) >= d) { r = r - (d << 46); }
        if ((r >> 45) >= d) { r = r - (d << 45); }
        if ((r >> 44) >= d) { r = r - (d << 44); }
        if ((r >> 43) >= d) { r = r - (d << 43); }
        if ((r >> 42) >= d) { r = r - (d << 42); }
        if ((r >> 41) >= d) { r = r - (d << 41); }
        if ((r >> 40) >= d) { r = r - (d << 40); }
        if ((r >> 39) >= d) { r = r - (d << 39); }
        if ((r >> 38) >= d) { r = r - (d << 38); }
        if ((r >> 37) >= d) { r = r - (d << 37); }
        if ((r >> 36) >= d) { r = r - (d << 36); }
        if ((r >> 35) >= d) { r = r - (d << 35); }
        if ((r >> 34) >= d) { r = r - (d << 34); }
        if ((r >> 33) >= d) { r = r - (d << 33); }
        if ((r >> 32) >= d) { r = r - (d << 32); }
        if ((r >> 31) >= d) { r = r - (d << 31); }
        if ((r >> 30) >= d) { r = r - (d << 30); }
        if ((r >> 29) >= d) { r = r - (d << 29); }
        if ((r >> 28) >= d) { r = r - (d << 28); }
        if ((r >> 27) >= d) { r = r - (d << 27); }
        if ((r >> 26) >= d) { r = r - (d << 26); }
        if ((r >> 25) >= d) { r = r - (d << 25); }
        if ((r >> 24) >= d) { r = r - (d << 24); }
        if ((r >> 23) >= d) { r = r - (d << 23); }
        if ((r >> 22) >= d) { r = r - (d << 22); }
        if ((r >> 21) >= d) { r = r - (d << 21); }
        if ((r >> 20) >= d) { r = r - (d << 20); }
        if ((r >> 19) >= d) { r = r - (d << 19); }
        if ((r >> 18) >= d) { r = r - (d << 18); }
        if ((r >> 17) >= d) { r = r - (d << 17); }
        if ((r >> 16) >= d) { r = r - (d << 16); }
        if ((r >> 15) >= d) { r = r - (d << 15); }
        if ((r >> 14) >= d) { r = r - (d << 14); }
        if ((r >> 13) >= d) { r = r - (d << 13); }
        if ((r >> 12) >= d) { r = r - (d << 12); }
        if ((r >> 11) >= d) { r = r - (d << 11); }
        if ((r >> 10) >= d) { r = r - (d << 10); }
        if ((r >> 9) >= d) { r = r - (d << 9); }
        if ((r >> 8) >= d) { r = r - (d << 8); }
        if ((r >> 7) >= d) { r = r - (d << 7); }
        if ((r >> 6) >= d) { r = r - (d << 6); }
        if ((r >> 5) >= d) { r = r - (d << 5); }
        if ((r >> 4) >= d) { r = r - (d << 4); }
        if ((r >> 3) >= d) { r = r - (d << 3); }
        if ((r >> 2) >= d) { r = r - (d << 2); }
        if ((r >> 1) >= d) { r = r - (d << 1); }
        if ((r >> 0) >= d) { r = r - (d << 0); }
    }
}

/* One timer transition of u, if one fired by `now`: applied to u and described in c. */
control RadioTimerStep(in radio_params_t p, inout radio_ue_t u, in time_ns_t now, out radio_change_t c) {
    apply {
        c.fired = 0;
        c.report = 0;
        c.old_state = u.rrc_state;
        c.new_state = u.rrc_state;
        c.at = 0;
        c.spent = 0;

        bool has = false;
        time_ns_t at = 0;
        bit<8> next = u.rrc_state;
        time_ns_t local = u.since;
        if (u.last > local) {
            local = u.last;
        }
        bool short_on = p.short_drx_time_ns != 0 && p.short_drx_cycle_ns != 0;
        bool long_on = p.long_drx_cycle_ns != 0;
        bool drx_on = p.drx_inactivity_ns != 0 && (short_on || long_on);
        time_ns_t drx_start = u.last + (time_ns_t)p.drx_inactivity_ns;
        time_ns_t long_start = drx_start;
        if (short_on) {
            long_start = drx_start + (time_ns_t)p.short_drx_time_ns;
        }
        time_ns_t tail_at = u.last + (time_ns_t)p.tail_ns;

        if (u.rrc_state == RADIO_PROMOTING) {
            has = true;
            at = u.done;
            if (p.model == RADIO_UMTS) {
                next = RADIO_DCH;
            } else if (p.model == RADIO_LTE) {
                next = RADIO_CONNECTED;
            } else {
                next = RADIO_READY;
            }
        } else if (p.model == RADIO_UMTS) {
            if (u.rrc_state == RADIO_DCH && p.dch_fach_timer_ns != 0) {
                has = true;
                at = local + (time_ns_t)p.dch_fach_timer_ns;
                next = RADIO_FACH;
            } else if (u.rrc_state == RADIO_FACH && p.fach_idle_timer_ns != 0) {
                has = true;
                at = local + (time_ns_t)p.fach_idle_timer_ns;
                next = RADIO_IDLE;
            }
        } else if (p.model == RADIO_LTE) {
            if (u.rrc_state == RADIO_CONNECTED && drx_on) {
                has = true;
                at = drx_start;
                next = RADIO_LONG_DRX;
                if (short_on) {
                    next = RADIO_SHORT_DRX;
                }
            } else if (u.rrc_state == RADIO_SHORT_DRX && long_on) {
                has = true;
                at = long_start;
                next = RADIO_LONG_DRX;
            }
            /* The tail wins ties: CONNECTED and both DRX states end in IDLE at last + tail. */
            bool connected = u.rrc_state == RADIO_CONNECTED || u.rrc_state == RADIO_SHORT_DRX ||
                             u.rrc_state == RADIO_LONG_DRX;
            if (connected && p.tail_ns != 0 && (!has || tail_at <= at)) {
                has = true;
                at = tail_at;
                next = RADIO_IDLE;
            }
        } else if (p.model == RADIO_GPRS) {
            if (u.rrc_state == RADIO_READY && p.ready_timer_ns != 0) {
                has = true;
                at = local + (time_ns_t)p.ready_timer_ns;
                next = RADIO_STANDBY;
            } else if (u.rrc_state == RADIO_STANDBY && p.tail_ns != 0) {
                has = true;
                at = local + (time_ns_t)p.tail_ns;
                next = RADIO_IDLE;
            }
        }

        if (has) {
            /* Never before the state began: keeps changes in time order. */
            if (at < u.since) {
                at = u.since;
            }
            if (at <= now) {
                c.fired = 1;
                c.report = 1;
                if (u.rrc_state == RADIO_PROMOTING) {
                    c.report = 0;
                }
                c.new_state = next;
                c.at = at;
                /* since 0: a UE never seen before; its time before the first packet is unknown. */
                if (u.since != 0) {
                    c.spent = at - u.since;
                }
                if (u.rrc_state == RADIO_CONNECTED && (next == RADIO_SHORT_DRX || next == RADIO_LONG_DRX)) {
                    u.drx_ref = at;
                }
                u.rrc_state = next;
                u.since = at;
            }
        }
    }
}

control RadioStage(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.radio_state")
    @id(0x16000008)
    register<bit<8>>(UE_COUNT) radio_state;

    @name(".P4netemIngress.radio_last_activity_ns")
    @id(0x16000009)
    register<time_ns_t>(UE_COUNT) radio_last_activity_ns;

    /* Completion time of the UE's current (or last) promotion. */
    @name(".P4netemIngress.radio_promo_done_ns")
    @id(0x1600000A)
    register<time_ns_t>(UE_COUNT) radio_promo_done_ns;

    /* FACH virtual clock, index ue * 2 + direction: when the direction's FACH buffer is empty.
     * Its distance ahead of now, at the FACH rate, is the RLC buffer occupancy; one register
     * gives both the occupancy and each packet's FACH departure. */
    @name(".P4netemIngress.radio_fach_free_ns")
    @id(0x1600000B)
    register<time_ns_t>(RADIO_FACH_SIZE) radio_fach_free_ns;

    /* Start of DRX: on-durations begin at drx_ref + k * cycle. */
    @name(".P4netemIngress.radio_drx_ref_ns")
    @id(0x1600000C)
    register<time_ns_t>(UE_COUNT) radio_drx_ref_ns;

    @name(".P4netemIngress.radio_state_since_ns")
    @id(0x1600000D)
    register<time_ns_t>(UE_COUNT) radio_state_since_ns;

    /* Time spent per state, index ue * RADIO_STATE_STRIDE + state (energy estimates). */
    @name(".P4netemIngress.radio_state_time_ns")
    @id(0x1600000E)
    register<time_ns_t>(RADIO_STATE_TIME_SIZE) radio_state_time_ns;

    /* Packets waiting for the current promotion (promo_queue_pkts). */
    @name(".P4netemIngress.radio_promo_pkts")
    @id(0x1600000F)
    register<bit<32>>(UE_COUNT) radio_promo_pkts;

    /* Index ue * RADIO_PROMO_KINDS + kind: 0 IDLE->DCH, 1 FACH->DCH, 2 IDLE->CONNECTED, 3 ->READY. */
    @name(".P4netemIngress.radio_promotions")
    @id(0x12000007)
    counter(RADIO_PROMO_COUNTER_SIZE, CounterType.packets) radio_promotions;

    @name(".P4netemIngress.set_radio")
    @id(0x01000007)
    action set_radio(bit<8>        model,
                     duration_ns_t idle_to_dch_ns,
                     duration_ns_t fach_to_dch_ns,
                     duration_ns_t idle_to_connected_ns,
                     duration_ns_t standby_to_ready_ns,
                     duration_ns_t promo_spread_ns,
                     duration_ns_t dch_fach_timer_ns,
                     duration_ns_t fach_idle_timer_ns,
                     duration_ns_t drx_inactivity_ns,
                     duration_ns_t short_drx_time_ns,
                     duration_ns_t short_drx_cycle_ns,
                     duration_ns_t long_drx_cycle_ns,
                     duration_ns_t drx_on_ns,
                     duration_ns_t tail_ns,
                     duration_ns_t ready_timer_ns,
                     bit<32>       rlc_ul_bytes,
                     bit<32>       rlc_dl_bytes,
                     bit<48>       fach_ns_per_byte_q16,
                     bit<32>       promo_queue_pkts) {
        meta.rp.model = model;
        meta.rp.idle_to_dch_ns = idle_to_dch_ns;
        meta.rp.fach_to_dch_ns = fach_to_dch_ns;
        meta.rp.idle_to_connected_ns = idle_to_connected_ns;
        meta.rp.standby_to_ready_ns = standby_to_ready_ns;
        meta.rp.promo_spread_ns = promo_spread_ns;
        meta.rp.dch_fach_timer_ns = dch_fach_timer_ns;
        meta.rp.fach_idle_timer_ns = fach_idle_timer_ns;
        meta.rp.drx_inactivity_ns = drx_inactivity_ns;
        meta.rp.short_drx_time_ns = short_drx_time_ns;
        meta.rp.short_drx_cycle_ns = short_drx_cycle_ns;
        meta.rp.long_drx_cycle_ns = long_drx_cycle_ns;
        meta.rp.drx_on_ns = drx_on_ns;
        meta.rp.tail_ns = tail_ns;
        meta.rp.ready_timer_ns = ready_timer_ns;
        meta.rp.rlc_ul_bytes = rlc_ul_bytes;
        meta.rp.rlc_dl_bytes = rlc_dl_bytes;
        meta.rp.fach_ns_per_byte_q16 = fach_ns_per_byte_q16;
        meta.rp.promo_queue_pkts = promo_queue_pkts;
    }

    /* A miss means "no radio" (model stays RADIO_NONE). */
    @name(".P4netemIngress.radio_profile")
    @id(0x02000006)
    table radio_profile {
        key = {
            meta.profile_id : exact;
        }
        actions = {
            set_radio;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = RADIO_PROFILE_SIZE;
    }

    RadioTimerStep() step1;
    RadioTimerStep() step2;
    RadioTimerStep() step3;
    RadioTimerStep() step4;
    RadioRemainder() drx_phase;

    apply {
        time_ns_t now = (time_ns_t)standard_metadata.ingress_global_timestamp * NS_PER_US;

        if (meta.pass_kind == PASS_FIRST && meta.drop == 0) {
            meta.radio_ready_ns = now;
            meta.radio_ev_pending = 0;
            meta.radio_discard = 0;
            meta.rp.model = RADIO_NONE;
            radio_profile.apply();

            if (meta.rp.model != RADIO_NONE && meta.rp.model <= RADIO_GPRS && meta.ue_id < UE_COUNT) {
                bit<32> ue = meta.ue_id;
                radio_state.read(meta.ru.rrc_state, ue);
                radio_state_since_ns.read(meta.ru.since, ue);
                radio_last_activity_ns.read(meta.ru.last, ue);
                radio_promo_done_ns.read(meta.ru.done, ue);
                radio_drx_ref_ns.read(meta.ru.drx_ref, ue);
                radio_promo_pkts.read(meta.ru.promo_pkts, ue);

                /* Replay the timers that fired since the last packet. */
                step1.apply(meta.rp, meta.ru, now, meta.rc1);
                step2.apply(meta.rp, meta.ru, now, meta.rc2);
                step3.apply(meta.rp, meta.ru, now, meta.rc3);
                step4.apply(meta.rp, meta.ru, now, meta.rc4);
                if (meta.rc1.fired == 1) {
                    meta.radio_ev0_old = meta.rc1.old_state;
                    meta.radio_ev0_new = meta.rc1.new_state;
                    meta.radio_ev0_at = meta.rc1.at;
                    meta.radio_ev_pending = meta.radio_ev_pending | (bit<8>)meta.rc1.report;
                }
                if (meta.rc2.fired == 1) {
                    meta.radio_ev1_old = meta.rc2.old_state;
                    meta.radio_ev1_new = meta.rc2.new_state;
                    meta.radio_ev1_at = meta.rc2.at;
                    meta.radio_ev_pending = meta.radio_ev_pending | ((bit<8>)meta.rc2.report << 1);
                }
                if (meta.rc3.fired == 1) {
                    meta.radio_ev2_old = meta.rc3.old_state;
                    meta.radio_ev2_new = meta.rc3.new_state;
                    meta.radio_ev2_at = meta.rc3.at;
                    meta.radio_ev_pending = meta.radio_ev_pending | ((bit<8>)meta.rc3.report << 2);
                }
                if (meta.rc4.fired == 1) {
                    meta.radio_ev3_old = meta.rc4.old_state;
                    meta.radio_ev3_new = meta.rc4.new_state;
                    meta.radio_ev3_at = meta.rc4.at;
                    meta.radio_ev_pending = meta.radio_ev_pending | ((bit<8>)meta.rc4.report << 3);
                }

                /* The packet in the state the radio is in now. */
                time_ns_t ready = now;
                bool promote = false;
                time_ns_t base = 0;
                bit<32> kind = PROMO_IDLE_DCH;
                bit<8> st = meta.ru.rrc_state;
                bit<8> model = meta.rp.model;
                bool pkt_changed = false;
                time_ns_t pkt_spent = 0;

                if (st == RADIO_PROMOTING) {
                    if (meta.rp.promo_queue_pkts != 0 && meta.ru.promo_pkts >= meta.rp.promo_queue_pkts) {
                        meta.drop = 1;
                        meta.drop_reason = DROP_RADIO;
                    } else {
                        meta.ru.promo_pkts = meta.ru.promo_pkts + 1;
                        if (meta.ru.done > now) {
                            ready = meta.ru.done;
                        }
                    }
                } else if ((model == RADIO_UMTS && st == RADIO_DCH) ||
                           (model == RADIO_LTE && st == RADIO_CONNECTED) ||
                           (model == RADIO_GPRS && st == RADIO_READY)) {
                    ready = now;
                } else if (model == RADIO_UMTS && st == RADIO_FACH) {
                    bit<32> cell = ue * 2 + (bit<32>)meta.direction;
                    time_ns_t free_at;
                    radio_fach_free_ns.read(free_at, cell);
                    bit<96> q = (bit<96>)meta.rp.fach_ns_per_byte_q16;
                    bit<96> len = (bit<96>)standard_metadata.packet_length;
                    bit<96> threshold = (bit<96>)meta.rp.rlc_ul_bytes;
                    if (meta.direction == DIRECTION_DOWNLINK) {
                        threshold = (bit<96>)meta.rp.rlc_dl_bytes;
                    }
                    time_ns_t tx = (time_ns_t)((len * q) >> RATE_FRACTION_BITS);
                    time_ns_t backlog = 0;
                    if (free_at > now) {
                        backlog = free_at - now;
                    }
                    bool over;
                    if (q == 0) {
                        over = len > threshold;
                    } else {
                        over = (bit<96>)backlog + (bit<96>)tx > ((threshold * q) >> RATE_FRACTION_BITS);
                    }
                    if (over) {
                        promote = true;
                        base = (time_ns_t)meta.rp.fach_to_dch_ns;
                        kind = PROMO_FACH_DCH;
                    } else {
                        time_ns_t start = now;
                        if (free_at > now) {
                            start = free_at;
                        }
                        ready = start + tx;
                        radio_fach_free_ns.write(cell, ready);
                    }
                } else if (model == RADIO_LTE && (st == RADIO_SHORT_DRX || st == RADIO_LONG_DRX)) {
                    /* Downlink waits for the next on-duration; the UE sends uplink at once. */
                    time_ns_t cycle = (time_ns_t)meta.rp.long_drx_cycle_ns;
                    if (st == RADIO_SHORT_DRX) {
                        cycle = (time_ns_t)meta.rp.short_drx_cycle_ns;
                    }
                    if (meta.direction == DIRECTION_DOWNLINK && cycle != 0 && now >= meta.ru.drx_ref) {
                        time_ns_t phase;
                        drx_phase.apply(now - meta.ru.drx_ref, cycle, phase);
                        if (phase >= (time_ns_t)meta.rp.drx_on_ns) {
                            ready = now - phase + cycle;
                        }
                    }
                    if (meta.ru.since != 0) {
                        pkt_spent = ready - meta.ru.since;
                    }
                    pkt_changed = true;
                    meta.radio_ev4_old = st;
                    meta.radio_ev4_new = RADIO_CONNECTED;
                    meta.radio_ev4_at = ready;
                    meta.radio_ev_pending = meta.radio_ev_pending | 0x10;
                    meta.ru.rrc_state = RADIO_CONNECTED;
                    meta.ru.since = ready;
                } else if (model == RADIO_GPRS && st == RADIO_STANDBY) {
                    promote = true;
                    base = (time_ns_t)meta.rp.standby_to_ready_ns;
                    kind = PROMO_TO_READY;
                } else {
                    /* IDLE, or a state this model does not have (the profile changed model). */
                    promote = true;
                    if (model == RADIO_UMTS) {
                        base = (time_ns_t)meta.rp.idle_to_dch_ns;
                        kind = PROMO_IDLE_DCH;
                    } else if (model == RADIO_LTE) {
                        base = (time_ns_t)meta.rp.idle_to_connected_ns;
                        kind = PROMO_IDLE_CONNECTED;
                    } else {
                        base = (time_ns_t)meta.rp.idle_to_connected_ns;
                        kind = PROMO_TO_READY;
                    }
                }

                if (promote) {
                    time_ns_t spread = 0;
                    if (meta.rp.promo_spread_ns != 0) {
                        random<time_ns_t>(spread, 0, (time_ns_t)meta.rp.promo_spread_ns);
                    }
                    time_ns_t start = now;
                    if (meta.ru.since > now) {
                        start = meta.ru.since;
                    }
                    time_ns_t done = start + base + spread;
                    if (meta.ru.since != 0) {
                        pkt_spent = start - meta.ru.since;
                    }
                    pkt_changed = true;
                    bit<8> target = RADIO_READY;
                    if (model == RADIO_UMTS) {
                        target = RADIO_DCH;
                    } else if (model == RADIO_LTE) {
                        target = RADIO_CONNECTED;
                    }
                    meta.radio_ev4_old = st;
                    meta.radio_ev4_new = RADIO_PROMOTING;
                    meta.radio_ev4_at = start;
                    meta.radio_ev5_old = RADIO_PROMOTING;
                    meta.radio_ev5_new = target;
                    meta.radio_ev5_at = done;
                    meta.radio_ev_pending = meta.radio_ev_pending | 0x30;
                    meta.ru.rrc_state = RADIO_PROMOTING;
                    meta.ru.since = start;
                    meta.ru.done = done;
                    meta.ru.promo_pkts = 1;
                    radio_promotions.count(ue * RADIO_PROMO_KINDS + kind);
                    ready = done;
                }

                /* Time per state: every change above adds the time spent in the state it left. */
                bit<32> tcell;
                time_ns_t total;
                if (meta.rc1.fired == 1) {
                    tcell = ue * RADIO_STATE_STRIDE + (bit<32>)meta.rc1.old_state[3:0];
                    radio_state_time_ns.read(total, tcell);
                    radio_state_time_ns.write(tcell, total + meta.rc1.spent);
                }
                if (meta.rc2.fired == 1) {
                    tcell = ue * RADIO_STATE_STRIDE + (bit<32>)meta.rc2.old_state[3:0];
                    radio_state_time_ns.read(total, tcell);
                    radio_state_time_ns.write(tcell, total + meta.rc2.spent);
                }
                if (meta.rc3.fired == 1) {
                    tcell = ue * RADIO_STATE_STRIDE + (bit<32>)meta.rc3.old_state[3:0];
                    radio_state_time_ns.read(total, tcell);
                    radio_state_time_ns.write(tcell, total + meta.rc3.spent);
                }
                if (meta.rc4.fired == 1) {
                    tcell = ue * RADIO_STATE_STRIDE + (bit<32>)meta.rc4.old_state[3:0];
                    radio_state_time_ns.read(total, tcell);
                    radio_state_time_ns.write(tcell, total + meta.rc4.spent);
                }
                if (pkt_changed) {
                    tcell = ue * RADIO_STATE_STRIDE + (bit<32>)st[3:0];
                    radio_state_time_ns.read(total, tcell);
                    radio_state_time_ns.write(tcell, total + pkt_spent);
                }

                if (meta.drop == 0 && ready > meta.ru.last) {
                    meta.ru.last = ready;
                }
                radio_state.write(ue, meta.ru.rrc_state);
                radio_state_since_ns.write(ue, meta.ru.since);
                radio_last_activity_ns.write(ue, meta.ru.last);
                radio_promo_done_ns.write(ue, meta.ru.done);
                radio_drx_ref_ns.write(ue, meta.ru.drx_ref);
                radio_promo_pkts.write(ue, meta.ru.promo_pkts);
                meta.radio_ready_ns = ready;
            }
        }

        /* One pending state change per pass, oldest slot first. */
        if (meta.radio_ev_pending != 0 && meta.digest_used == 0) {
            if (meta.radio_ev_pending[0:0] == 1) {
                meta.radio_dg_old = meta.radio_ev0_old;
                meta.radio_dg_new = meta.radio_ev0_new;
                meta.radio_dg_at = meta.radio_ev0_at;
                meta.radio_ev_pending[0:0] = 0;
            } else if (meta.radio_ev_pending[1:1] == 1) {
                meta.radio_dg_old = meta.radio_ev1_old;
                meta.radio_dg_new = meta.radio_ev1_new;
                meta.radio_dg_at = meta.radio_ev1_at;
                meta.radio_ev_pending[1:1] = 0;
            } else if (meta.radio_ev_pending[2:2] == 1) {
                meta.radio_dg_old = meta.radio_ev2_old;
                meta.radio_dg_new = meta.radio_ev2_new;
                meta.radio_dg_at = meta.radio_ev2_at;
                meta.radio_ev_pending[2:2] = 0;
            } else if (meta.radio_ev_pending[3:3] == 1) {
                meta.radio_dg_old = meta.radio_ev3_old;
                meta.radio_dg_new = meta.radio_ev3_new;
                meta.radio_dg_at = meta.radio_ev3_at;
                meta.radio_ev_pending[3:3] = 0;
            } else if (meta.radio_ev_pending[4:4] == 1) {
                meta.radio_dg_old = meta.radio_ev4_old;
                meta.radio_dg_new = meta.radio_ev4_new;
                meta.radio_dg_at = meta.radio_ev4_at;
                meta.radio_ev_pending[4:4] = 0;
            } else {
                meta.radio_dg_old = meta.radio_ev5_old;
                meta.radio_dg_new = meta.radio_ev5_new;
                meta.radio_dg_at = meta.radio_ev5_at;
                meta.radio_ev_pending[5:5] = 0;
            }
            digest<radio_state_digest_t>(RADIO_RECEIVER,
                                         { meta.ue_id, meta.radio_dg_old, meta.radio_dg_new, meta.radio_dg_at });
        }
    }
}

#endif
