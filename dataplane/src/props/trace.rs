//! Exact trace delivery (stage/trace.rs) on any registers, parameters and per-pd state: a packet
//! never leaves before it is ready, nor before its first byte goes (`t <= begin <= departure`),
//! and nothing panics (the registers are any P4Runtime client's to write, loaded or not). On a
//! trace as the controller loads it, every packet leaves at one of the trace's opportunities
//! (the rule that keeps the first property holds without changing anything).
use std::sync::atomic::Ordering::Relaxed;

use proptest::prelude::*;

use crate::stage::trace::{schedule, Vars};
use crate::state::{Capacities, Registers};
use crate::tables::profile::Impairment;

const MS: u64 = 1_000_000;

fn registers() -> Registers {
    Registers::new(&Capacities { profiles: 2, ..Capacities::default() }, vec![0; 16384].into(), 1)
}

/// A cell index near the start of the registers, or one whose sum with the position wraps.
fn base() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..8, (u32::MAX - 8)..=u32::MAX]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn no_packet_leaves_before_it_is_ready(
        ms in prop::collection::vec(prop_oneof![0u32..60, any::<u32>()], 8),
        first_at in prop::collection::vec(prop_oneof![0u32..10, any::<u32>()], 8),
        (trace_base, trace_ms_base) in (base(), base()),
        trace_len in prop_oneof![1u32..8, any::<u32>()],
        trace_period_ms in prop_oneof![0u32..60, any::<u32>()],
        recip in prop_oneof![Just(None), any::<u64>().prop_map(Some)],
        (cycle, pos, left) in (prop_oneof![Just(0u64), any::<u64>()], prop_oneof![0u32..8, any::<u32>()],
                               prop_oneof![0u32..1600, any::<u32>()]),
        arrivals in prop::collection::vec((0u64..200 * MS, 1u32..=9000), 1..20),
        t0 in prop_oneof![1u64..1 << 40, any::<u64>().prop_map(|t| t >> 1)],
    ) {
        let regs = registers();
        for (i, (m, f)) in ms.iter().zip(&first_at).enumerate() {
            regs.trace_opportunity_ms[i].store(*m, Relaxed);
            regs.trace_first_at[i].store(*f, Relaxed);
        }
        let period_ns = trace_period_ms as u128 * MS as u128;
        let proper = (1u128 << 64).checked_div(period_ns).map_or(0, |r| r.min(u64::MAX as u128) as u64);
        let imp = Impairment {
            trace_base,
            trace_len,
            trace_ms_base,
            trace_period_ms,
            trace_period_recip: recip.unwrap_or(proper),
            ..Default::default()
        };
        let mut v = Vars { cycle_ns: cycle, pos, left };
        let mut t = t0;
        for (gap, len) in arrivals {
            t = t.saturating_add(gap);
            let slot = schedule(&imp, &regs, &mut v, t, len);
            prop_assert!(t <= slot.begin && slot.begin <= slot.departure, "t {} {:?}", t, slot);
        }
    }

    #[test]
    fn a_loaded_trace_sends_every_packet_at_one_of_its_opportunities(
        steps in prop::collection::vec(0u32..15, 1..8),
        arrivals in prop::collection::vec((0u64..40 * MS, 1u32..=1514), 1..200),
    ) {
        // Ascending timestamps (the first may be 0), the period the last; cells from 3 and 5.
        let mut ms = Vec::new();
        let mut at = 0u32;
        for s in steps {
            at += s;
            ms.push(at);
        }
        let period = *ms.last().unwrap();
        prop_assume!(period > 0);
        let regs = registers();
        for (i, m) in ms.iter().enumerate() {
            regs.trace_opportunity_ms[3 + i].store(*m, Relaxed);
        }
        for m in 0..=period {
            regs.trace_first_at[5 + m as usize].store(ms.partition_point(|&x| x < m) as u32, Relaxed);
        }
        let period_ns = period as u64 * MS;
        let imp = Impairment {
            trace_base: 3,
            trace_len: ms.len() as u32,
            trace_ms_base: 5,
            trace_period_ms: period,
            trace_period_recip: ((1u128 << 64) / period_ns as u128) as u64,
            ..Default::default()
        };
        let opportunities: Vec<u64> = ms.iter().map(|&m| m as u64 * MS % period_ns).collect();
        let (mut v, mut t, mut last) = (Vars::default(), 1_000_000_000u64, 0u64);
        let start = t + arrivals[0].0;
        for (gap, len) in arrivals {
            t += gap;
            let slot = schedule(&imp, &regs, &mut v, t, len);
            for when in [slot.begin, slot.departure] {
                prop_assert!(opportunities.contains(&((when - start) % period_ns)), "{} not an opportunity", when);
            }
            prop_assert!(t <= slot.begin && slot.begin <= slot.departure && last <= slot.departure);
            last = slot.departure;
        }
    }
}
