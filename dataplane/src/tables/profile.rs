//! The `profile` table: pd -> impairment parameters (`set_impairment`).
//!
//! A profile's parameters are one immutable, copyable [`Impairment`]; replacing the table entry
//! swaps all of them at once (the snapshot is published whole), which is what makes a profile
//! switch atomic for the packets.
use crate::contract::imp;

/// The parameters of `set_impairment`, decoded into native types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Impairment {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub jitter_dist: u8,
    pub reorder_mode: u8,
    pub reorder_prob: u32,
    pub loss_prob: u32,
    pub ge_p: u32,
    pub ge_r: u32,
    pub ge_loss_good: u32,
    pub ge_loss_bad: u32,
    pub ns_per_byte_q16: u64,
    /// netem's PACKETOVERHEAD, signed: the param's 16 bits in two's complement (stage/rate.rs
    /// `wire_bytes`).
    pub overhead_bytes: i16,
    pub queue_limit_bytes: u32,
    pub queue_limit_pkts: u32,
    pub dup_prob: u32,
    pub corrupt_prob: u32,
    /// AQM of the rate queue: `AQM_TAIL_DROP` or `AQM_CODEL`.
    pub aqm: u8,
    pub codel_target_ns: u64,
    pub codel_interval_ns: u64,
    /// Mark CE instead of dropping ECN-capable packets (RFC 3168).
    pub ecn: bool,
    /// RED (stage/red.rs).
    pub red_min_bytes: u32,
    pub red_max_bytes: u32,
    pub red_max_prob: u32,
    pub red_wlog: u8,
    pub red_span_bytes: u32,
    pub red_gentle: bool,
    pub red_idle_q48: u64,
    /// netem's 4-state loss (stage/loss.rs): on when loss4_p13 or loss4_p14 is non-zero.
    pub loss4_p13: u32,
    pub loss4_p31: u32,
    pub loss4_p32: u32,
    pub loss4_p23: u32,
    pub loss4_p14: u32,
    /// Bearer queues of a cell (stage/bearer.rs): `BEARER_FIFO` (none), `BEARER_DRR`, `BEARER_PF`.
    pub bearer_sched: u8,
    pub bearer_quantum_bytes: u32,
    pub bearer_pf_halflife_log2: u8,
    /// netem's slots (stage/slot.rs): on when slot_delay_ns or slot_span_ns is non-zero.
    pub slot_delay_ns: u64,
    pub slot_span_ns: u64,
    pub slot_dist: u8,
    pub slot_packets: u32,
    pub slot_bytes: u32,
    /// Exact trace delivery (stage/trace.rs): on when trace_len is non-zero.
    pub trace_base: u32,
    pub trace_len: u32,
    pub trace_ms_base: u32,
    pub trace_period_ms: u32,
    pub trace_period_recip: u64,
    /// netem's correlations (stage/correlation.rs), each netem's rho as a fraction of 2^32; 0 =
    /// independent draws. `jitter_mod_recip` = floor(2^64 / (2 * jitter_ns)) for the uniform
    /// jitter's modulo (p4src has no run-time division; the switch does the same arithmetic).
    pub delay_corr: u32,
    pub jitter_mod_recip: u64,
    pub loss_corr: u32,
    pub dup_corr: u32,
    pub corrupt_corr: u32,
    pub reorder_corr: u32,
    /// netem's reorder `gap` (stage/delay.rs); 0 and 1: every packet draws.
    pub reorder_gap: u32,
    /// netem's `ecn` (stage/loss.rs): a lost ECN-capable packet is marked CE instead.
    pub loss_ecn: bool,
    /// netem's cell framing (stage/rate.rs `service_ns`): the link time counts
    /// ceil(wire / cell_bytes) cells of cell_bytes + cell_overhead_bytes; 0 = no cells.
    /// `cell_recip` = floor(2^32 / cell_bytes) is p4src's division (the switch divides).
    pub cell_bytes: u16,
    /// netem's CELLOVERHEAD, signed like `overhead_bytes`.
    pub cell_overhead_bytes: i16,
    pub cell_recip: u64,
    /// The on/off link (stage/onoff.rs, Mahimahi's mm-onoff): the share of time it is on (Q32)
    /// and 2^64 / (tau ln 2), its relaxation's half-lives per ns (Q64); on when onoff_recip != 0.
    pub onoff_on_prob: u32,
    pub onoff_recip: u64,
    /// PIE (stage/pie.rs, `aqm` = AQM_PIE): target and update period (ns), alpha and beta
    /// (floor(Hz * 2^56 / 10^9): Q56 probability per ns of delay, per update), burst allowance (ns).
    pub pie_target_ns: u32,
    pub pie_tupdate_ns: u32,
    pub pie_alpha: u32,
    pub pie_beta: u32,
    pub pie_max_burst_ns: u32,
}

