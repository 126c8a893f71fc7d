/*
 * p4netem: egress control, hold-until-release (contract stage 8).
 *
 * v1model has no way to park a packet until a given time, so a packet whose
 * release time has not come recirculates (as the P7 Tofino emulator does):
 * egress -> deparser -> parser -> ingress (PASS_HOLD, nearly nothing to do) ->
 * egress, until egress_global_timestamp (microseconds on bmv2) reaches the release
 * time. It also keeps looping while it still counts in the rate queue or still has
 * a bit flip pending, so that ingress can settle both. The software target gets
 * the same observable behaviour from a timing wheel.
 *
 * A duplicate arrives here as an ingress-to-egress clone and is sent back to
 * ingress once, as PASS_DUP, to get its own rate and delay treatment.
 */
#ifndef P4NETEM_EGRESS_P4
#define P4NETEM_EGRESS_P4

control P4netemEgress(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    @id(0x12000002)
    counter(PD_COUNT, CounterType.packets_and_bytes) profile_out;

    apply {
        if (meta.bypass == 0) {
            if (standard_metadata.instance_type == INSTANCE_TYPE_INGRESS_CLONE) {
                /* The clone inherited the original's end-of-ingress state; none of
                 * its queue or release bookkeeping applies to the copy. */
                meta.pass_kind = PASS_DUP;
                meta.in_backlog = 0;
                meta.in_bearer = 0;
                meta.pie_wait = 0;
                meta.pie_updates = 0;
                meta.corrupt_pending = 0;
                meta.departure_ns = 0;
                meta.release_ns = 0;
                meta.radio_ev_pending = 0;  /* the original reports the radio's changes */
                meta.radio_discard = 0;
                recirculate_preserving_field_list(PRESERVE_FL);
            } else {
                time_ns_t now = (time_ns_t)standard_metadata.egress_global_timestamp * NS_PER_US;
                bool waiting = meta.radio_discard == 0 && now < meta.release_ns;
                if (meta.in_backlog == 1 || meta.in_bearer == 1 || meta.pie_wait == 1 || meta.corrupt_pending == 1 ||
                    meta.radio_ev_pending != 0 || waiting) {
                    meta.pass_kind = PASS_HOLD;
                    recirculate_preserving_field_list(PRESERVE_FL);
                } else if (meta.radio_discard == 1) {
                    mark_to_drop(standard_metadata);
                } else {
                    profile_out.count(meta.pd);
                    if (standard_metadata.egress_port == CPU_PORT) {
                        hdr.packet_in.setValid();
                        hdr.packet_in.ingress_port = meta.orig_ingress_port;
                        hdr.packet_in._pad = 0;
                    }
                }
            }
        }
    }
}

#endif
