//! `export.otlp_logs`, as read ([`RawOtlpLogs`]) and as validated ([`OtlpLogsSettings`]).
//! Absent means kept logs are not exported.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::Uri;
use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;
use crate::data::export::section::{CheckedSection, ExtraHeaders, Limits, RawRetry, RetrySettings, Section};

fn default_batch_size() -> usize {
    512
}
fn default_max_delay() -> DurationSetting {
    DurationSetting(Duration::from_secs(1))
}
fn default_queue_batches() -> usize {
    64
}
fn default_timeout() -> DurationSetting {
    DurationSetting(Duration::from_secs(10))
}

/// The largest `batch_size` accepted (log records per request).
pub const MAX_BATCH_SIZE: usize = 10_000;
/// The largest `queue_batches` accepted (memory: `queue_batches × batch_size` logs).
pub const MAX_QUEUE_BATCHES: usize = 10_000;

/// Headers the exporter sets itself; a configured header may not replace them.
pub const RESERVED_HEADERS: [&str; 7] =
    ["content-encoding", "content-type", "content-length", "user-agent", "host", "connection", "transfer-encoding"];

/// How the shared checks name this section's keys.
const SECTION: Section = Section {
    name: "export.otlp_logs",
    url_key: "endpoint",
    url_example: "http://collector:4318/v1/logs",
    reserved_headers: &RESERVED_HEADERS,
    refuse_url: refuse_without_path,
};

/// `export.otlp_logs:` as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOtlpLogs {
    /// The OTLP/HTTP logs URL, path included (`http://collector:4318/v1/logs`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Extra request headers (`Authorization`, `X-Scope-OrgID`, ...); their values are secrets.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    #[serde(default = "default_max_delay")]
    pub max_delay: DurationSetting,
    #[serde(default = "default_queue_batches")]
    pub queue_batches: usize,
    #[serde(default = "default_timeout")]
    pub timeout: DurationSetting,
    #[serde(default)]
    pub retry: RawRetry,
}

/// Validated `export.otlp_logs`.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpLogsSettings {
    pub endpoint: Uri,
    pub headers: ExtraHeaders,
    /// Log records per request: a batch is cut as soon as this many wait.
    pub batch_size: usize,
    /// How long a log waits for its batch to fill before a smaller batch is sent.
    pub max_delay: Duration,
    /// Cut batches waiting to be sent (the one being sent is not counted).
    pub queue_batches: usize,
    /// One request attempt, connection included.
    pub timeout: Duration,
    pub retry: RetrySettings,
}

impl OtlpLogsSettings {
    /// Settings for tests: `endpoint`, small batches, a short delay and fast retries.
    pub fn for_test(endpoint: &str) -> OtlpLogsSettings {
        OtlpLogsSettings {
            endpoint: endpoint.parse().unwrap_or_else(|_| Uri::from_static("http://127.0.0.1:9/v1/logs")),
            headers: ExtraHeaders::default(),
            batch_size: 100,
            max_delay: Duration::from_millis(50),
            queue_batches: 8,
            timeout: Duration::from_secs(2),
            retry: RetrySettings::for_test(),
        }
    }
}

/// Validates `export.otlp_logs`; `None` when absent or when a problem was reported to `issue`.
pub fn validate(raw: Option<&RawOtlpLogs>, issue: &mut impl FnMut(&str, String)) -> Option<OtlpLogsSettings> {
    let raw = raw?;
    let limits = Limits { batch_size: (raw.batch_size, MAX_BATCH_SIZE), queue_batches: (raw.queue_batches, MAX_QUEUE_BATCHES) };
    let intervals = [("max_delay", raw.max_delay), ("timeout", raw.timeout)];
    let CheckedSection { url: endpoint, headers, retry } =
        SECTION.check(raw.endpoint.as_deref(), &raw.headers, limits, &intervals, &raw.retry, issue)?;
    Some(OtlpLogsSettings {
        endpoint,
        headers,
        batch_size: raw.batch_size,
        max_delay: raw.max_delay.0,
        queue_batches: raw.queue_batches,
        timeout: raw.timeout.0,
        retry,
    })
}

