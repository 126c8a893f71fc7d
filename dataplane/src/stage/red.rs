//! RED (Floyd & Jacobson 1993) and gentle RED on the rate queue, with Linux sch_red's arithmetic.
//!
//! RED decides as a packet arrives, from an exponentially weighted average of the backlog it finds
//! (`qavg`, kept scaled by 2^wlog as Linux does, so the update is shifts and adds). After an idle
//! link the average first decays as if `m` empty-queue samples had been taken, m = idle time /
//! transmission time of an average packet: (1 - W)^m = 2^-(m log2(1/(1-W))); the control plane
//! folds the constant into `idle_q48` (halvings per 1024 ns), and fractional halvings are dropped
//! (Linux looks the same value up in tc's 256-entry Stab table).
//!
//! Between the thresholds the marks are spaced as Linux spaces them: after each mark a uniform draw
//! `qr` in [0, (max - min) / max_p), and a packet is marked once `(avg - min) * qcount >= qr`, qcount
//! counting the packets since; the marking probability then grows with qcount as Floyd's
//! `pa = pb / (1 - count pb)` does: the gaps between marks are uniform in [1, 1/pb] instead of
//! geometric (a mark every (1/pb + 1) / 2 packets on average, pb = max_p (avg - min) / (max - min)). Gentle RED
//! (Floyd 2000) replaces the cliff at max with a line from max_p at max to 1 at 2 max (drawn per
//! packet). Above that, every packet is marked (Linux's hard mark). "Marked" is CE for an
//! ECN-capable packet with ECN on, else a drop. p4src's red.p4 runs the same steps.
use super::codel::Decision;
use crate::rng::Prng;

/// One pd's RED variables (the `red_*` registers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    /// The average backlog in bytes, scaled by 2^wlog.
    pub qavg: u64,
    /// Linux's qcount + 1: 0 outside the thresholds, 1 right after a draw.
    pub count: u32,
    /// The current draw in [0, span).
    pub qr: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub min_bytes: u32,
    pub max_bytes: u32,
    pub max_prob: u32,
    pub wlog: u8,
    pub span_bytes: u32,
    pub gentle: bool,
    pub idle_q48: u64,
    pub ecn: bool,
}

fn draw_qr(p: &Params, rng: &mut Prng) -> u32 {
    ((rng.next_u32() as u64 * p.span_bytes as u64) >> 32) as u32
}