impl Impairment {
    /// From `set_impairment`'s params in ParamDef order (widths already validated).
    pub fn from_params(p: &[u128]) -> Self {
        let g = |i: usize| p.get(i).copied().unwrap_or(0);
        Impairment {
            delay_ns: g(imp::DELAY_NS) as u64,
            jitter_ns: g(imp::JITTER_NS) as u64,
            jitter_dist: g(imp::JITTER_DIST) as u8,
            reorder_mode: g(imp::REORDER_MODE) as u8,
            reorder_prob: g(imp::REORDER_PROB) as u32,
            loss_prob: g(imp::LOSS_PROB) as u32,
            ge_p: g(imp::GE_P) as u32,
            ge_r: g(imp::GE_R) as u32,
            ge_loss_good: g(imp::GE_LOSS_GOOD) as u32,
            ge_loss_bad: g(imp::GE_LOSS_BAD) as u32,
            ns_per_byte_q16: g(imp::NS_PER_BYTE_Q16) as u64,
            overhead_bytes: g(imp::OVERHEAD_BYTES) as u16 as i16,
            queue_limit_bytes: g(imp::QUEUE_LIMIT_BYTES) as u32,
            queue_limit_pkts: g(imp::QUEUE_LIMIT_PKTS) as u32,
            dup_prob: g(imp::DUP_PROB) as u32,
            corrupt_prob: g(imp::CORRUPT_PROB) as u32,
            aqm: g(imp::AQM) as u8,
            codel_target_ns: g(imp::CODEL_TARGET_NS) as u64,
            codel_interval_ns: g(imp::CODEL_INTERVAL_NS) as u64,
            ecn: g(imp::ECN) != 0,
            red_min_bytes: g(imp::RED_MIN_BYTES) as u32,
            red_max_bytes: g(imp::RED_MAX_BYTES) as u32,
            red_max_prob: g(imp::RED_MAX_PROB) as u32,
            red_wlog: g(imp::RED_WLOG) as u8,
            red_span_bytes: g(imp::RED_SPAN_BYTES) as u32,
            red_gentle: g(imp::RED_GENTLE) != 0,
            red_idle_q48: g(imp::RED_IDLE_Q48) as u64,
            loss4_p13: g(imp::LOSS4_P13) as u32,
            loss4_p31: g(imp::LOSS4_P31) as u32,
            loss4_p32: g(imp::LOSS4_P32) as u32,
            loss4_p23: g(imp::LOSS4_P23) as u32,
            loss4_p14: g(imp::LOSS4_P14) as u32,
            bearer_sched: g(imp::BEARER_SCHED) as u8,
            bearer_quantum_bytes: g(imp::BEARER_QUANTUM_BYTES) as u32,
            bearer_pf_halflife_log2: g(imp::BEARER_PF_HALFLIFE_LOG2) as u8,
            slot_delay_ns: g(imp::SLOT_DELAY_NS) as u64,
            slot_span_ns: g(imp::SLOT_SPAN_NS) as u64,
            slot_dist: g(imp::SLOT_DIST) as u8,
            slot_packets: g(imp::SLOT_PACKETS) as u32,
            slot_bytes: g(imp::SLOT_BYTES) as u32,
            trace_base: g(imp::TRACE_BASE) as u32,
            trace_len: g(imp::TRACE_LEN) as u32,
            trace_ms_base: g(imp::TRACE_MS_BASE) as u32,
            trace_period_ms: g(imp::TRACE_PERIOD_MS) as u32,
            trace_period_recip: g(imp::TRACE_PERIOD_RECIP) as u64,
            delay_corr: g(imp::DELAY_CORR) as u32,
            jitter_mod_recip: g(imp::JITTER_MOD_RECIP) as u64,
            loss_corr: g(imp::LOSS_CORR) as u32,
            dup_corr: g(imp::DUP_CORR) as u32,
            corrupt_corr: g(imp::CORRUPT_CORR) as u32,
            reorder_corr: g(imp::REORDER_CORR) as u32,
            reorder_gap: g(imp::REORDER_GAP) as u32,
            loss_ecn: g(imp::LOSS_ECN) != 0,
            cell_bytes: g(imp::CELL_BYTES) as u16,
            cell_overhead_bytes: g(imp::CELL_OVERHEAD_BYTES) as u16 as i16,
            cell_recip: g(imp::CELL_RECIP) as u64,
            onoff_on_prob: g(imp::ONOFF_ON_PROB) as u32,
            onoff_recip: g(imp::ONOFF_RECIP) as u64,
            pie_target_ns: g(imp::PIE_TARGET_NS) as u32,
            pie_tupdate_ns: g(imp::PIE_TUPDATE_NS) as u32,
            pie_alpha: g(imp::PIE_ALPHA) as u32,
            pie_beta: g(imp::PIE_BETA) as u32,
            pie_max_burst_ns: g(imp::PIE_MAX_BURST_NS) as u32,
        }
    }

