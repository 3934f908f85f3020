//! The `storage` section of the node configuration: retention per granularity, and of kept
//! logs.
//!
//! ```yaml
//! storage:
//!   retention: { minute: 7d, hour: 15d, day: 15d, logs: 3d, alarms: 3d }
//! ```
//!
//! The metric defaults are SkyWalking BanyanDB's (`bydb.yml`: metricsMinute 7 d, metricsHour
//! 15 d, metricsDay 15 d); the log default is SkyWalking's record TTL (`recordDataTTL`, 3 d).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;
use crate::data::metrics::Granularity;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn default_minute() -> DurationSetting {
    DurationSetting(DAY * 7)
}
fn default_hour() -> DurationSetting {
    DurationSetting(DAY * 15)
}
fn default_day() -> DurationSetting {
    DurationSetting(DAY * 15)
}
fn default_logs() -> DurationSetting {
    DurationSetting(crate::data::logs::records::DEFAULT_RETENTION)
}
fn default_alarms() -> DurationSetting {
    DurationSetting(crate::data::alarm_records::store::DEFAULT_RETENTION)
}

/// `storage` as read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStorage {
    #[serde(default)]
    pub retention: RawRetention,
}

/// `storage.retention` as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetention {
    #[serde(default = "default_minute")]
    pub minute: DurationSetting,
    #[serde(default = "default_hour")]
    pub hour: DurationSetting,
    #[serde(default = "default_day")]
    pub day: DurationSetting,
    /// Kept logs (`crate::data::logs::records`).
    #[serde(default = "default_logs")]
    pub logs: DurationSetting,
    /// Alarm records (`crate::data::alarm_records`), by start time.
    #[serde(default = "default_alarms")]
    pub alarms: DurationSetting,
}

impl Default for RawRetention {
    fn default() -> Self {
        RawRetention { minute: default_minute(), hour: default_hour(), day: default_day(), logs: default_logs(), alarms: default_alarms() }
    }
}

/// How long cells of each granularity are kept, and kept logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub minute: Duration,
    pub hour: Duration,
    pub day: Duration,
    pub logs: Duration,
    pub alarms: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { minute: default_minute().0, hour: default_hour().0, day: default_day().0, logs: default_logs().0, alarms: default_alarms().0 }
    }
}

impl Retention {
    pub fn of(&self, granularity: Granularity) -> Duration {
        match granularity {
            Granularity::Minute => self.minute,
            Granularity::Hour => self.hour,
            Granularity::Day => self.day,
        }
    }

    /// The retention of `granularity` in milliseconds (saturating).
    pub fn millis(&self, granularity: Granularity) -> i64 {
        i64::try_from(self.of(granularity).as_millis()).unwrap_or(i64::MAX)
    }
}

impl RawStorage {
    /// The validated retention; a zero duration is an issue (`storage.retention.<granularity>`).
    pub fn validate(&self, issue: &mut impl FnMut(&str, String)) -> Retention {
        let r = &self.retention;
        for (key, value) in [
            ("storage.retention.minute", r.minute),
            ("storage.retention.hour", r.hour),
            ("storage.retention.day", r.day),
            ("storage.retention.logs", r.logs),
            ("storage.retention.alarms", r.alarms),
        ] {
            if value.0.is_zero() {
                issue(key, "must be greater than zero".into());
            }
        }
        Retention { minute: r.minute.0, hour: r.hour.0, day: r.day.0, logs: r.logs.0, alarms: r.alarms.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_banyandb_and_days_parse() {
        let raw: RawStorage = serde_json::from_str(r#"{"retention": {"minute": "2d"}}"#).expect("parse");
        let mut issues = Vec::new();
        let retention = raw.validate(&mut |key, message| issues.push(format!("{key}: {message}")));
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(retention, Retention { minute: DAY * 2, hour: DAY * 15, day: DAY * 15, logs: DAY * 3, alarms: DAY * 3 });
        assert_eq!(RawStorage::default().validate(&mut |_, _| {}), Retention::default());

        let zero: RawStorage = serde_json::from_str(r#"{"retention": {"hour": "0s"}}"#).expect("parse");
        let mut issues = Vec::new();
        zero.validate(&mut |key, _| issues.push(key.to_string()));
        assert_eq!(issues, vec!["storage.retention.hour".to_string()]);
        let logs: RawStorage = serde_json::from_str(r#"{"retention": {"logs": "12h"}}"#).expect("parse");
        assert_eq!(logs.validate(&mut |_, _| {}).logs, Duration::from_secs(12 * 3600));
        let mut issues = Vec::new();
        let zero_logs: RawStorage = serde_json::from_str(r#"{"retention": {"logs": "0s"}}"#).expect("parse");
        zero_logs.validate(&mut |key, _| issues.push(key.to_string()));
        assert_eq!(issues, vec!["storage.retention.logs".to_string()]);
        let alarms: RawStorage = serde_json::from_str(r#"{"retention": {"alarms": "7d"}}"#).expect("parse");
        assert_eq!(alarms.validate(&mut |_, _| {}).alarms, DAY * 7);
        let mut issues = Vec::new();
        let zero_alarms: RawStorage = serde_json::from_str(r#"{"retention": {"alarms": "0s"}}"#).expect("parse");
        zero_alarms.validate(&mut |key, _| issues.push(key.to_string()));
        assert_eq!(issues, vec!["storage.retention.alarms".to_string()]);
        assert!(serde_json::from_str::<RawStorage>(r#"{"retention": {"week": "1d"}}"#).is_err());
    }

    #[test]
    fn the_node_configuration_carries_the_storage_section() {
        use crate::config::{ConfigErrors, ConfigSources, load};
        let env = || -> std::sync::Arc<dyn hotrule_confmap::Env> {
            std::sync::Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()))
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hotrule.yaml");
        std::fs::write(&path, "storage:\n  retention:\n    minute: 2d\n    day: 30d\n").expect("write");
        let sources = ConfigSources { uris: vec![format!("file:{}", path.display())], ..ConfigSources::default() };
        let loaded = load(&sources, env()).expect("valid");
        assert_eq!(loaded.config.retention, Retention { minute: DAY * 2, hour: DAY * 15, day: DAY * 30, logs: DAY * 3, alarms: DAY * 3 });
        assert_eq!(load(&ConfigSources::default(), env()).expect("defaults").config.retention, Retention::default());

        std::fs::write(&path, "storage:\n  retention:\n    minute: 0s\n").expect("write");
        match load(&sources, env()) {
            Err(ConfigErrors(issues)) => assert!(issues.iter().any(|i| i.key == "storage.retention.minute"), "{issues:?}"),
            Ok(_) => panic!("a zero retention must be refused"),
        }
    }
}
