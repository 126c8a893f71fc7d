/*
 * p4netem: constants and type aliases shared by every stage.
 *
 * Sizes and widths come from docs/pipeline-contract.md; they are written once
 * here so that the tables, registers and counters that are indexed by the same
 * quantity cannot drift apart.
 */
#ifndef P4NETEM_DEFINES_P4
#define P4NETEM_DEFINES_P4

/* ---- control-plane visible sizes (contract) ----
 * The sizes marked "-D" may be chosen at compile time (p4c -DUE_COUNT=4096 ...); the
 * defaults are the contract's sizes (p4src/p4netem.p4info.txtpb). A target that allocates
 * every register cell up front (bmv2: 3 GiB for a million UEs) compiles a smaller program;
 * the controller works with any sizes (it reads them from the P4Info the switch runs).
 * Sizes derived from them follow, so that arrays indexed by the same quantity cannot drift. */
#ifndef PORT_MAP_SIZE
#define PORT_MAP_SIZE        512          /* -D */
#endif
#ifndef L2_FWD_SIZE
#define L2_FWD_SIZE          4096         /* -D */
#endif
#ifndef L2_LEARN_SIZE
#define L2_LEARN_SIZE        4096         /* -D */
#endif
#ifndef CLASSIFIER_SIZE
#define CLASSIFIER_SIZE      65536        /* -D */
#endif
/* Profiles addressable by pd; larger profile ids fall back to DEFAULT_PROFILE. */
#ifndef MAX_PROFILES
#define MAX_PROFILES         4096         /* -D */
#endif
/* radio_profile: one entry per profile (the radio is shared by both directions). */
#define RADIO_PROFILE_SIZE   MAX_PROFILES
/* One slot per profile-direction (pd = profile_id * 2 + direction). */
#define PD_COUNT             (MAX_PROFILES * 2)
#define PROFILE_SIZE         PD_COUNT
#define DEFAULT_PROFILE      0
/* drops is indexed by pd * DROP_REASONS + reason. */
#define DROP_REASONS         16
#define DROP_COUNTER_SIZE    (PD_COUNT * DROP_REASONS)
#define PARSER_ERROR_KINDS   4
/* dist_table: DIST_TABLES tables of DIST_TABLE_LEN int16 samples each. */
#define DIST_TABLES          4
#define DIST_TABLE_LEN       4096
#define DIST_TABLE_SIZE      16384
#define DIST_INDEX_BITS      12
/* Per-UE radio state: UE ids (classifier) index arrays of UE_COUNT. */
#ifndef UE_COUNT
#define UE_COUNT             1048576      /* -D */
#endif
/* radio_state_time_ns: one cell per state, index ue * RADIO_STATE_STRIDE + state. */
#define RADIO_STATE_STRIDE   16
#define RADIO_STATE_TIME_SIZE (UE_COUNT * RADIO_STATE_STRIDE)
/* radio_fach_free_ns: index ue * 2 + direction. */
#define RADIO_FACH_SIZE      (UE_COUNT * 2)
/* radio_promotions: index ue * RADIO_PROMO_KINDS + kind. */
#define RADIO_PROMO_KINDS    4
#define RADIO_PROMO_COUNTER_SIZE (UE_COUNT * RADIO_PROMO_KINDS)
/* Per-UE bearer queues (bearer.p4): index ue * 2 + direction. */
#define BEARER_SIZE          (UE_COUNT * 2)

/* ---- drop reasons (index within a pd's block of the drops counter) ---- */
#define DROP_LOSS_RANDOM     0
#define DROP_LOSS_BURST      1
#define DROP_QUEUE_FULL      2
#define DROP_RADIO           3
#define DROP_NO_ROUTE        4
#define DROP_AQM_DROP        8
#define DROP_LINK_OFF        9

/* ---- the on/off link (loss.p4): onoff_state values; 0 (never written) reads as on ---- */
#define ONOFF_ON             1
#define ONOFF_OFF            2

/* ---- AQM on the rate queue (set_impairment.aqm) ---- */
#define AQM_TAIL_DROP        0
#define AQM_CODEL            1
#define AQM_RED              2
#define AQM_PIE              3
/* CoDel (Linux codel_impl.h arithmetic): 1/sqrt(count) in 16 bits, "one MTU" of backlog. */
#define CODEL_REC_INV_SQRT_SHIFT 16
#define CODEL_MTU_BYTES      1514
#define CODEL_DROPPING       1
#define CODEL_RECHECK_DROPPING 2
#define CODEL_RECHECK_FIRST  4

