//! Loss stage: Gilbert-Elliott when `ge_p != 0` (per-pd state in `ge_state`: transition first,
//! then lose with the new state's probability, reason loss_burst), else netem's 4-state model when
//! `loss4_p13` or `loss4_p14` is non-zero ([`four_state`]; per-pd state in `loss4_state`), else
//! Bernoulli `loss_prob` (reason loss_random; its draws correlated as netem's with `loss_corr`). Copies never pass here (they are made after this
//! stage). With `loss_ecn` (netem's `ecn`), a lost packet that is ECN-capable is marked CE and
//! passes instead of being dropped, whichever model lost it (Linux's `netem_enqueue`).
//!
//! First of all, with `onoff_recip != 0`, the on/off link ([`onoff`]): a packet that finds it off
//! is dropped (reason link_off, never marked: an outage is not a loss event) and the loss models
//! do not see it, so their state does not move.
use std::sync::atomic::Ordering::Relaxed;

use super::{correlation, onoff, Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::DropReason;

pub struct Loss;

/// `loss4_state` values: the states as tc-netem(8) numbers them (p13 moves 1 -> 3; the kernel's
/// enum lists LOST_IN_GAP before LOST_IN_BURST); 0, a register never written, is 1.
pub const TX_IN_GAP: u8 = 1;
pub const TX_IN_BURST: u8 = 2;
pub const LOST_IN_BURST: u8 = 3;
pub const LOST_IN_GAP: u8 = 4;

/// One step of netem's 4-state loss chain for a packet, exactly as Linux's `loss_4state` takes it
/// (Debian 12's kernel: one 32-bit draw, its strict comparisons, u32 sums that wrap; a1 = p13,
/// a2 = p31, a3 = p32, a4 = p14, a5 = p23 as the kernel stores iproute2's `loss state` values):
/// the new state and whether the packet is lost (reason loss_random for an isolated loss in a gap,
/// loss_burst for a loss in a burst).
#[inline]
pub fn four_state(state: u8, rnd: u32, imp: &Impairment) -> (u8, Option<DropReason>) {
    let (a1, a2, a3, a4, a5) = (imp.loss4_p13, imp.loss4_p31, imp.loss4_p32, imp.loss4_p14, imp.loss4_p23);
    match state {
        TX_IN_BURST => {
            if rnd < a5 {
                return (LOST_IN_BURST, Some(DropReason::LossBurst));
            }
            (TX_IN_BURST, None)
        }
        LOST_IN_BURST => {
            if rnd < a3 {
                (TX_IN_BURST, None)
            } else if a3 < rnd && rnd < a2.wrapping_add(a3) {
                (TX_IN_GAP, None)
            } else if a2.wrapping_add(a3) < rnd {
                (LOST_IN_BURST, Some(DropReason::LossBurst))
            } else {
                (LOST_IN_BURST, None) // rnd on a boundary: the kernel leaves the state and sends
            }
        }
        LOST_IN_GAP => (TX_IN_GAP, None),
        // TX_IN_GAP, and any other value a controller wrote (the kernel's switch has no default:
        // such a state would send every packet; p4netem reads it as TX_IN_GAP, as p4src does).
        _ => {
            if rnd < a4 {
                (LOST_IN_GAP, Some(DropReason::LossRandom))
            } else if a4 < rnd && rnd < a1.wrapping_add(a4) {
                (LOST_IN_BURST, Some(DropReason::LossBurst))
            } else {
                (TX_IN_GAP, None)
            }
        }
    }
}

impl Loss {
    /// Whether the profile's loss model loses this packet, and why; the model's state moves
    /// either way.
    #[inline]
    fn lost(imp: &Impairment, ctx: &mut Ctx) -> Option<DropReason> {
        if imp.ge_p != 0 {
            let cell = &ctx.regs.ge_state[ctx.pd as usize];
            // Any value other than 0 written by the controller reads as bad (p4src does the same).
            let bad = if cell.load(Relaxed) == 0 { ctx.rng.chance(imp.ge_p) } else { !ctx.rng.chance(imp.ge_r) };
            cell.store(bad as u8, Relaxed);
            let p = if bad { imp.ge_loss_bad } else { imp.ge_loss_good };
            ctx.rng.chance(p).then_some(DropReason::LossBurst)
        } else if imp.loss4_p13 != 0 || imp.loss4_p14 != 0 {
            let cell = &ctx.regs.loss4_state[ctx.pd as usize];
            let (state, lost) = four_state(cell.load(Relaxed), ctx.rng.next_u32(), imp);
            cell.store(state, Relaxed);
            lost
        } else {
            correlation::chance(ctx, correlation::LOSS, imp.loss_corr, imp.loss_prob).then_some(DropReason::LossRandom)
        }
    }
}

impl Stage for Loss {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if pkt.is_copy {
            return Verdict::Pass;
        }
        if imp.onoff_recip != 0 && onoff::off(imp, ctx) {
            return Verdict::Drop(DropReason::LinkOff);
        }
        match Self::lost(imp, ctx) {
            None => Verdict::Pass,
            // netem's ecn: `if (q->ecn && INET_ECN_set_ce(skb))` marks ECT(0), ECT(1) and CE alike.
            Some(_) if imp.loss_ecn && pkt.ip.is_some_and(|ip| ip.ect()) => {
                pkt.mark_ce(ctx);
                Verdict::Pass
            }
            Some(reason) => Verdict::Drop(reason),
        }
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

    /// The 4-state chain of bench/loss4_theory.py: p13 2 %, p31 40 %, p32 20 %, p23 50 %, p14 1 %.
    fn four_state_example() -> Impairment {
        Impairment {
            loss4_p13: p(0.02),
            loss4_p31: p(0.4),
            loss4_p32: p(0.2),
            loss4_p23: p(0.5),
            loss4_p14: p(0.01),
            ..Default::default()
        }
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
        let imp =
            Impairment { ge_p: p(0.01), ge_r: p(0.2), ge_loss_good: 0, ge_loss_bad: u32::MAX, ..Default::default() };
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
        assert!(regs.ge_state[3].load(Relaxed) <= 1);
    }

    /// The 4-state chain's long-run loss and mean burst against its stationary law: p13 2 %, p31
    /// 40 %, p32 20 %, p23 50 %, p14 1 %: pi = (0.9259, 0.0185, 0.0463, 0.0093) (states 1..4), loss
    /// 5.56 %, mean loss run 1.5 packets (bench/loss4_theory.py).
    #[test]
    fn four_state_statistics_match_theory() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(5);
        let imp = four_state_example();
        let n = 2_000_000;
        let (mut lost, mut isolated, mut bursts, mut prev) = (0u64, 0u64, 0u64, false);
        for _ in 0..n {
            let mut ctx = Ctx { now: 0, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
            let v = Loss.enqueue(&imp, &mut ctx, &mut Pkt::new(100, 0));
            let l = v != Verdict::Pass;
            isolated += (v == Verdict::Drop(DropReason::LossRandom)) as u64;
            lost += l as u64;
            bursts += (l && !prev) as u64;
            prev = l;
        }
        let frac = lost as f64 / n as f64;
        assert!((frac - 1.0 / 18.0).abs() / (1.0 / 18.0) < 0.03, "loss fraction {frac}");
        assert!((lost as f64 / bursts as f64 - 1.5).abs() < 0.03, "mean burst {}", lost as f64 / bursts as f64);
        // Isolated losses: pi_4 = 1/108 of the packets.
        assert!((isolated as f64 / n as f64 - 1.0 / 108.0).abs() < 0.0005, "isolated {isolated}");
    }

    #[test]
    fn four_state_boundaries_are_the_kernels() {
        let imp =
            Impairment { loss4_p13: 10, loss4_p31: 20, loss4_p32: 5, loss4_p23: 7, loss4_p14: 3, ..Default::default() };
        assert_eq!(four_state(0, 2, &imp), (LOST_IN_GAP, Some(DropReason::LossRandom)));
        assert_eq!(four_state(TX_IN_GAP, 3, &imp), (TX_IN_GAP, None)); // rnd == a4: no branch
        assert_eq!(four_state(TX_IN_GAP, 12, &imp), (LOST_IN_BURST, Some(DropReason::LossBurst)));
        assert_eq!(four_state(TX_IN_GAP, 13, &imp), (TX_IN_GAP, None)); // rnd == a1 + a4
        assert_eq!(four_state(LOST_IN_GAP, 0, &imp), (TX_IN_GAP, None));
        assert_eq!(four_state(LOST_IN_BURST, 4, &imp), (TX_IN_BURST, None));
        assert_eq!(four_state(LOST_IN_BURST, 5, &imp), (LOST_IN_BURST, None)); // rnd == a3: sent, stays
        assert_eq!(four_state(LOST_IN_BURST, 24, &imp), (TX_IN_GAP, None));
        assert_eq!(four_state(LOST_IN_BURST, 26, &imp), (LOST_IN_BURST, Some(DropReason::LossBurst)));
        assert_eq!(four_state(TX_IN_BURST, 6, &imp), (LOST_IN_BURST, Some(DropReason::LossBurst)));
        assert_eq!(four_state(TX_IN_BURST, 7, &imp), (TX_IN_BURST, None));
    }

    fn ip(ecn: u8) -> Option<crate::parse::IpHdr> {
        Some(crate::parse::IpHdr { off: 14, v4: true, ecn })
    }

    /// A link that is off drops first (link_off), never marks, and hides the packet from the loss
    /// model, whose state does not move; a copy never meets the link.
    #[test]
    fn an_off_link_drops_before_the_loss_models() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(3);
        // Mean on 1 us, off 1000 s: on at the first packet, then off (P(on) = 4 / 2^32 + e^-1000).
        let imp = Impairment {
            onoff_on_prob: 4,
            onoff_recip: 26_613_026_222_301_672,
            ge_p: u32::MAX,
            ge_r: 0,
            ge_loss_bad: 0,
            loss_ecn: true,
            ..Default::default()
        };
        let mut send = |now: u64, copy: bool| {
            let mut ctx = Ctx { now, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            let mut pkt = Pkt { ip: ip(1), is_copy: copy, ..Pkt::new(100, 0) };
            let v = Loss.enqueue(&imp, &mut ctx, &mut pkt);
            (v, pkt.mark_ce)
        };
        assert_eq!(send(1_000, false), (Verdict::Pass, false), "on at the first packet");
        assert_eq!(regs.ge_state[1].load(Relaxed), 1, "the first packet went on to the GE model");
        regs.ge_state[1].store(0, Relaxed);
        for k in 1..=100 {
            assert_eq!(send(1_000 + k * 1_000_000, false), (Verdict::Drop(DropReason::LinkOff), false));
        }
        assert_eq!(regs.ge_state[1].load(Relaxed), 0, "the GE model saw none of them");
        assert_eq!(regs.onoff[1].state.load(Relaxed), onoff::OFF);
        assert_eq!(send(2_000_000_000, true), (Verdict::Pass, false), "a copy passes");
        assert_eq!(regs.onoff[1].at_ns.load(Relaxed), 1_000 + 100 * 1_000_000, "and does not move the chain");
    }

    /// netem's ecn: with every packet lost, an ECN-capable one (ECT(0), ECT(1), already CE) is
    /// marked and passes, counted once in profile_ecn_mark; a Not-ECT or non-IP one is dropped
    /// with the model's reason, as without ecn.
    #[test]
    fn ecn_marks_what_the_model_loses_when_the_packet_can_carry_it() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(7);
        let models = [
            (Impairment { loss_prob: u32::MAX, ..Default::default() }, DropReason::LossRandom),
            (
                Impairment { ge_p: u32::MAX, ge_r: 0, ge_loss_bad: u32::MAX, ..Default::default() },
                DropReason::LossBurst,
            ),
            // 4-state, p13 = 1 and p31 = p32 = 0: into LOST_IN_BURST and never out of it.
            (Impairment { loss4_p13: u32::MAX, ..Default::default() }, DropReason::LossBurst),
        ];
        for (model, reason) in models {
            for ecn in [false, true] {
                let imp = Impairment { loss_ecn: ecn, ..model };
                for (hdr, capable) in [(ip(0), false), (ip(1), true), (ip(2), true), (ip(3), true), (None, false)] {
                    let before = counters.profile_ecn_mark.get(2);
                    let mut ctx = Ctx { now: 0, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
                    let mut pkt = Pkt { ip: hdr, ..Pkt::new(100, 0) };
                    let v = Loss.enqueue(&imp, &mut ctx, &mut pkt);
                    let after = counters.profile_ecn_mark.get(2);
                    if ecn && capable {
                        assert_eq!((v, pkt.mark_ce), (Verdict::Pass, true), "{imp:?} {hdr:?}");
                        assert_eq!((after.0 - before.0, after.1 - before.1), (100, 1));
                    } else {
                        assert_eq!((v, pkt.mark_ce), (Verdict::Drop(reason), false), "{imp:?} {hdr:?}");
                        assert_eq!(after, before);
                    }
                }
            }
        }
        // The AQM marking the same packet again on its pass adds no second mark (p4src: one bit).
        let mut ctx = Ctx { now: 0, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
        let mut pkt = Pkt { ip: ip(2), ..Pkt::new(60, 0) };
        pkt.mark_ce(&ctx);
        pkt.mark_ce(&ctx);
        assert_eq!(counters.profile_ecn_mark.get(3), (60, 1));
        // A packet not lost is not marked.
        let imp = Impairment { loss_ecn: true, ..Default::default() };
        let mut pkt = Pkt { ip: ip(2), ..Pkt::new(60, 0) };
        assert_eq!(Loss.enqueue(&imp, &mut ctx, &mut pkt), Verdict::Pass);
        assert!(!pkt.mark_ce);
    }

    /// The model moves the same with ecn on: the marks of an all-ECT stream with ecn are exactly
    /// the losses of the same seeded stream without it.
    #[test]
    fn ecn_marks_fall_where_the_losses_would() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let counters = Counters::new(&caps);
        let imp = four_state_example();
        let run = |ecn: bool| -> Vec<bool> {
            let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
            let mut rng = Prng::new(11);
            let imp = Impairment { loss_ecn: ecn, ..imp };
            (0..20_000)
                .map(|_| {
                    let mut ctx = Ctx { now: 0, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
                    let mut pkt = Pkt { ip: ip(2), ..Pkt::new(100, 0) };
                    let v = Loss.enqueue(&imp, &mut ctx, &mut pkt);
                    if ecn {
                        pkt.mark_ce
                    } else {
                        v != Verdict::Pass
                    }
                })
                .collect()
        };
        let (lost, marked) = (run(false), run(true));
        assert!(lost.iter().filter(|&&l| l).count() > 500);
        assert_eq!(lost, marked);
    }
}
