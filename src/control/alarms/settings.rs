//! `alarm-settings.yml`, read as SkyWalking's `RulesReader` reads it, then validated into
//! [`AlarmSettings`] (nothing downstream sees the YAML).
//!
//! The file has `rules:` and `hooks:` ([`hook_settings`]). Hooks are read first, then rules:
//! - only rule keys ending in `_rule` are rules; SkyWalking skips the others silently, hotrule
//!   skips them too and says so in the warnings;
//! - `expression` is required; it is checked through the verifier passed to
//!   [`AlarmSettings::parse`] (the MQE engine in production, [`ExpressionFacts`] back);
//! - defaults as `RulesReader`: `period` 1, `silence-period` = `period`,
//!   `recovery-observation-period` 0, `message` "Alarm caused by Rule <name>", no tags, no
//!   filters; a rule without `hooks` uses every `is-default: true` hook;
//! - `message` may hold only `{name}` and `{id}` (as `AlarmMessageFormatter`);
//! - name regexes must match the whole entity name (Java's `matches()`).
//!
//! Where SkyWalking would throw on a wrong type (a `ClassCastException` at load), hotrule
//! refuses the file with an error naming the rule and the key. Keys SkyWalking ignores are
//! ignored here too, with a warning each. hotrule also refuses what SkyWalking would load and
//! then misbehave on: a period below 1, negative periods, windows over a week, bad urls.
//!
//! [`diff`] compares two settings by rule name: SkyWalking keeps a rule's running windows only
//! when the rule is equal in every attribute (Lombok equality over the whole `AlarmRule`).

mod hook_settings;
mod patterns;
mod yaml;

use yaml_rust2::Yaml;

pub use hook_settings::{AlertmanagerConfig, Hook, HookConfig, HookId, HookKind, MAX_HOOK_TIMEOUT, WebhookConfig};
pub use patterns::{MessageTemplate, NameRegex};
pub use yaml::{MAX_SETTINGS_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES};

use super::state::Periods;
use yaml::{Fields, kind, scalar_text};

/// Longest window (`period` plus the expression's trend range), in minutes: one week.
pub const MAX_WINDOW_MINUTES: u32 = 7 * 24 * 60;

/// The rule keys `RulesReader` reads.
const RULE_KEYS: &[&str] = &[
    "expression",
    "include-names",
    "exclude-names",
    "include-names-regex",
    "exclude-names-regex",
    "period",
    "silence-period",
    "recovery-observation-period",
    "message",
    "tags",
    "hooks",
];

/// Rule keys of the pre-9.6 format (replaced by `expression`), and the old top-level keys.
const LEGACY_RULE_KEYS: &[&str] = &[
    "metrics-name", "count", "threshold", "op", "only-as-condition", "include-labels", "exclude-labels",
    "include-labels-regex", "exclude-labels-regex",
];
const LEGACY_TOP_KEYS: &[&str] = &["composite-rules", "webhooks", "gRPCHook", "slackHooks", "wechatHooks", "dingtalkHooks", "feishuHooks", "welinkHooks"];

/// What the expression verifier reports about a valid expression.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ExpressionFacts {
    /// The metric names the expression reads (SkyWalking's `includeMetrics`).
    pub metrics: Vec<String>,
    /// The largest N of any `increase/rate(m, N)` (SkyWalking's `maxTrendRange`).
    pub max_trend_range: u32,
}

/// The expression check: `Ok(facts)` or the reason the expression is refused.
pub type ExpressionVerifier<'a> = &'a dyn Fn(&str) -> Result<ExpressionFacts, String>;

