//! Where notifications go and how hard hotrule tries: a validated [`HookTarget`] per configured
//! hook, and the [`DeliverySettings`] every hook shares. The YAML of `alarm-settings.yml`'s
//! `hooks:` section is read elsewhere; it builds these through [`HookTarget::webhook`] and
//! [`HookTarget::alertmanager`], which check what they are given.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Uri};

/// Why a hook's configuration is not usable.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TargetError {
    #[error("hook {hook}: url {url:?} is not an absolute http(s) URL")]
    BadUrl { hook: String, url: String },
    #[error("hook {hook}: header {name:?} is not a valid HTTP header")]
    BadHeader { hook: String, name: String },
    #[error("hook {hook}: no urls")]
    NoUrls { hook: String },
    #[error("hook {hook} is configured twice")]
    Duplicate { hook: String },
    #[error("hook id {hook:?} is not `type.name`")]
    BadId { hook: String },
}

/// What a hook speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookKind {
    /// SkyWalking's webhook: firing messages to `urls`, recoveries to `recovery-urls`.
    Webhook,
    /// Prometheus Alertmanager's API v2 (`POST /api/v2/alerts`): firing and resolved alerts
    /// to `urls`.
    Alertmanager,
}

/// The two kinds of notification, as the `kind` label of `hotrule_alarm_hook_sent_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoticeKind {
    Firing,
    Recovery,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Firing => "firing",
            NoticeKind::Recovery => "recovery",
        }
    }
}

/// One configured hook, validated.
#[derive(Debug, Clone)]
pub struct HookTarget {
    /// `type.name`, as rules name it (`webhook.default`, `alertmanager.team-a`).
    pub id: String,
    pub kind: HookKind,
    pub urls: Vec<Uri>,
    /// Webhook only: where recoveries go; none means no recovery is sent (as SkyWalking).
    pub recovery_urls: Vec<Uri>,
    /// Sent with every request, after `Content-Type`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Alertmanager only: the `generatorURL` of every alert (a link back to hotrule).
    pub generator_url: Option<String>,
    /// Alertmanager only: a firing alert carries `endsAt = startTime + this`, so Alertmanager
    /// keeps it active until the next repeat even when repeats are further apart than its
    /// `resolve_timeout`. None: no `endsAt` while firing (`resolve_timeout` applies).
    pub firing_valid_for: Option<Duration>,
}

/// The path of Alertmanager's API v2 alerts endpoint.
pub const ALERTMANAGER_ALERTS_PATH: &str = "/api/v2/alerts";

impl HookTarget {
    /// A SkyWalking webhook hook: `id` is `webhook.<name>`.
    pub fn webhook(id: &str, urls: &[&str], recovery_urls: &[&str], headers: &[(&str, &str)]) -> Result<HookTarget, TargetError> {
        check_id(id)?;
        Ok(HookTarget {
            id: id.to_string(),
            kind: HookKind::Webhook,
            urls: parse_urls(id, urls)?,
            recovery_urls: parse_urls(id, recovery_urls)?,
            headers: parse_headers(id, headers)?,
            generator_url: None,
            firing_valid_for: None,
        })
    }

    /// An Alertmanager hook. Each url is an Alertmanager's address (`http://am:9093`); alerts go
    /// to its `/api/v2/alerts` (a url that already ends with that path is taken as is). Several
    /// urls are the members of one Alertmanager cluster: each gets every alert, as Prometheus
    /// does.
    pub fn alertmanager(id: &str, urls: &[&str], headers: &[(&str, &str)]) -> Result<HookTarget, TargetError> {
        check_id(id)?;
        if urls.is_empty() {
            return Err(TargetError::NoUrls { hook: id.to_string() });
        }
        let full: Vec<String> = urls
            .iter()
            .map(|url| {
                let trimmed = url.trim_end_matches('/');
                if trimmed.ends_with(ALERTMANAGER_ALERTS_PATH) { trimmed.to_string() } else { format!("{trimmed}{ALERTMANAGER_ALERTS_PATH}") }
            })
            .collect();
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        Ok(HookTarget {
            id: id.to_string(),
            kind: HookKind::Alertmanager,
            urls: parse_urls(id, &full)?,
            recovery_urls: Vec::new(),
            headers: parse_headers(id, headers)?,
            generator_url: None,
            firing_valid_for: None,
        })
    }

    /// Where notices of `kind` go.
    pub fn urls_for(&self, kind: NoticeKind) -> &[Uri] {
        match (self.kind, kind) {
            (HookKind::Webhook, NoticeKind::Recovery) => &self.recovery_urls,
            _ => &self.urls,
        }
    }
}

fn check_id(id: &str) -> Result<(), TargetError> {
    match id.split_once('.') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(TargetError::BadId { hook: id.to_string() }),
    }
}

fn parse_urls(hook: &str, urls: &[&str]) -> Result<Vec<Uri>, TargetError> {
    urls.iter()
        .map(|url| {
            let bad = || TargetError::BadUrl { hook: hook.to_string(), url: url.to_string() };
            let uri: Uri = url.parse().map_err(|_| bad())?;
            match (uri.scheme_str(), uri.host()) {
                (Some("http" | "https"), Some(_)) => Ok(uri),
                _ => Err(bad()),
            }
        })
        .collect()
}

