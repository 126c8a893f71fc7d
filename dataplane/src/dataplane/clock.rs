//! The loop's clocks: monotonic time (every release time and deadline is in it), the wall-to-
//! monotonic offset that turns the kernel's wall-clock RX timestamps into it, and a frame's
//! arrival from its stamp. Apart from the loop because the rest of the switch reads the same clock
//! (health, metrics, the TX threads), and because these lines hold the rule that a packet never
//! leaves before its sender's time plus the delay.
use super::MAX_SLEEP_NS;

pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC now, for turning the kernel's wall-clock RX timestamps into
/// the loop's monotonic time.
///
/// Read as (monotonic, wall, monotonic) three times, keeping the tightest bracket, and taken as
/// wall minus the *second* monotonic read: a preemption between the reads can then only make the
/// offset smaller than the truth, which makes arrival times later, never earlier. A packet must never
/// leave before its sender's time plus the delay; one that leaves a few microseconds late is what
/// a loop turn costs anyway. (Reading monotonic first and wall much later, as the loop once did at
/// start, after allocating the buffer pool, made every arrival of the first ~100 ms early by the
/// pool's allocation time.)
pub fn wall_offset_ns() -> i64 {
    wall_offset_from(clock_ns)
}

/// [`wall_offset_ns`] over any clock reader (the tests script a preempted read).
fn wall_offset_from(mut read: impl FnMut(libc::clockid_t) -> u64) -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..3 {
        let before = read(libc::CLOCK_MONOTONIC);
        let wall = read(libc::CLOCK_REALTIME);
        let after = read(libc::CLOCK_MONOTONIC);
        let width = after.saturating_sub(before);
        if width < best.0 {
            best = (width, wall as i64 - after as i64);
        }
    }
    best.1
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A frame's arrival: its kernel stamp `stamp` (monotonic ns) when plausible against `now`, the
/// clock read before its batch, else a fresh read of `clock`. `now` itself is never used as the
/// arrival: a frame that arrived after it (the thread can be held up for a millisecond and more by
/// softirq work on its CPU) has a stamp after `now`, and `now` would make it early.
#[inline]
pub(super) fn arrival_time(stamp: i64, now: u64, clock: impl FnOnce() -> u64) -> u64 {
    let plausible = |at: u64| stamp > 0 && (stamp as u64) <= at && at - (stamp as u64) < MAX_SLEEP_NS;
    if plausible(now) {
        return stamp as u64;
    }
    let fresh = clock();
    if plausible(fresh) {
        stamp as u64
    } else {
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_is_never_before_the_frame() {
        // Stamped before the batch's read: the stamp.
        assert_eq!(arrival_time(1_000, 2_000, || 3_000), 1_000);
        // Stamped after the batch's read (arrived during the batch): still the stamp, checked
        // against a fresh read; the batch's read (2_000) would be before the frame existed.
        assert_eq!(arrival_time(2_500, 2_000, || 3_000), 2_500);
        // No stamp, one from the future, or one too old: the fresh read, not the batch's.
        assert_eq!(arrival_time(0, 2_000, || 3_000), 3_000);
        assert_eq!(arrival_time(4_000, 2_000, || 3_000), 3_000);
        assert_eq!(arrival_time(1, 2 * MAX_SLEEP_NS, || 2 * MAX_SLEEP_NS + 1), 2 * MAX_SLEEP_NS + 1);
    }

    /// A clock whose wall time is monotonic time + `offset`, every read advancing time by
    /// `steps[i]` first (a preemption is a large step).
    fn scripted(offset: u64, steps: Vec<u64>) -> impl FnMut(libc::clockid_t) -> u64 {
        let (mut t, mut i) = (1_000_000u64, 0);
        move |clock| {
            t += steps[i];
            i += 1;
            if clock == libc::CLOCK_REALTIME {
                t + offset
            } else {
                t
            }
        }
    }

    #[test]
    fn wall_offset_errs_only_toward_later_arrivals() {
        let truth = 5_000_000_000u64;
        // Preempted for 400 us between the wall read and the monotonic read after it, in the
        // first bracket: the tightest bracket (the second, 20 ns wide) is the one taken.
        let steps = vec![10, 10, 400_000, 10, 10, 10, 10, 10, 30];
        assert_eq!(wall_offset_from(scripted(truth, steps)), truth as i64 - 10);
        // Every bracket preempted: still never above the truth (arrivals late, never early).
        let steps = vec![10, 10, 300_000, 10, 10, 200_000, 10, 10, 250_000];
        let offset = wall_offset_from(scripted(truth, steps));
        assert!(offset <= truth as i64 && offset == truth as i64 - 200_000, "{offset}");
        // On this machine's clocks: within a millisecond of a plain reading.
        let plain = clock_ns(libc::CLOCK_REALTIME) as i64 - monotonic_ns() as i64;
        assert!((wall_offset_ns() - plain).abs() < 1_000_000);
    }
}
