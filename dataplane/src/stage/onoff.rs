//! The on/off link (contract stage 3, before the loss models): Mahimahi's `mm-onoff`.
//!
//! The link alternates between on and off, each period exponentially distributed with mean
//! `mean_on` or `mean_off`; while it is off, every packet is dropped (reason link_off). That is a
//! two-state continuous-time Markov chain, and a packet only needs the state at its own arrival:
//! given the state s that the pd's previous packet saw dt ns earlier, the link is on with
//! probability
//!
//! ```text
//! P(on) = pi + ([s is on] - pi) * e^(-dt / tau),
//! pi = mean_on / (mean_on + mean_off),  tau = mean_on * mean_off / (mean_on + mean_off).
//! ```
//!
//! The chain is memoryless, so one draw per packet samples it exactly at the arrivals, with no
//! timer and no loop over the periods that passed between two packets (which p4src could not
//! have). The controller gives pi in Q32 (`onoff_on_prob`) and 2^64 / (tau ln 2)
//! (`onoff_recip`, the relaxation's half-lives per ns in Q64; 0: no on/off link), so that
//! e^(-dt / tau) = 2^-(dt * onoff_recip / 2^64) comes from [`exp2_neg`] in Q32, as p4src's
//! OnOffLink computes it (p4src/include/onoff.p4), bit for bit. The chain starts on at the pd's
//! first packet (state 0, never written, reads as on with dt = 0).
use std::sync::atomic::Ordering::Relaxed;

use super::{Ctx, Impairment};
use crate::exp2::exp2_neg;

/// `onoff_state` values (0: not started, reads as on).
pub const ON: u8 = 1;
pub const OFF: u8 = 2;

const ONE_Q32: u64 = 1 << 32;

/// The probability (Q32, at most 2^32) that the link is on for a packet `dt` ns after the pd's
/// previous packet saw it in `state`.
#[inline]
pub fn p_on(state: u8, dt: u64, on_prob: u32, recip: u64) -> u64 {
    let y = dt as u128 * recip as u128;
    let e = exp2_neg(ONE_Q32, (y >> 64) as u64, (y as u64) >> 8) as u128;
    let pi = on_prob as u128;
    (if state == OFF { pi - ((pi * e) >> 32) } else { pi + (((ONE_Q32 as u128 - pi) * e) >> 32) }) as u64
}

