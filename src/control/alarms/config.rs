//! The `alarms` section of the node configuration, as read ([`RawAlarms`]) and as validated
//! ([`AlarmsConfig`]).
//!
//! - `settings_file`: SkyWalking's `alarm-settings.yml` (default `./config/alarm-settings.yml`;
//!   a missing default file means no alarm rules, a missing file named in the config is an
//!   error). It is read and validated when the node starts; an invalid file stops the start with
//!   the rule and the reason.
//! - `check_interval`: unset, rules are checked as SkyWalking's `AlarmCore` does, once a minute
//!   after second 15. A duration checks that often instead (each check is one step of the state
//!   machine): for tests and demos that cannot wait a minute per step, never for production.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

pub fn default_settings_file() -> PathBuf {
    PathBuf::from("./config/alarm-settings.yml")
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlarms {
    /// `alarm-settings.yml` (default `./config/alarm-settings.yml`).
    #[serde(default)]
    pub settings_file: Option<PathBuf>,
    /// Check every this long instead of once a minute after second 15 (tests and demos).
    #[serde(default)]
    pub check_interval: Option<DurationSetting>,
}

/// Validated alarm settings of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmsConfig {
    pub settings_file: PathBuf,
    /// Whether the file was named (then it must exist).
    pub settings_file_named: bool,
    pub check_interval: Option<Duration>,
}

impl Default for AlarmsConfig {
    fn default() -> Self {
        AlarmsConfig { settings_file: default_settings_file(), settings_file_named: false, check_interval: None }
    }
}

impl RawAlarms {
    pub fn validate(&self, issue: &mut impl FnMut(&str, String)) -> AlarmsConfig {
        if let Some(interval) = &self.check_interval
            && interval.0 < Duration::from_millis(100)
        {
            issue("alarms.check_interval", format!("{interval} is under 100ms"));
        }
        AlarmsConfig {
            settings_file: self.settings_file.clone().unwrap_or_else(default_settings_file),
            settings_file_named: self.settings_file.is_some(),
            check_interval: self.check_interval.as_ref().map(|d| d.0),
        }
    }
}
