//! The `hooks:` section: named hook configs per kind, referred to by rules as `kind.name`.
//!
//! `webhook` is read with SkyWalking's keys (`is-default`, `urls`, `recovery-urls`, `headers`);
//! `alertmanager` is hotrule's own kind (`is-default`, `urls`, `timeout`, `headers`). The other
//! kinds SkyWalking has (gRPC, slack, wechat, dingtalk, feishu, welink, discord, pagerduty) are
//! accepted so that rules naming them stay valid, but hotrule delivers nothing to them: each
//! such hook is reported in the warnings. A kind SkyWalking does not know is skipped with a
//! warning (SkyWalking ignores it too; a rule that names it is then refused).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use yaml_rust2::Yaml;

use super::yaml::{Fields, kind, scalar_text};
use super::{Place, SettingsError, SettingsWarning};

/// Longest hook request timeout accepted.
pub const MAX_HOOK_TIMEOUT: Duration = Duration::from_secs(300);

/// The hook kinds: SkyWalking's `AlarmHooksType` plus hotrule's `alertmanager`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HookKind {
    Webhook,
    Alertmanager,
    Grpc,
    Slack,
    Wechat,
    Dingtalk,
    Feishu,
    Welink,
    Discord,
    Pagerduty,
}

impl HookKind {
    pub const ALL: [HookKind; 10] = [
        HookKind::Webhook,
        HookKind::Alertmanager,
        HookKind::Grpc,
        HookKind::Slack,
        HookKind::Wechat,
        HookKind::Dingtalk,
        HookKind::Feishu,
        HookKind::Welink,
        HookKind::Discord,
        HookKind::Pagerduty,
    ];

    /// The key in the `hooks:` section and the prefix of hook ids (case as SkyWalking spells it).
    pub fn key(self) -> &'static str {
        match self {
            HookKind::Webhook => "webhook",
            HookKind::Alertmanager => "alertmanager",
            HookKind::Grpc => "gRPC",
            HookKind::Slack => "slack",
            HookKind::Wechat => "wechat",
            HookKind::Dingtalk => "dingtalk",
            HookKind::Feishu => "feishu",
            HookKind::Welink => "welink",
            HookKind::Discord => "discord",
            HookKind::Pagerduty => "pagerduty",
        }
    }

    /// Whether hotrule delivers to this kind.
    pub fn is_supported(self) -> bool {
        matches!(self, HookKind::Webhook | HookKind::Alertmanager)
    }
}

/// A hook's id as rules name it: `kind.name` (`webhook.default`, `slack.custom1`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HookId {
    pub kind: HookKind,
    pub name: String,
}

impl std::fmt::Display for HookId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.kind.key(), self.name)
    }
}

/// A SkyWalking webhook: POSTs a JSON array of messages to every url; recoveries go to
/// `recovery_urls` only (none when empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookConfig {
    pub urls: Vec<String>,
    pub recovery_urls: Vec<String>,
    pub headers: Vec<(String, String)>,
}

/// hotrule's Alertmanager hook: firing and resolved alerts to Alertmanager's v2 API at `urls`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertmanagerConfig {
    pub urls: Vec<String>,
    /// The request timeout; `None` leaves it to the hook (SkyWalking's HTTP hooks use 12 s).
    pub timeout: Option<Duration>,
    pub headers: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HookConfig {
    Webhook(WebhookConfig),
    Alertmanager(AlertmanagerConfig),
    /// A SkyWalking kind hotrule does not deliver to; its keys are not read.
    Unsupported,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    pub id: HookId,
    /// `is-default`: used by every rule that names no hooks.
    pub is_default: bool,
    pub config: HookConfig,
}

/// Reads the `hooks:` section (absent or null is no hooks), in file order.
pub fn parse_hooks(section: Option<&Yaml>, warnings: &mut Vec<SettingsWarning>) -> Result<Vec<Hook>, SettingsError> {
    let kinds = match section {
        None | Some(Yaml::Null) => return Ok(Vec::new()),
        Some(Yaml::Hash(kinds)) => kinds,
        Some(other) => return Err(top_wrong("hooks", "a mapping", other)),
    };
    let mut hooks = Vec::new();
    for (kind_key, configs) in kinds {
        let kind_text = scalar_text(kind_key).unwrap_or_default();
        let Some(hook_kind) = HookKind::ALL.into_iter().find(|k| k.key() == kind_text) else {
            warnings.push(SettingsWarning::UnknownHookKind { kind: kind_text });
            continue;
        };
        let configs = match configs {
            Yaml::Null => continue,
            Yaml::Hash(configs) => configs,
            other => return Err(top_wrong(&format!("hooks.{kind_text}"), "a mapping of hook names", other)),
        };
        for (name, config) in configs {
            let Some(name) = scalar_text(name) else {
                return Err(top_wrong(&format!("hooks.{kind_text}"), "text hook names", name));
            };
            let id = HookId { kind: hook_kind, name };
            hooks.push(parse_hook(id, config, warnings)?);
        }
    }
    Ok(hooks)
}

