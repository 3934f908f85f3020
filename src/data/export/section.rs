//! What every exporter's config section shares: the receiver's URL, extra headers, batch and
//! queue sizes, intervals and retry, each checked the same way and each problem reported under
//! the section's own `{name}.…` key. `config` (remote-write, and the `export:` section that holds
//! both) and `otlp_logs::config` use it; neither imports the other.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Uri};
use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

fn default_initial_backoff() -> DurationSetting {
    DurationSetting(Duration::from_millis(100))
}
fn default_max_backoff() -> DurationSetting {
    DurationSetting(Duration::from_secs(5))
}
fn default_max_attempts() -> u32 {
    5
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
pub(crate) fn checked_headers(
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

