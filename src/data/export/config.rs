//! The `export` section of the node configuration, as read ([`RawExport`]) and as validated
//! ([`RemoteWriteSettings`]). Absent `export.remote_write` means no export.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Uri};
use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

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
fn default_initial_backoff() -> DurationSetting {
    DurationSetting(Duration::from_millis(100))
}
fn default_max_backoff() -> DurationSetting {
    DurationSetting(Duration::from_secs(5))
}
fn default_max_attempts() -> u32 {
    5
}

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
    #[serde(default)]
    pub retry: RawRetry,
}

/// `export.remote_write.retry:` as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    #[serde(default = "default_initial_backoff")]
    pub initial_backoff: DurationSetting,
    #[serde(default = "default_max_backoff")]
    pub max_backoff: DurationSetting,
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
}

impl Default for RawRetry {
    fn default() -> Self {
        RawRetry {
            initial_backoff: default_initial_backoff(),
            max_backoff: default_max_backoff(),
            max_attempts: default_max_attempts(),
        }
    }
}

/// Extra request headers. Their `Debug` shows names only: values are credentials.
#[derive(Clone, PartialEq, Default)]
pub struct ExtraHeaders(pub Vec<(HeaderName, HeaderValue)>);

impl fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(name, _)| format!("{name}: [REDACTED]"))).finish()
    }
}

/// How a failed batch is retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrySettings {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
}

impl RetrySettings {
    /// Fast retries for tests: 10 ms doubling up to 100 ms, three attempts.
    pub fn for_test() -> RetrySettings {
        RetrySettings { initial_backoff: Duration::from_millis(10), max_backoff: Duration::from_millis(100), max_attempts: 3 }
    }
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
            retry: RetrySettings::for_test(),
        }
    }

    /// How many series may wait for the next flush: as many samples as the queue holds.
    pub fn max_pending_series(&self) -> usize {
        self.batch_size.saturating_mul(self.queue_batches)
    }
}

/// Validates `export`; `None` when there is no export or a problem was reported to `issue`.
pub fn validate(raw: &RawExport, issue: &mut impl FnMut(&str, String)) -> Option<RemoteWriteSettings> {
    let rw = raw.remote_write.as_ref()?;
    let limits = Limits { batch_size: (rw.batch_size, MAX_BATCH_SIZE), queue_batches: (rw.queue_batches, MAX_QUEUE_BATCHES) };
    let intervals = [("flush_interval", rw.flush_interval), ("timeout", rw.timeout)];
    let CheckedSection { url, headers, retry } = SECTION.check(rw.url.as_deref(), &rw.headers, limits, &intervals, &rw.retry, issue)?;
    Some(RemoteWriteSettings {
        url,
        headers,
        batch_size: rw.batch_size,
        queue_batches: rw.queue_batches,
        flush_interval: rw.flush_interval.0,
        timeout: rw.timeout.0,
        retry,
    })
}

/// The checks every exporter's section shares: its receiver's URL, extra headers, sizes,
/// intervals and retry, each problem reported under its `{name}.…` key.
pub(crate) struct Section {
    /// `export.remote_write`, `export.otlp_logs`.
    pub name: &'static str,
    /// The key of the receiver's URL within the section, and an example of one.
    pub url_key: &'static str,
    pub url_example: &'static str,
    /// Headers the exporter sets itself; a configured header may not replace them.
    pub reserved_headers: &'static [&'static str],
    /// The exporter's own rule on a parsed URL (as written, as parsed): the message when it
    /// refuses it.
    pub refuse_url: fn(&str, &Uri) -> Option<String>,
}

/// What [`Section::check`] validated.
pub(crate) struct CheckedSection {
    pub url: Uri,
    pub headers: ExtraHeaders,
    pub retry: RetrySettings,
}