/// Whether the link is off for this packet; the pd's chain moves to the state the packet saw.
#[inline]
pub fn off(imp: &Impairment, ctx: &mut Ctx) -> bool {
    let cell = &ctx.regs.onoff[ctx.pd as usize];
    let state = cell.state.load(Relaxed);
    let at = cell.at_ns.load(Relaxed);
    let dt = if state != 0 { ctx.now.saturating_sub(at) } else { 0 };
    let off = ctx.rng.next_u32() as u64 >= p_on(state, dt, imp.onoff_on_prob, imp.onoff_recip);
    cell.state.store(if off { OFF } else { ON }, Relaxed);
    cell.at_ns.store(ctx.now, Relaxed);
    off
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters, Registers};

    /// The controller's encoding (control-plane/p4netem/profiles/onoff.py) in floating point: pi in
    /// Q32 and 2^64 / (tau ln 2), within a few units of the controller's exact integers.
    fn encode(mean_on_ns: f64, mean_off_ns: f64) -> (u32, u64) {
        let pi = (mean_on_ns / (mean_on_ns + mean_off_ns) * 2f64.powi(32)).round() as u32;
        let tau = mean_on_ns * mean_off_ns / (mean_on_ns + mean_off_ns);
        (pi, (2f64.powi(64) / (tau * std::f64::consts::LN_2)).round() as u64)
    }

    #[test]
    fn p_on_is_the_chains_transition() {
        let (on, off_) = (10e9, 2e9);
        let (pi_q, recip) = encode(on, off_);
        let pi = on / (on + off_);
        let tau = on * off_ / (on + off_);
        for dt in [0u64, 1, 1_000, 1_000_000, 100_000_000, 1_666_666_667, 5_000_000_000, 60_000_000_000] {
            let e = (-(dt as f64) / tau).exp();
            for (state, was_on) in [(0u8, 1.0), (ON, 1.0), (OFF, 0.0)] {
                let want = pi + (was_on - pi) * e;
                let got = p_on(state, dt, pi_q, recip) as f64 / 2f64.powi(32);
                assert!((got - want).abs() < 4e-6, "state {state} dt {dt}: {got} vs {want}");
            }
        }
        // No time since an on (or a start): certainly on; since an off: certainly off.
        assert_eq!(p_on(ON, 0, pi_q, recip), ONE_Q32);
        assert_eq!(p_on(0, 0, pi_q, recip), ONE_Q32);
        assert_eq!(p_on(OFF, 0, pi_q, recip), 0);
        // Long after: the stationary share, whatever the state.
        assert_eq!(p_on(ON, u64::MAX, pi_q, recip), pi_q as u64);
        assert_eq!(p_on(OFF, u64::MAX, pi_q, recip), pi_q as u64);
    }

    /// (state, dt ns, onoff_on_prob, onoff_recip, P(on) in Q32): tests/contract/test_contract.py
    /// runs a statement-by-statement Python transcription of p4src's OnOffLink and Exp2Neg on
    /// these vectors, so the switch and the P4 program compute the same bits.
    pub const ONOFF_VECTORS: [(u8, u64, u32, u64, u64); 12] = [
        (0, 0, 3579139413, 15967815717, 4294967296),
        (1, 1000, 3579139413, 15967815717, 4294966866),
        (1, 123456789, 3579139413, 15967815717, 4243858953),
        (2, 123456789, 3579139413, 15967815717, 255541715),
        (1, 1666666667, 3579139413, 15967815717, 3842477669),
        (2, 1666666667, 3579139413, 15967815717, 2262448133),
        (1, 693147181, 2147483648, 53226052391, 2684354559),
        (2, 40000000, 429496730, 591400582126, 252925402),
        (2, 18446744073709551615, 429496730, 591400582126, 429496730),
        (1, 999, 2147483648, 53226052391377288, 2438694890),
        (2, 3, 2147483648, 53226052391377288, 12846690),
        (1, 1000000000000, 3579139413, 15967815717, 3579139413),
    ];

    #[test]
    fn p_on_matches_the_p4_vectors() {
        for (state, dt, pi, recip, want) in ONOFF_VECTORS {
            assert_eq!(p_on(state, dt, pi, recip), want, "state {state} dt {dt} pi {pi} recip {recip}");
        }
    }

    /// Sampled at 1 ms over 2000 s of a 1 s on / 0.25 s off link: the share of packets that find
    /// it off (pi_off 0.2) and the mean off run (0.25 s = 250 packets) against the chain's law.
    #[test]
    fn packets_see_the_chains_law() {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, vec![0; 16384].into(), 1);
        let counters = Counters::new(&caps);
        let mut rng = Prng::new(11);
        let (pi, recip) = encode(1e9, 0.25e9);
        let imp = Impairment { onoff_on_prob: pi, onoff_recip: recip, ..Default::default() };
        let n = 2_000_000u64;
        let (mut offs, mut runs, mut prev) = (0u64, 0u64, false);
        for i in 0..n {
            let mut ctx = Ctx { now: 5_000 + i * 1_000_000, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
            let o = off(&imp, &mut ctx);
            assert!(i != 0 || !o, "the link starts on");
            offs += o as u64;
            runs += (o && !prev) as u64;
            prev = o;
        }
        let share = offs as f64 / n as f64;
        // Over T = 2000 s the off share's sd is sqrt(2 pi_on pi_off tau / T) = 0.0040 (tau 0.2 s).
        assert!((share - 0.2).abs() < 4.0 * 0.0040, "off share {share}");
        // About 1600 off periods of mean 250 ms (sd of the mean 250 / sqrt(1600) = 6.25 packets).
        let mean_run = offs as f64 / runs as f64;
        assert!((mean_run - 250.0).abs() < 4.0 * 6.25 + 1.0, "mean off run {mean_run} packets");
        assert_eq!(regs.onoff[3].at_ns.load(Relaxed), 5_000 + (n - 1) * 1_000_000);
    }
}
