/*
 * p4netem: ingress control, the contract's stage order.
 *
 *   PASS_FIRST:  parser errors -> forwarding -> classification -> profile_in ->
 *                route -> profile -> radio (ready time) -> loss -> duplication ->
 *                corruption (decide) -> rate (admit) -> delay (release time)
 *   PASS_DUP:    profile -> corruption (decide) -> rate (admit) -> delay
 *   PASS_HOLD:   [profile, if waiting in a bearer] -> corruption (flip, if
 *                pending) -> rate (leave the queue once departed; a bearer's
 *                packet: take the link if the cell's scheduler lets it, then
 *                delay; one waiting for its PIE updates: the next update, then
 *                admission and delay once they are caught up) -> radio (next
 *                pending digest) -> back to egress, which holds or transmits
 *
 * Each stage control is applied from exactly one place and picks its work from
 * meta.pass_kind. Stages only record a drop (meta.drop, meta.drop_reason); the
 * drop is counted and carried out once, at the end.
 */
#ifndef P4NETEM_INGRESS_P4
#define P4NETEM_INGRESS_P4

control P4netemIngress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    @id(0x12000001)
    counter(PD_COUNT, CounterType.packets_and_bytes) profile_in;

    /* Index pd * DROP_REASONS + reason. The annotation lists the reasons in index order: p4c copies
       it into the P4Info, from which the switch (build time) and the control plane (run time)
       take them; the DROP_* constants of defines.p4 are checked against it (tests/contract). */
    @id(0x12000003)
    @p4netem_drop_reasons("loss_random loss_burst queue_full radio no_route malformed buffer_exhausted tx_error aqm_drop link_off")
    counter(DROP_COUNTER_SIZE, CounterType.packets_and_bytes) drops;

    /* ECN CE marks made instead of a drop (contract: ecn_mark), per pd: by the AQM, or by the
     * loss stage with loss_ecn (netem's ecn); one per pass however many stages marked. */
    @id(0x12000008)
    counter(PD_COUNT, CounterType.packets_and_bytes) profile_ecn_mark;

    @id(0x12000004)
    counter(PARSER_ERROR_KINDS, CounterType.packets) parser_errors;

    /* Part of the control-plane API of every target. bmv2's random() cannot be
     * seeded from a P4 program, so on v1model writing it has no effect. */
    @id(0x16000007)
    register<bit<64>>(1) rng_seed;

    Forwarding()       forwarding;
    Classify()         classify;
    ProfileLookup()    profile_lookup;
    RadioStage()       radio;
    LossStage()        loss;
    DuplicationStage() duplication;
    CorruptionStage()  corruption;
    RateStage()        rate;
    DelayStage()       delay;

    apply {
        meta.drop = 0;
        meta.drop_reason = 0;
        meta.bypass = 0;
        meta.digest_used = 0;
        meta.bearer_served = 0;
        meta.pie_admitted = 0;

        if (meta.pass_kind == PASS_FIRST) {
            if (standard_metadata.parser_error != error.NoError) {
                bit<32> kind = PARSER_ERROR_OTHER;
                if (standard_metadata.parser_error == error.PacketTooShort) {
                    kind = PARSER_ERROR_PACKET_TOO_SHORT;
                } else if (standard_metadata.parser_error == error.NoMatch) {
                    kind = PARSER_ERROR_NO_MATCH;
                } else if (standard_metadata.parser_error == error.HeaderTooShort) {
                    kind = PARSER_ERROR_HEADER_TOO_SHORT;
                }
                parser_errors.count(kind);
            }

            if (hdr.packet_out.isValid()) {
                /* PacketOut: sent unchanged out of the requested port. */
                standard_metadata.egress_spec = hdr.packet_out.egress_port;
                hdr.packet_out.setInvalid();
                meta.bypass = 1;
            } else {
                meta.orig_ingress_port = standard_metadata.ingress_port;
                forwarding.apply(hdr, meta, standard_metadata);
                classify.apply(hdr, meta, standard_metadata);
                profile_in.count(meta.pd);
                if (meta.no_route == 1) {
                    meta.drop = 1;
                    meta.drop_reason = DROP_NO_ROUTE;
                }
            }
        }

        if (meta.bypass == 0) {
            /* A packet waiting in a bearer, or for its PIE updates, needs its profile's
             * parameters on every pass. */
            if (meta.drop == 0 && (meta.pass_kind != PASS_HOLD || meta.in_bearer == 1 || meta.pie_wait == 1)) {
                profile_lookup.apply(hdr, meta, standard_metadata);
            }
            /* Every pass: the first computes the ready time, each pass sends one pending digest. */
            radio.apply(hdr, meta, standard_metadata);
            if (meta.drop == 0) {
                loss.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop == 0) {
                duplication.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop == 0) {
                corruption.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop == 0) {
                rate.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop == 0) {
                delay.apply(hdr, meta, standard_metadata);
            }
            if (meta.ecn_marked == 1) {
                profile_ecn_mark.count(meta.pd);
                meta.ecn_marked = 0;
            }

            if (meta.drop == 1) {
                drops.count(meta.pd * DROP_REASONS + (bit<32>)meta.drop_reason);
                if (meta.radio_ev_pending != 0) {
                    /* Counted as dropped now; kept looping only to send its radio digests. */
                    meta.radio_discard = 1;
                    standard_metadata.egress_spec = meta.out_port;
                } else {
                    mark_to_drop(standard_metadata);
                }
            } else {
                standard_metadata.egress_spec = meta.out_port;
            }
        }
    }
}

#endif
