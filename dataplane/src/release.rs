//! The delay line: every held packet waits here for its release time, in one of two timing
//! wheels by how exactly it must leave.
//!
//! - **precise**: the loop wakes a wake margin early and spins up to the release time (wait.rs),
//!   so the packet leaves within a tick and a turn of it. Everything is precise unless said below.
//! - **coalesced**: a packet that waited behind another in a rate queue (the rate stage's virtual
//!   clock, not its arrival, set its departure: `Pkt::coalescable`). The loop does not spin for it:
//!   it may leave up to `--release-slack-us` after its release time, together with every other
//!   packet due by then, in one transmit. Its departure on the virtual clock is unchanged, so the
//!   next packet's schedule is too, and the rate over any window longer than the slack stays exact;
//!   only the instant each frame is handed to the kernel moves, by at most the slack.
//!
//! Why two wheels and not a flag: the loop needs the earliest *precise* deadline to decide whether
//! to spin, and one wheel only gives the earliest of all. Release order is kept across the two:
//! a poll takes what is due from both and merges it by (release tick, insertion sequence), so
//! packets leave in the order one wheel would have released them.
use crate::pool::Handle;
use crate::wheel::Wheel;

/// `--release-slack-us`: how late a coalescable packet may leave, and which ones are coalesced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slack {
    /// Every coalescable packet may leave up to this many ns late (0: every release precise).
    Fixed(u64),
    /// The default: AUTO_SLACK_NS, for the packets of links that serve at least
    /// AUTO_BATCH_FRAMES of them within it (service time <= AUTO_SLACK_NS / AUTO_BATCH_FRAMES:
    /// for 1500-byte frames 768 Mbit/s and up, for 64-byte frames 33 Mbit/s and up). Those are the
    /// links whose departures come so close together that releasing each precisely means
    /// spinning through all of them: a gigabit shaper kept a core 95 % busy that way, 31 % with
    /// the slack (docs/dataplane.md "Release slack"). Slower links stay precise, where a late
    /// release would be a visible part of a frame's time and batching would gain nothing.
    Auto,
}

/// The automatic slack and the batch it must allow (see [`Slack::Auto`]).
pub const AUTO_SLACK_NS: u64 = 500_000;
pub const AUTO_BATCH_FRAMES: u64 = 32;

/// As the start log says it: "500 us auto", "0 us".
impl std::fmt::Display for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slack::Fixed(ns) => write!(f, "{} us", ns / 1000),
            Slack::Auto => {
                write!(f, "{} us auto, for links serving {AUTO_BATCH_FRAMES} frames within it", AUTO_SLACK_NS / 1000)
            }
        }
    }
}

impl Slack {
    /// How late a coalesced release may leave (ns).
    pub fn ns(self) -> u64 {
        match self {
            Slack::Fixed(ns) => ns,
            Slack::Auto => AUTO_SLACK_NS,
        }
    }

    /// Whether a packet the rate stage queued behind another, served in `service_ns` on its
    /// link, is coalesced rather than released precisely.
    #[inline]
    pub fn coalesces(self, service_ns: u64) -> bool {
        match self {
            Slack::Fixed(ns) => ns > 0,
            Slack::Auto => service_ns.saturating_mul(AUTO_BATCH_FRAMES) <= AUTO_SLACK_NS,
        }
    }
}

/// Which wheel a packet waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exactness {
    Precise,
    Coalesced,
}

pub struct DelayLine {
    precise: Wheel,
    coalesced: Wheel,
    /// Insertion sequence per handle: the tie-break within a tick across the two wheels.
    seq: Vec<u64>,
    next_seq: u64,
    /// Reused buffers for one poll of each wheel (no allocation per turn).
    from_precise: Vec<Handle>,
    from_coalesced: Vec<Handle>,
}

/// What one poll released, besides the handles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Polled {
    /// Release tick start (ns) of the earliest precise packet released, if any.
    pub first_precise_ns: Option<u64>,
    /// Same for the coalesced ones.
    pub first_coalesced_ns: Option<u64>,
    pub precise: usize,
    pub coalesced: usize,
}

