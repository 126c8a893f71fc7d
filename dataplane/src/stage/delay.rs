//! Delay stage: the release time.
//!
//! With `reorder_prob` the packet skips the delay line: release = departure, `last_release_ns`
//! untouched. Else release = departure + max(0, delay_ns + jitter), jitter from `jitter_dist`
//! (1 uniform in [-jitter_ns, +jitter_ns]; 2..5 a `dist_table` sample * jitter_ns / 8192,
//! truncated toward zero), then with `reorder_mode == 0` release = max(release, last_release);
//! `last_release_ns[pd] = release`. Same integer arithmetic as p4src/include/delay.p4.
//!
//! netem's `gap` and correlation: with `reorder_gap > 1` the first `reorder_gap - 1` packets after
//! each one that skipped the line (and from the start) take it without a draw (`reorder_count`,
//! netem's counter); `reorder_corr` correlates the skip draw. `delay_corr` makes the jitter's draw
//! netem's correlated number `a`, used as netem's tabledist uses it: uniform jitter
//! `(a mod 2*jitter_ns) - jitter_ns`, table cell `a mod 4096` (stage/correlation.rs).
use std::sync::atomic::Ordering::Relaxed;

use super::{correlation, Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::{DIST_TABLE_LEN, JITTER_NORMAL, JITTER_UNIFORM, JITTER_USER};

pub struct Delay;

/// The signed jitter sample in ns for one packet.
#[inline]
pub fn jitter_sample(imp: &Impairment, ctx: &mut Ctx) -> (bool, u64) {
    if imp.delay_corr != 0 && (JITTER_UNIFORM..=JITTER_USER).contains(&imp.jitter_dist) {
        return correlated_jitter(imp, ctx);
    }
    dist_sample(imp.jitter_dist, imp.jitter_ns, ctx)
}

/// The jitter from netem's correlated number `a`, as netem's tabledist takes it: uniform
/// `(a mod 2*jitter_ns) - jitter_ns` in [-jitter_ns, jitter_ns) (the modulo with p4src's
/// arithmetic: quotient from `jitter_mod_recip`, one correction); a table's cell `a mod 4096`.
#[inline]
fn correlated_jitter(imp: &Impairment, ctx: &mut Ctx) -> (bool, u64) {
    let a = correlation::draw(ctx, correlation::DELAY, imp.delay_corr) as u64;
    let scale = imp.jitter_ns;
    if imp.jitter_dist == JITTER_UNIFORM {
        let m = scale << 1;
        let q = ((a as u128 * imp.jitter_mod_recip as u128) >> 64) as u64;
        let mut r = a.wrapping_sub(q.wrapping_mul(m));
        if r >= m {
            r = r.wrapping_sub(m);
        }
        return if r >= scale { (false, r - scale) } else { (true, scale - r) };
    }
    table_sample(imp.jitter_dist, scale, a as u32 % DIST_TABLE_LEN, ctx)
}

/// Cell `slot` of table `dist` (a `jitter_dist` code 2..5) scaled by `scale`, as netem: sample *
/// scale / 8192, truncated toward zero.
#[inline]
fn table_sample(dist: u8, scale: u64, slot: u32, ctx: &Ctx) -> (bool, u64) {
    let idx = (dist - JITTER_NORMAL) as u32 * DIST_TABLE_LEN + slot;
    let sample = ctx.regs.dist(idx as usize);
    let mag = sample.unsigned_abs() as u64;
    (sample < 0, ((mag as u128 * scale as u128) >> 13) as u64)
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
            table_sample(d, scale, slot, ctx)
        }
        _ => (false, 0),
    }
}