/// OTLP/HTTP has no default path: the endpoint names the full URL.
fn refuse_without_path(text: &str, endpoint: &Uri) -> Option<String> {
    matches!(endpoint.path(), "" | "/").then(|| {
        format!("{text:?} has no path; OTLP/HTTP logs are posted to a full URL such as http://collector:4318/v1/logs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn raw(endpoint: &str) -> RawOtlpLogs {
        RawOtlpLogs {
            endpoint: Some(endpoint.into()),
            headers: BTreeMap::new(),
            batch_size: default_batch_size(),
            max_delay: default_max_delay(),
            queue_batches: default_queue_batches(),
            timeout: default_timeout(),
            retry: RawRetry::default(),
        }
    }

    fn check(raw: RawOtlpLogs) -> (Option<OtlpLogsSettings>, Vec<(String, String)>) {
        let mut issues = Vec::new();
        let settings = validate(Some(&raw), &mut |k: &str, m: String| issues.push((k.to_string(), m)));
        (settings, issues)
    }

    #[test]
    fn absent_means_no_log_export() {
        let mut issues = Vec::new();
        assert!(validate(None, &mut |k: &str, m: String| issues.push((k.to_string(), m))).is_none());
        assert!(issues.is_empty());
    }

    #[test]
    fn defaults_are_valid() {
        let (settings, issues) = check(raw("http://collector:4318/v1/logs"));
        assert!(issues.is_empty(), "{issues:?}");
        let settings = settings.expect("valid");
        assert_eq!(settings.batch_size, 512);
        assert_eq!(settings.max_delay, Duration::from_secs(1));
        assert_eq!(settings.queue_batches, 64);
        assert_eq!(settings.retry.max_attempts, 5);
        assert_eq!(settings.endpoint.path(), "/v1/logs");
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut bad = raw("ftp://user:pw@x/");
        bad.batch_size = 0;
        bad.queue_batches = MAX_QUEUE_BATCHES + 1;
        bad.max_delay = DurationSetting(Duration::ZERO);
        bad.timeout = DurationSetting(Duration::ZERO);
        bad.retry.max_backoff = DurationSetting(Duration::from_millis(1));
        bad.retry.max_attempts = 0;
        bad.headers.insert("Content-Type".into(), "application/json".into());
        bad.headers.insert("bad header".into(), "x".into());
        let (settings, issues) = check(bad);
        assert!(settings.is_none());
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        for key in [
            "export.otlp_logs.endpoint",
            "export.otlp_logs.batch_size",
            "export.otlp_logs.queue_batches",
            "export.otlp_logs.max_delay",
            "export.otlp_logs.timeout",
            "export.otlp_logs.retry.max_backoff",
            "export.otlp_logs.retry.max_attempts",
            "export.otlp_logs.headers.Content-Type",
            "export.otlp_logs.headers.bad header",
        ] {
            assert!(keys.contains(&key), "{key} not reported in {issues:?}");
        }
    }

    #[test]
    fn the_endpoint_is_a_full_http_url() {
        let message = |endpoint: &str| check(raw(endpoint)).1.first().map(|(_, m)| m.clone()).unwrap_or_default();
        assert!(message("http://collector:4318").contains("no path"), "{}", message("http://collector:4318"));
        assert!(message("ftp://collector/v1/logs").contains("scheme"), "{}", message("ftp://collector/v1/logs"));
        assert!(message("collector:4318/v1/logs").contains("not a URL"), "{}", message("collector:4318/v1/logs"));
        assert!(message("https://u:p@collector/v1/logs").contains("credentials"));
        assert!(check(RawOtlpLogs { endpoint: None, ..raw("") }).1[0].1.contains("is required"));
        assert!(check(raw("https://otlp.example/v1/logs")).0.is_some());
    }

    #[test]
    fn the_section_loads_from_a_file_next_to_remote_write_and_hides_header_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.yaml");
        let text = "export:\n  otlp_logs:\n    endpoint: http://collector:4318/v1/logs\n    headers:\n      \
                    Authorization: Bearer s3cret\n    batch_size: 200\n    max_delay: 250ms\n    retry:\n      max_attempts: 2\n";
        std::fs::write(&path, text).expect("write");
        let sources = crate::config::ConfigSources { uris: vec![format!("file:{}", path.display())], ..Default::default() };
        let env = Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let loaded = crate::config::load(&sources, env).expect("valid");
        assert!(loaded.config.export.is_none(), "no remote write");
        let logs = loaded.config.otlp_logs_export.clone().expect("log export configured");
        assert_eq!(logs.batch_size, 200);
        assert_eq!(logs.max_delay, Duration::from_millis(250));
        assert_eq!(logs.retry.max_attempts, 2);
        assert!(!format!("{logs:?}").contains("s3cret"));
        let view = crate::config::ConfigState::new(loaded).view().to_string();
        assert!(!view.contains("s3cret"), "{view}");

        std::fs::write(&path, "export:\n  otlp_logs:\n    batch_size: 0\n").expect("write");
        let env = Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let errors = match crate::config::load(&sources, env) {
            Ok(_) => panic!("an invalid section is refused"),
            Err(errors) => errors.to_string(),
        };
        assert!(errors.contains("export.otlp_logs.endpoint") && errors.contains("export.otlp_logs.batch_size"), "{errors}");
    }
}
