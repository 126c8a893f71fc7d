//! MAC learning digests (`l2_learn` default action `learn`), with a short-window duplicate filter.
//!
//! At line rate an unknown source MAC would otherwise produce one digest per packet until the
//! controller installs its l2_learn entry. A direct-mapped cache remembers the last (MAC, port)
//! pairs reported; the same pair is reported again only after `window_ns`, so a controller that
//! missed one (queue full) still hears about it later.
pub struct LearnFilter {
    slots: Box<[(u64, u64)]>,
    window_ns: u64,
}

const SLOTS: usize = 4096;

impl LearnFilter {
    pub fn new(window_ns: u64) -> Self {
        LearnFilter { slots: vec![(0, 0); SLOTS].into_boxed_slice(), window_ns }
    }

    /// True if (mac, port) should be reported now.
    #[inline]
    pub fn admit(&mut self, mac: u64, port: u16, now: u64) -> bool {
        let key = 1 << 63 | (port as u64) << 48 | (mac & 0xffff_ffff_ffff);
        let idx = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize & (SLOTS - 1);
        let s = &mut self.slots[idx];
        if s.0 == key && now.wrapping_sub(s.1) < self.window_ns {
            return false;
        }
        *s = (key, now);
        true
    }

    pub fn clear(&mut self) {
        self.slots.fill((0, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_only_after_the_window() {
        let mut f = LearnFilter::new(1_000);
        assert!(f.admit(0xaabb, 1, 10));
        assert!(!f.admit(0xaabb, 1, 500));
        assert!(f.admit(0xaabb, 2, 500), "other port is another event");
        assert!(f.admit(0xaabb, 1, 2_000));
        f.clear();
        assert!(f.admit(0xaabb, 1, 2_001));
    }
}
