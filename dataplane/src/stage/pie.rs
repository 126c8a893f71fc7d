//! PIE (RFC 8033) on the rate queue, with Linux sch_pie's arithmetic and constants.
//!
//! PIE keeps a drop probability `p` (Q56: 2^56 - 1 is 1, Linux's MAX_PROB) that an update moves
//! every `tupdate` by `alpha * (q - target) + beta * (q - q_old)`, alpha and beta scaled down while
//! p is small; packets are dropped (or marked CE) with probability p as they join the queue, with
//! Linux's de-randomisation (`accu`) and burst allowance. Linux runs the update from a timer. The
//! switch, like p4src, has no timer for it: the updates that fell due since the pd's last packet
//! run, in order and each at its own time, when the next packet arrives and before it is decided
//! ([`catch_up`]), so a packet sees the state the timer would have left. An idle pd costs nothing:
//! once PIE has settled (p 0, no delay at two updates; every later update would change nothing) its
//! clock stops, and the next packet restarts it one period ahead.
//!
//! The queue delay an update sees at T is `max(0, next_free - T)`: exactly how long a packet
//! arriving at T would wait (RFC 8033's backlog / drain rate, with the drain rate known). Linux by
//! default uses the sojourn of the last packet dequeued. docs/pipeline-contract.md (stage 6) and
//! p4src's pie.p4 state the same steps; tests/contract runs p4src's on [`tests::PIE_VECTORS`].
use super::codel::Decision;
use crate::rng::Prng;

/// 1 in Q56 (Linux's MAX_PROB = U64_MAX >> 8).
pub const MAX_PROB: u64 = (1 << 56) - 1;
const PROB_10PCT: u64 = MAX_PROB / 10;
const PROB_20PCT: u64 = MAX_PROB / 5;
/// Below each of these, alpha and beta are quartered once more (RFC 8033's auto-tuning).
const SCALE_BANDS: [u64; 5] =
    [MAX_PROB / 100, MAX_PROB / 1_000, MAX_PROB / 10_000, MAX_PROB / 100_000, MAX_PROB / 1_000_000];
const STEP_2PCT: u64 = MAX_PROB / 50;
const CLAMP_2PCT: u64 = (MAX_PROB / 100) * 2;
const ACCU_LOW: u64 = (MAX_PROB / 100) * 85;
const ACCU_HIGH: u64 = (MAX_PROB / 2) * 17;
const QDELAY_BOOST_NS: u64 = 250_000_000;
/// Two 1514-byte frames (Linux's psched_mtu on Ethernet): below this backlog nothing is dropped.
const TWO_MTU_BYTES: u64 = 2 * 1514;
/// The most updates caught up for one packet; only raw register or param writes (a stale clock,
/// alpha 0) can need more, and then the clock restarts at the packet.
pub const MAX_CATCHUP: u32 = 4096;

/// One pd's PIE variables (the `pie_*` registers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    pub prob: u64,
    pub qdelay_old_ns: u64,
    pub burst_ns: u64,
    pub accu_prob: u64,
    /// When the next update falls due; 0: the clock is stopped.
    pub next_ns: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Params {
    pub target_ns: u64,
    pub tupdate_ns: u64,
    pub alpha: u64,
    pub beta: u64,
    pub max_burst_ns: u64,
    pub ecn: bool,
}

