//! Exact trace delivery: a Mahimahi `mm-link` trace played by the rate queue itself.
//!
//! A trace is a list of millisecond timestamps, one per delivery opportunity of `OPPORTUNITY_BYTES`
//! (one 1500-byte IP packet with the 4-byte header Mahimahi's TUN frames carry), repeating with the
//! period of its last timestamp. Mahimahi's link queue (`LinkQueue::rationalize`) serves its FIFO
//! at each opportunity: the bytes of one opportunity go to the packets queued by then, several small
//! packets share one, a packet that does not fit finishes in the next opportunity (it leaves when its
//! last byte does), and bytes no queued packet can use are lost. A packet counts `len - 10` bytes
//! (the frame without its 14-byte Ethernet header, plus Mahimahi's 4), at least 1 and at most one
//! opportunity.
//!
//! The trace lives in two contract registers the controller fills: `trace_opportunity_ms` (the
//! timestamps, `trace_len` cells from `trace_base`) and `trace_first_at` (for each millisecond m of
//! the period, `trace_period_ms + 1` cells from `trace_ms_base`: the index of the first opportunity
//! at or after m), so that finding the first opportunity after an idle time is one lookup (p4src has
//! no loops). Per pd the state is `trace_cycle_ns` (when the current period began; 0: not started),
//! `trace_pos` (the current opportunity) and `trace_left` (its bytes not yet used). For a packet
//! ready at `t` (departures are computed at arrival: the queue is a FIFO, so this is exact):
//!
//! ```text
//! cur = cycle + ms[pos] * 1e6
//! if cycle == 0:              cycle = t, then as "cur < t"
//! if left > 0 and cur >= t:   share the current opportunity (the packet was queued by then)
//! elif cur >= t:              the next opportunity (pos + 1, wrapping into the next period), left = full
//! else (cur < t):             skip whole periods, then pos = first_at[ceil((t - cycle) / 1e6)], left = full
//! if left >= size: left -= size  else: the rest goes into the next opportunity (left = full - rest)
//! departure = cycle + ms[pos] * 1e6
//! begin = max(begin, t); departure = max(departure, begin)
//! ```
//!
//! The last line changes nothing for a trace as the controller loads it (ascending timestamps,
//! `first_at` their index, `trace_period_recip` the period's reciprocal): `t <= begin <= departure`
//! holds by construction. It is there for registers that do not hold such a trace (never loaded:
//! all zeros; written by another P4Runtime client; a wrong reciprocal), whose opportunity can lie
//! before `t`: the packet then leaves when it is ready, not in the past, so the delay stage after
//! this one still adds the profile's whole delay (a departure in the past used to absorb it) and
//! CoDel never sees a negative sojourn. Cell indices are 32-bit and wrap as in p4src.
//!
//! The opportunity chosen before the size is fitted (`begin`) is where the packet's first byte
//! goes: Mahimahi's `LinkQueue` dequeues it there, so that is where an AQM decides (CoDel at its
//! dequeue instant, as on the rate's clock). [`schedule`] only computes: the rate stage stores the
//! new state when it admits the packet, so a packet the AQM or the limits drop uses no bytes of
//! the trace (Mahimahi drops it before it takes any).
use super::Impairment;
use crate::state::Registers;

/// Bytes of one delivery opportunity: Mahimahi's PACKET_SIZE (a 1500-byte IP packet + 4).
pub const OPPORTUNITY_BYTES: u32 = 1504;
/// What a frame counts against an opportunity: its length minus this (14 Ethernet - 4 TUN).
pub const FRAME_ADJUST: u32 = 10;
const MS: u64 = 1_000_000;

/// One pd's trace state (the `trace_*` per-pd registers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    pub cycle_ns: u64,
    pub pos: u32,
    pub left: u32,
}

