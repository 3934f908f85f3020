//! The notification SkyWalking's alarm engine sends, field for field: `AlarmMessage` and its
//! recovery variant `AlarmRecoveryMessage` (`CA/AlarmMessage.java`, `CA/AlarmRecoveryMessage.java`
//! in the reference, §2.6). The webhook body is Gson's `toJson(List<AlarmMessage>)`: a JSON array
//! of every non-transient field under its Java name, so the serde names here are SkyWalking's
//! camelCase ones, and `period` (transient in Java) is never serialized.
//!
//! Reading is lenient the way Gson writes: Gson leaves out null fields, so every field has a
//! default when it is absent.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One `{key, value}` tag of a rule, carried by every message of the rule.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Tag {
    pub key: String,
    pub value: String,
}

impl Tag {
    pub fn new(key: &str, value: &str) -> Tag {
        Tag { key: key.to_string(), value: value.to_string() }
    }
}

/// A firing notification: one rule matched for one entity.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AlarmMessage {
    /// The scope's numeric id (`DefaultScopeDefine`: 1 is SERVICE).
    pub scope_id: i32,
    /// The scope's name, e.g. `SERVICE`, `SERVICE_INSTANCE`, `ENDPOINT`.
    pub scope: String,
    /// The entity's display name (`{name}` in the rule's message).
    pub name: String,
    /// The entity id.
    pub id0: String,
    /// The second entity id of relation scopes; empty otherwise.
    pub id1: String,
    pub rule_name: String,
    /// The rule's message with `{name}`/`{id}` filled in.
    pub alarm_message: String,
    pub tags: Vec<Tag>,
    /// When this (re)fire was decided, epoch milliseconds.
    pub start_time: i64,
    /// The rule's period in minutes. Transient in SkyWalking: never in the JSON.
    #[serde(skip)]
    pub period: i32,
    /// The hook ids (`type.name`, e.g. `webhook.default`) of the rule: where the message goes.
    pub hooks: BTreeSet<String>,
    /// The rule's MQE expression.
    pub expression: String,
    /// Metric text → the JSON string of its MQE values when the rule was checked.
    pub mqe_metrics_snapshot: BTreeMap<String, String>,
    /// A fresh random id per (re)fire; the recovery repeats the last one.
    pub uuid: String,
    /// The entity's layers.
    pub layers: Vec<String>,
}

/// A recovery: the last firing message of the entity, unchanged, plus when it recovered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AlarmRecoveryMessage {
    #[serde(flatten)]
    pub alarm: AlarmMessage,
    /// Epoch milliseconds.
    pub recovery_time: i64,
}

impl AlarmRecoveryMessage {
    /// The recovery of `alarm` at `recovery_time` (epoch ms), as `AlarmRecoveryMessage(last)` does.
    pub fn of(alarm: AlarmMessage, recovery_time: i64) -> AlarmRecoveryMessage {
        AlarmRecoveryMessage { alarm, recovery_time }
    }
}

