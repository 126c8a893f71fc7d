//! Delay stage: the release time.
//!
//! With `reorder_prob` the packet skips the delay line: release = departure, `last_release_ns`
//! untouched. Else release = departure + max(0, delay_ns + jitter), jitter from `jitter_dist`
//! (1 uniform in [-jitter_ns, +jitter_ns]; 2..5 a `dist_table` sample * jitter_ns / 8192,
//! truncated toward zero), then with `reorder_mode == 0` release = max(release, last_release);
//! `last_release_ns[pd] = release`. Same integer arithmetic as p4src/include/delay.p4.
use std::sync::atomic::Ordering::Relaxed;

use super::{Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::{DIST_TABLE_LEN, JITTER_NORMAL, JITTER_UNIFORM, JITTER_USER};

pub struct Delay;

/// The signed jitter sample in ns for one packet.
#[inline]
pub fn jitter_sample(imp: &Impairment, ctx: &mut Ctx) -> (bool, u64) {
    dist_sample(imp.jitter_dist, imp.jitter_ns, ctx)
}

/// A signed sample (negative?, magnitude in ns) of distribution `dist` (the `jitter_dist` codes)
/// with scale `scale`; the slot stage draws its slot delays with it too.
#[inline]
pub fn dist_sample(dist: u8, scale: u64, ctx: &mut Ctx) -> (bool, u64) {
    match dist {
        JITTER_UNIFORM => {
            let u = ctx.rng.up_to(scale << 1);
            if u >= scale {
                (false, u - scale)
            } else {
                (true, scale - u)
            }
        }
        d @ JITTER_NORMAL..=JITTER_USER => {
            let slot = ctx.rng.next_u32() % DIST_TABLE_LEN;
            let idx = (d - JITTER_NORMAL) as u32 * DIST_TABLE_LEN + slot;
            let sample = ctx.regs.dist(idx as usize);
            let mag = sample.unsigned_abs() as u64;
            (sample < 0, ((mag as u128 * scale as u128) >> 13) as u64)
        }
        _ => (false, 0),
    }
}

impl Stage for Delay {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if imp.reorder_prob != 0 && ctx.rng.chance(imp.reorder_prob) {
            pkt.release = pkt.departure;
            pkt.skipped_line = true;
            return Verdict::Pass;
        }
        let (neg, mag) = if imp.jitter_ns != 0 { jitter_sample(imp, ctx) } else { (false, 0) };
        let added = if neg { imp.delay_ns.saturating_sub(mag) } else { imp.delay_ns.saturating_add(mag) };
        let mut release = pkt.departure.saturating_add(added);
        let last = &ctx.regs.last_release_ns[ctx.pd as usize];
        if imp.reorder_mode == 0 {
            release = release.max(last.load(Relaxed));
        }
        last.store(release, Relaxed);
        pkt.release = release;
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters, Registers};

    fn setup() -> (Registers, Counters, Prng) {
        let caps = Capacities { profiles: 4, ..Default::default() };
        (Registers::new(&caps, crate::dist::builtin_tables(), 1), Counters::new(&caps), Prng::new(4))
    }

    #[test]
    fn constant_delay_and_order_keeping() {
        let (regs, counters, mut rng) = setup();
        let imp = Impairment {
            delay_ns: 10_000_000,
            jitter_ns: 5_000_000,
            jitter_dist: JITTER_UNIFORM,
            ..Default::default()
        };
        let mut prev = 0;
        for i in 0..10_000u64 {
            let now = i * 1000;
            let mut ctx = Ctx { now, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(100, now);
            Delay.enqueue(&imp, &mut ctx, &mut p);
            assert!(p.release >= now + 5_000_000 && p.release <= now.max(prev) + 15_000_000);
            assert!(p.release >= prev, "order kept with reorder_mode 0");
            prev = p.release;
        }
    }

    #[test]
    fn jitter_distributions_have_expected_sigma() {
        let (regs, counters, mut rng) = setup();
        for (dist, want_sigma) in
            [(JITTER_UNIFORM, 1e6 / 3f64.sqrt()), (JITTER_NORMAL, 1e6), (crate::contract::JITTER_PARETONORMAL, 1e6)]
        {
            let imp = Impairment {
                delay_ns: 50_000_000,
                jitter_ns: 1_000_000,
                jitter_dist: dist,
                reorder_mode: 1,
                ..Default::default()
            };
            let n = 100_000;
            let mut xs = Vec::with_capacity(n);
            for _ in 0..n {
                let mut ctx = Ctx { now: 0, pd: 0, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(100, 0);
                Delay.enqueue(&imp, &mut ctx, &mut p);
                xs.push(p.release as f64 - 50e6);
            }
            let m = xs.iter().sum::<f64>() / n as f64;
            let s = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert!(m.abs() < 0.05 * want_sigma, "dist {dist}: mean {m}");
            assert!((s - want_sigma).abs() / want_sigma < 0.05, "dist {dist}: sigma {s} want {want_sigma}");
        }
    }

    #[test]
    fn reorder_prob_skips_the_line_and_leaves_last_release() {
        let (regs, counters, mut rng) = setup();
        let imp = Impairment { delay_ns: 1_000_000, reorder_prob: u32::MAX, ..Default::default() };
        let mut ctx = Ctx { now: 10, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
        let mut p = Pkt::new(100, 10);
        p.departure = 77;
        Delay.enqueue(&imp, &mut ctx, &mut p);
        assert_eq!(p.release, 77);
        assert_eq!(regs.last_release_ns[2].load(Relaxed), 0);
    }
}