/// The decision for a packet arriving to `backlog` bytes; `idle_ns`: the link has been idle for
/// this long (None: busy). `ect`: the packet is ECN-capable.
pub fn enqueue(v: &mut Vars, p: &Params, backlog: u32, idle_ns: Option<u64>, ect: bool, rng: &mut Prng) -> Decision {
    let wlog = p.wlog.min(63) as u32;
    if let Some(idle) = idle_ns {
        let halvings = ((idle >> 10) as u128 * p.idle_q48 as u128) >> 48;
        v.qavg = if halvings >= 64 { 0 } else { v.qavg >> halvings };
    }
    // Wrapping as P4's bit<64> arithmetic (cannot wrap for 32-bit backlogs and wlog <= 23).
    v.qavg = v.qavg.wrapping_add(backlog as u64).wrapping_sub(v.qavg >> wlog);
    let avg = v.qavg >> wlog;
    let (min, max) = (p.min_bytes as u64, p.max_bytes as u64);
    let mark = if avg < min {
        v.count = 0;
        false
    } else if avg < max {
        v.count = v.count.wrapping_add(1);
        if v.count == 1 {
            v.qr = draw_qr(p, rng);
            false
        } else if (avg - min).wrapping_mul((v.count - 1) as u64) >= v.qr as u64 {
            v.count = 1;
            v.qr = draw_qr(p, rng);
            true
        } else {
            false
        }
    } else if p.gentle && avg < 2 * max {
        v.count = 0;
        let draw = rng.next_u32() as u64;
        let prob = p.max_prob as u64;
        // draw / 2^32 < max_p + (1 - max_p) (avg - max) / max, without a division.
        draw.wrapping_mul(max) < prob.wrapping_mul(max).wrapping_add((avg - max).wrapping_mul((1u64 << 32) - prob))
    } else {
        v.count = 0;
        true
    };
    match (mark, p.ecn && ect) {
        (false, _) => Decision::Pass,
        (true, true) => Decision::Mark,
        (true, false) => Decision::Drop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(min: u32, max: u32, max_p: f64, wlog: u8, gentle: bool) -> Params {
        let max_prob = (max_p * 2f64.powi(32)).round() as u32;
        Params {
            min_bytes: min,
            max_bytes: max,
            max_prob,
            wlog,
            span_bytes: ((max - min) as f64 / max_p) as u32,
            gentle,
            idle_q48: 0,
            ecn: false,
        }
    }

    /// The fraction of packets marked at a constant average (backlog held at `avg`, wlog 1 so the
    /// average is there after a few packets).
    fn mark_fraction(p: &Params, avg: u32) -> f64 {
        let mut v = Vars::default();
        let mut rng = Prng::new(7);
        for _ in 0..64 {
            enqueue(&mut v, p, avg, None, false, &mut rng);
        }
        let n = 200_000;
        let marks = (0..n).filter(|_| enqueue(&mut v, p, avg, None, false, &mut rng) == Decision::Drop).count();
        marks as f64 / n as f64
    }

    #[test]
    fn marking_probability_follows_the_red_curve() {
        let red = params(30_000, 90_000, 0.1, 1, false);
        let gentle = Params { gentle: true, ..red };
        assert_eq!(mark_fraction(&red, 20_000), 0.0);
        // Between the thresholds the spacing between marks is uniform in [1, 1/pb] (Floyd &
        // Jacobson's pa = pb / (1 - count pb), which Linux's draw implements): a mark every
        // (1/pb + 1) / 2 packets on average; pb = 0.05 at the middle -> 2 / 21 of the packets.
        let mid = mark_fraction(&red, 60_000);
        assert!((mid - 2.0 / 21.0).abs() < 0.002, "{mid}");
        assert_eq!(mark_fraction(&red, 100_000), 1.0);
        // Gentle: 0.1 + 0.9 * (135000 - 90000) / 90000 = 0.55 at 1.5 max, all from 2 max.
        let g = mark_fraction(&gentle, 135_000);
        assert!((g - 0.55).abs() < 0.01, "{g}");
        assert_eq!(mark_fraction(&gentle, 180_000), 1.0);
        assert_eq!(mark_fraction(&gentle, 60_000), mid);
    }

    #[test]
    fn the_average_follows_the_backlog_with_weight_and_decays_when_idle() {
        let mut p = params(1_000_000, 2_000_000, 0.1, 9, false);
        let (mut v, mut rng) = (Vars::default(), Prng::new(1));
        for _ in 0..512 {
            enqueue(&mut v, &p, 100_000, None, false, &mut rng);
        }
        // 1 - (1 - 2^-9)^512 = 63 % of the way after 2^9 samples.
        let avg = (v.qavg >> 9) as f64;
        assert!((avg - 63_230.0).abs() < 200.0, "{avg}");
        // Half a halving per 1024 ns of idle: 5 us (4 whole units) -> two halvings.
        p.idle_q48 = 1 << 47;
        let before = v.qavg;
        enqueue(&mut v, &p, 0, Some(5_000), false, &mut rng);
        assert_eq!(v.qavg, (before >> 2) - ((before >> 2) >> 9));
        enqueue(&mut v, &p, 0, Some(10_000_000), false, &mut rng);
        assert_eq!(v.qavg, 0);
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped() {
        let p = Params { ecn: true, ..params(1_000, 2_000, 0.1, 1, false) };
        let (mut v, mut rng) = (Vars::default(), Prng::new(1));
        for _ in 0..8 {
            enqueue(&mut v, &p, 5_000, None, true, &mut rng);
        }
        assert_eq!(enqueue(&mut v, &p, 5_000, None, true, &mut rng), Decision::Mark);
        assert_eq!(enqueue(&mut v, &p, 5_000, None, false, &mut rng), Decision::Drop);
    }
}
