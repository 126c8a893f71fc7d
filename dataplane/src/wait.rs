//! How early the data-plane loop wakes before its next deadline (a release in the timing wheel, a
//! cell's next service), learnt from how late its own timed wake-ups come.
//!
//! The loop sleeps in `ppoll` (so that a frame on any port or a PacketOut wakes it at once) with a
//! timeout that ends `margin` before the deadline, then spins, doing ordinary loop turns, until
//! the deadline. Timer slack is 1 ns and the thread runs SCHED_FIFO, yet on a virtual machine the
//! wake-up still comes tens of microseconds after the timeout: the guest's timer is the
//! hypervisor's, and the vCPU has to be run again. Measured on this project's 2-vCPU Firecracker
//! VM (docs/dataplane.md "The loop's wait"): 55-65 us late at the median, ~80 us at p90, whatever
//! the sleep call (ppoll, clock_nanosleep TIMER_ABSTIME, timerfd). A fixed 50 us spin margin was
//! therefore too short for most wake-ups, and any fixed value is wrong on some machine: a bare
//! metal host wakes within a few microseconds and would spin for nothing.
//!
//! So the margin is an online estimate of the 99th percentile of the wake-up lateness (the
//! "frugal" streaming quantile: a wake-up later than the estimate raises it by 99 steps, one no
//! later lowers it by one step, which settles where 1 % of wake-ups are later), plus a guard for
//! the loop turn that follows the wake-up. No allocation, two comparisons per timed wake-up. It is
//! bounded both ways: at least `MIN_MARGIN_NS` (a turn's own length), at most `MAX_MARGIN_NS`, so
//! that a machine whose vCPU is stalled for milliseconds (host preemption, which no guest-side
//! wait can avoid) costs at most that much spinning per deadline rather than a busy loop. An idle
//! switch has no deadline and never spins: it sleeps until a frame arrives (or `MAX_SLEEP_NS`).

/// One step of the estimate down; a wake-up later than the estimate raises it by 99 steps (p99).
const STEP_NS: u64 = 100;
const UP_NS: u64 = 99 * STEP_NS;
/// Where the estimate starts (a few early releases adjust it within a second at a 5 ms period).
const INITIAL_ESTIMATE_NS: u64 = 100_000;
const MIN_ESTIMATE_NS: u64 = 0;
/// Spinning is bounded: at most this long per deadline, whatever the machine's stalls.
const MAX_ESTIMATE_NS: u64 = 300_000;
/// Room for the loop turn that follows the wake-up (RX poll of every port, stages, release).
const GUARD_NS: u64 = 10_000;

#[derive(Debug, Clone)]
pub struct WakeMargin {
    /// Estimated 99th percentile of how late a timed wake-up comes (ns).
    estimate_ns: u64,
    /// `--wake-margin-us N`: this margin, never learnt.
    fixed: Option<u64>,
}

impl Default for WakeMargin {
    fn default() -> Self {
        WakeMargin { estimate_ns: INITIAL_ESTIMATE_NS, fixed: None }
    }
}

impl WakeMargin {
    /// A margin that stays `ns` (the operator chose it).
    pub fn fixed(ns: u64) -> Self {
        WakeMargin { estimate_ns: ns, fixed: Some(ns) }
    }

    /// How long before a deadline the loop stops sleeping and starts spinning.
    #[inline]
    pub fn margin_ns(&self) -> u64 {
        self.fixed.unwrap_or(self.estimate_ns + GUARD_NS)
    }

    /// A timed sleep that ended by its timeout (not by a frame) woke `late_ns` after it.
    #[inline]
    pub fn observe(&mut self, late_ns: u64) {
        if self.fixed.is_some() {
            return;
        }
        self.estimate_ns = if late_ns > self.estimate_ns {
            (self.estimate_ns + UP_NS).min(MAX_ESTIMATE_NS)
        } else {
            self.estimate_ns.saturating_sub(STEP_NS).max(MIN_ESTIMATE_NS)
        };
    }

    /// The estimated 99th percentile of wake-up lateness (health metric).
    pub fn estimate_ns(&self) -> u64 {
        self.estimate_ns
    }
}

