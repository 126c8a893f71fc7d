//! CoDel (RFC 8289) on the rate queue, decided at each packet's dequeue instant.
//!
//! The rate queue is a FIFO served at a known rate, so a packet's dequeue time (when its
//! serialisation starts, `begin`) is known when it is admitted, and packets are dequeued in the
//! order they arrive. This module runs CoDel's dequeue-side state machine for each packet at that
//! instant, in that order, which is what a CoDel qdisc at the head of the same queue would see:
//! - a dropped packet takes no link time, so the next queued packet is dequeued at the same
//!   instant (its `begin` equals the dropped one's) and is checked there, as in the RFC's
//!   drop loop (`Recheck`): if the next packet arrives only after that instant, the queue was
//!   empty when CoDel looked (the RFC's `dequeue` returned nothing);
//! - the sojourn time is `begin - ready` (ready: when the packet joined the queue).
//!   The one approximation: RFC 8289 does not drop while the queue holds at most one MTU *after*
//!   the packet; the target cannot know arrivals that have not happened yet, so it uses the bytes
//!   queued *ahead* of the packet (`backlog`). While packets keep arriving the two agree (above
//!   target at a rate of more than MTU / target, 2.4 Mbit/s for 5 ms, both are above one MTU);
//!   they differ where arrivals stop behind a standing queue (the end of a burst, a sender's
//!   pause): Linux passes the last packets (at most one MTU behind them) and leaves the dropping
//!   state, this may still drop one of them, and the extra drop raises the count a later
//!   dropping episode restarts from. rate.rs's `codel_drop_schedule_matches_...` test shows both.
//!
//! The arithmetic (count, Newton step of 1/sqrt(count) in 16 bits, control law) is Linux's
//! (include/net/codel_impl.h), so the drop schedule matches `tc qdisc ... codel`. The per-pd
//! variables are contract registers (`codel_*`), so p4src, which runs the same steps at ingress,
//! keeps them where the control plane can read and reset them.

/// Largest frame counted as "one MTU" in the backlog check.
pub const MTU_BYTES: u64 = 1514;
const REC_INV_SQRT_BITS: u32 = 16;
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;
/// `codel_state` bits.
pub const DROPPING: u8 = 1;
/// The last packet was dropped in the dropping state: check the next one at the same instant.
pub const RECHECK_DROPPING: u8 = 2;
/// The last packet was the first drop of a dropping episode: the next one (same instant) only
/// updates `first_above`, and always leaves.
pub const RECHECK_FIRST: u8 = 4;

/// One pd's CoDel variables (the `codel_*` registers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    pub first_above_ns: u64,
    pub drop_next_ns: u64,
    pub count: u32,
    pub lastcount: u32,
    pub rec_inv_sqrt: u16,
    pub state: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Pass,
    /// Mark CE instead of dropping (ECN on and the packet is ECN-capable).
    Mark,
    Drop,
}

pub struct Params {
    pub target_ns: u64,
    pub interval_ns: u64,
    pub ecn: bool,
}