/// One update at `t`, the queue then draining until `free_at`. Returns true when PIE has settled
/// (p 0 and no queue delay at this update and the last): every later update would change nothing.
pub fn update(v: &mut Vars, p: &Params, t: u64, free_at: u64) -> bool {
    let q = free_at.saturating_sub(t);
    let (mut a, mut b) = (p.alpha as u128, p.beta as u128);
    if v.prob < PROB_10PCT {
        a >>= 1;
        b >>= 1;
        for band in SCALE_BANDS {
            if v.prob < band {
                a >>= 2;
                b >>= 2;
            }
        }
    }
    // delta = inc - dec, exact in 128 bits, as a sign and a magnitude (p4src's form).
    let inc = a * q as u128 + b * q as u128;
    let dec = a * p.target_ns as u128 + b * v.qdelay_old_ns as u128;
    let (mut up, mut mag) = if inc >= dec { (true, inc - dec) } else { (false, dec - inc) };
    if up && mag > STEP_2PCT as u128 && v.prob >= PROB_10PCT {
        // Steps up of at most 2 % above 10 %.
        mag = CLAMP_2PCT as u128;
    }
    if q > QDELAY_BOOST_NS {
        // Above 250 ms of delay every update adds 2 % more.
        if up {
            mag += STEP_2PCT as u128;
        } else if mag > STEP_2PCT as u128 {
            mag -= STEP_2PCT as u128;
        } else {
            mag = STEP_2PCT as u128 - mag;
            up = true;
        }
    }
    let mut update_prob = true;
    let mut prob = if up {
        let sum = v.prob as u128 + mag;
        if sum > MAX_PROB as u128 {
            update_prob = false;
            MAX_PROB
        } else {
            sum as u64
        }
    } else if mag < v.prob as u128 {
        v.prob - mag as u64
    } else {
        0
    };
    if q == 0 && v.qdelay_old_ns == 0 && update_prob {
        // No delay at two updates in a row: the probability falls faster (to 63/64).
        prob -= prob >> 6;
    }
    v.burst_ns = v.burst_ns.saturating_sub(p.tupdate_ns);
    let half = p.target_ns >> 1;
    let mut settled = false;
    if q < half && v.qdelay_old_ns < half && prob == 0 {
        // Linux's pie_vars_init: a new burst allowance, de-randomisation from zero.
        v.burst_ns = p.max_burst_ns;
        v.accu_prob = 0;
        settled = q == 0 && v.qdelay_old_ns == 0;
    }
    v.qdelay_old_ns = q;
    v.prob = prob;
    settled
}

/// Runs the updates due by `t` (a packet's arrival), starting the clock if it is stopped.
/// Returns how many ran.
pub fn catch_up(v: &mut Vars, p: &Params, t: u64, free_at: u64) -> u32 {
    let mut n = 0;
    if p.tupdate_ns == 0 {
        return 0;
    }
    loop {
        if v.next_ns == 0 {
            v.next_ns = t.saturating_add(p.tupdate_ns);
            v.burst_ns = p.max_burst_ns;
            return n;
        }
        if v.next_ns > t {
            return n;
        }
        if n == MAX_CATCHUP {
            v.next_ns = t.saturating_add(p.tupdate_ns);
            return n;
        }
        let settled = update(v, p, v.next_ns, free_at);
        n += 1;
        // Settled: stopped, and restarted at once by this packet (the loop's next turn).
        v.next_ns = if settled { 0 } else { v.next_ns.saturating_add(p.tupdate_ns) };
    }
}