/* ---- PIE (pie.p4; RFC 8033 with Linux sch_pie's constants, integer division as Linux writes it) ---- */
/* 1: Linux's MAX_PROB (U64_MAX >> 8), probabilities are Q56 */
#define PIE_MAX_PROB         0xFFFFFFFFFFFFFF
/* MAX/10: the scaling's first band; ECN marks only at or below it */
#define PIE_PROB_10PCT       0x19999999999999
/* MAX/5: below it (and a low delay) no early drop */
#define PIE_PROB_20PCT       0x33333333333333
/* MAX/100 .. MAX/10^6: each one p is below halves alpha and beta twice more */
#define PIE_PROB_1PCT        0x28F5C28F5C28F
#define PIE_PROB_1E3         0x4189374BC6A7
#define PIE_PROB_1E4         0x68DB8BAC710
#define PIE_PROB_1E5         0xA7C5AC471B
#define PIE_PROB_1E6         0x10C6F7A0B5
/* MAX/(100/2): the largest step up above 10 %, and the boost above 250 ms */
#define PIE_STEP_2PCT        0x51EB851EB851E
/* (MAX/100)*2: what a larger step up is cut to */
#define PIE_CLAMP_2PCT       0x51EB851EB851E
/* (MAX/100)*85: de-randomisation, no drop below this accumulated probability */
#define PIE_ACCU_LOW         0xD999999999997B
/* (MAX/2)*17: always a drop at or above it */
#define PIE_ACCU_HIGH        0x87FFFFFFFFFFFEF
#define PIE_QDELAY_BOOST_NS  250000000  /* above 250 ms of delay every update steps up 2 % more */
#define PIE_TWO_MTU_BYTES    3028       /* 2 x 1514: below this backlog no early drop (Linux's psched_mtu) */
#define PIE_MAX_CATCHUP      4096       /* updates caught up for one packet at most (only raw writes reach it) */

/* ---- bearer queues of a shared cell (set_impairment.bearer_sched) ---- */
#define BEARER_FIFO          0   /* one rate queue per profile-direction */
#define BEARER_DRR           1   /* a queue per UE, deficit round robin by bytes */
#define BEARER_PF            2   /* a queue per UE, proportional fair */
/* bearer_quantum_bytes 0 reads as one Ethernet frame of 1514 bytes. */
#define BEARER_DEFAULT_QUANTUM 1514
/* v1model: a UE that gave up the turn takes it again only after the link stayed free this long
 * (longer than one recirculation), so that another UE's waiting head claims it first. */
#define BEARER_CLAIM_WAIT_NS 20000

/* ---- parser_errors counter index ---- */
#define PARSER_ERROR_OTHER            0
#define PARSER_ERROR_PACKET_TOO_SHORT 1
#define PARSER_ERROR_NO_MATCH         2
#define PARSER_ERROR_HEADER_TOO_SHORT 3

/* ---- jitter distributions (set_impairment.jitter_dist) ---- */
#define DIST_NONE            0
#define DIST_UNIFORM         1
#define DIST_NORMAL          2
#define DIST_USER            5
/* Table samples are in units of sigma / NETEM_DIST_SCALE (netem's scale, 8192 = 2^13). */
#define NETEM_DIST_SCALE_SHIFT 13
/* slot_dist: 0 is netem's `slot MIN [MAX]` (uniform in [slot_delay_ns, slot_delay_ns +
 * slot_span_ns]); 1..5 are `slot distribution` with the DIST_* shapes (mean slot_delay_ns,
 * jitter slot_span_ns). */
#define SLOT_RANGE           0
/* Exact trace delivery (trace.p4): cells of the trace registers, Mahimahi's opportunity size
 * (PACKET_SIZE: a 1500-byte IP packet + the 4-byte TUN header), what a frame counts less than its
 * length (14 Ethernet - 4 TUN), and floor(2^64 / 10^6) for ns -> ms. */
#define TRACE_CELLS          1048576
#define TRACE_MS_CELLS       1048576
#define TRACE_OPPORTUNITY    1504
#define TRACE_FRAME_ADJUST   10
#define NS_PER_MS            1000000
#define TRACE_RECIP_MS       18446744073709

