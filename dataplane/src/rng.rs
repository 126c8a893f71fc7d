//! The data plane's PRNG: xoshiro256++ (fast, well-tested, seedable for reproducible runs).
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub struct Prng {
    inner: Xoshiro256PlusPlus,
}

impl Prng {
    pub fn new(seed: u64) -> Self {
        Prng { inner: Xoshiro256PlusPlus::seed_from_u64(seed) }
    }

    pub fn reseed(&mut self, seed: u64) {
        self.inner = Xoshiro256PlusPlus::seed_from_u64(seed);
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform 32-bit draw (the high half, xoshiro's best bits).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.inner.next_u64() >> 32) as u32
    }

    /// A Bernoulli trial with probability `p / 2^32`; 0 never, `u32::MAX` always (contract).
    #[inline]
    pub fn chance(&mut self, p: u32) -> bool {
        p != 0 && (p == u32::MAX || self.next_u32() < p)
    }

    /// Uniform in `[0, n]` inclusive (Lemire's multiply-shift; the bias is below 2^-64 * n).
    #[inline]
    pub fn up_to(&mut self, n: u64) -> u64 {
        if n == u64::MAX {
            return self.next_u64();
        }
        ((self.next_u64() as u128 * (n as u128 + 1)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_edges_and_rate() {
        let mut r = Prng::new(3);
        assert!((0..1000).all(|_| !r.chance(0)));
        assert!((0..1000).all(|_| r.chance(u32::MAX)));
        let p = (0.1 * 4294967296.0) as u32;
        let n = 200_000;
        let hits = (0..n).filter(|_| r.chance(p)).count() as f64;
        let sigma = (n as f64 * 0.1 * 0.9).sqrt();
        assert!((hits - n as f64 * 0.1).abs() < 4.0 * sigma, "{hits}");
    }

    #[test]
    fn reseed_reproduces() {
        let mut a = Prng::new(1);
        let x: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        a.reseed(1);
        let y: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(x, y);
        assert!((0..1000).all(|_| a.up_to(10) <= 10));
    }
}