fn newton_step(v: &mut Vars) {
    let invsqrt = (v.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
    let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
    let mut val = (3u64 << 32).wrapping_sub(v.count as u64 * invsqrt2 as u64);
    val >>= 2; // avoid overflow in the multiply below
    val = (val * invsqrt as u64) >> (32 - 2 + 1);
    v.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
}

fn control_law(t: u64, interval: u64, rec_inv_sqrt: u16) -> u64 {
    let scale = ((rec_inv_sqrt as u64) << REC_INV_SQRT_SHIFT) as u32;
    t + ((interval as u32 as u64 * scale as u64) >> 32)
}

/// RFC 8289 `should_drop` for a packet dequeued at `now` after `sojourn` in the queue.
fn should_drop(v: &mut Vars, p: &Params, now: u64, sojourn: u64, backlog: u64) -> bool {
    if sojourn < p.target_ns || backlog <= MTU_BYTES {
        v.first_above_ns = 0;
        return false;
    }
    if v.first_above_ns == 0 {
        v.first_above_ns = now + p.interval_ns;
        false
    } else {
        now > v.first_above_ns
    }
}

/// The decision for one packet dequeued at `now` (its service start), that waited `sojourn` behind
/// `backlog` bytes; `queued_at_recheck`: it was already queued when the previous packet was
/// dropped (its dequeue instant is that drop's). `ect`: the packet is ECN-capable.
pub fn dequeue(
    v: &mut Vars,
    p: &Params,
    now: u64,
    sojourn: u64,
    backlog: u64,
    queued_at_recheck: bool,
    ect: bool,
) -> Decision {
    let recheck = v.state & (RECHECK_DROPPING | RECHECK_FIRST);
    v.state &= !(RECHECK_DROPPING | RECHECK_FIRST);
    if recheck != 0 {
        if !queued_at_recheck {
            // The queue was empty right after the drop: CoDel's dequeue found nothing.
            v.first_above_ns = 0;
            if recheck == RECHECK_DROPPING {
                v.state &= !DROPPING;
            }
        } else if recheck == RECHECK_FIRST {
            should_drop(v, p, now, sojourn, backlog);
            return Decision::Pass;
        } else {
            if !should_drop(v, p, now, sojourn, backlog) {
                v.state &= !DROPPING;
                return Decision::Pass;
            }
            v.drop_next_ns = control_law(v.drop_next_ns, p.interval_ns, v.rec_inv_sqrt);
            return drop_loop(v, p, now, ect);
        }
    }
    let drop = should_drop(v, p, now, sojourn, backlog);
    if v.state & DROPPING != 0 {
        if !drop {
            v.state &= !DROPPING;
            return Decision::Pass;
        }
        return drop_loop(v, p, now, ect);
    }
    if !drop {
        return Decision::Pass;
    }
    // Entering the dropping state.
    let decision = if p.ecn && ect {
        Decision::Mark
    } else {
        v.state |= RECHECK_FIRST;
        Decision::Drop
    };
    v.state |= DROPPING;
    let delta = v.count.wrapping_sub(v.lastcount);
    // Linux compares the signed difference: a drop_next still ahead counts as recent.
    if delta > 1 && (now < v.drop_next_ns || now - v.drop_next_ns < 16 * p.interval_ns) {
        v.count = delta;
        newton_step(v);
    } else {
        v.count = 1;
        v.rec_inv_sqrt = (u32::MAX >> REC_INV_SQRT_SHIFT) as u16;
    }
    v.lastcount = v.count;
    v.drop_next_ns = control_law(now, p.interval_ns, v.rec_inv_sqrt);
    decision
}

/// In the dropping state: one step of the RFC's drop loop for this packet.
fn drop_loop(v: &mut Vars, p: &Params, now: u64, ect: bool) -> Decision {
    if now < v.drop_next_ns {
        return Decision::Pass;
    }
    v.count = v.count.wrapping_add(1);
    newton_step(v);
    if p.ecn && ect {
        v.drop_next_ns = control_law(v.drop_next_ns, p.interval_ns, v.rec_inv_sqrt);
        return Decision::Mark;
    }
    v.state |= RECHECK_DROPPING;
    Decision::Drop
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn newton_step_converges_to_inverse_sqrt() {
        let mut v = Vars { count: 1, rec_inv_sqrt: u16::MAX, ..Default::default() };
        // One step per drop, as in Linux: rough for the first counts, then close.
        for count in 2..200u32 {
            v.count = count;
            newton_step(&mut v);
            let got = v.rec_inv_sqrt as f64 / 65536.0;
            let want = 1.0 / (count as f64).sqrt();
            assert!(count < 8 || (got - want).abs() < 0.03, "count {count}: {got} vs {want}");
        }
    }

    /// A standing queue of 20 ms (a 10 Mbit/s link, 1500-byte packets every 1.2 ms, 25 queued):
    /// no drop during the first interval, then drops whose spacing shrinks as interval/sqrt(n).
    #[test]
    fn drops_start_after_one_interval_and_speed_up() {
        let p = Params { target_ns: 5 * MS, interval_ns: 100 * MS, ecn: false };
        let mut v = Vars::default();
        let mut drops = Vec::new();
        let mut now = 0;
        for _ in 0..1000 {
            now += 1_200_000;
            let d = dequeue(&mut v, &p, now, 20 * MS, 30_000, true, false);
            if d == Decision::Drop {
                drops.push(now);
            }
        }
        assert!(drops[0] > 100 * MS && drops[0] <= 102 * MS, "first drop at {}", drops[0]);
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 12, "{gaps:?}");
        // interval / sqrt(count): 100 ms after the first drop, then shorter and shorter (one
        // packet time of granularity; the first counts use Linux's rough Newton estimates).
        assert!((gaps[0] as i64 - 100_000_000).abs() <= 1_200_000, "{gaps:?}");
        assert!(gaps[10] < gaps[0] * 2 / 5, "{gaps:?}");
        assert!(gaps[2..].windows(2).all(|w| w[1] <= w[0] + 1_200_000), "{gaps:?}");
    }

    #[test]
    fn below_target_never_drops_and_leaves_dropping() {
        let p = Params { target_ns: 5 * MS, interval_ns: 100 * MS, ecn: false };
        let mut v = Vars::default();
        for i in 1..200 {
            assert_eq!(dequeue(&mut v, &p, i * MS, 4 * MS, 30_000, true, false), Decision::Pass);
        }
        v.state = DROPPING;
        assert_eq!(dequeue(&mut v, &p, 300 * MS, MS, 30_000, true, false), Decision::Pass);
        assert_eq!(v.state & DROPPING, 0);
    }

    #[test]
    fn ecn_marks_instead_of_dropping_ect_packets() {
        let p = Params { target_ns: 5 * MS, interval_ns: 100 * MS, ecn: true };
        let mut v = Vars::default();
        let mut marks = 0;
        for i in 1..2000u64 {
            match dequeue(&mut v, &p, i * 1_200_000, 20 * MS, 30_000, true, true) {
                Decision::Drop => panic!("an ECT packet was dropped"),
                Decision::Mark => marks += 1,
                Decision::Pass => {}
            }
        }
        assert!(marks > 10, "{marks}");
        // Not ECN-capable: dropped.
        let mut v = Vars::default();
        let drops = (1..2000u64)
            .filter(|i| dequeue(&mut v, &p, i * 1_200_000, 20 * MS, 30_000, true, false) == Decision::Drop)
            .count();
        assert!(drops > 10);
    }

    #[test]
    fn one_packet_backlog_is_never_dropped() {
        let p = Params { target_ns: 5 * MS, interval_ns: 100 * MS, ecn: false };
        let mut v = Vars::default();
        for i in 1..1000 {
            assert_eq!(dequeue(&mut v, &p, i * MS, 50 * MS, 1500, true, false), Decision::Pass);
        }
    }
}