/// netem's reorder decision for a profile with `reorder_prob`: inside the gap the packet takes the
/// line without a draw; past it, it skips with `reorder_prob` (correlated with `reorder_corr`).
/// `reorder_count` restarts at 0 on a skip and counts the packets that take the line (wrapping,
/// as netem's u32 counter).
#[inline]
fn skips_line(imp: &Impairment, ctx: &mut Ctx) -> bool {
    let regs = ctx.regs; // a copy of the shared reference: the draw below borrows ctx mutably
    let count = &regs.corr[ctx.pd as usize].reorder_count;
    let n = count.load(Relaxed);
    let in_gap = imp.reorder_gap > 1 && n < imp.reorder_gap - 1;
    let skip = !in_gap && correlation::chance(ctx, correlation::REORDER, imp.reorder_corr, imp.reorder_prob);
    count.store(if skip { 0 } else { n.wrapping_add(1) }, Relaxed);
    skip
}

impl Stage for Delay {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if imp.reorder_prob != 0 && skips_line(imp, ctx) {
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

    /// netem's gap: with reorder 100 % and gap 5, exactly every 5th packet skips the line (netem's
    /// man page: "the 5th (10th, 15th, ...) packet is sent immediately").
    #[test]
    fn gap_sends_every_nth_packet_at_once() {
        let (regs, counters, mut rng) = setup();
        let imp = Impairment { delay_ns: 1_000_000, reorder_prob: u32::MAX, reorder_gap: 5, ..Default::default() };
        let mut skipped = vec![];
        for i in 1..=20u64 {
            let mut ctx = Ctx { now: i, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(100, i);
            Delay.enqueue(&imp, &mut ctx, &mut p);
            if p.skipped_line {
                skipped.push(i);
            }
        }
        assert_eq!(skipped, vec![5, 10, 15, 20]);
        assert_eq!(regs.corr[1].reorder_count.load(Relaxed), 0);
        // gap 1 (and 0): every packet draws.
        for gap in [0, 1] {
            let imp = Impairment { reorder_gap: gap, ..imp };
            let mut ctx = Ctx { now: 0, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(100, 0);
            Delay.enqueue(&imp, &mut ctx, &mut p);
            assert!(p.skipped_line, "gap {gap}");
        }
    }

    /// Correlated uniform jitter is netem's `(a mod 2*jitter) - jitter` for the chain's numbers,
    /// with the modulo done through `jitter_mod_recip` as p4src does; table jitter reads cell
    /// `a mod 4096`.
    #[test]
    fn correlated_jitter_is_netem_s_modulo_of_the_chain() {
        let (regs, counters, mut rng) = setup();
        let corr = 1u32 << 30;
        for jitter in [1u64, 7, 10_000_000, 2_147_483_647] {
            let imp = Impairment {
                delay_ns: 3_000_000_000,
                jitter_ns: jitter,
                jitter_dist: JITTER_UNIFORM,
                reorder_mode: 1,
                delay_corr: corr,
                jitter_mod_recip: ((1u128 << 64) / (2 * jitter as u128)) as u64,
                ..Default::default()
            };
            for _ in 0..2000 {
                let mut ctx = Ctx { now: 0, pd: 0, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(100, 0);
                Delay.enqueue(&imp, &mut ctx, &mut p);
                let a = regs.corr[0].last[correlation::DELAY].load(Relaxed) as u32 as u64;
                let want = 3_000_000_000i64 + (a % (2 * jitter)) as i64 - jitter as i64;
                assert_eq!(p.release as i64, want, "jitter {jitter} a {a}");
            }
        }
        let imp = Impairment {
            delay_ns: 50_000_000,
            jitter_ns: 1_000_000,
            jitter_dist: JITTER_NORMAL,
            reorder_mode: 1,
            delay_corr: corr,
            ..Default::default()
        };
        for _ in 0..2000 {
            let mut ctx = Ctx { now: 0, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(100, 0);
            Delay.enqueue(&imp, &mut ctx, &mut p);
            let a = regs.corr[3].last[correlation::DELAY].load(Relaxed) as u32;
            let sample = regs.dist((a % DIST_TABLE_LEN) as usize) as i64;
            let want = 50_000_000 + (sample.signum() * ((sample.abs() * 1_000_000) >> 13));
            assert_eq!(p.release as i64, want);
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