    /// True when the rate stage does something for this profile.
    #[inline]
    pub fn has_rate(&self) -> bool {
        self.ns_per_byte_q16 != 0
    }

    /// True when the rate queue plays a trace (exact Mahimahi delivery) instead of its clock.
    #[inline]
    pub fn has_trace(&self) -> bool {
        self.trace_len != 0
    }

    /// True when packets wait for netem-style slots (as the kernel: MIN, MAX or jitter non-zero).
    #[inline]
    pub fn has_slots(&self) -> bool {
        self.slot_delay_ns != 0 || self.slot_span_ns != 0
    }
}

/// One slot per pd; `None` = miss (the table's default action applies).
pub struct ProfileTable {
    slots: Box<[Option<Impairment>]>,
}

impl ProfileTable {
    pub fn new(pds: usize, entries: impl IntoIterator<Item = (u32, Impairment)>) -> Self {
        let mut slots = vec![None; pds].into_boxed_slice();
        for (pd, imp) in entries {
            if let Some(s) = slots.get_mut(pd as usize) {
                *s = Some(imp);
            }
        }
        ProfileTable { slots }
    }

    #[inline]
    pub fn get(&self, pd: u32) -> Option<&Impairment> {
        self.slots.get(pd as usize).and_then(|s| s.as_ref())
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every installed entry with its pd.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Impairment)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i as u32, s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{action, ACTION_SET_IMPAIRMENT};