/// Where a setting lives, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    TopLevel,
    Rule(String),
    Hook(String),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::TopLevel => write!(f, "the top level"),
            Place::Rule(name) => write!(f, "rule `{name}`"),
            Place::Hook(id) => write!(f, "hook `{id}`"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("alarm settings are {len} bytes; the limit is {max}")]
    TooLarge { len: usize, max: usize },
    #[error("alarm settings are not valid YAML: {reason}")]
    BadYaml { reason: String },
    #[error("alarm settings must be one YAML document, found {count}")]
    DocumentCount { count: usize },
    #[error("alarm settings nest deeper than {max} levels")]
    TooDeep { max: usize },
    #[error("alarm settings expand to more than {max} YAML nodes (anchors and aliases)")]
    TooManyNodes { max: u64 },
    #[error("{place} must be a mapping, found {found}")]
    NotAMapping { place: Place, found: &'static str },
    #[error("{place}: `{key}` must be {expected}, found {found}")]
    WrongType { place: Place, key: String, expected: &'static str, found: &'static str },
    #[error("{place}: `{key}` is {value}; it must be between 0 and {max}")]
    OutOfRange { place: Place, key: String, value: i64, max: u32 },
    #[error("rule key {key} is {found}; rule names are text ending in `_rule`")]
    RuleNameNotText { key: String, found: &'static str },
    #[error("rule `{rule}`: expression can't be empty")]
    EmptyExpression { rule: String },
    #[error("rule `{rule}` has no `expression`; it uses the pre-9.6 keys ({keys}), which SkyWalking replaced by an MQE expression")]
    LegacyRule { rule: String, keys: String },
    #[error("rule `{rule}`: expression `{expression}` is refused: {reason}")]
    ExpressionRejected { rule: String, expression: String, reason: String },
    #[error("rule `{rule}`: `period` must be at least 1")]
    ZeroPeriod { rule: String },
    #[error("rule `{rule}`: the window (period {period} + trend range {trend}) exceeds {max} minutes")]
    WindowTooLarge { rule: String, period: u32, trend: u32, max: u32 },
    #[error("rule `{rule}`: `{key}` is not a valid regex: {reason}")]
    BadRegex { rule: String, key: &'static str, reason: String },
    #[error("rule `{rule}`: Var [{var}] in alarm message [{message}] is illegal (only {{name}} and {{id}})")]
    BadMessage { rule: String, var: String, message: String },
    #[error("rule `{rule}` contains invalid hook `{hook}`; hooks are named {{hookType}}.{{hookName}} and must be defined under `hooks:`")]
    UnknownHook { rule: String, hook: String },
    #[error("{place}: `{key}` holds `{url}`, which is not an absolute http(s) url")]
    BadUrl { place: Place, key: String, url: String },
    #[error("{place}: header `{name}` is not a valid HTTP header")]
    BadHeader { place: Place, name: String },
    #[error("{place}: timeout `{value}` must be a positive duration up to {max:?} (10, \"10s\", \"500ms\", \"1m\")")]
    BadTimeout { place: Place, value: String, max: std::time::Duration },
    #[error("hook `{hook}` needs at least one url in `urls`")]
    HookNeedsUrls { hook: HookId },
}

impl SettingsError {
    /// The rule the refusal is about, when it is about one.
    pub fn rule(&self) -> Option<&str> {
        use SettingsError::*;
        match self {
            EmptyExpression { rule }
            | LegacyRule { rule, .. }
            | ExpressionRejected { rule, .. }
            | ZeroPeriod { rule }
            | WindowTooLarge { rule, .. }
            | BadRegex { rule, .. }
            | BadMessage { rule, .. }
            | UnknownHook { rule, .. } => Some(rule),
            NotAMapping { place, .. } | WrongType { place, .. } | OutOfRange { place, .. } | BadUrl { place, .. } | BadHeader { place, .. } | BadTimeout { place, .. } => {
                match place {
                    Place::Rule(rule) => Some(rule),
                    Place::TopLevel | Place::Hook(_) => None,
                }
            }
            TooLarge { .. } | BadYaml { .. } | DocumentCount { .. } | TooDeep { .. } | TooManyNodes { .. } | RuleNameNotText { .. } | HookNeedsUrls { .. } => None,
        }
    }
}

/// What was accepted but deserves the operator's eye.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsWarning {
    #[error("`rules.{key}` is skipped: rule names must end in `_rule` (as SkyWalking)")]
    SkippedRuleKey { key: String },
    #[error("{place}: unknown key `{key}` is ignored")]
    UnknownKey { place: Place, key: String },
    #[error("{place}: `{key}` is from the pre-9.6 format and is ignored")]
    LegacyKey { place: Place, key: String },
    #[error("hook kind `{kind}` is unknown and skipped")]
    UnknownHookKind { kind: String },
    #[error("hook `{hook}` is read but hotrule does not deliver {} hooks", .hook.kind.key())]
    UnsupportedHook { hook: HookId },
    #[error("hook `{hook}` has neither `urls` nor `recovery-urls`")]
    HookWithoutUrls { hook: HookId },
    #[error("rule `{rule}` notifies no hook (it names none and no hook is `is-default: true`)")]
    RuleWithoutHooks { rule: String },
    #[error("rule `{rule}` names hook `{hook}`, which hotrule does not deliver to")]
    RuleUsesUnsupportedHook { rule: String, hook: HookId },
}

/// One validated alarm rule.
#[derive(Clone, Debug, PartialEq)]
pub struct AlarmRule {
    pub name: String,
    pub expression: String,
    /// The metrics the expression reads, sorted, without repeats.
    pub metrics: Vec<String>,
    pub max_trend_range: u32,
    pub include_names: Vec<String>,
    pub exclude_names: Vec<String>,
    pub include_names_regex: Option<NameRegex>,
    pub exclude_names_regex: Option<NameRegex>,
    pub periods: Periods,
    pub message: MessageTemplate,
    /// Tags in file order.
    pub tags: Vec<(String, String)>,
    /// The hooks this rule notifies, sorted: the ones it names, or else the default hooks.
    pub hooks: Vec<HookId>,
    /// True when `hooks` came from the `is-default` hooks.
    pub hooks_from_defaults: bool,
}

impl AlarmRule {
    /// Minute slots of this rule's windows.
    pub fn window_size(&self) -> usize {
        super::window::window_size(self.periods.period, self.max_trend_range)
    }

    /// SkyWalking's `RunningRule.validate`, in its order: include list, exclude list, include
    /// regex, exclude regex; all must pass.
    pub fn accepts_entity(&self, name: &str) -> bool {
        (self.include_names.is_empty() || self.include_names.iter().any(|n| n == name))
            && !self.exclude_names.iter().any(|n| n == name)
            && self.include_names_regex.as_ref().is_none_or(|r| r.matches(name))
            && !self.exclude_names_regex.as_ref().is_some_and(|r| r.matches(name))
    }

    /// Equal as SkyWalking's `AlarmRule` equality sees it: tags are a map there, so their order
    /// does not count.
    fn same_as(&self, other: &AlarmRule) -> bool {
        let sorted = |tags: &[(String, String)]| {
            let mut tags = tags.to_vec();
            tags.sort();
            tags
        };
        // `hooks_from_defaults` is hotrule's note, not a SkyWalking attribute: the hook set counts.
        AlarmRule { tags: Vec::new(), hooks_from_defaults: false, ..self.clone() }
            == AlarmRule { tags: Vec::new(), hooks_from_defaults: false, ..other.clone() }
            && sorted(&self.tags) == sorted(&other.tags)
    }
}

/// A validated `alarm-settings.yml`.
#[derive(Clone, Debug, PartialEq)]
pub struct AlarmSettings {
    /// Rules in file order.
    pub rules: Vec<AlarmRule>,
    /// Hooks in file order.
    pub hooks: Vec<Hook>,
    pub warnings: Vec<SettingsWarning>,
}

impl AlarmSettings {
    /// Empty settings: what SkyWalking installs when the dynamic config is deleted.
    pub fn empty() -> Self {
        AlarmSettings { rules: Vec::new(), hooks: Vec::new(), warnings: Vec::new() }
    }

    /// Reads and validates the text; `verify` checks each rule's expression.
    pub fn parse(text: &str, verify: ExpressionVerifier<'_>) -> Result<Self, SettingsError> {
        let document = yaml::load(text)?;
        let top = match &document {
            Yaml::Null => return Ok(AlarmSettings::empty()),
            Yaml::Hash(top) => top,
            other => return Err(SettingsError::NotAMapping { place: Place::TopLevel, found: kind(other) }),
        };
        let fields = Fields { place: &Place::TopLevel, map: top };
        let mut warnings = Vec::new();
        for key in fields.unknown_keys(&["rules", "hooks"]) {
            warnings.push(if LEGACY_TOP_KEYS.contains(&key.as_str()) {
                SettingsWarning::LegacyKey { place: Place::TopLevel, key }
            } else {
                SettingsWarning::UnknownKey { place: Place::TopLevel, key }
            });
        }
        let hooks = hook_settings::parse_hooks(fields.get("hooks"), &mut warnings)?;
        let rules = match fields.get("rules") {
            None => Vec::new(),
            Some(Yaml::Hash(rules)) => {
                let mut parsed = Vec::new();
                for (key, body) in rules {
                    let Yaml::String(name) = key else {
                        return Err(SettingsError::RuleNameNotText { key: scalar_text(key).unwrap_or_default(), found: kind(key) });
                    };
                    if !name.ends_with("_rule") {
                        warnings.push(SettingsWarning::SkippedRuleKey { key: name.clone() });
                        continue;
                    }
                    parsed.push(parse_rule(name, body, &hooks, verify, &mut warnings)?);
                }
                parsed
            }
            Some(other) => {
                return Err(SettingsError::WrongType { place: Place::TopLevel, key: "rules".into(), expected: "a mapping", found: kind(other) });
            }
        };
        Ok(AlarmSettings { rules, hooks, warnings })
    }

    pub fn rule(&self, name: &str) -> Option<&AlarmRule> {
        self.rules.iter().find(|r| r.name == name)
    }

    pub fn hook(&self, id: &HookId) -> Option<&Hook> {
        self.hooks.iter().find(|h| &h.id == id)
    }
}

fn parse_rule(
    name: &str,
    body: &Yaml,
    hooks: &[Hook],
    verify: ExpressionVerifier<'_>,
    warnings: &mut Vec<SettingsWarning>,
) -> Result<AlarmRule, SettingsError> {
    let place = Place::Rule(name.to_string());
    let Yaml::Hash(map) = body else {
        return Err(SettingsError::NotAMapping { place, found: kind(body) });
    };
    let fields = Fields { place: &place, map };
    let rule = name.to_string();
    for key in fields.unknown_keys(RULE_KEYS) {
        warnings.push(if LEGACY_RULE_KEYS.contains(&key.as_str()) {
            SettingsWarning::LegacyKey { place: place.clone(), key }
        } else {
            SettingsWarning::UnknownKey { place: place.clone(), key }
        });
    }

    let Some(expression) = fields.string("expression")? else {
        let legacy: Vec<&str> = LEGACY_RULE_KEYS.iter().copied().filter(|k| fields.get(k).is_some()).collect();
        return Err(if legacy.is_empty() {
            SettingsError::EmptyExpression { rule }
        } else {
            SettingsError::LegacyRule { rule, keys: legacy.join(", ") }
        });
    };
    if expression.trim().is_empty() {
        return Err(SettingsError::EmptyExpression { rule });
    }
    let facts = verify(&expression).map_err(|reason| SettingsError::ExpressionRejected {
        rule: rule.clone(),
        expression: expression.clone(),
        reason,
    })?;
    let mut metrics = facts.metrics;
    metrics.sort();
    metrics.dedup();

    let period = fields.count("period", MAX_WINDOW_MINUTES)?.unwrap_or_else(default_period);
    if period == 0 {
        return Err(SettingsError::ZeroPeriod { rule });
    }
    if period.saturating_add(facts.max_trend_range) > MAX_WINDOW_MINUTES {
        return Err(SettingsError::WindowTooLarge { rule, period, trend: facts.max_trend_range, max: MAX_WINDOW_MINUTES });
    }
    let periods = Periods {
        period,
        silence_period: fields.count("silence-period", MAX_WINDOW_MINUTES)?.unwrap_or_else(|| default_silence_period(period)),
        recovery_observation_period: fields
            .count("recovery-observation-period", MAX_WINDOW_MINUTES)?
            .unwrap_or_else(default_recovery_observation_period),
    };

    let regex = |key: &'static str| -> Result<Option<NameRegex>, SettingsError> {
        match fields.string(key)? {
            None => Ok(None),
            Some(source) if source.is_empty() => Ok(None),
            Some(source) => NameRegex::new(&source)
                .map(Some)
                .map_err(|e| SettingsError::BadRegex { rule: rule.clone(), key, reason: e.to_string() }),
        }
    };
    let include_names_regex = regex("include-names-regex")?;
    let exclude_names_regex = regex("exclude-names-regex")?;

    let message_text = fields.string("message")?.unwrap_or_else(|| default_message(name));
    let message = MessageTemplate::parse(&message_text).map_err(|var| SettingsError::BadMessage {
        rule: rule.clone(),
        var,
        message: message_text.clone(),
    })?;

    let (hook_ids, hooks_from_defaults) = rule_hooks(&rule, fields.strings("hooks")?, hooks, warnings)?;

    Ok(AlarmRule {
        name: rule.clone(),
        expression,
        metrics,
        max_trend_range: facts.max_trend_range,
        include_names: fields.strings("include-names")?,
        exclude_names: fields.strings("exclude-names")?,
        include_names_regex,
        exclude_names_regex,
        periods,
        message,
        tags: fields.string_map("tags")?,
        hooks: hook_ids,
        hooks_from_defaults,
    })
}

