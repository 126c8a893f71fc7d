//! Slot stage: netem's slotted delivery (`slot MIN [MAX] [packets N] [bytes B]` and `slot
//! distribution TYPE DELAY JITTER ...`, tc-netem(8), Linux sch_netem.c).
//!
//! netem releases the packets that are due only when the current slot opens, at most `slot_packets`
//! packets and `slot_bytes` bytes per slot (0 = unlimited; the packet that reaches the byte limit
//! still goes); a slot used up is followed by the next one a slot delay later, and a packet that
//! becomes due after the current slot opened starts a new slot one delay after its due time. With
//! `t` the release time the delay stage gave:
//!
//! ```text
//! if next_ns == 0 || next_ns < t { next_ns = t + draw; used = 0 }  // none yet, or opened before t
//! release = next_ns; used_pkts += 1; used_bytes += len
//! if a limit is reached { next_ns += draw; used = 0 }  // the slot is used up
//! ```
//!
//! Computed at arrival, which is exact while packets reach the stage in order of `t` (no reordering
//! jitter); the slot grid is the ideal one (netem's drifts by its timer's lateness). A draw is
//! `slot_delay_ns + slot_span_ns * r / 2^32` for `slot_dist` 0 (`slot MIN MAX`), else `slot_delay_ns`
//! plus a jitter drawn as the delay stage draws its own, with scale `slot_span_ns`, never below 0.
//! Same integer arithmetic as p4src/include/slot.p4. A packet that skipped the delay line (netem
//! "reorder") does not wait for a slot (netem queues it outside the slots).
use super::delay::dist_sample;
use super::{Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::SLOT_RANGE;

pub struct Slot;

/// One pd's slot state (the `slot_*` registers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    /// When the current slot opens (0: none yet).
    pub next_ns: u64,
    pub used_pkts: u32,
    pub used_bytes: u32,
}

/// One slot delay (netem's get_slot_next `next_delay`).
#[inline]
fn draw(imp: &Impairment, ctx: &mut Ctx) -> u64 {
    if imp.slot_dist == SLOT_RANGE {
        // 48 x 32 bits: the product needs 80 (the kernel's mul_u64_u32_shr).
        let r = ctx.rng.next_u32() as u128;
        return imp.slot_delay_ns + ((imp.slot_span_ns as u128 * r) >> 32) as u64;
    }
    let (neg, mag) = dist_sample(imp.slot_dist, imp.slot_span_ns, ctx);
    if neg {
        imp.slot_delay_ns.saturating_sub(mag)
    } else {
        imp.slot_delay_ns + mag
    }
}

