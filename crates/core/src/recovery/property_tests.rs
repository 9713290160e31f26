//! Recovery plans against the truth, on random lives of a job (plain `#[test]`s over seeds).
//! `CORTEX_PROPERTY_RUNS` sets how many lives each test draws.

mod clocks;
mod seams;

/// A small deterministic generator (xorshift), so a failing seed can be run again.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// How many lives a test draws.
pub fn runs(default: u64) -> u64 {
    std::env::var("CORTEX_PROPERTY_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
