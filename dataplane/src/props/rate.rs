//! The rate stage (stage/rate.rs) on any arrival sequence, rate, overhead and queue limits: each
//! admitted packet occupies the link for exactly wire * ns_per_byte (with netem's cells: its
//! cells' bytes, ceil(wire / cell) * (cell + cell overhead)) after the later of its
//! arrival and the previous departure (the link never runs faster than its rate, nor idles with
//! a packet waiting); the backlog registers always equal the admitted packets not yet departed;
//! a packet is dropped exactly when it would push the backlog past a limit, and a drop leaves the
//! clock alone; once every departure is past, the backlog is empty.
use std::sync::atomic::Ordering::Relaxed;

use proptest::prelude::*;

use crate::contract::DropReason;
use crate::rng::Prng;
use crate::stage::rate::Rate;
use crate::stage::{Ctx, Pkt, Stage, Verdict};
use crate::state::{Capacities, Counters, Registers};
use crate::tables::profile::Impairment;

fn impairment() -> impl Strategy<Value = Impairment> {
    (
        // 1 kbit/s .. 100 Gbit/s: ns_per_byte_q16 = 8e9 * 65536 / bps.
        (5_243u64..=524_288_000_000),
        // netem's overheads may be negative; below -60 some frames have no wire bytes at all.
        prop_oneof![0i16..64, -2000i16..0, Just(i16::MIN), Just(i16::MAX)],
        prop_oneof![Just(0u32), 1u32..40],
        prop_oneof![Just(0u32), 1_000u32..60_000],
        // A cell of fewer than 1 byte on the link (cell + overhead <= 0) only by a raw write.
        prop_oneof![Just((0u16, 0i16)), (1u16..1600, -64i16..64), (1u16..64, -100i16..-60)],
    )
        .prop_map(|(q16, overhead, pkts, bytes, (cell, cell_overhead))| Impairment {
            ns_per_byte_q16: q16,
            overhead_bytes: overhead,
            queue_limit_pkts: pkts,
            queue_limit_bytes: bytes,
            cell_bytes: cell,
            cell_overhead_bytes: cell_overhead,
            cell_recip: if cell == 0 { 0 } else { (1u64 << 32) / cell as u64 },
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rate_queue_invariants(
        imp in impairment(),
        arrivals in prop::collection::vec((0u64..2_000_000, 60u32..=1514), 1..400),
    ) {
        let caps = Capacities { profiles: 2, ..Capacities::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(7);
        let mut rate = Rate::new(4, 100_000);
        rate.provision(1, &imp);
        let pd = 1u32;
        let mut now = 0u64;
        let mut admitted: Vec<(u64, u64)> = Vec::new(); // (departure, wire) of admitted packets
        let mut last_dep = 0u64;
        for (gap, len) in arrivals {
            now += gap;
            let wire = (len as i64 + imp.overhead_bytes as i64).max(0) as u64;
            // What is still queued at `now` (departure after now), from our own record.
            let waiting: Vec<&(u64, u64)> = admitted.iter().filter(|(d, _)| *d > now).collect();
            let (q_pkts, q_bytes) = (waiting.len() as u64, waiting.iter().map(|(_, w)| w).sum::<u64>());
            let full = (imp.queue_limit_pkts != 0 && q_pkts >= imp.queue_limit_pkts as u64)
                || (imp.queue_limit_bytes != 0 && q_bytes + wire > imp.queue_limit_bytes as u64);
            let clock_before = regs.next_free_ns[pd as usize].load(Relaxed);
            let mut ctx = Ctx { now, pd, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(len, now);
            let verdict = rate.enqueue(&imp, &mut ctx, &mut p);
            if full {
                prop_assert_eq!(verdict, Verdict::Drop(DropReason::QueueFull));
                prop_assert_eq!(regs.next_free_ns[pd as usize].load(Relaxed), clock_before);
            } else {
                prop_assert_eq!(verdict, Verdict::Pass);
                // On the link: the wire bytes, or whole cells of them (counted here by repeated
                // subtraction, independently of the stage's division).
                let mut on_link = wire;
                if imp.cell_bytes != 0 {
                    let (cell, mut left, mut cells) = (imp.cell_bytes as u64, wire, 0u64);
                    while left > 0 {
                        left = left.saturating_sub(cell);
                        cells += 1;
                    }
                    on_link = cells * (cell as i64 + imp.cell_overhead_bytes as i64).max(0) as u64;
                }
                let service = ((on_link as u128 * imp.ns_per_byte_q16 as u128) >> 16) as u64;
                prop_assert_eq!(p.departure, now.max(last_dep) + service);
                prop_assert!(p.departure >= last_dep);
                last_dep = p.departure;
                admitted.push((p.departure, wire));
            }
            // The registers: exactly the admitted packets still to depart.
            let waiting: Vec<&(u64, u64)> = admitted.iter().filter(|(d, _)| *d > now).collect();
            prop_assert_eq!(regs.backlog_pkts[pd as usize].load(Relaxed) as usize, waiting.len());
            prop_assert_eq!(regs.backlog_bytes[pd as usize].load(Relaxed) as u64, waiting.iter().map(|(_, w)| w).sum::<u64>());
            if imp.queue_limit_pkts != 0 {
                prop_assert!(waiting.len() <= imp.queue_limit_pkts as usize);
            }
        }
        rate.dequeue(pd, last_dep, &regs);
        prop_assert_eq!(regs.backlog_pkts[pd as usize].load(Relaxed), 0);
        prop_assert_eq!(regs.backlog_bytes[pd as usize].load(Relaxed), 0);
    }
}