/// The rule's named hooks, each defined; none named means the default hooks.
fn rule_hooks(
    rule: &str,
    named: Vec<String>,
    hooks: &[Hook],
    warnings: &mut Vec<SettingsWarning>,
) -> Result<(Vec<HookId>, bool), SettingsError> {
    let from_defaults = named.is_empty();
    let mut ids: Vec<HookId> = if from_defaults {
        hooks.iter().filter(|h| h.is_default).map(|h| h.id.clone()).collect()
    } else {
        named
            .iter()
            .map(|text| {
                hooks
                    .iter()
                    .find(|h| h.id.to_string() == *text)
                    .map(|h| h.id.clone())
                    .ok_or_else(|| SettingsError::UnknownHook { rule: rule.to_string(), hook: text.clone() })
            })
            .collect::<Result<_, _>>()?
    };
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        warnings.push(SettingsWarning::RuleWithoutHooks { rule: rule.to_string() });
    }
    for id in ids.iter().filter(|id| !id.kind.is_supported()) {
        warnings.push(SettingsWarning::RuleUsesUnsupportedHook { rule: rule.to_string(), hook: id.clone() });
    }
    Ok((ids, from_defaults))
}

/// `period` when absent (`RulesReader`: `getOrDefault("period", 1)`).
pub fn default_period() -> u32 {
    1
}

