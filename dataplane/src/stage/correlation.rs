//! netem's correlated random numbers (Linux sch_netem's `get_crandom`; contract "Correlation").
//!
//! netem correlates its loss, duplication, corruption, reorder and jitter draws with one
//! generator each: `a = (v * (2^32 - rho) + last * rho) >> 32`, `last = a`, where `v` is a fresh
//! uniform 32-bit draw and `rho` the tc percentage as a fraction of 2^32, plus one. The stages
//! call [`draw`] with their use's index; `last` lives in the pd's `*_corr_last` register cell
//! ([`crate::state::PdCorr`]), so the control plane reads the same values p4src keeps. A cell
//! never drawn (0, also after a reset) is seeded with another uniform draw, as netem seeds `last`
//! when a qdisc is configured. With `corr` 0 the draw is the plain independent one: the same single
//! `next_u32` the stage made before correlation existed, so seeded runs keep their sequences.
use std::sync::atomic::Ordering::Relaxed;

use super::Ctx;

/// The uses, in `PdCorr::last` (and `CORR_REGISTERS`) order.
pub const DELAY: usize = 0;
pub const LOSS: usize = 1;
pub const DUP: usize = 2;
pub const CORRUPT: usize = 3;
pub const REORDER: usize = 4;

/// Bit 32 of a cell: it holds a number.
const DRAWN: u64 = 1 << 32;

/// netem's step: the correlated number after `last` for a fresh draw `value`. Both products are
/// at most (2^32 - 1) times weights that add up to 2^32, so the sum fits in 64 bits.
#[inline]
pub fn next(value: u32, last: u32, corr: u32) -> u32 {
    let rho = corr as u64 + 1;
    ((value as u64 * ((1u64 << 32) - rho) + last as u64 * rho) >> 32) as u32
}

/// One 32-bit draw of use `k` for the packet's pd: independent with `corr` 0, else netem's
/// correlated number (the cell advances).
#[inline]
pub fn draw(ctx: &mut Ctx, k: usize, corr: u32) -> u32 {
    let value = ctx.rng.next_u32();
    if corr == 0 {
        return value;
    }
    let cell = &ctx.regs.corr[ctx.pd as usize].last[k];
    let c = cell.load(Relaxed);
    let last = if c & DRAWN != 0 { c as u32 } else { ctx.rng.next_u32() };
    let a = next(value, last, corr);
    cell.store(DRAWN | a as u64, Relaxed);
    a
}

