//! Alarm messages as Prometheus Alertmanager alerts (API v2, `POST /api/v2/alerts`, a JSON
//! array of `{labels, annotations, startsAt, endsAt?, generatorURL?}`). Beyond SkyWalking,
//! which has no Alertmanager hook. Pure functions.
//!
//! **Mapping.** Alertmanager identifies an alert by its label set (the fingerprint), SkyWalking
//! by a random `uuid` per (re)fire. So the labels hold only what names the alarm, never the
//! uuid or a time:
//! - `alertname` and `rule`: the rule name; `scope` (`SERVICE`, ...); `name`: the entity name;
//!   `id0` and `id1` when not empty (relation scopes have both);
//! - each rule tag as a label (`level: WARNING` → `level="WARNING"`), its key made a valid
//!   label name (other characters become `_`); a tag whose key is one of the labels above is
//!   written `tag_<key>` so it cannot rename the alarm.
//!
//! Annotations carry what changes between repeats: `summary` (the message text), `uuid`,
//! `expression`, `layers` (comma-separated) and `mqe_metrics_snapshot` (the snapshot as JSON),
//! each only when not empty.
//!
//! **Times.** `startsAt` is `startTime` in RFC 3339 (UTC, milliseconds). A recovery carries
//! `endsAt` = `recoveryTime`, which resolves the alert with the same labels.
//!
//! **While firing.** An alert without `endsAt` stays active for Alertmanager's
//! `resolve_timeout` (default 5m) after it was last posted, so Alertmanager expects re-sends.
//! hotrule posts each of SkyWalking's repeats: the state machine re-fires every
//! `silence-period + 1` checks (one check a minute) while the condition holds, with a new uuid
//! and startTime but the same labels, so each repeat refreshes the same Alertmanager alert
//! (Alertmanager keeps the earliest `startsAt` of the overlapping posts). When repeats are
//! further apart than `resolve_timeout` (a silence period of 5 or more with the default), the
//! alert would resolve between them; either raise `resolve_timeout`, or give the hook a
//! `firing_valid_for` (then a firing alert carries `endsAt = startTime + firing_valid_for`, and
//! stays active that long without a repeat; set it above the silence period). A recovery that
//! is never delivered then still ends the alert at the latest at that time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::message::{AlarmMessage, AlarmRecoveryMessage};

/// One element of the body of `POST /api/v2/alerts` (`postableAlert`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostableAlert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    #[serde(rename = "startsAt")]
    pub starts_at: String,
    #[serde(rename = "endsAt", skip_serializing_if = "Option::is_none", default)]
    pub ends_at: Option<String>,
    #[serde(rename = "generatorURL", skip_serializing_if = "Option::is_none", default)]
    pub generator_url: Option<String>,
}

/// The labels hotrule sets itself; a tag with one of these keys becomes `tag_<key>`.
pub const RESERVED_LABELS: &[&str] = &["alertname", "rule", "scope", "name", "id0", "id1"];

/// How a hook's alerts are shaped beyond the message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertOptions {
    pub generator_url: Option<String>,
    /// See the module doc ("While firing").
    pub firing_valid_for: Option<Duration>,
}

/// The labels that identify `message`'s alarm (the same for every repeat and the recovery).
pub fn labels(message: &AlarmMessage) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for (key, value) in [("alertname", &message.rule_name), ("rule", &message.rule_name), ("scope", &message.scope), ("name", &message.name), ("id0", &message.id0), ("id1", &message.id1)] {
        if !value.is_empty() {
            labels.insert(key.to_string(), value.clone());
        }
    }
    for tag in &message.tags {
        if tag.value.is_empty() {
            continue;
        }
        let mut key = label_name(&tag.key);
        if RESERVED_LABELS.contains(&key.as_str()) {
            key = format!("tag_{key}");
        }
        labels.entry(key).or_insert_with(|| tag.value.clone());
    }
    labels
}

/// `text` as a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`): other characters become `_`,
/// and a leading digit (or an empty key) gets a `_` in front.
pub fn label_name(text: &str) -> String {
    let mut name: String = text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

fn annotations(message: &AlarmMessage) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    let snapshot = if message.mqe_metrics_snapshot.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&message.mqe_metrics_snapshot).unwrap_or_default()
    };
    for (key, value) in [
        ("summary", message.alarm_message.clone()),
        ("uuid", message.uuid.clone()),
        ("expression", message.expression.clone()),
        ("layers", message.layers.join(",")),
        ("mqe_metrics_snapshot", snapshot),
    ] {
        if !value.is_empty() {
            annotations.insert(key.to_string(), value);
        }
    }
    annotations
}

/// A firing message as an alert.
pub fn firing_alert(message: &AlarmMessage, options: &AlertOptions) -> PostableAlert {
    let ends_at = options.firing_valid_for.map(|valid_for| {
        let valid_ms = i64::try_from(valid_for.as_millis()).unwrap_or(i64::MAX);
        rfc3339_millis(message.start_time.saturating_add(valid_ms))
    });
    PostableAlert {
        labels: labels(message),
        annotations: annotations(message),
        starts_at: rfc3339_millis(message.start_time),
        ends_at,
        generator_url: options.generator_url.clone(),
    }
}

