/*
 * p4netem: packet headers, controller headers, digest and metadata types.
 */
#ifndef P4NETEM_HEADERS_P4
#define P4NETEM_HEADERS_P4

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* 802.1Q / 802.1ad tag; two are parsed so that QinQ still yields the inner EtherType. */
header vlan_tag_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* Up to 10 words of options (IHL <= 15); parsed only to reach the L4 header. */
header ipv4_options_t {
    varbit<320> options;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* ICMP and ICMPv6 share this fixed part. */
header icmp_t {
    bit<8>  icmp_type;
    bit<8>  icmp_code;
    bit<16> checksum;
}

/*
 * Corruption on v1model can only modify parsed bytes, so the pass that flips the
 * chosen bit re-parses the frame as: Ethernet, the bytes before the target byte
 * (variable length), the target byte. Emitting the three in order rebuilds the
 * frame with exactly one bit changed.
 */
header corrupt_skip_t {
    varbit<CORRUPT_SKIP_MAX_BITS> bytes;
}

header corrupt_byte_t {
    bit<8> value;
}

/* CPU port metadata (P4Runtime PacketIn / PacketOut). Padded to whole bytes. */
@controller_header("packet_in")
@id(0x04000001)
header packet_in_header_t {
    port_t ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
@id(0x04000002)
header packet_out_header_t {
    port_t egress_port;
    bit<7> _pad;
}

/*
 * Radio state change (RadioStage): the UE, the old and new state (the contract's state enum) and
 * the time the change takes effect (ns). No @id, as for mac_learn_digest_t: id 0x17C4B86E.
 */
struct radio_state_digest_t {
    ue_id_t   ue_id;
    bit<8>    old_state;
    bit<8>    new_state;
    time_ns_t timestamp_ns;
}

/*
 * MAC learning digest. No @id: for v1model digest() calls p4c derives the P4Info
 * digest id from this struct's name (0x17F8D97F), it does not read annotations.
 */
struct mac_learn_digest_t {
    mac_addr_t src_addr;
    port_t     ingress_port;
}

struct headers_t {
    packet_out_header_t packet_out;
    packet_in_header_t  packet_in;
    ethernet_t          ethernet;
    corrupt_skip_t      corrupt_skip;
    corrupt_byte_t      corrupt_byte;
    vlan_tag_t          vlan_outer;
    vlan_tag_t          vlan_inner;
    ipv4_t              ipv4;
    ipv4_options_t      ipv4_options;
    ipv6_t              ipv6;
    tcp_t               tcp;
    udp_t               udp;
    icmp_t              icmp;
}

/* The parameters of the packet's profile (set_impairment), valid for one pass. */
struct impairment_t {
    duration_ns_t delay_ns;
    duration_ns_t jitter_ns;
    bit<8>        jitter_dist;
    bit<8>        reorder_mode;
    prob_t        reorder_prob;
    prob_t        loss_prob;
    prob_t        ge_p;
    prob_t        ge_r;
    prob_t        ge_loss_good;
    prob_t        ge_loss_bad;
    bit<48>       ns_per_byte_q16;
    bit<16>       overhead_bytes;
    bit<32>       queue_limit_bytes;
    bit<32>       queue_limit_pkts;
    prob_t        dup_prob;
    prob_t        corrupt_prob;
    bit<8>        aqm;
    duration_ns_t codel_target_ns;
    duration_ns_t codel_interval_ns;
    bit<1>        ecn;
    bit<32>       red_min_bytes;
    bit<32>       red_max_bytes;
    prob_t        red_max_prob;
    bit<8>        red_wlog;
    bit<32>       red_span_bytes;
    bit<1>        red_gentle;
    bit<48>       red_idle_q48;
    prob_t        loss4_p13;
    prob_t        loss4_p31;
    prob_t        loss4_p32;
    prob_t        loss4_p23;
    prob_t        loss4_p14;
    duration_ns_t slot_delay_ns;
    duration_ns_t slot_span_ns;
    bit<8>        slot_dist;
    bit<32>       slot_packets;
    bit<32>       slot_bytes;
    bit<32>       trace_base;
    bit<32>       trace_len;
    bit<32>       trace_ms_base;
    bit<32>       trace_period_ms;
    bit<64>       trace_period_recip;
    bit<8>        bearer_sched;
    bit<32>       bearer_quantum_bytes;
    bit<8>        bearer_pf_halflife_log2;
    prob_t        delay_corr;
    bit<64>       jitter_mod_recip;
    prob_t        loss_corr;
    prob_t        dup_corr;
    prob_t        corrupt_corr;
    prob_t        reorder_corr;
    bit<32>       reorder_gap;
    bit<1>        loss_ecn;
    bit<16>       cell_bytes;
    bit<16>       cell_overhead_bytes;
    bit<64>       cell_recip;
    prob_t        onoff_on_prob;
    bit<64>       onoff_recip;
    bit<32>       pie_target_ns;
    bit<32>       pie_tupdate_ns;
    bit<32>       pie_alpha;
    bit<32>       pie_beta;
    bit<32>       pie_max_burst_ns;
}

/* The radio model of the packet's profile (set_radio), valid for one pass. */
struct radio_params_t {
    bit<8>        model;
    duration_ns_t idle_to_dch_ns;
    duration_ns_t fach_to_dch_ns;
    duration_ns_t idle_to_connected_ns;
    duration_ns_t standby_to_ready_ns;
    duration_ns_t promo_spread_ns;
    duration_ns_t dch_fach_timer_ns;
    duration_ns_t fach_idle_timer_ns;
    duration_ns_t drx_inactivity_ns;
    duration_ns_t short_drx_time_ns;
    duration_ns_t short_drx_cycle_ns;
    duration_ns_t long_drx_cycle_ns;
    duration_ns_t drx_on_ns;
    duration_ns_t tail_ns;
    duration_ns_t ready_timer_ns;
    bit<32>       rlc_ul_bytes;
    bit<32>       rlc_dl_bytes;
    bit<48>       fach_ns_per_byte_q16;
    bit<32>       promo_queue_pkts;
}

/* One UE's radio registers while its packet is processed (RadioStage loads and stores them). */
struct radio_ue_t {
    bit<8>    rrc_state;
    time_ns_t since;
    time_ns_t last;
    time_ns_t done;
    time_ns_t drx_ref;
    bit<32>   promo_pkts;
}

/* A state change found by one RadioTimerStep. */
struct radio_change_t {
    bit<1>    fired;
    bit<1>    report;      /* 0: a promotion's completion, already reported when it started */
    bit<8>    old_state;
    bit<8>    new_state;
    time_ns_t at;
    time_ns_t spent;       /* time spent in old_state, for radio_state_time_ns */
}

/*
 * Fields tagged @field_list(PRESERVE_FL) survive clone_preserving_field_list and
 * recirculate_preserving_field_list: they are what a duplicate or a held packet
 * must remember between passes. Everything else is recomputed on each pass.
 * v1model starts a new packet with all user metadata at 0, so pass_kind is
 * PASS_FIRST for every packet that arrives on a port.
 */
struct metadata_t {
    /* Classifier keys: copies that read as 0 when their header is absent. */
    bit<16>     ether_type;
    ipv4_addr_t ipv4_src;
    ipv4_addr_t ipv4_dst;
    ipv6_addr_t ipv6_src;
    ipv6_addr_t ipv6_dst;
    bit<8>      ip_proto;
    bit<16>     l4_src_port;
    bit<16>     l4_dst_port;
    bit<6>      dscp;

    /* Classification result. */
    @field_list(PRESERVE_FL) profile_id_t profile_id;
    @field_list(PRESERVE_FL) direction_t  direction;
    @field_list(PRESERVE_FL) ue_id_t      ue_id;
    @field_list(PRESERVE_FL) bit<32>      pd;

    /* Forwarding result. */
    @field_list(PRESERVE_FL) port_t out_port;
    @field_list(PRESERVE_FL) port_t orig_ingress_port;
    bit<1> no_route;

    /* Multi-pass state. */
    @field_list(PRESERVE_FL) bit<2>    pass_kind;
    @field_list(PRESERVE_FL) time_ns_t departure_ns;
    @field_list(PRESERVE_FL) time_ns_t release_ns;
    @field_list(PRESERVE_FL) bit<32>   wire_len;
    @field_list(PRESERVE_FL) bit<1>    in_backlog;
    @field_list(PRESERVE_FL) bit<1>    corrupt_pending;
    @field_list(PRESERVE_FL) bit<32>   corrupt_byte;
    @field_list(PRESERVE_FL) bit<8>    corrupt_mask;
    /* Waiting in its UE's bearer queue (bearer.p4): position bearer_seq in it. */
    @field_list(PRESERVE_FL) bit<1>    in_bearer;
    @field_list(PRESERVE_FL) bit<32>   bearer_seq;
    /* Waiting for its PIE updates to be caught up (pie.p4: one update per pass); while it waits,
     * departure_ns holds its arrival time and pie_updates the updates run for it so far. */
    @field_list(PRESERVE_FL) bit<1>    pie_wait;
    @field_list(PRESERVE_FL) bit<16>   pie_updates;

    /* Radio: when the radio can carry the packet (rate and delay start from it). */
    @field_list(PRESERVE_FL) time_ns_t radio_ready_ns;
    /* Radio state changes still to report. v1model sends at most one digest per ingress pass,
     * so they wait in six slots (bit i of radio_ev_pending: slot i) and go out one per pass;
     * egress keeps the packet recirculating until all are out. Slots 0-3: replayed timers,
     * 4-5: the packet's own change (a promotion's two, or a DRX wake-up). */
    @field_list(PRESERVE_FL) bit<8>    radio_ev_pending;
    @field_list(PRESERVE_FL) bit<8>    radio_ev0_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev0_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev0_at;
    @field_list(PRESERVE_FL) bit<8>    radio_ev1_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev1_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev1_at;
    @field_list(PRESERVE_FL) bit<8>    radio_ev2_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev2_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev2_at;
    @field_list(PRESERVE_FL) bit<8>    radio_ev3_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev3_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev3_at;
    @field_list(PRESERVE_FL) bit<8>    radio_ev4_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev4_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev4_at;
    @field_list(PRESERVE_FL) bit<8>    radio_ev5_old;
    @field_list(PRESERVE_FL) bit<8>    radio_ev5_new;
    @field_list(PRESERVE_FL) time_ns_t radio_ev5_at;
    /* A dropped packet kept only until its radio digests are out (egress then drops it). */
    @field_list(PRESERVE_FL) bit<1>    radio_discard;
    /* The digest of this pass (digest() sends the values these have at the end of ingress). */
    bit<8>    radio_dg_old;
    bit<8>    radio_dg_new;
    time_ns_t radio_dg_at;
    /* This pass already called digest() (learning): the radio digest waits for the next pass. */
    bit<1>    digest_used;

    /* A PacketOut: forwarded untouched, never counted or impaired. */
    bit<1> bypass;

    /* Drop decision of this pass. */
    bit<1> drop;
    bit<4> drop_reason;
    /* The AQM or the loss stage (loss_ecn) marked this packet CE on this pass (counted in profile_ecn_mark). */
    bit<1> ecn_marked;
    /* The packet left its bearer queue for the link on this pass: the delay stage runs now. */
    bit<1> bearer_served;
    /* The packet was admitted to the rate queue on this hold pass, its PIE updates caught up:
     * the delay stage runs now. */
    bit<1> pie_admitted;

    impairment_t imp;
    radio_params_t rp;
    radio_ue_t     ru;
    radio_change_t rc1;
    radio_change_t rc2;
    radio_change_t rc3;
    radio_change_t rc4;
}

#endif