impl DelayLine {
    /// `capacity`: the number of handles (the pool size).
    pub fn new(capacity: usize, now_ns: u64) -> Self {
        DelayLine {
            precise: Wheel::new(capacity, now_ns),
            coalesced: Wheel::new(capacity, now_ns),
            seq: vec![0; capacity],
            next_seq: 0,
            from_precise: Vec::with_capacity(capacity),
            from_coalesced: Vec::with_capacity(capacity),
        }
    }

    /// Room for handles below `handles`, the pool's (its larger buffers' handles follow the
    /// others': `Pool::handles`). What waits keeps its place and order.
    pub fn grow(&mut self, handles: usize) {
        if handles > self.seq.len() {
            self.precise.grow(handles);
            self.coalesced.grow(handles);
            self.seq.resize(handles, 0);
            self.from_precise.reserve(handles.saturating_sub(self.from_precise.len()));
            self.from_coalesced.reserve(handles.saturating_sub(self.from_coalesced.len()));
        }
    }

    #[inline]
    pub fn insert(&mut self, h: Handle, release_ns: u64, how: Exactness) {
        self.seq[h as usize] = self.next_seq;
        self.next_seq += 1;
        match how {
            Exactness::Precise => self.precise.insert(h, release_ns),
            Exactness::Coalesced => self.coalesced.insert(h, release_ns),
        }
    }