/// The trace's timestamp of opportunity `pos` in ms. The index is p4src's `bit<32>` sum (it wraps);
/// a cell outside the register reads 0 (v1model leaves such a read unspecified: the clamp at the
/// end of [`schedule`] keeps any value it could give harmless).
#[inline]
fn ms_of(regs: &Registers, imp: &Impairment, pos: u32) -> u64 {
    let i = imp.trace_base.wrapping_add(pos) as usize;
    regs.trace_opportunity_ms.get(i).map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed) as u64)
}

/// The index of the first opportunity at or after millisecond `ms` of the period; `ms` is the
/// low 32 bits of the count, as p4src's `(bit<32>)q` (only a trace without its reciprocal can
/// leave more than `trace_period_ms` to count).
#[inline]
fn first_at(regs: &Registers, imp: &Impairment, ms: u64) -> u32 {
    let i = imp.trace_ms_base.wrapping_add(ms as u32) as usize;
    regs.trace_first_at.get(i).map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed))
}

#[inline]
fn advance(v: &mut Vars, imp: &Impairment, period_ns: u64) {
    v.pos = v.pos.wrapping_add(1);
    if v.pos >= imp.trace_len {
        v.pos = 0;
        v.cycle_ns = v.cycle_ns.wrapping_add(period_ns);
    }
}

/// When opportunity `v.pos` of the current period is. The time arithmetic here is p4src's
/// `bit<64>` (it wraps): the per-pd registers are writable by any P4Runtime client.
#[inline]
fn opportunity(regs: &Registers, imp: &Impairment, v: &Vars) -> u64 {
    v.cycle_ns.wrapping_add(ms_of(regs, imp, v.pos) * MS)
}

/// Where a packet goes in the trace: the opportunity of its first byte and of its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// When its first byte leaves (its dequeue instant in Mahimahi's link queue).
    pub begin: u64,
    /// When its last byte leaves: the packet's departure.
    pub departure: u64,
}

