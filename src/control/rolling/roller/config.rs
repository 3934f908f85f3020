//! The `rolling` section of the node configuration, as read ([`RawRolling`]) and as validated
//! ([`RollerSettings`]). The per-roll settings (step timeout, health window, unreachable tries)
//! come with each start request; their defaults live in `rolling` (`RollRecord::
//! DEFAULT_STEP_TIMEOUT_MS`, `HealthSettings::DEFAULT_WINDOW_MS`, `DEFAULT_UNREACHABLE_TRIES`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

/// 5 s: a healthy step takes the health window (30 s by default) plus at most one tick.
pub fn default_tick() -> Duration {
    Duration::from_secs(5)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRolling {
    /// How often the main's roll worker judges every roll in progress, and every node
    /// republishes its roll health. An unreachable node is skipped after
    /// `unreachable_tries` ticks.
    #[serde(default = "raw_default_tick")]
    pub tick: DurationSetting,
}

fn raw_default_tick() -> DurationSetting {
    DurationSetting(default_tick())
}

impl Default for RawRolling {
    fn default() -> Self {
        RawRolling { tick: raw_default_tick() }
    }
}

/// Validated rolling settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollerSettings {
    pub tick: Duration,
}

impl Default for RollerSettings {
    fn default() -> Self {
        RollerSettings { tick: default_tick() }
    }
}

impl RollerSettings {
    /// Settings for tests: a 100 ms tick.
    pub fn for_test() -> RollerSettings {
        RollerSettings { tick: Duration::from_millis(100) }
    }
}

impl RawRolling {
    /// Reports every problem through `issue` and returns the settings (meaningful only when
    /// nothing was reported).
    pub fn validate(&self, issue: &mut impl FnMut(&str, String)) -> RollerSettings {
        if self.tick.0 < Duration::from_millis(10) {
            issue("rolling.tick", format!("{} is under 10ms", self.tick));
        }
        RollerSettings { tick: self.tick.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_tick_is_five_seconds_and_a_tiny_one_is_refused() {
        let mut issues = Vec::new();
        let settings = RawRolling::default().validate(&mut |k: &str, m| issues.push((k.to_string(), m)));
        assert!(issues.is_empty());
        assert_eq!(settings, RollerSettings { tick: Duration::from_secs(5) });
        RawRolling { tick: DurationSetting(Duration::ZERO) }.validate(&mut |k: &str, m| issues.push((k.to_string(), m)));
        assert_eq!(issues.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["rolling.tick"]);
    }

    #[test]
    fn the_section_loads_from_a_config_source_and_an_unknown_key_is_reported() {
        use crate::config::{ConfigSources, load};
        let env: std::sync::Arc<dyn hotrule_confmap::Env> =
            std::sync::Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let sources = |uri: &str| ConfigSources { uris: vec![uri.to_string()], ..ConfigSources::default() };
        let loaded = load(&sources("yaml:rolling::tick: 2s"), env.clone()).expect("valid");
        assert_eq!(loaded.config.rolling.tick, Duration::from_secs(2));
        let loaded = load(&sources("yaml:dispatch::workers: 1"), env.clone()).expect("valid");
        assert_eq!(loaded.config.rolling.tick, Duration::from_secs(5));
        let Err(errors) = load(&sources("yaml:rolling::ticks: 2s"), env) else { panic!("unknown key accepted") };
        assert_eq!(errors.0[0].key, "rolling.ticks");
    }
}
