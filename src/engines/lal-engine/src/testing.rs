//! Test support for this crate's unit and integration tests: a small deterministic generator
//! (xorshift), so generated cases are the same on every run.

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        // Empty `items` are a test's mistake: an empty pick, not a panic.
        let at = (self.next() % items.len().max(1) as u64) as usize;
        items.get(at).copied().unwrap_or_default()
    }
}