fn parse_headers(hook: &str, headers: &[(&str, &str)]) -> Result<Vec<(HeaderName, HeaderValue)>, TargetError> {
    headers
        .iter()
        .map(|(name, value)| {
            let bad = || TargetError::BadHeader { hook: hook.to_string(), name: name.to_string() };
            Ok((HeaderName::try_from(*name).map_err(|_| bad())?, HeaderValue::try_from(*value).map_err(|_| bad())?))
        })
        .collect()
}

/// How every hook is delivered to.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliverySettings {
    /// Deliveries (one POST each) waiting per (hook, url); when full the oldest is dropped.
    pub queue_capacity: usize,
    /// One attempt, connect to answer.
    pub timeout: Duration,
    /// Attempts per delivery, the first included.
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            queue_capacity: default_queue_capacity(),
            timeout: default_timeout(),
            max_attempts: default_max_attempts(),
            initial_backoff: default_initial_backoff(),
            max_backoff: default_max_backoff(),
        }
    }
}

/// A minute of alarms for one receiver is one delivery, so 64 is about an hour of a dead hook.
pub fn default_queue_capacity() -> usize {
    64
}

/// SkyWalking's HTTP hooks time out after 12 s (`HttpAlarmCallback`).
pub fn default_timeout() -> Duration {
    Duration::from_secs(12)
}

pub fn default_max_attempts() -> u32 {
    4
}

pub fn default_initial_backoff() -> Duration {
    Duration::from_secs(1)
}

pub fn default_max_backoff() -> Duration {
    Duration::from_secs(30)
}

impl DeliverySettings {
    /// Small and quick, for tests.
    pub fn for_test() -> DeliverySettings {
        DeliverySettings {
            queue_capacity: 8,
            timeout: Duration::from_millis(300),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
        }
    }

    /// The wait after failed attempt number `attempt` (1 for the first):
    /// `initial_backoff × 2^(attempt-1)`, at most `max_backoff`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// The hooks a settings file names, as delivery targets. Hook kinds hotrule does not send are
/// left out (the settings' warnings said so).
pub fn targets_of(settings: &crate::control::alarms::settings::AlarmSettings) -> Result<Vec<HookTarget>, TargetError> {
    use crate::control::alarms::settings::HookConfig;
    fn pairs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
    let mut out = Vec::new();
    for hook in &settings.hooks {
        let id = hook.id.to_string();
        let target = match &hook.config {
            HookConfig::Webhook(config) => {
                let urls: Vec<&str> = config.urls.iter().map(String::as_str).collect();
                let recovery: Vec<&str> = config.recovery_urls.iter().map(String::as_str).collect();
                HookTarget::webhook(&id, &urls, &recovery, &pairs(&config.headers))?
            }
            HookConfig::Alertmanager(config) => {
                let urls: Vec<&str> = config.urls.iter().map(String::as_str).collect();
                HookTarget::alertmanager(&id, &urls, &pairs(&config.headers))?
            }
            HookConfig::Unsupported => continue,
        };
        out.push(target);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked() {
        let hook = HookTarget::webhook("webhook.default", &["http://127.0.0.1:1/alarm"], &[], &[("Authorization", "Bearer x")]).expect("valid");
        assert_eq!(hook.urls_for(NoticeKind::Firing).len(), 1);
        assert!(hook.urls_for(NoticeKind::Recovery).is_empty(), "no recovery-urls: no recovery");
        assert!(matches!(HookTarget::webhook("webhook", &[], &[], &[]), Err(TargetError::BadId { .. })));
        assert!(matches!(HookTarget::webhook("webhook.a", &["ftp://x/"], &[], &[]), Err(TargetError::BadUrl { .. })));
        assert!(matches!(HookTarget::webhook("webhook.a", &["/relative"], &[], &[]), Err(TargetError::BadUrl { .. })));
        assert!(matches!(HookTarget::webhook("webhook.a", &[], &[], &[("bad name", "v")]), Err(TargetError::BadHeader { .. })));

        let am = HookTarget::alertmanager("alertmanager.team", &["http://am:9093", "http://am2:9093/api/v2/alerts/"], &[]).expect("valid");
        let urls: Vec<String> = am.urls.iter().map(ToString::to_string).collect();
        assert_eq!(urls, ["http://am:9093/api/v2/alerts", "http://am2:9093/api/v2/alerts"]);
        assert_eq!(am.urls_for(NoticeKind::Recovery).len(), 2, "Alertmanager gets resolutions where it gets alerts");
        assert!(matches!(HookTarget::alertmanager("alertmanager.x", &[], &[]), Err(TargetError::NoUrls { .. })));
    }

    #[test]
    fn backoff_doubles_up_to_its_bound() {
        let settings = DeliverySettings { initial_backoff: Duration::from_secs(1), max_backoff: Duration::from_secs(5), ..DeliverySettings::default() };
        let waits: Vec<u64> = (1..=5).map(|attempt| settings.backoff(attempt).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(settings.backoff(u32::MAX), Duration::from_secs(5));
    }
}