/// How late the loop's releases from the timing wheel are (the earliest packet of each turn that
/// released any, measured after the turn's transmit), in power-of-two microsecond buckets:
/// logged when the switch stops, so a run's release accuracy can be read from the switch's own
/// log (bench/slot.py compares it with the wire). One array increment per turn, no atomics.
#[derive(Debug, Clone, Default)]
pub struct Lateness {
    /// buckets[i]: turns released less than 2^i us late (the last: everything later).
    buckets: [u64; LATENESS_BUCKETS],
    turns: u64,
    max_ns: u64,
}

const LATENESS_BUCKETS: usize = 24;

impl Lateness {
    #[inline]
    pub fn observe(&mut self, late_ns: u64) {
        let us = late_ns / 1000;
        let i = (64 - us.leading_zeros() as usize).min(LATENESS_BUCKETS - 1);
        self.buckets[i] += 1;
        self.turns += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// Upper bound (us) of the bucket holding the `q` quantile; None before any release.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.turns == 0 {
            return None;
        }
        let want = (q * self.turns as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(1u64 << i);
            }
        }
        Some(self.max_ns / 1000)
    }

    pub fn turns(&self) -> u64 {
        self.turns
    }

    pub fn max_us(&self) -> u64 {
        self.max_ns / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;

    /// Lateness drawn from a VM-like distribution: 60 us +- 10 us, 2 % at 150-250 us, 0.3 % of
    /// vCPU stalls of 1-6 ms.
    fn vm_lateness(r: &mut Prng) -> u64 {
        match r.up_to(1000) {
            0..=2 => 1_000_000 + r.up_to(5_000_000),
            3..=22 => 150_000 + r.up_to(100_000),
            _ => 50_000 + r.up_to(20_000),
        }
    }

    #[test]
    fn settles_near_the_99th_percentile_and_ignores_rare_stalls() {
        let mut r = Prng::new(3);
        let mut m = WakeMargin::default();
        let mut samples = Vec::new();
        for _ in 0..50_000 {
            let l = vm_lateness(&mut r);
            samples.push(l);
            m.observe(l);
        }
        samples.sort_unstable();
        // The true p99 of this mixture is in the 150-250 us band; p97.7 is its lower edge.
        let late_share = samples.iter().filter(|&&s| s > m.estimate_ns()).count() as f64 / samples.len() as f64;
        assert!((0.003..0.03).contains(&late_share), "share later than the estimate {late_share}");
        assert!(m.estimate_ns() >= 150_000 && m.estimate_ns() <= 250_000, "estimate {}", m.estimate_ns());
        // The ms stalls (0.3 %) alone do not drag it to the cap.
        assert!(m.estimate_ns() < MAX_ESTIMATE_NS);
    }

    #[test]
    fn a_prompt_machine_spins_little() {
        let mut m = WakeMargin::default();
        for _ in 0..2_000 {
            m.observe(3_000); // bare metal: a few us
        }
        // It hovers just above the samples (one late sample raises it by UP_NS, then it creeps down).
        assert!(m.margin_ns() <= 3_000 + UP_NS + GUARD_NS, "margin {}", m.margin_ns());
        assert!(m.margin_ns() >= GUARD_NS);
    }

    #[test]
    fn lateness_quantiles_are_bucket_bounds() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile_us(0.5), None);
        for _ in 0..98 {
            l.observe(700); // < 1 us: bucket 0
        }
        l.observe(3_500); // 3 us: below 4
        l.observe(2_000_000); // 2 ms
        assert_eq!(l.quantile_us(0.5), Some(1));
        assert_eq!(l.quantile_us(0.99), Some(4));
        assert_eq!(l.quantile_us(1.0), Some(2048));
        assert_eq!((l.turns(), l.max_us()), (100, 2000));
    }

    #[test]
    fn a_fixed_margin_is_not_learnt() {
        let mut m = WakeMargin::fixed(50_000);
        m.observe(5_000_000);
        assert_eq!(m.margin_ns(), 50_000);
    }

    #[test]
    fn bounded_when_every_wake_up_is_late() {
        let mut m = WakeMargin::default();
        for _ in 0..1_000 {
            m.observe(10_000_000);
        }
        assert_eq!(m.estimate_ns(), MAX_ESTIMATE_NS);
        assert_eq!(m.margin_ns(), MAX_ESTIMATE_NS + GUARD_NS);
    }
}