impl Stage for Slot {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if !imp.has_slots() || pkt.skipped_line {
            return Verdict::Pass;
        }
        let cell = &ctx.regs.slot[ctx.pd as usize];
        let mut v = cell.load();
        // 0: no slot opened yet (a due time is never below it, so the test alone would miss time 0).
        if v.next_ns == 0 || v.next_ns < pkt.release {
            v = Vars { next_ns: pkt.release + draw(imp, ctx), used_pkts: 0, used_bytes: 0 };
        }
        pkt.release = v.next_ns;
        pkt.coalescable = false; // a slot opens on time, whatever queue the packet came through
        v.used_pkts = v.used_pkts.saturating_add(1);
        v.used_bytes = v.used_bytes.saturating_add(pkt.len);
        if (imp.slot_packets != 0 && v.used_pkts >= imp.slot_packets)
            || (imp.slot_bytes != 0 && v.used_bytes >= imp.slot_bytes)
        {
            v = Vars { next_ns: v.next_ns + draw(imp, ctx), used_pkts: 0, used_bytes: 0 };
        }
        cell.store(&v);
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{JITTER_NORMAL, JITTER_UNIFORM};
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters, Registers};

    fn setup() -> (Registers, Counters, Prng) {
        let caps = Capacities { profiles: 4, ..Default::default() };
        (Registers::new(&caps, crate::dist::builtin_tables(), 1), Counters::new(&caps), Prng::new(7))
    }

    /// Release times of packets of `len` bytes due at `times`.
    fn releases(imp: &Impairment, times: &[u64], len: u32) -> Vec<u64> {
        let (regs, counters, mut rng) = setup();
        times
            .iter()
            .map(|&t| {
                let mut ctx = Ctx { now: t, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(len, t);
                p.release = t;
                assert_eq!(Slot.enqueue(imp, &mut ctx, &mut p), Verdict::Pass);
                p.release
            })
            .collect()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_backlog_leaves_in_bursts_on_the_slot_grid() {
        // slot 10ms packets 4: ten packets due at once leave 4, 4, 2 at 10, 20 and 30 ms.
        let imp = Impairment { slot_delay_ns: 10 * MS, slot_packets: 4, ..Default::default() };
        let got = releases(&imp, &[1000; 10], 100);
        let want: Vec<u64> = [1, 1, 1, 1, 2, 2, 2, 2, 3, 3].iter().map(|k| 1000 + k * 10 * MS).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_slotted_packet_is_never_coalesced() {
        // A packet queued behind another in a rate queue (coalescable) still leaves when its slot
        // opens, on time: the slot stage clears the flag; without slots it is left as it was.
        let (regs, counters, mut rng) = setup();
        let mut ctx = Ctx { now: 0, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
        let mut p = Pkt { coalescable: true, ..Pkt::new(100, 0) };
        let slotted = Impairment { slot_delay_ns: 10 * MS, ..Default::default() };
        assert_eq!(Slot.enqueue(&slotted, &mut ctx, &mut p), Verdict::Pass);
        assert!(!p.coalescable);
        let mut q = Pkt { coalescable: true, ..Pkt::new(100, 0) };
        assert_eq!(Slot.enqueue(&Impairment::default(), &mut ctx, &mut q), Verdict::Pass);
        assert!(q.coalescable);
    }

    #[test]
    fn a_packet_due_after_the_slot_opened_starts_a_new_one() {
        // The slot at 10 ms had room left, but a packet due at 12 ms waits a full slot delay (netem
        // re-draws slot_next when it is before the head packet's time_to_send).
        let imp = Impairment { slot_delay_ns: 10 * MS, slot_packets: 4, ..Default::default() };
        assert_eq!(releases(&imp, &[0, 12 * MS, 15 * MS], 100), vec![10 * MS, 22 * MS, 22 * MS]);
        // Due exactly when the slot opens: it joins it.
        assert_eq!(releases(&imp, &[0, 10 * MS], 100), vec![10 * MS, 10 * MS]);
    }

    #[test]
    fn the_packet_that_reaches_the_byte_limit_still_goes() {
        // bytes 2500 with 1000-byte packets: 3 per slot (1000, 2000, 3000 >= 2500).
        let imp = Impairment { slot_delay_ns: MS, slot_bytes: 2500, ..Default::default() };
        let got = releases(&imp, &[0; 7], 1000);
        assert_eq!(got, vec![MS, MS, MS, 2 * MS, 2 * MS, 2 * MS, 3 * MS]);
    }

    #[test]
    fn unlimited_slots_release_everything_due_at_once() {
        let imp = Impairment { slot_delay_ns: 5 * MS, ..Default::default() };
        assert_eq!(releases(&imp, &[0, 1, 2, 3], 1500), vec![5 * MS; 4]);
    }

    #[test]
    fn off_without_a_delay_and_after_skipping_the_line() {
        assert_eq!(releases(&Impairment { slot_packets: 1, ..Default::default() }, &[7, 9], 100), vec![7, 9]);
        let (regs, counters, mut rng) = setup();
        let imp = Impairment { slot_delay_ns: MS, ..Default::default() };
        let mut ctx = Ctx { now: 5, pd: 0, rng: &mut rng, regs: &regs, counters: &counters };
        let mut p = Pkt::new(100, 5);
        p.skipped_line = true;
        Slot.enqueue(&imp, &mut ctx, &mut p);
        assert_eq!(p.release, 5);
        assert_eq!(regs.slot[0].load(), Vars::default());
    }

    #[test]
    fn range_draws_are_uniform_between_min_and_max() {
        // slot 2ms 6ms packets 1: each slot delay uniform in [2, 6] ms, mean 4 ms.
        let imp = Impairment { slot_delay_ns: 2 * MS, slot_span_ns: 4 * MS, slot_packets: 1, ..Default::default() };
        let n = 20_000;
        let got = releases(&imp, &vec![0; n], 100);
        let gaps: Vec<u64> = got.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| (2 * MS..=6 * MS).contains(g)));
        let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
        assert!((mean - 4e6).abs() < 0.02 * 4e6, "mean slot delay {mean}");
        assert!(gaps.iter().any(|g| *g < 2 * MS + MS / 10) && gaps.iter().any(|g| *g > 6 * MS - MS / 10));
    }

    #[test]
    fn distribution_draws_have_the_mean_and_sigma_and_never_go_below_zero() {
        for (dist, sigma) in [(JITTER_NORMAL, 1e6), (JITTER_UNIFORM, 1e6 / 3f64.sqrt())] {
            let imp = Impairment {
                slot_delay_ns: 10 * MS,
                slot_span_ns: MS,
                slot_dist: dist,
                slot_packets: 1,
                ..Default::default()
            };
            let got = releases(&imp, &vec![0; 50_000], 100);
            let gaps: Vec<f64> = got.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let s = (gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
            assert!((m - 1e7).abs() < 0.01 * 1e7, "dist {dist}: mean {m}");
            assert!((s - sigma).abs() < 0.05 * sigma, "dist {dist}: sigma {s} want {sigma}");
        }
        // A mean of 0 with a wide jitter: negative draws are 0 (the slot opens at once).
        let imp = Impairment { slot_span_ns: MS, slot_dist: JITTER_NORMAL, slot_packets: 1, ..Default::default() };
        let got = releases(&imp, &vec![0; 1000], 100);
        assert!(got.windows(2).all(|w| w[1] >= w[0]));
        assert!(got.windows(2).any(|w| w[1] == w[0]), "some slot delays are clamped to 0");
    }
}