/// The body SkyWalking's webhook posts: a JSON array of messages (firing or recovery).
pub fn webhook_body<M: Serialize>(messages: &[M]) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The example of the reference (§2.6, `backend-alarm.md` "Webhook"), verbatim.
    const DOCUMENTED: &str = r#"[{"scopeId":1,"scope":"SERVICE","name":"serviceA","uuid":"uuid1","id0":"12","id1":"",
  "ruleName":"service_resp_time_rule","alarmMessage":"alarmMessage xxxx",
  "startTime":1560524171000,"recoveryTime":1560524351000,
  "tags":[{"key":"level","value":"WARNING"}]}]"#;

    #[test]
    fn the_documented_example_reads_and_writes_back_field_by_field() {
        let read: Vec<AlarmRecoveryMessage> = serde_json::from_str(DOCUMENTED).expect("the documented JSON reads");
        assert_eq!(read.len(), 1);
        let m = &read[0];
        assert_eq!(m.alarm.scope_id, 1);
        assert_eq!(m.alarm.scope, "SERVICE");
        assert_eq!(m.alarm.name, "serviceA");
        assert_eq!(m.alarm.uuid, "uuid1");
        assert_eq!(m.alarm.id0, "12");
        assert_eq!(m.alarm.id1, "");
        assert_eq!(m.alarm.rule_name, "service_resp_time_rule");
        assert_eq!(m.alarm.alarm_message, "alarmMessage xxxx");
        assert_eq!(m.alarm.start_time, 1_560_524_171_000);
        assert_eq!(m.recovery_time, 1_560_524_351_000);
        assert_eq!(m.alarm.tags, vec![Tag::new("level", "WARNING")]);

        // Written back, every documented field is there with the same value.
        let documented: Value = serde_json::from_str(DOCUMENTED).expect("json");
        let written: Value = serde_json::from_slice(&webhook_body(&read).expect("encode")).expect("json");
        let (documented, written) = (&documented[0], &written[0]);
        let fields = documented.as_object().expect("an object");
        assert_eq!(fields.len(), 11);
        for (field, value) in fields {
            assert_eq!(&written[field], value, "field {field}");
        }
        // And the rest of the non-transient fields, under SkyWalking's names.
        let mut names: Vec<&str> = written.as_object().expect("object").keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut want = vec![
            "scopeId", "scope", "name", "id0", "id1", "ruleName", "alarmMessage", "tags", "startTime", "hooks", "expression",
            "mqeMetricsSnapshot", "uuid", "layers", "recoveryTime",
        ];
        want.sort_unstable();
        assert_eq!(names, want);
    }

    #[test]
    fn every_field_has_its_skywalking_name_and_period_is_transient() {
        let message = AlarmMessage {
            scope_id: 1,
            scope: "SERVICE".into(),
            name: "svc".into(),
            id0: "c3Zj.1".into(),
            id1: String::new(),
            rule_name: "service_resp_time_rule".into(),
            alarm_message: "Response time of service svc is more than 1000ms".into(),
            tags: vec![Tag::new("level", "WARNING")],
            start_time: 1_700_000_000_000,
            period: 10,
            hooks: ["webhook.default".to_string(), "alertmanager.team".to_string()].into(),
            expression: "sum(service_resp_time > 1000) >= 3".into(),
            mqe_metrics_snapshot: [("service_resp_time".to_string(), "[{\"value\":1200}]".to_string())].into(),
            uuid: "0b5c".into(),
            layers: vec!["GENERAL".into()],
        };
        let written = serde_json::to_value([&message]).expect("encode");
        assert_eq!(
            written,
            json!([{
                "scopeId": 1, "scope": "SERVICE", "name": "svc", "id0": "c3Zj.1", "id1": "",
                "ruleName": "service_resp_time_rule",
                "alarmMessage": "Response time of service svc is more than 1000ms",
                "tags": [{"key": "level", "value": "WARNING"}],
                "startTime": 1_700_000_000_000_i64,
                "hooks": ["alertmanager.team", "webhook.default"],
                "expression": "sum(service_resp_time > 1000) >= 3",
                "mqeMetricsSnapshot": {"service_resp_time": "[{\"value\":1200}]"},
                "uuid": "0b5c", "layers": ["GENERAL"]
            }])
        );
        let back: Vec<AlarmMessage> = serde_json::from_value(written).expect("decode");
        assert_eq!(back[0], AlarmMessage { period: 0, ..message.clone() }, "period does not travel");

        let recovery = AlarmRecoveryMessage::of(message, 1_700_000_300_000);
        let written = serde_json::to_value(&recovery).expect("encode");
        assert_eq!(written["recoveryTime"], json!(1_700_000_300_000_i64));
        assert_eq!(written["uuid"], json!("0b5c"));
        assert!(written.get("period").is_none());
    }
}
