//! The `export` section of the node configuration, as read ([`RawExport`]) and as validated
//! ([`RemoteWriteSettings`]). Absent `export.remote_write` means no export.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::Uri;
use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;
pub use super::section::{ExtraHeaders, RawRetry, RetrySettings};
use super::section::{CheckedSection, Limits, Section};

fn default_batch_size() -> usize {
    1000
}
fn default_queue_batches() -> usize {
    64
}
fn default_flush_interval() -> DurationSetting {
    DurationSetting(Duration::from_secs(15))
}
fn default_timeout() -> DurationSetting {
    DurationSetting(Duration::from_secs(10))
}
fn default_close_after() -> DurationSetting {
    DurationSetting(Duration::from_secs(10))
}

/// The longest `close_after` accepted: a minute waits at most this long past its end before it
/// is exported, and every pending bucket is held in memory until then.
pub const MAX_CLOSE_AFTER: Duration = Duration::from_secs(300);

/// The largest `batch_size` accepted: a request of more samples is refused by most receivers
/// (Mimir and Prometheus cap a request's size).
pub const MAX_BATCH_SIZE: usize = 100_000;
/// The largest `queue_batches` accepted (memory: `queue_batches × batch_size` samples).
pub const MAX_QUEUE_BATCHES: usize = 10_000;

/// Headers the exporter sets itself; a configured header may not replace them.
pub const RESERVED_HEADERS: [&str; 8] = [
    "content-encoding",
    "content-type",
    "content-length",
    "user-agent",
    "x-prometheus-remote-write-version",
    "host",
    "connection",
    "transfer-encoding",
];

/// How the shared checks name this section's keys.
const SECTION: Section = Section {
    name: "export.remote_write",
    url_key: "url",
    url_example: "http://prometheus:9090/api/v1/write",
    reserved_headers: &RESERVED_HEADERS,
    refuse_url: |_, _| None,
};

/// `export:` as read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExport {
    /// Prometheus remote-write 1.0; absent: no export.
    #[serde(default)]
    pub remote_write: Option<RawRemoteWrite>,
    /// OTLP/HTTP export of kept logs; absent: no log export.
    #[serde(default)]
    pub otlp_logs: Option<super::otlp_logs::config::RawOtlpLogs>,
}

/// `export.remote_write:` as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRemoteWrite {
    #[serde(default)]
    pub url: Option<String>,
    /// Extra request headers (`Authorization`, `X-Scope-OrgID`, ...); their values are secrets.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    #[serde(default = "default_queue_batches")]
    pub queue_batches: usize,
    #[serde(default = "default_flush_interval")]
    pub flush_interval: DurationSetting,
    #[serde(default = "default_timeout")]
    pub timeout: DurationSetting,
    /// How long after a minute's end its value is final enough to export (late samples and
    /// peers' handoffs land within it).
    #[serde(default = "default_close_after")]
    pub close_after: DurationSetting,
    #[serde(default)]
    pub retry: RawRetry,
}

/// Validated `export.remote_write`.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteWriteSettings {
    pub url: Uri,
    pub headers: ExtraHeaders,
    /// Samples per request.
    pub batch_size: usize,
    /// Built requests waiting to be sent (the one being sent is not counted).
    pub queue_batches: usize,
    pub flush_interval: Duration,
    /// One request attempt, connection included.
    pub timeout: Duration,
    /// A minute bucket is exported once `now >= its end + close_after`.
    pub close_after: Duration,
    pub retry: RetrySettings,
}

impl RemoteWriteSettings {
    /// Settings for tests: `url`, small batches, a fast flush and fast retries.
    pub fn for_test(url: &str) -> RemoteWriteSettings {
        RemoteWriteSettings {
            url: url.parse().unwrap_or_else(|_| Uri::from_static("http://127.0.0.1:9/api/v1/write")),
            headers: ExtraHeaders::default(),
            batch_size: 100,
            queue_batches: 8,
            flush_interval: Duration::from_millis(50),
            timeout: Duration::from_secs(2),
            close_after: default_close_after().0,
            retry: RetrySettings::for_test(),
        }
    }

