//! Sampler state, owned by the caller and passed into every run: the `rateLimit` counters per
//! rule and sampler id, and the random source of `possibility`.
//!
//! SkyWalking resets every rate-limit counter on a fixed-rate 60 s timer started with the first
//! sampler; here the window starts at the first `rateLimit` call's `now_ms` and advances in whole
//! 60 s steps of the caller's clock, so the behaviour is the same without a timer thread.

use std::collections::HashMap;

/// The rate-limit window.
pub const WINDOW_MS: i64 = 60_000;

#[derive(Debug, Clone, Copy, Default)]
struct Limiter {
    count: i64,
}

/// Sampler state for a set of LAL files (rule keys are unique across them).
#[derive(Debug, Clone)]
pub struct LalState {
    window_start_ms: Option<i64>,
    /// rule key -> sampler id -> counter.
    limiters: HashMap<String, HashMap<String, Limiter>>,
    rng: u64,
}

impl Default for LalState {
    fn default() -> LalState {
        LalState::with_seed(0x9E37_79B9_7F4A_7C15)
    }
}

impl LalState {
    /// A state whose `possibility` sampler draws from a generator seeded with `seed`.
    pub fn with_seed(seed: u64) -> LalState {
        LalState {
            window_start_ms: None,
            limiters: HashMap::new(),
            rng: seed | 1,
        }
    }

    /// Drops the counters of rules that no longer exist (after a rule file changed).
    pub fn retain_rules(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.limiters.retain(|rule, _| keep(rule));
    }

    /// `rateLimit(id) { rpm n }`: whether this log is within the id's budget for the window.
    /// Each call sets the limit (the latest `rpm` wins), then `count++ < rpm` keeps.
    pub(crate) fn rate_limit(&mut self, rule: &str, id: &str, rpm: i64, now_ms: i64) -> bool {
        match self.window_start_ms {
            None => self.window_start_ms = Some(now_ms),
            Some(start) if now_ms.saturating_sub(start) >= WINDOW_MS => {
                let windows = now_ms.saturating_sub(start) / WINDOW_MS;
                self.window_start_ms = Some(start.saturating_add(windows * WINDOW_MS));
                for ids in self.limiters.values_mut() {
                    ids.values_mut().for_each(|limiter| limiter.count = 0);
                }
            }
            Some(_) => {}
        }
        let ids = match self.limiters.get_mut(rule) {
            Some(ids) => ids,
            None => self.limiters.entry(rule.to_owned()).or_default(),
        };
        let limiter = match ids.get_mut(id) {
            Some(limiter) => limiter,
            None => ids.entry(id.to_owned()).or_default(),
        };
        let kept = limiter.count < rpm;
        limiter.count = limiter.count.saturating_add(1);
        kept
    }

    /// `possibility(percent) {}`: keeps when a uniform draw from 0..100 is below `percent`.
    pub(crate) fn possibility(&mut self, percent: i64) -> bool {
        // xorshift64*: deterministic for a given seed, no global RNG.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let draw = (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % 100;
        (draw as i64) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_counts_per_rule_and_id_and_resets_each_window() {
        let mut state = LalState::default();
        let t0 = 1_000_000;
        assert!(state.rate_limit("r", "a", 2, t0));
        assert!(state.rate_limit("r", "a", 2, t0 + 1));
        assert!(!state.rate_limit("r", "a", 2, t0 + 2));
        // Another id and another rule have their own budgets.
        assert!(state.rate_limit("r", "b", 2, t0 + 3));
        assert!(state.rate_limit("other", "a", 2, t0 + 3));
        // The window is fixed from the first call, not a minute boundary.
        assert!(!state.rate_limit("r", "a", 2, t0 + WINDOW_MS - 1));
        assert!(state.rate_limit("r", "a", 2, t0 + WINDOW_MS));
        // The latest rpm wins.
        assert!(state.rate_limit("r", "a", 5, t0 + WINDOW_MS + 1));
        assert!(state.rate_limit("r", "a", 5, t0 + WINDOW_MS + 2));
    }

    #[test]
    fn possibility_keeps_about_the_share_asked_for() {
        let mut state = LalState::with_seed(7);
        let kept = (0..10_000).filter(|_| state.possibility(30)).count();
        assert!((2_500..3_500).contains(&kept), "{kept}");
        assert_eq!((0..100).filter(|_| state.possibility(0)).count(), 0);
        assert_eq!((0..100).filter(|_| state.possibility(100)).count(), 100);
    }
}