/// `silence-period` when absent: the rule's period (`RulesReader`).
pub fn default_silence_period(period: u32) -> u32 {
    period
}

/// `recovery-observation-period` when absent.
pub fn default_recovery_observation_period() -> u32 {
    0
}

/// `message` when absent (`RulesReader`).
pub fn default_message(rule: &str) -> String {
    format!("Alarm caused by Rule {rule}")
}

/// Which rules a reload keeps, rebuilds, adds and drops (names sorted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingsDiff {
    /// Equal in every attribute: windows and states are kept.
    pub unchanged: Vec<String>,
    /// Some attribute differs: windows and states are rebuilt (no recovery for the old ones).
    pub changed: Vec<String>,
    pub added: Vec<String>,
    /// Dropped with their windows, silently.
    pub removed: Vec<String>,
}

pub fn diff(old: &AlarmSettings, new: &AlarmSettings) -> SettingsDiff {
    let mut result = SettingsDiff::default();
    for rule in &new.rules {
        match old.rule(&rule.name) {
            None => result.added.push(rule.name.clone()),
            Some(before) if before.same_as(rule) => result.unchanged.push(rule.name.clone()),
            Some(_) => result.changed.push(rule.name.clone()),
        }
    }
    result.removed = old.rules.iter().filter(|r| new.rule(&r.name).is_none()).map(|r| r.name.clone()).collect();
    for names in [&mut result.unchanged, &mut result.changed, &mut result.added, &mut result.removed] {
        names.sort();
    }
    result
}

#[cfg(test)]
mod tests;
