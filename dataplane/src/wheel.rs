//! Hierarchical timing wheel holding packet handles until their release time.
//!
//! 7 levels of 64 slots over ticks of 1024 ns (level 0 spans 65 us, level 6 about 52 days), in
//! the style of the Linux and tokio timer wheels: an entry sits on the level given by the highest
//! bit in which its tick differs from the current tick, so it is moved down at most 6 times; each
//! level has a 64-bit occupancy word, so finding the next deadline is a few bit operations.
//! Slots are intrusive FIFO lists (`next` links indexed by handle, preallocated), so insert and
//! release never allocate and keep insertion order within a tick: packets of one profile with
//! non-decreasing release times leave in the order they entered.
//!
//! A level-0 slot is released once the clock has passed the end of its tick, so a packet leaves
//! at most 1.024 us (plus loop latency) after its release time and never before it.
use crate::pool::{Handle, NIL};

const BITS: u32 = 6;
const SLOTS: usize = 1 << BITS;
const LEVELS: usize = 7;
pub const TICK_SHIFT: u32 = 10;

pub struct Wheel {
    /// Current tick: every slot before it has been processed.
    elapsed: u64,
    occupied: [u64; LEVELS],
    head: [[Handle; SLOTS]; LEVELS],
    tail: [[Handle; SLOTS]; LEVELS],
    next: Vec<Handle>,
    when: Vec<u64>,
    /// Entries too far ahead for the levels (only around a 2^42-tick boundary of the clock).
    overflow: Vec<Handle>,
    len: usize,
}

