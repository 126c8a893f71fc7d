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
            // Down to nothing on a machine that always wakes on time: no spinning at all.
            self.estimate_ns.saturating_sub(STEP_NS)
        };
    }

    /// The estimated 99th percentile of wake-up lateness (health metric).
    pub fn estimate_ns(&self) -> u64 {
        self.estimate_ns
    }
}

/// What the loop does after a turn with nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A deadline is too close to sleep for: turn again.
    Spin,
    /// Sleep in `ppoll` at most `ns` (a frame or the control eventfd ends it sooner); `timed`: the
    /// timeout is a deadline's, so how late it wakes is a sample for the margin; `defer_rx`: the
    /// ports whose frames all went to backlogged rate queues are left out of the poll (they are
    /// read when the sleep ends, at most `ns` plus the wake-up's lateness later).
    Sleep { ns: u64, timed: bool, defer_rx: bool },
}

/// The loop's wait at `now`, given the next precise deadline (a precise release, a cell's next
/// service), the next coalesced release (release.rs), the learnt `margin_ns`, the release slack
/// `slack_ns`, and `backlogged`: some port's frames in its last turn with any all went to
/// backlogged rate queues (or were dropped). `max_sleep_ns` bounds any sleep.
///
/// - A precise deadline is slept for until `margin` before it, then spun for.
/// - A coalesced release may leave up to `slack` late. With frames of other kinds around, its
///   sleep ends `margin - slack` before it, or at it when the slack covers the margin (a frame wakes
///   the loop anyway, and a queue draining with no traffic is then released one wake-up late, not
///   a slack late): it is not spun for, and leaves at most the wake-up's lateness after its time,
///   which the margin bounds at its quantile (p99): `margin - slack + lateness <= slack`.
/// - Batching, when `backlogged` and the slack exceeds the margin: the sleep ends `slack - margin`
///   after the coalesced release and lasts at most `slack - margin`, and the backlogged ports do
///   not wake it. Frames of a saturated shaped stream otherwise wake the loop every few
///   microseconds, and on a VM each timed sleep and wake-up costs ~10 us of the thread (the timer
///   programming exits to the hypervisor), more than the frames; so the loop wakes once per
///   `slack - margin + lateness`, takes every frame that came and sends every packet due in one
///   transmit. Still within the slack at the margin's quantile, for the release
///   (`slack - margin + lateness <= slack`) and for a frame waiting in a deferred port's ring.
pub fn plan(
    now: u64,
    precise: Option<u64>,
    coalesced: Option<u64>,
    margin_ns: u64,
    slack_ns: u64,
    backlogged: bool,
    max_sleep_ns: u64,
) -> Wait {
    let mut sleep = max_sleep_ns;
    let mut timed = false;
    if let Some(d) = precise {
        let wait = d.saturating_sub(now);
        if wait <= margin_ns {
            return Wait::Spin;
        }
        (sleep, timed) = (sleep.min(wait - margin_ns), true);
    }
    let defer_rx = backlogged && coalesced.is_some() && slack_ns > margin_ns;
    if let Some(d) = coalesced {
        let end =
            if defer_rx { d + (slack_ns - margin_ns) } else { d.saturating_sub(margin_ns.saturating_sub(slack_ns)) };
        if end <= now {
            return Wait::Spin; // due (the next turn releases it), or inside the spin part
        }
        (sleep, timed) = (sleep.min(end - now), true);
    }
    if defer_rx {
        sleep = sleep.min(slack_ns - margin_ns); // how long a deferred port's frame may wait
    }
    Wait::Sleep { ns: sleep, timed, defer_rx }
}

/// How much of its time the data-plane loop may spend awake before it stops spinning, so that the
/// kernel's RT throttling never stops it.
///
/// A SCHED_FIFO thread that runs more than `sched_rt_runtime_us` of every `sched_rt_period_us`
/// (950 ms of 1 s by default) is not run at all for the rest of the period. For the switch that is
/// a freeze of every port for up to 50 ms, every second: measured on 2026-11-26 with a 50 ms delay
/// profile carrying 200 Mbit/s (its loop awake 96 % of the time, most of it spinning before
/// releases), probes left 14-36 ms late in runs of ten, and the same with `--wake-margin-us 250` at
/// 50 Mbit/s. Spinning is what the loop can give up: over budget it plans its waits with no margin
/// and no busy poll (`plan` with margin, slack and backlog zero: it sleeps until the earliest
/// release itself and wakes a wake-up's lateness after it, tens of microseconds on a VM, instead of
/// being stopped for tens of milliseconds).
///
/// The budget is kept per WINDOW_NS: the loop may be awake (anything but its `ppoll` sleeps) for
/// `limit_ns` of each window, the kernel's share less HEADROOM_PCT: the rest of a window
/// may still hold work (frames, due releases), which the loop does whatever the budget. With the
/// default 95 %, 85 ms of every 100 ms; no limit when throttling is off (`-1`) or the thread is
/// not real-time. Only a window that also spun (awake but not in turns with work) for MIN_SPIN_NS
/// stops spinning: giving up spinning is all the budget can do, and a loop busy with work alone
/// keeps its ordinary waits.
#[derive(Debug, Clone)]
pub struct SpinBudget {
    limit_ns: Option<u64>,
    window_start_ns: u64,
    slept_ns: u64,
    /// Time in turns with work (packets, due releases) this window: what giving up spinning
    /// cannot save.
    worked_ns: u64,
    /// This window already ran out (counted once).
    exhausted: bool,
    /// Windows in which the budget ran out.
    pub windows_exhausted: u64,
}