/// A recovery as the same alert, resolved at `recoveryTime`.
pub fn resolved_alert(recovery: &AlarmRecoveryMessage, options: &AlertOptions) -> PostableAlert {
    let message = &recovery.alarm;
    PostableAlert {
        labels: labels(message),
        annotations: annotations(message),
        starts_at: rfc3339_millis(message.start_time),
        // Alertmanager refuses an alert that ends before it starts.
        ends_at: Some(rfc3339_millis(recovery.recovery_time.max(message.start_time))),
        generator_url: options.generator_url.clone(),
    }
}

/// The body of one `POST /api/v2/alerts`.
pub fn alerts_body(alerts: &[PostableAlert]) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(alerts)
}

/// Epoch milliseconds as RFC 3339 in UTC with milliseconds: `2019-06-14T14:56:11.000Z`.
/// Years outside 0..=9999 are clamped to that range (RFC 3339 has four-digit years).
pub fn rfc3339_millis(epoch_ms: i64) -> String {
    const MIN_MS: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00Z
    const MAX_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = epoch_ms.clamp(MIN_MS, MAX_MS);
    let (seconds, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = hotrule_mal_engine::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::alarms::hooks::message::Tag;
    use serde_json::json;

    fn message() -> AlarmMessage {
        AlarmMessage {
            scope_id: 1,
            scope: "SERVICE".into(),
            name: "serviceA".into(),
            id0: "12".into(),
            id1: String::new(),
            rule_name: "service_resp_time_rule".into(),
            alarm_message: "alarmMessage xxxx".into(),
            tags: vec![Tag::new("level", "WARNING"), Tag::new("team.name", "core"), Tag::new("name", "shadow"), Tag::new("empty", "")],
            start_time: 1_560_524_171_000,
            period: 3,
            hooks: ["alertmanager.default".to_string()].into(),
            expression: "sum(service_resp_time > 1000) >= 1".into(),
            mqe_metrics_snapshot: BTreeMap::new(),
            uuid: "uuid1".into(),
            layers: vec!["GENERAL".into(), "MESH".into()],
        }
    }

    #[test]
    fn rfc3339_is_utc_with_milliseconds() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(1_560_524_171_000), "2019-06-14T14:56:11.000Z");
        assert_eq!(rfc3339_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_millis(1_795_816_800_999), "2026-11-27T22:00:00.999Z");
        assert_eq!(rfc3339_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_millis(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_millis(i64::MIN), "0000-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_firing_message_is_an_alert_labelled_by_rule_entity_and_tags() {
        let alert = firing_alert(&message(), &AlertOptions::default());
        assert_eq!(
            serde_json::to_value(&alert).expect("encode"),
            json!({
                "labels": {
                    "alertname": "service_resp_time_rule", "rule": "service_resp_time_rule", "scope": "SERVICE",
                    "name": "serviceA", "id0": "12", "level": "WARNING", "team_name": "core", "tag_name": "shadow"
                },
                "annotations": {
                    "summary": "alarmMessage xxxx", "uuid": "uuid1",
                    "expression": "sum(service_resp_time > 1000) >= 1", "layers": "GENERAL,MESH"
                },
                "startsAt": "2019-06-14T14:56:11.000Z"
            })
        );
    }

    #[test]
    fn a_repeat_has_the_same_labels_and_a_recovery_resolves_them() {
        let first = message();
        let repeat = AlarmMessage { uuid: "uuid2".into(), start_time: first.start_time + 120_000, ..first.clone() };
        let options = AlertOptions { generator_url: Some("http://hotrule:17128/".into()), firing_valid_for: Some(Duration::from_secs(600)) };
        let (a, b) = (firing_alert(&first, &options), firing_alert(&repeat, &options));
        assert_eq!(a.labels, b.labels, "one Alertmanager alert across repeats");
        assert_ne!(a.annotations["uuid"], b.annotations["uuid"]);
        assert_eq!(b.ends_at.as_deref(), Some("2019-06-14T15:08:11.000Z"), "startTime + firing_valid_for");
        assert_eq!(b.generator_url.as_deref(), Some("http://hotrule:17128/"));

        let resolved = resolved_alert(&AlarmRecoveryMessage::of(repeat, 1_560_524_351_000), &options);
        assert_eq!(resolved.labels, a.labels);
        assert_eq!(resolved.ends_at.as_deref(), Some("2019-06-14T14:59:11.000Z"));
        let clock_skew = resolved_alert(&AlarmRecoveryMessage::of(message(), 0), &AlertOptions::default());
        assert_eq!(clock_skew.ends_at, Some(clock_skew.starts_at.clone()), "never ends before it starts");
    }

    #[test]
    fn label_names_are_made_valid() {
        assert_eq!(label_name("level"), "level");
        assert_eq!(label_name("team-a.owner"), "team_a_owner");
        assert_eq!(label_name("1st"), "_1st");
        assert_eq!(label_name(""), "_");
        assert_eq!(label_name("ü"), "_");
    }

    #[test]
    fn the_body_is_an_array() {
        let body = alerts_body(&[firing_alert(&message(), &AlertOptions::default())]).expect("encode");
        let value: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(value.as_array().map(Vec::len), Some(1));
    }
}