/// The slot of a packet of frame length `len` ready at `t`, advancing `v` (one pd's trace state)
/// past it; the caller stores `v` if it admits the packet.
#[inline]
pub fn schedule(imp: &Impairment, regs: &Registers, v: &mut Vars, t: u64, len: u32) -> Slot {
    let period_ns = imp.trace_period_ms as u64 * MS;
    let size = len.saturating_sub(FRAME_ADJUST).clamp(1, OPPORTUNITY_BYTES);
    let fresh = v.cycle_ns == 0;
    if fresh {
        v.cycle_ns = t;
    }
    let cur = opportunity(regs, imp, v);
    if !fresh && v.left > 0 && cur >= t {
        // Shares the opportunity the packet before it left in: it was queued by then.
    } else if !fresh && cur >= t {
        advance(v, imp, period_ns);
        v.left = OPPORTUNITY_BYTES;
    } else {
        // The link was idle (or never used): the first opportunity at or after t.
        let mut d = t.wrapping_sub(v.cycle_ns);
        if d >= period_ns && period_ns != 0 {
            // Whole periods passed: k = d / period with the controller's reciprocal, then one
            // correction (the reciprocal is rounded down, so k is at most one short).
            let k = ((d as u128 * imp.trace_period_recip as u128) >> 64) as u64;
            let mut kp = k.wrapping_mul(period_ns).min(d);
            if d - kp >= period_ns {
                kp = kp.wrapping_add(period_ns).min(d);
            }
            v.cycle_ns = v.cycle_ns.wrapping_add(kp);
            d -= kp;
        }
        v.pos = first_at(regs, imp, d.div_ceil(MS));
        v.left = OPPORTUNITY_BYTES;
    }
    // Never before the packet is ready (see the module docs: only registers that do not hold a
    // trace as the controller loads it give an opportunity in the past).
    let begin = opportunity(regs, imp, v).max(t);
    if v.left >= size {
        v.left -= size;
    } else {
        let rest = size - v.left;
        advance(v, imp, period_ns);
        v.left = OPPORTUNITY_BYTES - rest;
    }
    Slot { begin, departure: opportunity(regs, imp, v).max(begin) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Capacities, Registers};
    use std::sync::atomic::Ordering::Relaxed;

    /// Registers with `ms` loaded at cells 100.. and its index at 50.., and the profile naming them.
    fn load(ms: &[u32]) -> (Registers, Impairment) {
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, crate::dist::builtin_tables(), 1);
        let period = *ms.last().unwrap();
        for (i, v) in ms.iter().enumerate() {
            regs.trace_opportunity_ms[100 + i].store(*v, Relaxed);
        }
        for m in 0..=period {
            let first = ms.iter().position(|&v| v >= m).unwrap() as u32;
            regs.trace_first_at[50 + m as usize].store(first, Relaxed);
        }
        let imp = Impairment {
            trace_base: 100,
            trace_len: ms.len() as u32,
            trace_ms_base: 50,
            trace_period_ms: period,
            trace_period_recip: (u64::MAX as u128 + 1).div_euclid(period as u128 * MS as u128) as u64,
            ..Default::default()
        };
        (regs, imp)
    }

    /// Departures (from T0) of packets all admitted (their state stored, as the rate stage does).
    fn run(regs: &Registers, imp: &Impairment, pkts: &[(u64, u32)]) -> Vec<u64> {
        slots(regs, imp, pkts).iter().map(|s| s.departure - T0).collect()
    }

    fn slots(regs: &Registers, imp: &Impairment, pkts: &[(u64, u32)]) -> Vec<Slot> {
        pkts.iter()
            .map(|&(t, len)| {
                let mut v = regs.trace[1].load();
                let slot = schedule(imp, regs, &mut v, t, len);
                regs.trace[1].store(&v);
                slot
            })
            .collect()
    }

    const T0: u64 = 1_000_000_000;

    #[test]
    fn a_backlog_of_full_packets_takes_one_opportunity_each_and_the_trace_repeats() {
        let (regs, imp) = load(&[1, 1, 2, 5]);
        let got = run(&regs, &imp, &[(T0, 1514); 9]);
        let want: Vec<u64> = [1, 1, 2, 5, 6, 6, 7, 10, 11].iter().map(|m| m * MS).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn small_packets_share_an_opportunity_and_one_that_does_not_fit_ends_in_the_next() {
        // 500-byte frames count 490 bytes: three fit in 1504 (34 left), the fourth takes those 34
        // and 456 of the next opportunity, whose 1048 left carry two more and 68 bytes of a third.
        let (regs, imp) = load(&[1, 3, 4]);
        let got = run(&regs, &imp, &[(T0, 500); 7]);
        let want: Vec<u64> = [1, 1, 1, 3, 3, 3, 4].iter().map(|m| m * MS).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bytes_nobody_was_queued_for_are_lost_and_an_idle_link_resumes_at_the_next_opportunity() {
        let (regs, imp) = load(&[2, 4, 6, 10]);
        // A small packet at t0 leaves at 2 ms with most of the opportunity unused; one arriving at
        // 2.5 ms cannot use those bytes: it takes the opportunity at 4 ms.
        assert_eq!(run(&regs, &imp, &[(T0, 100), (T0 + 2_500_000, 100)]), vec![2 * MS, 4 * MS]);
        // Idle over two periods: 26.5 ms is 6.5 ms into the third period, whose next opportunity is
        // its 10 ms mark (30 ms).
        assert_eq!(run(&regs, &imp, &[(T0 + 26_500_000, 1514)]), vec![30 * MS]);
        // Exactly on an opportunity: it takes it.
        assert_eq!(run(&regs, &imp, &[(T0 + 42 * MS, 1514)]), vec![42 * MS]);
    }

    #[test]
    fn a_frame_counts_its_ip_packet_plus_four_bytes() {
        // 1514-byte frames (a 1500-byte IP packet) take exactly one 1504-byte opportunity; a
        // 1515-byte one is counted as a full opportunity too (never more than one).
        let (regs, imp) = load(&[1, 2]);
        assert_eq!(run(&regs, &imp, &[(T0, 1514), (T0, 1515), (T0, 60)]), vec![MS, 2 * MS, 3 * MS]);
    }

    #[test]
    fn a_packet_begins_where_its_first_byte_goes() {
        // 1000-byte frames count 990: the first fits the 1 ms opportunity (514 left), the second
        // begins there and ends at 3 ms, the third begins and ends at 3 ms.
        let (regs, imp) = load(&[1, 3, 4]);
        let got: Vec<(u64, u64)> =
            slots(&regs, &imp, &[(T0, 1000); 3]).iter().map(|s| (s.begin - T0, s.departure - T0)).collect();
        assert_eq!(got, vec![(MS, MS), (MS, 3 * MS), (3 * MS, 3 * MS)]);
    }

    #[test]
    fn a_packet_not_stored_uses_no_bytes_of_the_trace() {
        // As a packet the AQM drops: its slot is computed, its state thrown away; the next packet
        // gets the bytes it would have used.
        let (regs, imp) = load(&[1, 2, 3]);
        let mut v = regs.trace[1].load();
        assert_eq!(schedule(&imp, &regs, &mut v, T0, 1514).departure, T0 + MS);
        assert_eq!(run(&regs, &imp, &[(T0, 1514)]), vec![MS]);
    }

    #[test]
    fn an_unloaded_trace_sends_each_packet_when_it_is_ready() {
        // Cells nobody wrote (all 0): every opportunity is at the period's start, long past for
        // most packets. They leave when they are ready, never in the past, so the delay stage
        // still adds the profile's whole delay (it once skipped it: release = a past departure +
        // delay was already over).
        let caps = Capacities { profiles: 4, ..Default::default() };
        let regs = Registers::new(&caps, crate::dist::builtin_tables(), 1);
        let imp = Impairment {
            trace_base: 7,
            trace_len: 4,
            trace_ms_base: 3,
            trace_period_ms: 50,
            trace_period_recip: ((1u128 << 64) / (50 * MS as u128)) as u64,
            ..Default::default()
        };
        let pkts: Vec<(u64, u32)> = (0..60).map(|i| (T0 + i * 5 * MS, 1514)).collect();
        for (s, (t, _)) in slots(&regs, &imp, &pkts).iter().zip(&pkts) {
            assert_eq!((s.begin, s.departure), (*t, *t));
        }
    }

    #[test]
    fn a_trace_in_the_wrong_order_never_sends_a_packet_before_it_begins() {
        // Timestamps 5, 1, 9: a packet that spills from the 5 ms opportunity into the next would
        // end at 1 ms, before its first byte went; it leaves at 5 ms.
        let (regs, mut imp) = load(&[5, 9]);
        regs.trace_opportunity_ms[100].store(5, Relaxed);
        regs.trace_opportunity_ms[101].store(1, Relaxed);
        regs.trace_opportunity_ms[102].store(9, Relaxed);
        imp.trace_len = 3;
        let got = slots(&regs, &imp, &[(T0, 1000), (T0, 1000)]);
        assert_eq!((got[1].begin, got[1].departure), (T0 + 5 * MS, T0 + 5 * MS));
    }

    /// (trace_base, trace_len, the timestamps in cells 0..3, the first_at index in cells 0..4,
    /// trace_period_ms, trace_period_recip, the pd's cycle, pos and left, t, frame length) ->
    /// (begin, departure, cycle, pos, left). tests/contract transcribes p4src's trace.p4 and must
    /// compute the same on every row; the rows past the first six are registers that hold no
    /// trace as the controller loads it.
    #[allow(clippy::type_complexity)]
    #[rustfmt::skip]
    pub const TRACE_VECTORS: [(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64); 16] = [
        // Well-formed trace [1,2,3] ms, period 3.
        // Fresh: the first opportunity after t.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 0, 0, 0, 1000000000, 1514, 1001000000, 1001000000, 1000000000, 0, 0),
        // Shares the current opportunity.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 0, 1000, 1000500000, 500, 1001000000, 1001000000, 1000000000, 0, 510),
        // The next opportunity.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 0, 0, 1000500000, 1514, 1002000000, 1002000000, 1000000000, 1, 0),
        // Wraps into the next period.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 2, 0, 1000500000, 1514, 1004000000, 1004000000, 1003000000, 0, 0),
        // Idle 3 periods: 11 ms.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 0, 0, 1010500000, 1514, 1011000000, 1011000000, 1009000000, 1, 0),
        // Does not fit: ends in the next opportunity.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 0, 100, 1000500000, 1514, 1001000000, 1002000000, 1000000000, 1, 100),
        // Registers that hold no such trace.
        // Never loaded: zeros.
        (0, 3, 0, 0, 0, 0, 0, 0, 0, 50, 368934881474, 1000000000, 0, 0, 1030000000, 1514, 1030000000, 1030000000, 1000000000, 0, 0),
        // Zeros, a period later.
        (0, 3, 0, 0, 0, 0, 0, 0, 0, 50, 368934881474, 1000000000, 0, 0, 1080000000, 1514, 1080000000, 1080000000, 1050000000, 0, 0),
        // No reciprocal: the period lags.
        (0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1000000000, 0, 0, 1005500000, 1514, 1005500000, 1005500000, 1001000000, 0, 0),
        // Out of order: ends before it begins.
        (0, 3, 5, 1, 9, 0, 0, 0, 0, 9, 2049638230412, 1000000000, 0, 100, 1000500000, 1514, 1005000000, 1005000000, 1000000000, 1, 100),
        // First_at past the trace.
        (0, 3, 1, 2, 3, 0, 0, 4294967280, 0, 3, 6148914691236, 1000000000, 0, 0, 1001500000, 1514, 1001500000, 1001500000, 1000000000, 4294967280, 0),
        // Per-pd state written by a client.
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 18446744073709551606, 4294967295, 0, 1000000000, 1514, 1000000000, 1000000000, 18446744073709551606, 0, 0),
        (0, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 18446744073709551606, 4294967295, 5000, 1000000000, 60, 18446744073709551606, 18446744073709551606, 18446744073709551606, 4294967295, 4950),
        // Trace_base + pos wraps to cell 1.
        (5, 3, 1, 2, 3, 0, 0, 1, 2, 3, 6148914691236, 1000000000, 4294967292, 0, 1000500000, 1514, 1003000000, 1003000000, 1003000000, 0, 0),
        // No reciprocal, 49 days idle: q wraps.
        (0, 3, 1, 2, 3, 2, 2, 2, 2, 3, 0, 4294967293500000, 0, 0, 8589934592000000, 1514, 8589934592000000, 8589934592000000, 4294967296500000, 2, 0),
        // Period 0 (refused by the switch's write).
        (0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1000000000, 0, 0, 1007500000, 1514, 1007500000, 1007500000, 1000000000, 0, 0),
    ];

    #[test]
    fn schedule_matches_the_p4_vectors() {
        for (i, r) in TRACE_VECTORS.iter().enumerate() {
            let caps = Capacities { profiles: 4, ..Default::default() };
            let regs = Registers::new(&caps, crate::dist::builtin_tables(), 1);
            for (c, v) in [r.2, r.3, r.4].into_iter().enumerate() {
                regs.trace_opportunity_ms[c].store(v as u32, Relaxed);
            }
            for (c, v) in [r.5, r.6, r.7, r.8].into_iter().enumerate() {
                regs.trace_first_at[c].store(v as u32, Relaxed);
            }
            let imp = Impairment {
                trace_base: r.0 as u32,
                trace_len: r.1 as u32,
                trace_period_ms: r.9 as u32,
                trace_period_recip: r.10,
                ..Default::default()
            };
            let mut v = Vars { cycle_ns: r.11, pos: r.12 as u32, left: r.13 as u32 };
            let slot = schedule(&imp, &regs, &mut v, r.14, r.15 as u32);
            assert_eq!(
                (slot.begin, slot.departure, v.cycle_ns, v.pos as u64, v.left as u64),
                (r.16, r.17, r.18, r.19, r.20),
                "row {i}"
            );
            assert!(r.14 <= slot.begin && slot.begin <= slot.departure, "row {i}");
        }
    }
}