impl Wheel {
    /// `capacity`: the number of handles (the pool size); handles must be below it.
    pub fn new(capacity: usize, now_ns: u64) -> Self {
        Wheel {
            elapsed: now_ns >> TICK_SHIFT,
            occupied: [0; LEVELS],
            head: [[NIL; SLOTS]; LEVELS],
            tail: [[NIL; SLOTS]; LEVELS],
            next: vec![NIL; capacity],
            when: vec![0; capacity],
            overflow: Vec::with_capacity(capacity),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Room for handles below `handles` (larger packet buffers were added to the pool: their
    /// handles follow the others'). Entries in the wheel keep their places.
    pub fn grow(&mut self, handles: usize) {
        if handles > self.next.len() {
            self.next.resize(handles, NIL);
            self.when.resize(handles, 0);
            self.overflow.reserve(handles.saturating_sub(self.overflow.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn level_for(&self, when: u64) -> usize {
        let masked = (self.elapsed ^ when) | (SLOTS as u64 - 1);
        ((63 - masked.leading_zeros()) / BITS) as usize
    }

    #[inline]
    fn push(&mut self, h: Handle) {
        let when = self.when[h as usize];
        let level = self.level_for(when);
        if level >= LEVELS {
            self.overflow.push(h);
            return;
        }
        let slot = ((when >> (level as u32 * BITS)) as usize) & (SLOTS - 1);
        self.next[h as usize] = NIL;
        let t = self.tail[level][slot];
        if t == NIL {
            self.head[level][slot] = h;
        } else {
            self.next[t as usize] = h;
        }
        self.tail[level][slot] = h;
        self.occupied[level] |= 1 << slot;
    }

    /// Holds `h` until `release_ns`. A release time already past goes out at the next poll.
    #[inline]
    pub fn insert(&mut self, h: Handle, release_ns: u64) {
        self.when[h as usize] = (release_ns >> TICK_SHIFT).max(self.elapsed);
        self.len += 1;
        self.push(h);
    }

    /// The start of the tick `h` was inserted for (its release time, rounded down to 1.024 us):
    /// valid for a handle just released by `poll`, until it is inserted again.
    #[inline]
    pub fn tick_ns(&self, h: Handle) -> u64 {
        self.when[h as usize] << TICK_SHIFT
    }

    /// (level, slot, first tick of the slot) of the earliest occupied slot.
    #[inline]
    fn next_expiration(&self) -> Option<(usize, usize, u64)> {
        for level in 0..LEVELS {
            let occ = self.occupied[level];
            if occ == 0 {
                continue;
            }
            let shift = level as u32 * BITS;
            let now_slot = ((self.elapsed >> shift) as usize) & (SLOTS - 1);
            let slot = (occ.rotate_right(now_slot as u32).trailing_zeros() as usize + now_slot) % SLOTS;
            let level_range = 1u64 << (shift + BITS);
            let start = (self.elapsed & !(level_range - 1)) + ((slot as u64) << shift);
            return Some((level, slot, start));
        }
        None
    }

    fn take(&mut self, level: usize, slot: usize) -> Handle {
        let h = self.head[level][slot];
        self.head[level][slot] = NIL;
        self.tail[level][slot] = NIL;
        self.occupied[level] &= !(1 << slot);
        h
    }

    /// Releases, in order, every handle whose tick has fully passed at `now_ns`.
    pub fn poll(&mut self, now_ns: u64, mut release: impl FnMut(Handle)) {
        let now = now_ns >> TICK_SHIFT;
        if !self.overflow.is_empty() && now > self.elapsed {
            self.elapsed = now;
            let pending = std::mem::take(&mut self.overflow);
            for &h in &pending {
                self.push(h);
            }
            let mut pending = pending;
            pending.clear();
            if self.overflow.is_empty() {
                self.overflow = pending; // keep the preallocated buffer
            }
        }
        while let Some((level, slot, start)) = self.next_expiration() {
            if level == 0 {
                if start >= now {
                    break;
                }
                self.elapsed = start;
                let mut h = self.take(0, slot);
                while h != NIL {
                    let n = self.next[h as usize];
                    self.len -= 1;
                    release(h);
                    h = n;
                }
            } else {
                if start > now {
                    break;
                }
                // Cascade: everything in this slot moves to lower levels, in list order.
                self.elapsed = self.elapsed.max(start);
                let mut h = self.take(level, slot);
                while h != NIL {
                    let n = self.next[h as usize];
                    self.push(h);
                    h = n;
                }
            }
        }
        self.elapsed = self.elapsed.max(now);
    }

    /// When `poll` next has something to do (ns), or `None` if the wheel is empty.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        if !self.overflow.is_empty() {
            return Some((self.elapsed + 1) << TICK_SHIFT);
        }
        self.next_expiration().map(|(level, _, start)| {
            let t = if level == 0 { start + 1 } else { start };
            t << TICK_SHIFT
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;

    #[test]
    fn releases_in_time_order_never_early_and_within_a_tick() {
        let mut r = Prng::new(5);
        let n = 20_000;
        let t0 = 1_000_000_000u64;
        let mut w = Wheel::new(n, t0);
        let mut when = vec![0u64; n];
        for (h, w_h) in when.iter_mut().enumerate() {
            // Mix of short (us), medium (ms) and long (s, minutes) delays.
            let d = match r.up_to(3) {
                0 => r.up_to(100_000),
                1 => r.up_to(50_000_000),
                2 => r.up_to(5_000_000_000),
                _ => r.up_to(600_000_000_000),
            };
            *w_h = t0 + d;
            w.insert(h as Handle, t0 + d);
        }
        let mut out: Vec<(u64, Handle)> = Vec::new();
        let mut now = t0;
        let mut steps = 0;
        while !w.is_empty() {
            // Jump straight to the next deadline, or step irregularly, like the data-plane loop.
            let next = w.next_deadline_ns().unwrap();
            now = if r.chance(u32::MAX / 2) { next } else { now + r.up_to(3_000_000) }.max(now);
            w.poll(now, |h| out.push((now, h)));
            steps += 1;
            assert!(steps < 10_000_000);
        }
        assert_eq!(out.len(), n);
        let mut seen = vec![false; n];
        for &(at, h) in &out {
            assert!(!seen[h as usize]);
            seen[h as usize] = true;
            assert!(at >= when[h as usize], "released early");
        }
        // Released in release-tick order.
        for pair in out.windows(2) {
            assert!(when[pair[0].1 as usize] >> TICK_SHIFT <= when[pair[1].1 as usize] >> TICK_SHIFT);
        }
    }

    #[test]
    fn accuracy_when_polled_at_deadlines() {
        let t0 = 5_000_000u64;
        let mut w = Wheel::new(1000, t0);
        let mut r = Prng::new(9);
        let mut when = Vec::new();
        for h in 0..1000u32 {
            let t = t0 + r.up_to(2_000_000_000);
            when.push(t);
            w.insert(h, t);
        }
        while let Some(d) = w.next_deadline_ns() {
            w.poll(d, |h| {
                let late = d - when[h as usize];
                assert!(late <= 1 << TICK_SHIFT, "late by {late} ns");
            });
        }
    }

    #[test]
    fn same_tick_keeps_insertion_order_across_cascades() {
        let t0 = 0u64;
        let mut w = Wheel::new(100, t0);
        let release = 3_000_000_000u64; // far: starts on a high level
        for h in 0..50u32 {
            w.insert(h, release);
        }
        // Poll part-way, then insert more with the same release (now on a lower level).
        w.poll(release - 100_000, |_| panic!("early"));
        for h in 50..100u32 {
            w.insert(h, release);
        }
        let mut out = Vec::new();
        w.poll(release + 2048, |h| out.push(h));
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn past_release_goes_out_at_next_poll() {
        let mut w = Wheel::new(4, 1_000_000);
        w.poll(2_000_000, |_| {});
        w.insert(1, 500);
        let mut out = Vec::new();
        w.poll(2_000_000 + 1024, |h| out.push(h));
        assert_eq!(out, vec![1]);
    }
}