impl Section {
    /// Checks the section's values, reporting every problem to `issue`; `None` when one was
    /// reported. `intervals` are the durations that must be greater than zero, by key.
    pub fn check(
        &self,
        url: Option<&str>,
        headers: &BTreeMap<String, String>,
        limits: Limits,
        intervals: &[(&str, DurationSetting)],
        retry: &RawRetry,
        issue: &mut impl FnMut(&str, String),
    ) -> Option<CheckedSection> {
        let mut ok = true;
        let mut fail = |key: &str, message: String| {
            ok = false;
            issue(key, message);
        };
        let url = match url.map(str::trim) {
            None | Some("") => Err(format!("is required (e.g. {})", self.url_example)),
            Some(text) => parse_url(text).map_err(|reason| format!("{text:?}: {reason}")).and_then(|url| match (self.refuse_url)(text, &url) {
                Some(message) => Err(message),
                None => Ok(url),
            }),
        };
        let url = url.map_err(|message| fail(&format!("{}.{}", self.name, self.url_key), message)).ok();
        let headers = checked_headers(self.name, headers, self.reserved_headers, &mut fail);
        let retry = checked_limits(self.name, &limits, intervals, retry, &mut fail);
        let url = url?;
        ok.then_some(CheckedSection { url, headers, retry })
    }
}

/// An exporter's batch and queue sizes, each with its largest accepted value.
pub(crate) struct Limits {
    pub batch_size: (usize, usize),
    pub queue_batches: (usize, usize),
}

/// The extra request headers under `{section}.headers`: valid names and values, none of the
/// `reserved` ones the exporter sets itself; every bad one is reported to `fail` and left out.
fn checked_headers(
    section: &str,
    raw: &BTreeMap<String, String>,
    reserved: &[&str],
    fail: &mut impl FnMut(&str, String),
) -> ExtraHeaders {
    let mut headers = Vec::new();
    for (name, value) in raw {
        let key = format!("{section}.headers.{name}");
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            fail(&key, "is not a valid HTTP header name".into());
            continue;
        };
        if reserved.contains(&header.as_str()) {
            fail(&key, "is set by the exporter itself and cannot be configured".into());
            continue;
        }
        match HeaderValue::from_str(value) {
            Ok(mut header_value) => {
                header_value.set_sensitive(true);
                headers.push((header, header_value));
            }
            Err(_) => fail(&key, "the value is not a valid HTTP header value".into()),
        }
    }
    ExtraHeaders(headers)
}

/// Checks the sizes, intervals and retry, reporting each problem under its `{section}.…` key,
/// and returns the retry settings.
fn checked_limits(
    section: &str,
    limits: &Limits,
    intervals: &[(&str, DurationSetting)],
    retry: &RawRetry,
    fail: &mut impl FnMut(&str, String),
) -> RetrySettings {
    for (name, (value, max)) in [("batch_size", limits.batch_size), ("queue_batches", limits.queue_batches)] {
        if !(1..=max).contains(&value) {
            fail(&format!("{section}.{name}"), format!("{value} is outside 1..={max}"));
        }
    }
    for (name, value) in intervals.iter().copied().chain([("retry.initial_backoff", retry.initial_backoff)]) {
        if value.0.is_zero() {
            fail(&format!("{section}.{name}"), "must be greater than zero".into());
        }
    }
    if retry.max_backoff.0 < retry.initial_backoff.0 {
        fail(&format!("{section}.retry.max_backoff"), "must be at least retry.initial_backoff".into());
    }
    if retry.max_attempts == 0 {
        fail(&format!("{section}.retry.max_attempts"), "must be at least 1 (the first attempt counts)".into());
    }
    RetrySettings {
        initial_backoff: retry.initial_backoff.0,
        max_backoff: retry.max_backoff.0,
        max_attempts: retry.max_attempts,
    }
}

/// An `http://` or `https://` URL with a host and no credentials (those go in `headers`).
pub(crate) fn parse_url(text: &str) -> Result<Uri, String> {
    let url: Uri = text.parse().map_err(|e| format!("not a URL: {e}"))?;
    match url.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err("the scheme must be http or https".into()),
    }
    let Some(authority) = url.authority() else { return Err("has no host".into()) };
    if authority.as_str().contains('@') {
        return Err("credentials in the URL are refused; set an Authorization header in headers".into());
    }
    if authority.host().is_empty() {
        return Err("has no host".into());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
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
                    Authorization: Bearer s3cret\n      X-Scope-OrgID: team-a\n    batch_size: 500\n    retry:\n      max_attempts: 2\n";
        std::fs::write(&path, text).expect("write");
        let sources = crate::config::ConfigSources { uris: vec![format!("file:{}", path.display())], ..Default::default() };
        let env = Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new()));
        let loaded = crate::config::load(&sources, env).expect("valid");
        let export = loaded.config.export.clone().expect("export configured");
        assert_eq!(export.batch_size, 500);
        assert_eq!(export.retry.max_attempts, 2);
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