    /// How many (metric, entity, minute bucket) may wait to be exported: as many samples as the
    /// queue holds.
    pub fn max_pending_series(&self) -> usize {
        self.batch_size.saturating_mul(self.queue_batches)
    }
}

/// Validates `export`; `None` when there is no export or a problem was reported to `issue`.
pub fn validate(raw: &RawExport, issue: &mut impl FnMut(&str, String)) -> Option<RemoteWriteSettings> {
    let rw = raw.remote_write.as_ref()?;
    let limits = Limits { batch_size: (rw.batch_size, MAX_BATCH_SIZE), queue_batches: (rw.queue_batches, MAX_QUEUE_BATCHES) };
    let intervals = [("flush_interval", rw.flush_interval), ("timeout", rw.timeout)];
    // Checked apart from the section's shared checks: zero is allowed (export as soon as the
    // minute ends), and the bound applies.
    let close_after_ok = rw.close_after.0 <= MAX_CLOSE_AFTER;
    if !close_after_ok {
        issue(
            "export.remote_write.close_after",
            format!("{} is outside 0s..={}", rw.close_after, DurationSetting(MAX_CLOSE_AFTER)),
        );
    }
    let CheckedSection { url, headers, retry } = SECTION.check(rw.url.as_deref(), &rw.headers, limits, &intervals, &rw.retry, issue)?;
    if !close_after_ok {
        return None;
    }
    Some(RemoteWriteSettings {
        url,
        headers,
        batch_size: rw.batch_size,
        queue_batches: rw.queue_batches,
        flush_interval: rw.flush_interval.0,
        timeout: rw.timeout.0,
        close_after: rw.close_after.0,
        retry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::export::section::{checked_headers, parse_url};
    use std::sync::Arc;

    #[test]
    fn each_exporter_refuses_only_the_headers_it_sets_itself() {
        let raw = BTreeMap::from([
            ("X-Prometheus-Remote-Write-Version".to_string(), "2.0".to_string()),
            ("X-Scope-OrgID".to_string(), "tenant".to_string()),
        ]);
        let mut issues = Vec::new();
        let headers = checked_headers("export.remote_write", &raw, &RESERVED_HEADERS, &mut |key, message| {
            issues.push(format!("{key}: {message}"))
        });
        assert_eq!(headers.0.len(), 1, "only the tenant header is kept");
        assert_eq!(
            issues,
            ["export.remote_write.headers.X-Prometheus-Remote-Write-Version: is set by the exporter itself and cannot be configured"]
        );
        let mut issues = Vec::new();
        let reserved = crate::data::export::otlp_logs::config::RESERVED_HEADERS;
        let headers = checked_headers("export.otlp_logs", &raw, &reserved, &mut |key, message| {
            issues.push(format!("{key}: {message}"))
        });
        assert_eq!((headers.0.len(), issues.len()), (2, 0), "the log exporter does not set the remote-write header");
    }

    fn raw(url: &str) -> RawRemoteWrite {
        RawRemoteWrite {
            url: Some(url.into()),
            headers: BTreeMap::new(),
            batch_size: default_batch_size(),
            queue_batches: default_queue_batches(),
            flush_interval: default_flush_interval(),
            timeout: default_timeout(),
            close_after: default_close_after(),
            retry: RawRetry::default(),
        }
    }

    fn check(rw: RawRemoteWrite) -> (Option<RemoteWriteSettings>, Vec<(String, String)>) {
        let mut issues = Vec::new();
        let settings = validate(&RawExport { remote_write: Some(rw), otlp_logs: None }, &mut |k: &str, m: String| issues.push((k.to_string(), m)));
        (settings, issues)
    }

    #[test]
    fn absent_means_no_export() {
        let mut issues = Vec::new();
        assert!(validate(&RawExport::default(), &mut |k: &str, m: String| issues.push((k.to_string(), m))).is_none());
        assert!(issues.is_empty());
    }

    #[test]
    fn defaults_are_valid() {
        let (settings, issues) = check(raw("http://prom:9090/api/v1/write"));
        assert!(issues.is_empty(), "{issues:?}");
        let settings = settings.expect("valid");
        assert_eq!(settings.batch_size, 1000);
        assert_eq!(settings.retry.max_attempts, 5);
        assert_eq!(settings.url.path(), "/api/v1/write");
        assert_eq!(settings.close_after, Duration::from_secs(10));
    }

    #[test]
    fn close_after_may_be_zero_and_at_most_five_minutes() {
        for (seconds, valid) in [(0, true), (300, true), (301, false), (3600, false)] {
            let mut rw = raw("http://prom/api/v1/write");
            rw.close_after = DurationSetting(Duration::from_secs(seconds));
            let (settings, issues) = check(rw);
            assert_eq!(settings.is_some(), valid, "{seconds}s: {issues:?}");
            if valid {
                assert_eq!(settings.map(|s| s.close_after), Some(Duration::from_secs(seconds)));
            } else {
                assert_eq!(issues.len(), 1, "{issues:?}");
                assert_eq!(issues[0].0, "export.remote_write.close_after");
                assert!(issues[0].1.contains("outside 0s..=5m"), "{issues:?}");
            }
        }
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut rw = raw("ftp://user:pw@x/");
        rw.batch_size = 0;
        rw.queue_batches = 0;
        rw.flush_interval = DurationSetting(Duration::ZERO);
        rw.retry.max_backoff = DurationSetting(Duration::from_millis(1));
        rw.retry.max_attempts = 0;
        rw.headers.insert("Content-Type".into(), "text/plain".into());
        rw.headers.insert("bad header".into(), "x".into());
        let (settings, issues) = check(rw);
        assert!(settings.is_none());
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        for key in [
            "export.remote_write.url",
            "export.remote_write.batch_size",
            "export.remote_write.queue_batches",
            "export.remote_write.flush_interval",
            "export.remote_write.retry.max_backoff",
            "export.remote_write.retry.max_attempts",
            "export.remote_write.headers.Content-Type",
            "export.remote_write.headers.bad header",
        ] {
            assert!(keys.contains(&key), "{key} not reported in {issues:?}");
        }
    }

    #[test]
    fn urls_need_http_a_host_and_no_credentials() {
        assert!(parse_url("https://mimir.example/api/v1/push").is_ok());
        assert!(parse_url("http://127.0.0.1:9090/api/v1/write").is_ok());
        assert!(parse_url("prom:9090/api/v1/write").is_err());
        assert!(parse_url("http://u:p@prom/api/v1/write").is_err());
        assert!(parse_url("/api/v1/write").is_err());
        assert!(check(RawRemoteWrite { url: None, ..raw("") }).0.is_none());
    }

    #[test]
    fn the_section_loads_from_a_file_and_its_headers_are_redacted_in_the_config_view() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.yaml");
        let text = "export:\n  remote_write:\n    url: https://mimir.example/api/v1/push\n    headers:\n      \
                    Authorization: Bearer s3cret\n      X-Scope-OrgID: team-a\n    batch_size: 500\n    close_after: 30s\n    retry:\n      max_attempts: 2\n";
        std::fs::write(&path, text).expect("write");
        let sources = crate::config::ConfigSources { uris: vec![format!("file:{}", path.display())], ..Default::default() };
        let env = Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let loaded = crate::config::load(&sources, env).expect("valid");
        let export = loaded.config.export.clone().expect("export configured");
        assert_eq!(export.batch_size, 500);
        assert_eq!(export.retry.max_attempts, 2);
        assert_eq!(export.close_after, Duration::from_secs(30));
        assert_eq!(export.headers.0.len(), 2);
        let view = crate::config::ConfigState::new(loaded).view().to_string();
        assert!(!view.contains("s3cret") && !view.contains("team-a"), "{view}");
        assert!(view.contains("mimir.example"), "the URL is shown");

        std::fs::write(&path, "export:\n  remote_write:\n    urll: http://x/\n").expect("write");
        let env = Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let errors = match crate::config::load(&sources, env) {
            Ok(_) => panic!("an unknown key is refused"),
            Err(errors) => errors.to_string(),
        };
        assert!(errors.contains("urll"), "{errors}");
    }

    #[test]
    fn header_values_never_show_in_debug() {
        let mut rw = raw("http://prom/api/v1/write");
        rw.headers.insert("Authorization".into(), "Bearer s3cret".into());
        let settings = check(rw).0.expect("valid");
        let shown = format!("{settings:?}");
        assert!(shown.contains("authorization"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