/// The decision for a packet joining the queue behind `backlog` wire bytes, the updates caught up
/// and the limits passed (Linux's order). `ect`: the packet is ECN-capable.
pub fn enqueue(v: &mut Vars, p: &Params, backlog: u64, ect: bool, rng: &mut Prng) -> Decision {
    let half = p.target_ns >> 1;
    if v.burst_ns > 0 || (v.qdelay_old_ns < half && v.prob < PROB_20PCT) || backlog < TWO_MTU_BYTES {
        return Decision::Pass;
    }
    v.accu_prob = if v.prob == 0 { 0 } else { v.accu_prob.saturating_add(v.prob) };
    let drop = if v.accu_prob >= ACCU_HIGH {
        true
    } else if v.accu_prob < ACCU_LOW {
        false
    } else if (rng.next_u64() >> 8) < v.prob {
        v.accu_prob = 0;
        true
    } else {
        false
    };
    if !drop {
        Decision::Pass
    } else if p.ecn && v.prob <= PROB_10PCT && ect {
        // Linux marks below 10 % and keeps the accumulated probability.
        Decision::Mark
    } else {
        v.accu_prob = 0;
        Decision::Drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's defaults: target 15 ms, tupdate 15 ms, alpha 2/16 Hz, beta 20/16 Hz, burst 150 ms.
    pub fn linux_defaults() -> Params {
        let q56_per_ns = |hz16: u128| ((hz16 << 56) / (16 * 1_000_000_000)) as u64;
        Params {
            target_ns: 15_000_000,
            tupdate_ns: 15_000_000,
            alpha: q56_per_ns(2),
            beta: q56_per_ns(20),
            max_burst_ns: 150_000_000,
            ecn: false,
        }
    }

    fn row_params(r: &[u64; 16]) -> Params {
        Params { target_ns: r[6], tupdate_ns: r[7], alpha: r[8], beta: r[9], max_burst_ns: r[10], ecn: false }
    }

    #[test]
    fn update_matches_the_p4_vectors() {
        for row in PIE_VECTORS {
            let (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, q) = row;
            let r = [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, q];
            let mut v = Vars { prob: r[0], qdelay_old_ns: r[1], burst_ns: r[2], accu_prob: r[3], next_ns: 0 };
            let settled = update(&mut v, &row_params(&r), r[4], r[5]);
            assert_eq!(
                (v.prob, v.qdelay_old_ns, v.burst_ns, v.accu_prob, settled as u64),
                (r[11], r[12], r[13], r[14], r[15]),
                "{r:?}"
            );
        }
    }

    /// The defaults encode as Linux's alpha 2 and beta 20 (sixteenths of a Hz) do: 0.125 Hz is
    /// floor(0.125 * 2^56 / 10^9) per ns, the numbers of the vectors.
    #[test]
    fn linux_defaults_are_the_vectors_alpha_and_beta() {
        let p = linux_defaults();
        assert_eq!((p.alpha, p.beta), (9007199, 90071992));
    }

    /// p4src runs one update per pipeline pass, holding the packet while more are due: the same
    /// clock written pass by pass must end where [`catch_up`] does.
    fn one_per_pass(v: &mut Vars, p: &Params, t: u64, free_at: u64) -> u32 {
        let mut n = 0;
        loop {
            // pie.p4's clock block, one pass.
            let mut wait = false;
            if p.tupdate_ns != 0 {
                if v.next_ns == 0 {
                    v.next_ns = t + p.tupdate_ns;
                    v.burst_ns = p.max_burst_ns;
                } else if v.next_ns <= t {
                    if n == MAX_CATCHUP {
                        v.next_ns = t + p.tupdate_ns;
                    } else {
                        let settled = update(v, p, v.next_ns, free_at);
                        n += 1;
                        v.next_ns = if settled { t + p.tupdate_ns } else { v.next_ns + p.tupdate_ns };
                        if settled {
                            v.burst_ns = p.max_burst_ns;
                        }
                        wait = v.next_ns <= t;
                    }
                }
            }
            if !wait {
                return n;
            }
        }
    }

    #[test]
    fn catching_up_at_once_is_catching_up_pass_by_pass() {
        let mut rng = Prng::new(11);
        let p = linux_defaults();
        for _ in 0..2000 {
            let prob = match rng.up_to(4) {
                0 => 0,
                1 => rng.up_to(MAX_PROB / 1000),
                _ => rng.up_to(MAX_PROB),
            };
            let start = Vars {
                prob,
                qdelay_old_ns: rng.up_to(400_000_000) * rng.up_to(2),
                burst_ns: rng.up_to(150_000_000) * rng.up_to(2),
                accu_prob: rng.up_to(MAX_PROB),
                next_ns: 1 + rng.up_to(20_000_000) * rng.up_to(2),
            };
            let t = rng.up_to(3_000_000_000);
            let free_at = rng.up_to(3_000_000_000);
            let (mut a, mut b) = (start, start);
            assert_eq!(catch_up(&mut a, &p, t, free_at), one_per_pass(&mut b, &p, t, free_at));
            assert_eq!(a, b, "{start:?} t {t} free_at {free_at}");
            assert!(a.next_ns > t);
        }
    }

    /// After congestion, an idle pd settles (p 0, a full burst allowance) within the catch-up
    /// bound, and restarts its clock at the packet that finds it settled.
    #[test]
    fn an_idle_pd_settles_and_restarts_at_its_next_packet() {
        let p = linux_defaults();
        let mut v = Vars { prob: MAX_PROB, qdelay_old_ns: 300_000_000, burst_ns: 0, accu_prob: 5, next_ns: 1_000_000 };
        let t = 100_000_000_000;
        let n = catch_up(&mut v, &p, t, 0);
        assert!(n > 100 && n < MAX_CATCHUP, "{n} updates");
        assert_eq!(
            v,
            Vars { prob: 0, qdelay_old_ns: 0, burst_ns: p.max_burst_ns, accu_prob: 0, next_ns: t + p.tupdate_ns }
        );
        // A pd that settled long ago costs nothing more.
        assert_eq!(catch_up(&mut v, &p, t + 1, 0), 0);
        // tupdate 0: no clock at all.
        let mut w = Vars { next_ns: 5, ..v };
        assert_eq!(catch_up(&mut w, &Params { tupdate_ns: 0, ..p }, t, 0), 0);
        assert_eq!(w.next_ns, 5);
    }

    /// Linux's early-drop rules: the burst allowance, a low delay with a low probability and a
    /// backlog under two MTUs pass; de-randomisation drops at 8.5 accumulated; ECN marks at or
    /// below 10 %.
    #[test]
    fn the_decision_follows_linux() {
        let mut rng = Prng::new(3);
        let p = linux_defaults();
        let busy = Vars { prob: MAX_PROB / 2, qdelay_old_ns: 20_000_000, ..Default::default() };
        let mut v = Vars { burst_ns: 1, ..busy };
        assert_eq!(enqueue(&mut v, &p, 100_000, false, &mut rng), Decision::Pass);
        let mut v = Vars { prob: MAX_PROB / 6, qdelay_old_ns: 7_000_000, ..busy };
        assert_eq!(enqueue(&mut v, &p, 100_000, false, &mut rng), Decision::Pass);
        let mut v = busy;
        assert_eq!(enqueue(&mut v, &p, 3027, false, &mut rng), Decision::Pass);
        assert_eq!(v.accu_prob, 0, "nothing accumulated below two MTUs");
        // p = 1/2: 0.5 accumulated passes; from 1.0 on a draw decides; at 8.5 always a drop.
        let mut v = busy;
        assert_eq!(enqueue(&mut v, &p, 3028, false, &mut rng), Decision::Pass);
        assert_eq!(v.accu_prob, MAX_PROB / 2);
        let mut v = Vars { accu_prob: ACCU_HIGH - MAX_PROB / 2, ..busy };
        assert_eq!(enqueue(&mut v, &p, 3028, false, &mut rng), Decision::Drop);
        assert_eq!(v.accu_prob, 0);
        // Between: the drop share is p.
        let (mut drops, n) = (0, 200_000);
        for _ in 0..n {
            let mut v = Vars { accu_prob: ACCU_LOW, ..busy };
            drops += (enqueue(&mut v, &p, 3028, false, &mut rng) == Decision::Drop) as u32;
        }
        let share = drops as f64 / n as f64;
        assert!((share - 0.5).abs() < 5.0 * (0.25 / n as f64).sqrt(), "{share}");
        // ECN: marks at 10 %, drops above; a non-ECT packet is dropped.
        let ecn = Params { ecn: true, ..p };
        let mut v = Vars { prob: MAX_PROB / 10, qdelay_old_ns: 20_000_000, accu_prob: ACCU_HIGH, ..Default::default() };
        assert_eq!(enqueue(&mut v, &ecn, 3028, true, &mut rng), Decision::Mark);
        assert!(v.accu_prob > ACCU_HIGH, "a mark keeps the accumulated probability (Linux)");
        let mut v = Vars { prob: MAX_PROB / 10 + 1, accu_prob: ACCU_HIGH, ..v };
        assert_eq!(enqueue(&mut v, &ecn, 3028, true, &mut rng), Decision::Drop);
        let mut v = Vars { prob: MAX_PROB / 10, accu_prob: ACCU_HIGH, ..v };
        assert_eq!(enqueue(&mut v, &ecn, 3028, false, &mut rng), Decision::Drop);
    }

    /// (prob, qdelay_old, burst, accu, T, free_at, target, tupdate, alpha, beta, max_burst) ->
    /// (prob, qdelay_old, burst, accu, settled): one update. tests/contract/test_contract.py
    /// transcribes p4src's pie.p4 update and must compute the same on every row.
    #[allow(clippy::type_complexity)]
    #[rustfmt::skip]
    pub const PIE_VECTORS: [(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64); 16] = [
        // Empty queue, p 0: settles, burst allowance back.
        (0, 0, 0, 7, 1000, 0, 15000000, 15000000, 9007199, 90071992, 150000000, 0, 0, 150000000, 0, 1),
        // 30 ms of delay from 0: p rises (alpha and beta at their smallest scale).
        (0, 0, 150000000, 0, 1000, 30001000, 15000000, 15000000, 9007199, 90071992, 150000000, 1385370000000, 30000000, 135000000, 0, 0),
        // 20 ms, was 10 ms, p 5 %: the second band.
        (3602879701896396, 10000000, 0, 0, 5000, 20005000, 15000000, 15000000, 9007199, 90071992, 150000000, 4075757656896396, 20000000, 0, 0, 0),
        // p 50 %, 40 ms after 15 ms: the step is cut to 2 %.
        (36028797018963967, 15000000, 0, 0, 0, 40000000, 15000000, 15000000, 9007199, 90071992, 150000000, 37469948899722525, 40000000, 0, 0, 0),
        // p 50 %, 300 ms after 300 ms: the 250 ms boost.
        (36028797018963967, 300000000, 0, 0, 0, 300000000, 15000000, 15000000, 9007199, 90071992, 150000000, 38911100780481083, 300000000, 0, 0, 0),
        // p near 1 with the boost: held at 1, no decay.
        (72057594037927000, 300000000, 0, 0, 0, 400000000, 15000000, 15000000, 9007199, 90071992, 150000000, 72057594037927935, 400000000, 0, 0, 0),
        // Draining to 0 from 5 ms: p falls, no decay yet (q_old was not 0).
        (720575940379279, 5000000, 0, 0, 10000000, 0, 15000000, 15000000, 9007199, 90071992, 150000000, 427841975379279, 0, 0, 0, 0),
        // Two empty updates with p 30 %: the 63/64 decay.
        (21617278211378381, 0, 0, 0, 10000000, 0, 15000000, 15000000, 9007199, 90071992, 150000000, 21146511316591219, 0, 0, 0, 0),
        // Small p, empty: reaches 0 and settles.
        (100, 0, 90000000, 12345, 10000000, 0, 15000000, 15000000, 9007199, 90071992, 150000000, 0, 0, 150000000, 0, 1),
        // Burst allowance running down by one period.
        (0, 20000000, 150000000, 0, 0, 25000000, 15000000, 15000000, 9007199, 90071992, 150000000, 263880000000, 25000000, 135000000, 0, 0),
        // A large fall that the boost does not offset (260 ms after 900 ms): p to 0.
        (36028797018963967, 900000000, 0, 0, 0, 260000000, 15000000, 15000000, 9007199, 90071992, 150000000, 0, 260000000, 0, 0, 0),
        // The boost flips a small fall into a rise: 251 ms after 278 ms.
        (36028797018963967, 278000000, 0, 0, 0, 251000000, 15000000, 15000000, 9007199, 90071992, 150000000, 37163704079722525, 251000000, 0, 0, 0),
        // Mahimahi-like period and a large beta.
        (1000000000000, 2000000, 0, 0, 0, 9000000, 10000000, 30000000, 9007199, 144115188, 100000000, 8810925000000, 9000000, 0, 0, 0),
        // p 0.15 %, 0.015 % and 0.00015 %: one band each (alpha and beta / 8, / 32, / 512).
        (108086391056891, 18000000, 0, 0, 0, 20000000, 15000000, 15000000, 9007199, 90071992, 150000000, 136233884056891, 20000000, 0, 0, 0),
        (10808639105689, 18000000, 0, 0, 0, 20000000, 15000000, 15000000, 9007199, 90071992, 150000000, 17845507105689, 20000000, 0, 0, 0),
        (108086391056, 18000000, 0, 0, 0, 20000000, 15000000, 15000000, 9007199, 90071992, 150000000, 547888391056, 20000000, 0, 0, 0),
    ];
}