fn top_wrong(key: &str, expected: &'static str, found: &Yaml) -> SettingsError {
    SettingsError::WrongType { place: Place::TopLevel, key: key.to_string(), expected, found: kind(found) }
}

fn parse_hook(id: HookId, config: &Yaml, warnings: &mut Vec<SettingsWarning>) -> Result<Hook, SettingsError> {
    let place = Place::Hook(id.to_string());
    let Yaml::Hash(map) = config else {
        return Err(SettingsError::NotAMapping { place, found: kind(config) });
    };
    let fields = Fields { place: &place, map };
    let is_default = fields.boolean("is-default")?.unwrap_or(false);
    let (config, known): (HookConfig, &[&str]) = match id.kind {
        HookKind::Webhook => {
            let urls = urls_of(&fields, "urls")?;
            let recovery_urls = urls_of(&fields, "recovery-urls")?;
            if urls.is_empty() && recovery_urls.is_empty() {
                warnings.push(SettingsWarning::HookWithoutUrls { hook: id.clone() });
            }
            let headers = headers(&fields)?;
            (HookConfig::Webhook(WebhookConfig { urls, recovery_urls, headers }), &["is-default", "urls", "recovery-urls", "headers"])
        }
        HookKind::Alertmanager => {
            let urls = urls_of(&fields, "urls")?;
            if urls.is_empty() {
                return Err(SettingsError::HookNeedsUrls { hook: id.clone() });
            }
            let timeout = timeout(&fields)?;
            let headers = headers(&fields)?;
            (HookConfig::Alertmanager(AlertmanagerConfig { urls, timeout, headers }), &["is-default", "urls", "timeout", "headers"])
        }
        _ => {
            warnings.push(SettingsWarning::UnsupportedHook { hook: id.clone() });
            return Ok(Hook { id, is_default, config: HookConfig::Unsupported });
        }
    };
    for key in fields.unknown_keys(known) {
        warnings.push(SettingsWarning::UnknownKey { place: place.clone(), key });
    }
    Ok(Hook { id, is_default, config })
}

/// A list of absolute http(s) urls.
fn urls_of(fields: &Fields<'_>, key: &str) -> Result<Vec<String>, SettingsError> {
    let urls = fields.strings(key)?;
    for url in &urls {
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        let host_ok = rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.chars().any(char::is_whitespace));
        if !host_ok {
            return Err(SettingsError::BadUrl { place: fields.place.clone(), key: key.to_string(), url: url.clone() });
        }
    }
    Ok(urls)
}

/// Header names are HTTP tokens; values carry no line breaks.
fn headers(fields: &Fields<'_>) -> Result<Vec<(String, String)>, SettingsError> {
    let headers = fields.string_map("headers")?;
    for (name, value) in &headers {
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        let value_ok = !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
        if !name_ok || !value_ok {
            return Err(SettingsError::BadHeader { place: fields.place.clone(), name: name.clone() });
        }
    }
    Ok(headers)
}

/// `timeout`: whole seconds (`10`) or a number with `ms`, `s` or `m` (`500ms`, `10s`, `1m`).
fn timeout(fields: &Fields<'_>) -> Result<Option<Duration>, SettingsError> {
    let bad = |value: String| SettingsError::BadTimeout { place: fields.place.clone(), value, max: MAX_HOOK_TIMEOUT };
    let duration = match fields.get("timeout") {
        None => return Ok(None),
        Some(Yaml::Integer(secs)) => u64::try_from(*secs).ok().map(Duration::from_secs).ok_or_else(|| bad(secs.to_string()))?,
        Some(Yaml::String(text)) => parse_duration(text).ok_or_else(|| bad(text.clone()))?,
        Some(other) => return Err(bad(scalar_text(other).unwrap_or_else(|| kind(other).to_string()))),
    };
    if duration.is_zero() || duration > MAX_HOOK_TIMEOUT {
        return Err(bad(format!("{duration:?}")));
    }
    Ok(Some(duration))
}

fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1_000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000)
    } else {
        (text, 1_000)
    };
    let value: u64 = number.trim().parse().ok()?;
    value.checked_mul(unit_ms).map(Duration::from_millis)
}