/// A Bernoulli trial with probability `p / 2^32` (0 never, `u32::MAX` always, as `Prng::chance`)
/// whose draw is use `k`'s. Uncorrelated it draws exactly as `Prng::chance` does (nothing for p 0
/// or always); correlated it draws for every packet with p above 0, so the chain advances as
/// netem's (which, like p4src, makes no draw for a probability of 0).
#[inline]
pub fn chance(ctx: &mut Ctx, k: usize, corr: u32, p: u32) -> bool {
    if corr == 0 || p == 0 {
        return ctx.rng.chance(p);
    }
    let a = draw(ctx, k, corr);
    p == u32::MAX || a < p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters, Registers};

    /// The kernel's results, worked out by hand (Python's big integers for the products): at the
    /// edges no product overflows, and at 25 % the answer is 3/4 of the draw plus 1/4 of `last`.
    #[test]
    fn step_is_the_kernel_s_at_the_edges() {
        for (v, l, c, want) in [
            (0, 0, 1, 0),
            (u32::MAX, u32::MAX, 1, u32::MAX),
            (u32::MAX, u32::MAX, u32::MAX, u32::MAX),
            (u32::MAX, 0, u32::MAX, 0),
            (0, u32::MAX, u32::MAX, u32::MAX),
            (123_456_789, 987_654_321, 1 << 30, 339_506_172),
        ] {
            assert_eq!(next(v, l, c), want, "{v} {l} {c}");
        }
        // 100 % (rho = 2^32): the number never changes; a tiny rho: almost the fresh draw.
        assert_eq!(next(5, 77, u32::MAX), 77);
        assert_eq!(next(u32::MAX, 0, 1), u32::MAX - 2); // (2^32-1)(2^32-2) >> 32
    }

    fn setup() -> (Registers, Counters, Prng) {
        let caps = Capacities { profiles: 4, ..Default::default() };
        (Registers::new(&caps, crate::dist::builtin_tables(), 1), Counters::new(&caps), Prng::new(7))
    }

    /// The draws are netem's chain: replaying the PRNG by hand (seed draw first, then one value per
    /// packet) gives the same numbers, the cell keeps the last one with bit 32 set, and the other
    /// uses' cells and pds are untouched.
    #[test]
    fn draws_follow_netem_s_chain_from_a_seeded_last() {
        let (regs, counters, mut rng) = setup();
        let corr = (0.75 * 4294967296.0) as u32;
        let mut got = vec![];
        for _ in 0..50 {
            let mut ctx = Ctx { now: 0, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
            got.push(draw(&mut ctx, LOSS, corr));
        }
        let mut replay = Prng::new(7);
        let first_value = replay.next_u32();
        let mut last = replay.next_u32();
        let mut want = vec![next(first_value, last, corr)];
        last = want[0];
        for _ in 1..50 {
            last = next(replay.next_u32(), last, corr);
            want.push(last);
        }
        assert_eq!(got, want);
        assert_eq!(regs.corr[3].last[LOSS].load(Relaxed), DRAWN | *want.last().unwrap() as u64);
        for k in [DELAY, DUP, CORRUPT, REORDER] {
            assert_eq!(regs.corr[3].last[k].load(Relaxed), 0);
        }
        assert_eq!(regs.corr[2].last[LOSS].load(Relaxed), 0);
    }

    /// Without correlation the trial is `Prng::chance`, draw for draw, and no cell is written.
    #[test]
    fn zero_correlation_is_the_independent_trial() {
        let (regs, counters, mut rng) = setup();
        let mut plain = Prng::new(7);
        for p in [0, 1 << 31, u32::MAX, 12345] {
            for _ in 0..100 {
                let mut ctx = Ctx { now: 0, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
                assert_eq!(chance(&mut ctx, LOSS, 0, p), plain.chance(p));
            }
        }
        assert!(regs.corr[1].last.iter().all(|c| c.load(Relaxed) == 0));
    }

    /// Correlated loss, 25 % at rho 50 %: the chain's numbers are not uniform (an AR(1) mix of
    /// uniforms, concentrated around the middle), so netem loses far less than 25 %, and a loss
    /// follows a loss more often than the rate. Figures from two 4M-packet simulations of the
    /// kernel's formula with numpy's PRNG: rate 0.0696 / 0.0693, P(loss | loss) 0.300 / 0.300.
    #[test]
    fn correlated_loss_is_burstier_and_lighter_than_its_percentage() {
        let (regs, counters, mut rng) = setup();
        let p = (0.25 * 4294967296.0) as u32;
        let corr = (0.5 * 4294967296.0) as u32;
        let n = 2_000_000;
        let (mut lost, mut after_loss, mut lost_after_loss, mut prev) = (0u64, 0u64, 0u64, false);
        for _ in 0..n {
            let mut ctx = Ctx { now: 0, pd: 0, rng: &mut rng, regs: &regs, counters: &counters };
            let l = chance(&mut ctx, LOSS, corr, p);
            lost += l as u64;
            if prev {
                after_loss += 1;
                lost_after_loss += l as u64;
            }
            prev = l;
        }
        let rate = lost as f64 / n as f64;
        let cond = lost_after_loss as f64 / after_loss as f64;
        assert!((rate - 0.0695).abs() < 0.002, "rate {rate}");
        assert!((cond - 0.300).abs() < 0.008, "P(loss | loss) {cond}");
    }
}