pub const WINDOW_NS: u64 = 100_000_000;
/// Points of the kernel's share kept for work the loop cannot put off once its budget is spent.
const HEADROOM_PCT: u64 = 10;
/// Over the limit, spinning stops only if the window spun at least this long: a loop awake
/// because of work alone (a flood) would gain nothing by it, and its waits are left as they are
/// (the radio bench's 1M-UE bursts measured 3-6 % slower when they were not).
const MIN_SPIN_NS: u64 = 5_000_000;

impl SpinBudget {
    /// The budget for the kernel's RT throttling settings (`runtime_us` of every `period_us`;
    /// `runtime_us` negative: throttling off). `None`: no limit.
    pub fn for_rt_throttling(runtime_us: i64, period_us: i64) -> SpinBudget {
        let limit_ns = (runtime_us >= 0 && period_us > 0).then(|| {
            let pct = (runtime_us as u64 * 100 / period_us as u64).min(100);
            WINDOW_NS * pct.saturating_sub(HEADROOM_PCT) / 100
        });
        SpinBudget { limit_ns, window_start_ns: 0, slept_ns: 0, worked_ns: 0, exhausted: false, windows_exhausted: 0 }
    }

    /// No limit (a thread the kernel does not throttle).
    pub fn unlimited() -> SpinBudget {
        SpinBudget::for_rt_throttling(-1, 1)
    }

