//! The `dispatch` section of the node configuration: queue bounds, evaluation threads (for
//! metric batches and for log batches) and the drain bound, as read ([`RawDispatch`]) and as
//! validated ([`DispatchSettings`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

fn default_queue_batches() -> usize {
    1024
}
fn default_log_queue_batches() -> usize {
    1024
}
fn default_log_workers() -> usize {
    2
}
fn default_drain_timeout() -> DurationSetting {
    DurationSetting(crate::control::runtime::DEFAULT_DRAIN_TIMEOUT)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDispatch {
    /// Batches waiting for evaluation before receivers are answered 429 (queue_full).
    #[serde(default = "default_queue_batches")]
    pub queue_batches: usize,
    /// Evaluation threads; 0: one per available core.
    #[serde(default)]
    pub workers: usize,
    /// How long a structural apply, an inactivate or a peer's pause waits for the evaluations
    /// of the old content to finish.
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: DurationSetting,
    /// Log batches waiting for LAL evaluation before log receivers are answered 429.
    #[serde(default = "default_log_queue_batches")]
    pub log_queue_batches: usize,
    /// LAL evaluation threads (see `dispatch::lal` for why two).
    #[serde(default = "default_log_workers")]
    pub log_workers: usize,
}

impl Default for RawDispatch {
    fn default() -> Self {
        RawDispatch {
            queue_batches: default_queue_batches(),
            workers: 0,
            drain_timeout: default_drain_timeout(),
            log_queue_batches: default_log_queue_batches(),
            log_workers: default_log_workers(),
        }
    }
}

/// Validated dispatch settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchSettings {
    pub queue_batches: usize,
    /// Resolved: at least 1.
    pub workers: usize,
    pub drain_timeout: Duration,
    pub log_queue_batches: usize,
    /// At least 1.
    pub log_workers: usize,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings::from_valid(&RawDispatch::default())
    }
}

impl DispatchSettings {
    /// Settings for tests: a small queue, two threads, a 10 s drain bound (tests that hold a
    /// batch in flight must not see the bound pass on a loaded machine).
    pub fn for_test() -> DispatchSettings {
        DispatchSettings {
            queue_batches: 64,
            workers: 2,
            drain_timeout: Duration::from_secs(10),
            log_queue_batches: 64,
            log_workers: 2,
        }
    }

    fn from_valid(raw: &RawDispatch) -> DispatchSettings {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        DispatchSettings {
            queue_batches: raw.queue_batches.max(1),
            workers: if raw.workers == 0 { cores } else { raw.workers },
            drain_timeout: raw.drain_timeout.0,
            log_queue_batches: raw.log_queue_batches.max(1),
            log_workers: raw.log_workers.max(1),
        }
    }
}

impl RawDispatch {
    /// Reports every problem through `issue` and returns the settings (meaningful only when
    /// nothing was reported).
    pub fn validate(&self, issue: &mut impl FnMut(&str, String)) -> DispatchSettings {
        if self.queue_batches == 0 {
            issue("dispatch.queue_batches", "must be at least 1".into());
        }
        if self.workers > 1024 {
            issue("dispatch.workers", format!("{} is more than 1024 threads", self.workers));
        }
        if self.drain_timeout.0.is_zero() {
            issue("dispatch.drain_timeout", "must be greater than zero".into());
        }
        if self.log_queue_batches == 0 {
            issue("dispatch.log_queue_batches", "must be at least 1".into());
        }
        if self.log_workers == 0 || self.log_workers > 64 {
            issue("dispatch.log_workers", format!("{} is not between 1 and 64", self.log_workers));
        }
        DispatchSettings::from_valid(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve_and_bad_values_are_reported() {
        let mut issues = Vec::new();
        let settings = RawDispatch::default().validate(&mut |k: &str, m| issues.push((k.to_string(), m)));
        assert!(issues.is_empty());
        assert_eq!(settings.queue_batches, 1024);
        assert!(settings.workers >= 1);
        assert_eq!(settings.drain_timeout, Duration::from_secs(5));
        assert_eq!((settings.log_queue_batches, settings.log_workers), (1024, 2));
        let raw = RawDispatch {
            queue_batches: 0,
            workers: 5000,
            drain_timeout: DurationSetting(Duration::ZERO),
            log_queue_batches: 0,
            log_workers: 0,
        };
        raw.validate(&mut |k: &str, m| issues.push((k.to_string(), m)));
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["dispatch.queue_batches", "dispatch.workers", "dispatch.drain_timeout", "dispatch.log_queue_batches", "dispatch.log_workers"]
        );
    }

    #[test]
    fn the_section_loads_from_a_config_source_and_an_unknown_key_is_reported() {
        use crate::config::{ConfigSources, load};
        let env: std::sync::Arc<dyn hotrule_confmap::Env> = std::sync::Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let sources = |uri: &str| ConfigSources { uris: vec![uri.to_string()], ..ConfigSources::default() };
        let loaded = load(&sources("yaml:dispatch::queue_batches: 8"), env.clone()).expect("valid");
        assert_eq!(loaded.config.dispatch.queue_batches, 8);
        assert_eq!(loaded.config.dispatch.drain_timeout, Duration::from_secs(5));
        let loaded = load(&sources("yaml:dispatch::drain_timeout: 250ms"), env.clone()).expect("valid");
        assert_eq!(loaded.config.dispatch.drain_timeout, Duration::from_millis(250));
        let Err(errors) = load(&sources("yaml:dispatch::queue_batch: 8"), env) else { panic!("unknown key accepted") };
        assert_eq!(errors.0[0].key, "dispatch.queue_batch");
    }
}