    pub fn len(&self) -> usize {
        self.precise.len() + self.coalesced.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When a precise packet is next due (ns).
    #[inline]
    pub fn next_precise_ns(&self) -> Option<u64> {
        self.precise.next_deadline_ns()
    }

    /// When a coalesced packet is next due (ns).
    #[inline]
    pub fn next_coalesced_ns(&self) -> Option<u64> {
        self.coalesced.next_deadline_ns()
    }

    /// Appends to `out`, in release order, every packet due at `now_ns` in either wheel.
    pub fn poll(&mut self, now_ns: u64, out: &mut Vec<Handle>) -> Polled {
        let (mut p, mut c) = (std::mem::take(&mut self.from_precise), std::mem::take(&mut self.from_coalesced));
        self.precise.poll(now_ns, |h| p.push(h));
        self.coalesced.poll(now_ns, |h| c.push(h));
        let polled = Polled {
            first_precise_ns: p.first().map(|&h| self.precise.tick_ns(h)),
            first_coalesced_ns: c.first().map(|&h| self.coalesced.tick_ns(h)),
            precise: p.len(),
            coalesced: c.len(),
        };
        if c.is_empty() {
            out.extend_from_slice(&p);
        } else if p.is_empty() {
            out.extend_from_slice(&c);
        } else {
            // Both wheels released in their own tick order: merge by (tick, sequence).
            let key = |w: &Wheel, h: Handle| (w.tick_ns(h), self.seq[h as usize]);
            let (mut i, mut j) = (0, 0);
            while i < p.len() && j < c.len() {
                if key(&self.precise, p[i]) <= key(&self.coalesced, c[j]) {
                    out.push(p[i]);
                    i += 1;
                } else {
                    out.push(c[j]);
                    j += 1;
                }
            }
            out.extend_from_slice(&p[i..]);
            out.extend_from_slice(&c[j..]);
        }
        p.clear();
        c.clear();
        (self.from_precise, self.from_coalesced) = (p, c);
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::wheel::TICK_SHIFT;

    #[test]
    fn auto_slack_coalesces_only_links_that_serve_a_batch_within_it() {
        // Service time of a frame of `bytes` (wire bytes, as the rate stage counts) at `bps`.
        let service = |bytes: u64, bps: u64| bytes * 8 * 1_000_000_000 / bps;
        let auto = Slack::Auto;
        assert_eq!(auto.ns(), 500_000);
        // 1500-byte frames: 1 Gbit/s (12 us each, 32 in 384 us) batches; 100 Mbit/s (120 us) not.
        assert!(auto.coalesces(service(1500, 1_000_000_000)));
        assert!(!auto.coalesces(service(1500, 100_000_000)));
        // The boundary: 32 services exactly fill the slack.
        assert!(auto.coalesces(AUTO_SLACK_NS / AUTO_BATCH_FRAMES));
        assert!(!auto.coalesces(AUTO_SLACK_NS / AUTO_BATCH_FRAMES + 1));
        // Small frames batch on slower links: 64 bytes at 100 Mbit/s is 5.12 us each.
        assert!(auto.coalesces(service(64, 100_000_000)));
        assert!(!auto.coalesces(u64::MAX)); // no overflow on absurd services
                                            // A fixed slack applies to every queued packet; 0 to none.
        assert!(Slack::Fixed(250_000).coalesces(service(1500, 10_000_000)));
        assert!(!Slack::Fixed(0).coalesces(0));
    }

    #[test]
    fn merges_both_wheels_in_release_order_never_early() {
        let mut r = Prng::new(11);
        let n = 5_000;
        let t0 = 1_000_000_000u64;
        let mut line = DelayLine::new(n, t0);
        let mut when = vec![0u64; n];
        // Releases in increasing order with ties (one profile's packets), each in a random wheel,
        // as a rate queue alternating between empty (precise) and backlogged (coalesced) gives.
        let mut t = t0;
        for (h, w) in when.iter_mut().enumerate() {
            t += r.up_to(3) * 700; // 0, 700, 1400 or 2100 ns apart: many share a 1.024 us tick
            *w = t;
            let how = if r.chance(u32::MAX / 2) { Exactness::Precise } else { Exactness::Coalesced };
            line.insert(h as Handle, t, how);
        }
        let mut out = Vec::new();
        let mut now = t0;
        while !line.is_empty() {
            now += r.up_to(40_000); // polls at irregular instants release batches from both
            let before = out.len();
            let polled = line.poll(now, &mut out);
            assert_eq!(polled.precise + polled.coalesced, out.len() - before);
            for &h in &out[before..] {
                assert!(when[h as usize] >> TICK_SHIFT < now >> TICK_SHIFT, "released before its tick ended");
            }
        }
        // Insertion order is release order here, so the merged output is exactly 0..n.
        assert_eq!(out, (0..n as Handle).collect::<Vec<_>>());
    }

    #[test]
    fn grown_for_more_handles_it_holds_them_and_keeps_what_waits() {
        // Larger packet buffers added to the pool: handles beyond the start's (before, inserting
        // one was an index out of bounds that stopped the data-plane thread).
        let mut line = DelayLine::new(4, 0);
        line.insert(3, 2_000_000, Exactness::Precise);
        line.insert(1, 1_000_000, Exactness::Coalesced);
        line.grow(10);
        line.insert(9, 1_500_000, Exactness::Precise);
        line.insert(7, 1_500_000, Exactness::Coalesced);
        let mut out = Vec::new();
        line.poll(3_000_000, &mut out);
        assert_eq!(out, vec![1, 9, 7, 3], "in release order (ties in insertion order)");
        assert!(line.is_empty());
    }

    #[test]
    fn deadlines_are_per_wheel() {
        let mut line = DelayLine::new(8, 0);
        line.insert(1, 50_000, Exactness::Coalesced);
        assert_eq!(line.next_precise_ns(), None);
        assert!(line.next_coalesced_ns().is_some_and(|d| (50_000..50_000 + 2048).contains(&d)));
        line.insert(2, 60_000, Exactness::Precise);
        assert!(line.next_precise_ns().is_some_and(|d| (60_000..60_000 + 2048).contains(&d)));
        let mut out = Vec::new();
        let polled = line.poll(55_000, &mut out);
        assert_eq!((out.as_slice(), polled.precise, polled.coalesced), ([1].as_slice(), 0, 1));
        assert_eq!(polled.first_coalesced_ns, Some((50_000 >> TICK_SHIFT) << TICK_SHIFT));
        assert_eq!(line.next_coalesced_ns(), None);
        assert_eq!(line.len(), 1);
    }
}