    /// The running system's settings (/proc/sys/kernel/sched_rt_*); unreadable: the kernel's
    /// defaults.
    pub fn of_this_kernel() -> SpinBudget {
        let read = |name: &str, default: i64| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(default)
        };
        SpinBudget::for_rt_throttling(read("sched_rt_runtime_us", 950_000), read("sched_rt_period_us", 1_000_000))
    }

    /// The awake time allowed per window; None: no limit.
    pub fn limit_ns(&self) -> Option<u64> {
        self.limit_ns
    }

    /// Whether the loop may spin at `now` (a new window starts with a fresh budget).
    #[inline]
    pub fn may_spin(&mut self, now: u64) -> bool {
        let Some(limit) = self.limit_ns else { return true };
        let elapsed = now.saturating_sub(self.window_start_ns);
        if elapsed >= WINDOW_NS {
            (self.window_start_ns, self.slept_ns, self.worked_ns, self.exhausted) = (now, 0, 0, false);
            return true;
        }
        let awake = elapsed.saturating_sub(self.slept_ns);
        if awake < limit || awake.saturating_sub(self.worked_ns) < MIN_SPIN_NS {
            return true;
        }
        if !self.exhausted {
            self.exhausted = true;
            self.windows_exhausted += 1;
        }
        false
    }

    /// The loop slept `ns` in `ppoll`.
    #[inline]
    pub fn slept(&mut self, ns: u64) {
        self.slept_ns += ns;
    }

    /// A turn with work took `ns`.
    #[inline]
    pub fn worked(&mut self, ns: u64) {
        self.worked_ns += ns;
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
    fn the_spin_budget_follows_the_kernels_rt_share() {
        assert_eq!(SpinBudget::for_rt_throttling(950_000, 1_000_000).limit_ns(), Some(85_000_000));
        assert_eq!(SpinBudget::for_rt_throttling(500_000, 1_000_000).limit_ns(), Some(40_000_000));
        assert_eq!(SpinBudget::for_rt_throttling(100_000, 1_000_000).limit_ns(), Some(0));
        assert_eq!(SpinBudget::for_rt_throttling(-1, 1_000_000).limit_ns(), None);
        assert_eq!(SpinBudget::unlimited().limit_ns(), None);
    }

    #[test]
    fn the_spin_budget_runs_out_within_a_window_and_comes_back_with_the_next() {
        let mut b = SpinBudget::for_rt_throttling(950_000, 1_000_000);
        assert!(b.may_spin(0)); // the first window starts
        b.slept(10_000_000);
        b.worked(40_000_000); // and it spun the other 44-50 ms
        assert!(b.may_spin(94_000_000)); // awake 84 ms of 94
        assert!(!b.may_spin(96_000_000)); // awake 86 ms: over
        assert!(!b.may_spin(97_000_000));
        assert_eq!(b.windows_exhausted, 1); // counted once per window
        b.slept(1_000_000);
        assert!(!b.may_spin(99_000_000)); // 99 - 11 = 88 ms awake
        assert!(b.may_spin(100_000_000)); // a new window
        assert!(b.may_spin(180_000_000)); // 80 ms awake of 80
        assert!(!b.may_spin(186_000_000));
        assert_eq!(b.windows_exhausted, 2);
        // A window awake with work alone keeps spinning: there is nothing to save.
        let mut flood = SpinBudget::for_rt_throttling(950_000, 1_000_000);
        assert!(flood.may_spin(0));
        flood.worked(97_000_000);
        assert!(flood.may_spin(99_000_000)); // awake 99 ms, 2 ms of it not working
        assert_eq!(flood.windows_exhausted, 0);
        assert!(flood.may_spin(100_000_000)); // a new window
        flood.worked(80_000_000);
        assert!(!flood.may_spin(190_000_000)); // awake 90 ms, 10 of them spinning
        assert_eq!(flood.windows_exhausted, 1);
        let mut free = SpinBudget::unlimited();
        assert!(free.may_spin(99_000_000));
        assert_eq!(free.windows_exhausted, 0);
    }

    #[test]
    fn over_budget_the_plan_sleeps_until_the_release_itself() {
        // The loop's frugal plan: margin, slack and backlog zero.
        let now = 1_000_000;
        assert_eq!(
            plan(now, Some(now + 80_000), None, 0, 0, false, MAX),
            Wait::Sleep { ns: 80_000, timed: true, defer_rx: false }
        );
        assert_eq!(
            plan(now, None, Some(now + 30_000), 0, 0, false, MAX),
            Wait::Sleep { ns: 30_000, timed: true, defer_rx: false }
        );
        assert_eq!(plan(now, Some(now), None, 0, 0, false, MAX), Wait::Spin); // due: work, not a spin
    }

    #[test]
    fn a_fixed_margin_is_not_learnt() {
        let mut m = WakeMargin::fixed(50_000);
        m.observe(5_000_000);
        assert_eq!(m.margin_ns(), 50_000);
    }

    const MAX: u64 = 100_000_000;

    fn sleep(ns: u64) -> Wait {
        Wait::Sleep { ns, timed: true, defer_rx: false }
    }

    #[test]
    fn precise_deadlines_are_spun_for_within_the_margin() {
        // 80 us margin: a release 50 us away is spun for, one 200 us away slept for until 80 us before.
        assert_eq!(plan(1_000_000, Some(1_050_000), None, 80_000, 100_000, false, MAX), Wait::Spin);
        assert_eq!(plan(1_000_000, Some(1_200_000), None, 80_000, 100_000, false, MAX), sleep(120_000));
        // Nothing ahead: sleep until a frame, untimed (no margin sample).
        assert_eq!(
            plan(1_000_000, None, None, 80_000, 100_000, true, MAX),
            Wait::Sleep { ns: MAX, timed: false, defer_rx: false }
        );
        // Far deadlines are bounded by the longest sleep.
        assert_eq!(plan(0, Some(10 * MAX), None, 80_000, 0, false, MAX), sleep(MAX));
    }

    #[test]
    fn coalesced_releases_are_slept_for_up_to_their_time() {
        // Slack 100 us covers the 80 us margin: a coalesced release 12 us away (1 Gbit/s, 1500-byte
        // frames) is slept for until its time, not spun for; one already due is released at once.
        assert_eq!(plan(1_000_000, None, Some(1_012_000), 80_000, 100_000, false, MAX), sleep(12_000));
        assert_eq!(plan(1_000_000, None, Some(1_000_000), 80_000, 100_000, false, MAX), Wait::Spin);
        assert_eq!(plan(1_000_000, None, Some(999_000), 80_000, 100_000, false, MAX), Wait::Spin);
        // Slack below the margin: the sleep ends margin - slack before, and the rest is spun.
        assert_eq!(plan(1_000_000, None, Some(1_012_000), 80_000, 50_000, false, MAX), Wait::Spin);
        assert_eq!(plan(1_000_000, None, Some(1_100_000), 80_000, 50_000, false, MAX), sleep(70_000));
        // Slack 0 (--release-slack-us 0) is exactly the precise wait.
        for d in [1_012_000, 1_100_000, 1_500_000] {
            for backlogged in [false, true] {
                assert_eq!(
                    plan(1_000_000, None, Some(d), 80_000, 0, backlogged, MAX),
                    plan(1_000_000, Some(d), None, 80_000, 0, false, MAX)
                );
            }
        }
    }

    #[test]
    fn a_backlogged_stream_is_batched_within_the_slack() {
        // Slack 250 us, margin 80 us, a backlogged port: the sleep ends 170 us after the next
        // coalesced release, and the backlogged ports are left out of the poll.
        assert_eq!(
            plan(1_000_000, None, Some(1_012_000), 80_000, 250_000, true, MAX),
            Wait::Sleep { ns: 170_000, timed: true, defer_rx: true }
        );
        // The batch's end already passed: release now.
        assert_eq!(plan(1_300_000, None, Some(1_012_000), 80_000, 250_000, true, MAX), Wait::Spin);
        // A coalesced release far ahead (a slow queue): the sleep still ends within slack - margin,
        // which bounds how long a deferred port's frame waits.
        assert_eq!(
            plan(1_000_000, None, Some(9_000_000), 80_000, 250_000, true, MAX),
            Wait::Sleep { ns: 170_000, timed: true, defer_rx: true }
        );
        // A precise deadline inside the batch ends the sleep a margin before it.
        assert_eq!(
            plan(1_000_000, Some(1_100_000), Some(1_012_000), 80_000, 250_000, true, MAX),
            Wait::Sleep { ns: 20_000, timed: true, defer_rx: true }
        );
        // Slack not above the margin (a slow timer): no batching, the plain coalesced wait (its sleep
        // ends margin - slack before it).
        assert_eq!(plan(1_000_000, None, Some(1_100_000), 300_000, 250_000, true, MAX), sleep(50_000));
        // Nothing coalesced to wait for: frames wake the loop as always.
        assert_eq!(plan(1_000_000, Some(1_200_000), None, 80_000, 250_000, true, MAX), sleep(120_000));
    }

    #[test]
    fn a_precise_deadline_is_never_slept_through_for_a_coalesced_one() {
        // The coalesced release is later, the precise one within the margin: spin.
        assert_eq!(plan(1_000_000, Some(1_060_000), Some(1_300_000), 80_000, 100_000, false, MAX), Wait::Spin);
        // The precise one far, the coalesced one near: sleep for the nearer.
        assert_eq!(plan(1_000_000, Some(2_000_000), Some(1_030_000), 80_000, 100_000, false, MAX), sleep(30_000));
        // Both far: the earlier of the two ends.
        assert_eq!(plan(1_000_000, Some(1_500_000), Some(1_450_000), 80_000, 100_000, false, MAX), sleep(420_000));
    }

    #[test]
    fn coalesced_releases_and_deferred_frames_wait_at_most_the_slack() {
        // Scripted timer: every wake-up comes `late` after its timeout, up to the estimate the
        // margin is learnt as (its p99). Whatever the estimate, slack and batching, a coalesced
        // release (the first turn at or after its time) is never early and at most the slack late,
        // and a frame arriving just as the loop falls asleep is read within the slack.
        let deadline = 5_000_000u64;
        for (estimate, slack) in [
            (60_000u64, 100_000u64),
            (60_000, 50_000),
            (150_000, 100_000),
            (60_000, 0),
            (60_000, 250_000),
            (150_000, 500_000),
            (300_000, 250_000),
        ] {
            let m = WakeMargin::fixed(estimate + GUARD_NS);
            for backlogged in [false, true] {
                for late in (0..=estimate).step_by(5_000) {
                    let mut now = deadline - 400_000;
                    let released = loop {
                        if now >= deadline {
                            break now;
                        }
                        match plan(now, None, Some(deadline), m.margin_ns(), slack, backlogged, MAX) {
                            Wait::Spin => now += 1_000, // a spinning turn
                            Wait::Sleep { ns, defer_rx, .. } => {
                                if defer_rx {
                                    assert!(ns + late <= slack, "a deferred frame waits {} > slack {slack}", ns + late);
                                }
                                now += ns + late;
                            }
                        }
                    };
                    assert!(
                        released - deadline <= slack.max(1_000),
                        "estimate {estimate} slack {slack} backlogged {backlogged} late {late}: {}",
                        released - deadline
                    );
                }
            }
        }
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