/* ---- radio (set_radio.model, the state enum, promotion kinds) ---- */
#define RADIO_NONE           0
#define RADIO_UMTS           1
#define RADIO_LTE            2
#define RADIO_GPRS           3
#define RADIO_IDLE           0
#define RADIO_PROMOTING      1
#define RADIO_FACH           2
#define RADIO_DCH            3
#define RADIO_CONNECTED      4
#define RADIO_SHORT_DRX      5
#define RADIO_LONG_DRX       6
#define RADIO_STANDBY        7
#define RADIO_READY          8
#define PROMO_IDLE_DCH       0
#define PROMO_FACH_DCH       1
#define PROMO_IDLE_CONNECTED 2
#define PROMO_TO_READY       3
#define DIRECTION_DOWNLINK   1

/* ---- reorder modes ---- */
#define REORDER_KEEP_ORDER   0

/* ---- Gilbert-Elliott states ---- */
#define GE_GOOD              0
#define GE_BAD               1
/* loss4_state: the 4-state loss states as tc-netem(8) numbers them (p13: 1 -> 3). */
#define LOSS4_TX_IN_GAP      1
#define LOSS4_TX_IN_BURST    2
#define LOSS4_LOST_IN_BURST  3
#define LOSS4_LOST_IN_GAP    4

/* A probability of 0xFFFFFFFF means "always" (a 32-bit draw is never above it). */
#define PROB_ALWAYS          0xFFFFFFFF

/* ---- ports ---- */
/* v1model ports are 9 bits; 511 is bmv2's drop port, so the CPU port sits just below it.
 * simple_switch_grpc must be started with --cpu-port 510. */
#define CPU_PORT             510

/* ---- frames ---- */
#define ETH_HDR_BYTES        14
/* Largest frame whose every byte can be corrupted (jumbo). Longer frames (none on
 * standard Ethernet) have the flipped bit drawn from their first MAX_FRAME_BYTES bytes. */
#define MAX_FRAME_BYTES      9216
/* corrupt_skip_t must hold the bytes between the Ethernet header and the last
 * corruptible byte: (MAX_FRAME_BYTES - 1 - ETH_HDR_BYTES) * 8 bits. */
#define CORRUPT_SKIP_MAX_BITS 73608

#define ETHERTYPE_IPV4       0x0800
#define ETHERTYPE_IPV6       0x86DD
#define ETHERTYPE_VLAN       0x8100
#define ETHERTYPE_QINQ       0x88A8
#define IP_PROTO_ICMP        1
#define IP_PROTO_TCP         6
#define IP_PROTO_UDP         17
#define IP_PROTO_ICMPV6      58

/* ---- time ---- */
/* bmv2 timestamps (ingress/egress_global_timestamp) count microseconds. */
#define NS_PER_US            1000
/* ns_per_byte_q16 carries 16 fractional bits. */
#define RATE_FRACTION_BITS   16

/* ---- v1model multi-pass plumbing ---- */
/* Digest receiver id; bmv2 ignores the value, P4Runtime does not expose it. */
#define MAC_LEARN_RECEIVER   1
#define RADIO_RECEIVER       2
/* Clone session that carries duplicates (DuplicationStage). The controller must
 * create it on bmv2 (any replica port: the copy is recirculated before leaving). */
#define DUP_CLONE_SESSION    1
/* The user-metadata field list kept across clone and recirculation. */
#define PRESERVE_FL          1
/* instance_type value bmv2 simple_switch gives an ingress-to-egress clone. */
#define INSTANCE_TYPE_INGRESS_CLONE 1

/* meta.pass_kind: why this packet is in the pipeline. */
#define PASS_FIRST           0   /* arrived on a port: the whole pipeline */
#define PASS_DUP             1   /* a duplicate: its own corruption, rate and delay stages */
#define PASS_HOLD            2   /* waiting for its release time (recirculating) */

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<16>  profile_id_t;
typedef bit<1>   direction_t;
typedef bit<32>  ue_id_t;
/* Probability as a fraction of 2^32. */
typedef bit<32>  prob_t;
/* Durations in nanoseconds as carried by set_impairment. */
typedef bit<48>  duration_ns_t;
/* Absolute times in nanoseconds inside the pipeline. */
typedef bit<64>  time_ns_t;

#endif
