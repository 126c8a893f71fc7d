//! Loss stage: Gilbert-Elliott when `ge_p != 0` (per-pd state in `ge_state`: transition first,
//! then lose with the new state's probability, reason loss_burst), else Bernoulli `loss_prob`
//! (reason loss_random). Copies never pass here (they are made after this stage).
use std::sync::atomic::Ordering::Relaxed;

use super::{Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::DropReason;

pub struct Loss;

impl Stage for Loss {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if pkt.is_copy {
            return Verdict::Pass;
        }
        if imp.ge_p != 0 {
            let cell = &ctx.regs.ge_state[ctx.pd as usize];
            // Any value other than 0 written by the controller reads as bad (p4src does the same).
            let bad = if cell.load(Relaxed) == 0 { ctx.rng.chance(imp.ge_p) } else { !ctx.rng.chance(imp.ge_r) };
            cell.store(bad as u8, Relaxed);
            let p = if bad { imp.ge_loss_bad } else { imp.ge_loss_good };
            if ctx.rng.chance(p) {
                return Verdict::Drop(DropReason::LossBurst);
            }
        } else if ctx.rng.chance(imp.loss_prob) {
            return Verdict::Drop(DropReason::LossRandom);
        }
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters, Registers};

    fn p(x: f64) -> u32 {
        (x * 4294967296.0) as u32
    }

    #[test]
    fn bernoulli_rate_within_3_sigma() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(2);
        let imp = Impairment { loss_prob: p(0.05), ..Default::default() };
        let n = 400_000;
        let mut lost = 0;
        for _ in 0..n {
            let mut ctx = Ctx { now: 0, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            if Loss.enqueue(&imp, &mut ctx, &mut Pkt::new(100, 0)) == Verdict::Drop(DropReason::LossRandom) {
                lost += 1;
            }
        }
        let sigma = (n as f64 * 0.05 * 0.95).sqrt();
        assert!((lost as f64 - n as f64 * 0.05).abs() < 3.0 * sigma, "{lost}");
    }

    #[test]
    fn gilbert_elliott_statistics_match_theory() {
        // p = 0.01, r = 0.2, loss 0 in good, 1 in bad: bursts are geometric with mean 1/r = 5,
        // loss fraction p / (p + r) = 0.0476.
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(99);
        let imp = Impairment { ge_p: p(0.01), ge_r: p(0.2), ge_loss_good: 0, ge_loss_bad: u32::MAX, ..Default::default() };
        let n = 2_000_000;
        let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
        for _ in 0..n {
            let mut ctx = Ctx { now: 0, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
            let l = Loss.enqueue(&imp, &mut ctx, &mut Pkt::new(100, 0)) == Verdict::Drop(DropReason::LossBurst);
            lost += l as u64;
            bursts += (l && !prev) as u64;
            prev = l;
        }
        let frac = lost as f64 / n as f64;
        let mean_burst = lost as f64 / bursts as f64;
        let want_frac = 0.01 / 0.21;
        assert!((frac - want_frac).abs() / want_frac < 0.05, "loss fraction {frac}");
        assert!((mean_burst - 5.0).abs() / 5.0 < 0.05, "mean burst {mean_burst}");
        assert_eq!(regs.ge_state[3].load(Relaxed) <= 1, true);
    }
}