    /// Every field reads the param of its own name (the indices come from the P4Info; this checks
    /// the hand-written half, the field each index goes to).
    #[test]
    fn each_field_reads_its_named_param() {
        let params: Vec<u128> = (1..=imp::COUNT as u128).collect();
        let i = Impairment::from_params(&params);
        let by_name = |name: &str| {
            let a = action(ACTION_SET_IMPAIRMENT).unwrap();
            a.params.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no param {name}")).id as u64
        };
        // ecn, red_gentle and loss_ecn are one bit: checked apart below.
        let fields: [(&str, u64); imp::COUNT - 3] = [
            ("delay_ns", i.delay_ns),
            ("jitter_ns", i.jitter_ns),
            ("jitter_dist", i.jitter_dist as u64),
            ("reorder_mode", i.reorder_mode as u64),
            ("reorder_prob", i.reorder_prob as u64),
            ("loss_prob", i.loss_prob as u64),
            ("ge_p", i.ge_p as u64),
            ("ge_r", i.ge_r as u64),
            ("ge_loss_good", i.ge_loss_good as u64),
            ("ge_loss_bad", i.ge_loss_bad as u64),
            ("ns_per_byte_q16", i.ns_per_byte_q16),
            ("overhead_bytes", i.overhead_bytes as u16 as u64),
            ("queue_limit_bytes", i.queue_limit_bytes as u64),
            ("queue_limit_pkts", i.queue_limit_pkts as u64),
            ("dup_prob", i.dup_prob as u64),
            ("corrupt_prob", i.corrupt_prob as u64),
            ("aqm", i.aqm as u64),
            ("codel_target_ns", i.codel_target_ns),
            ("codel_interval_ns", i.codel_interval_ns),
            ("red_min_bytes", i.red_min_bytes as u64),
            ("red_max_bytes", i.red_max_bytes as u64),
            ("red_max_prob", i.red_max_prob as u64),
            ("red_wlog", i.red_wlog as u64),
            ("red_span_bytes", i.red_span_bytes as u64),
            ("red_idle_q48", i.red_idle_q48),
            ("loss4_p13", i.loss4_p13 as u64),
            ("loss4_p31", i.loss4_p31 as u64),
            ("loss4_p32", i.loss4_p32 as u64),
            ("loss4_p23", i.loss4_p23 as u64),
            ("loss4_p14", i.loss4_p14 as u64),
            ("bearer_sched", i.bearer_sched as u64),
            ("bearer_quantum_bytes", i.bearer_quantum_bytes as u64),
            ("bearer_pf_halflife_log2", i.bearer_pf_halflife_log2 as u64),
            ("slot_delay_ns", i.slot_delay_ns),
            ("slot_span_ns", i.slot_span_ns),
            ("slot_dist", i.slot_dist as u64),
            ("slot_packets", i.slot_packets as u64),
            ("slot_bytes", i.slot_bytes as u64),
            ("trace_base", i.trace_base as u64),
            ("trace_len", i.trace_len as u64),
            ("trace_ms_base", i.trace_ms_base as u64),
            ("trace_period_ms", i.trace_period_ms as u64),
            ("trace_period_recip", i.trace_period_recip),
            ("delay_corr", i.delay_corr as u64),
            ("jitter_mod_recip", i.jitter_mod_recip),
            ("loss_corr", i.loss_corr as u64),
            ("dup_corr", i.dup_corr as u64),
            ("corrupt_corr", i.corrupt_corr as u64),
            ("reorder_corr", i.reorder_corr as u64),
            ("reorder_gap", i.reorder_gap as u64),
            ("cell_bytes", i.cell_bytes as u64),
            ("cell_overhead_bytes", i.cell_overhead_bytes as u16 as u64),
            ("cell_recip", i.cell_recip),
            ("onoff_on_prob", i.onoff_on_prob as u64),
            ("onoff_recip", i.onoff_recip),
            ("pie_target_ns", i.pie_target_ns as u64),
            ("pie_tupdate_ns", i.pie_tupdate_ns as u64),
            ("pie_alpha", i.pie_alpha as u64),
            ("pie_beta", i.pie_beta as u64),
            ("pie_max_burst_ns", i.pie_max_burst_ns as u64),
        ];
        for (name, got) in fields {
            assert_eq!(got, by_name(name), "{name}");
        }
        let mut only_ecn = vec![0u128; imp::COUNT];
        only_ecn[by_name("ecn") as usize - 1] = 1;
        assert_eq!(Impairment::from_params(&only_ecn), Impairment { ecn: true, ..Default::default() });
        let mut only_gentle = vec![0u128; imp::COUNT];
        only_gentle[by_name("red_gentle") as usize - 1] = 1;
        assert_eq!(Impairment::from_params(&only_gentle), Impairment { red_gentle: true, ..Default::default() });
        let mut only_loss_ecn = vec![0u128; imp::COUNT];
        only_loss_ecn[by_name("loss_ecn") as usize - 1] = 1;
        assert_eq!(Impairment::from_params(&only_loss_ecn), Impairment { loss_ecn: true, ..Default::default() });
    }
}
