//! The pure side of delivery: which POSTs one round of alarm messages becomes, and what to do
//! after an attempt.
//!
//! **Grouping (as SkyWalking's `AlarmCallback.groupMessagesByHook`).** A message carries the
//! ids of its rule's hooks (`hooks`, default hooks already filled in by the rule reader). The
//! messages of one round are grouped by hook id, firing apart from recovery; each group becomes
//! one body (a JSON array) per URL of the hook: a webhook's firing group goes to its `urls`,
//! its recovery group to its `recovery-urls` (none: not sent); an Alertmanager hook's groups
//! both go to its `urls`, recoveries as resolved alerts. A hook id no target has is reported.
//!
//! **After an attempt.** A 2xx is delivered. 5xx, 408, 429, a timeout and an unreachable
//! receiver are worth another attempt, after `initial_backoff × 2^(attempt-1)` (at most
//! `max_backoff`), up to `max_attempts`; then the delivery is given up. Any other status (other
//! 4xx, 3xx: hyper follows no redirects) would be answered the same way again, so it is dropped
//! at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, Uri};
use bytes::Bytes;

use super::alertmanager::{self, AlertOptions};
use super::message::{AlarmMessage, AlarmRecoveryMessage, webhook_body};
use super::sender::HookError;
use super::target::{DeliverySettings, HookKind, HookTarget, NoticeKind};

/// One POST to make: a body for one URL of one hook.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub hook: Arc<str>,
    pub url: Uri,
    pub kind: NoticeKind,
    pub headers: Arc<[(HeaderName, HeaderValue)]>,
    pub body: Bytes,
    /// Messages in the body.
    pub messages: usize,
}

/// What one round of messages becomes.
#[derive(Debug, Default)]
pub struct Plan {
    pub deliveries: Vec<Delivery>,
    /// Hook ids named by messages that no configured hook has.
    pub unknown_hooks: BTreeSet<String>,
    /// Hooks whose body could not be encoded, with the error.
    pub unencodable: Vec<(String, String)>,
}

/// The deliveries of one round: `firing` and `recoveries` grouped by hook (module doc).
pub fn plan(targets: &BTreeMap<String, HookTarget>, firing: &[AlarmMessage], recoveries: &[AlarmRecoveryMessage]) -> Plan {
    let mut firing_by_hook: BTreeMap<&str, Vec<&AlarmMessage>> = BTreeMap::new();
    for message in firing {
        for hook in &message.hooks {
            firing_by_hook.entry(hook.as_str()).or_default().push(message);
        }
    }
    let mut recovery_by_hook: BTreeMap<&str, Vec<&AlarmRecoveryMessage>> = BTreeMap::new();
    for recovery in recoveries {
        for hook in &recovery.alarm.hooks {
            recovery_by_hook.entry(hook.as_str()).or_default().push(recovery);
        }
    }
    let mut out = Plan::default();
    let named: BTreeSet<&str> = firing_by_hook.keys().chain(recovery_by_hook.keys()).copied().collect();
    for hook in named {
        let Some(target) = targets.get(hook) else {
            out.unknown_hooks.insert(hook.to_string());
            continue;
        };
        let groups = [
            (NoticeKind::Firing, firing_by_hook.get(hook).map(|group| firing_body(target, group))),
            (NoticeKind::Recovery, recovery_by_hook.get(hook).map(|group| recovery_body(target, group))),
        ];
        let headers: Arc<[(HeaderName, HeaderValue)]> = target.headers.clone().into();
        for (kind, encoded) in groups {
            match encoded {
                None => {}
                Some(Err(e)) => out.unencodable.push((hook.to_string(), e.to_string())),
                Some(Ok((body, messages))) => {
                    for url in target.urls_for(kind) {
                        out.deliveries.push(Delivery { hook: Arc::from(hook), url: url.clone(), kind, headers: headers.clone(), body: body.clone(), messages });
                    }
                }
            }
        }
    }
    out
}

fn options(target: &HookTarget) -> AlertOptions {
    AlertOptions { generator_url: target.generator_url.clone(), firing_valid_for: target.firing_valid_for }
}

fn firing_body(target: &HookTarget, group: &[&AlarmMessage]) -> Result<(Bytes, usize), serde_json::Error> {
    let body = match target.kind {
        HookKind::Webhook => webhook_body(group)?,
        HookKind::Alertmanager => {
            let options = options(target);
            let alerts: Vec<_> = group.iter().map(|message| alertmanager::firing_alert(message, &options)).collect();
            alertmanager::alerts_body(&alerts)?
        }
    };
    Ok((Bytes::from(body), group.len()))
}

fn recovery_body(target: &HookTarget, group: &[&AlarmRecoveryMessage]) -> Result<(Bytes, usize), serde_json::Error> {
    let body = match target.kind {
        HookKind::Webhook => webhook_body(group)?,
        HookKind::Alertmanager => {
            let options = options(target);
            let alerts: Vec<_> = group.iter().map(|recovery| alertmanager::resolved_alert(recovery, &options)).collect();
            alertmanager::alerts_body(&alerts)?
        }
    };
    Ok((Bytes::from(body), group.len()))
}

/// Why an attempt failed, as the `reason` label of `hotrule_alarm_hook_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    Timeout,
    Status4xx,
    Status5xx,
    /// 1xx or 3xx.
    StatusOther,
    /// No connection, or the request could not be made.
    Unreachable,
}

impl FailReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Timeout => "timeout",
            FailReason::Status4xx => "status_4xx",
            FailReason::Status5xx => "status_5xx",
            FailReason::StatusOther => "status_other",
            FailReason::Unreachable => "unreachable",
        }
    }
}

/// What comes after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Delivered,
    /// Try again after `delay`.
    Retry { reason: FailReason, delay: Duration },
    /// Dropped: `refused` when the answer would be the same again (4xx, 3xx), else the last
    /// allowed attempt failed.
    GiveUp { reason: FailReason, refused: bool },
}

/// The step after attempt number `attempt` (1 for the first) answered `result`.
pub fn next_step(result: &Result<StatusCode, HookError>, attempt: u32, settings: &DeliverySettings) -> Step {
    let reason = match result {
        Ok(status) if status.is_success() => return Step::Delivered,
        Ok(status) if status.is_server_error() => FailReason::Status5xx,
        Ok(status) if *status == StatusCode::REQUEST_TIMEOUT || *status == StatusCode::TOO_MANY_REQUESTS => FailReason::Status4xx,
        Ok(status) if status.is_client_error() => return Step::GiveUp { reason: FailReason::Status4xx, refused: true },
        Ok(_) => return Step::GiveUp { reason: FailReason::StatusOther, refused: true },
        Err(HookError::Timeout { .. }) => FailReason::Timeout,
        Err(HookError::Unreachable { .. } | HookError::Tls { .. }) => FailReason::Unreachable,
        Err(HookError::Request { .. }) => return Step::GiveUp { reason: FailReason::Unreachable, refused: true },
    };
    if attempt >= settings.max_attempts {
        Step::GiveUp { reason, refused: false }
    } else {
        Step::Retry { reason, delay: settings.backoff(attempt) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::alarms::hooks::message::Tag;

    fn message(rule: &str, hooks: &[&str]) -> AlarmMessage {
        AlarmMessage {
            scope_id: 1,
            scope: "SERVICE".into(),
            name: format!("svc-of-{rule}"),
            rule_name: rule.into(),
            alarm_message: format!("{rule} fired"),
            tags: vec![Tag::new("level", "WARNING")],
            start_time: 1_000,
            hooks: hooks.iter().map(ToString::to_string).collect(),
            uuid: format!("uuid-{rule}"),
            ..AlarmMessage::default()
        }
    }

    fn targets() -> BTreeMap<String, HookTarget> {
        let hooks = [
            HookTarget::webhook("webhook.a", &["http://a1/", "http://a2/"], &["http://a-recovery/"], &[("X-Token", "t")]).expect("valid"),
            HookTarget::webhook("webhook.b", &["http://b/"], &[], &[]).expect("valid"),
            HookTarget::alertmanager("alertmanager.am", &["http://am:9093"], &[]).expect("valid"),
        ];
        hooks.into_iter().map(|hook| (hook.id.clone(), hook)).collect()
    }

    fn summary(plan: &Plan) -> Vec<(String, String, &'static str, usize)> {
        plan.deliveries.iter().map(|d| (d.hook.to_string(), d.url.to_string(), d.kind.as_str(), d.messages)).collect()
    }

    #[test]
    fn messages_are_grouped_by_hook_and_sent_to_each_url_of_their_kind() {
        let firing = [message("r1", &["webhook.a", "webhook.b"]), message("r2", &["webhook.a", "alertmanager.am", "webhook.gone"])];
        let recoveries = [
            AlarmRecoveryMessage::of(message("r3", &["webhook.a", "webhook.b"]), 2_000),
            AlarmRecoveryMessage::of(message("r4", &["alertmanager.am"]), 2_000),
        ];
        let plan = plan(&targets(), &firing, &recoveries);
        assert_eq!(
            summary(&plan),
            [
                ("alertmanager.am".to_string(), "http://am:9093/api/v2/alerts".to_string(), "firing", 1),
                ("alertmanager.am".to_string(), "http://am:9093/api/v2/alerts".to_string(), "recovery", 1),
                ("webhook.a".to_string(), "http://a1/".to_string(), "firing", 2),
                ("webhook.a".to_string(), "http://a2/".to_string(), "firing", 2),
                ("webhook.a".to_string(), "http://a-recovery/".to_string(), "recovery", 1),
                ("webhook.b".to_string(), "http://b/".to_string(), "firing", 1),
                // webhook.b has no recovery-urls: its recovery is not sent.
            ]
        );
        assert_eq!(plan.unknown_hooks, BTreeSet::from(["webhook.gone".to_string()]));

        let a1: serde_json::Value = serde_json::from_slice(&plan.deliveries[2].body).expect("json");
        let rules: Vec<&str> = a1.as_array().expect("array").iter().filter_map(|m| m["ruleName"].as_str()).collect();
        assert_eq!(rules, ["r1", "r2"]);
        assert_eq!(&*plan.deliveries[2].headers, &[(HeaderName::from_static("x-token"), HeaderValue::from_static("t"))]);
        let recovery: serde_json::Value = serde_json::from_slice(&plan.deliveries[4].body).expect("json");
        assert_eq!(recovery[0]["recoveryTime"], 2_000);
        let resolved: serde_json::Value = serde_json::from_slice(&plan.deliveries[1].body).expect("json");
        assert_eq!(resolved[0]["labels"]["alertname"], "r4");
        assert_eq!(resolved[0]["endsAt"], "1970-01-01T00:00:02.000Z");
    }

    #[test]
    fn an_empty_round_plans_nothing() {
        let plan = plan(&targets(), &[], &[]);
        assert!(plan.deliveries.is_empty() && plan.unknown_hooks.is_empty());
    }

    #[test]
    fn server_errors_timeouts_and_unreachable_are_retried_other_client_errors_are_not() {
        let settings = DeliverySettings::for_test();
        let timeout = Err(HookError::Timeout { url: "u".into(), timeout: settings.timeout });
        let unreachable = Err(HookError::Unreachable { url: "u".into(), reason: "refused".into() });
        assert_eq!(next_step(&Ok(StatusCode::OK), 1, &settings), Step::Delivered);
        assert_eq!(next_step(&Ok(StatusCode::ACCEPTED), 3, &settings), Step::Delivered);
        assert_eq!(next_step(&Ok(StatusCode::INTERNAL_SERVER_ERROR), 1, &settings), Step::Retry { reason: FailReason::Status5xx, delay: settings.initial_backoff });
        assert_eq!(next_step(&timeout, 2, &settings), Step::Retry { reason: FailReason::Timeout, delay: settings.initial_backoff * 2 });
        assert_eq!(next_step(&unreachable, 1, &settings), Step::Retry { reason: FailReason::Unreachable, delay: settings.initial_backoff });
        assert_eq!(next_step(&Ok(StatusCode::TOO_MANY_REQUESTS), 1, &settings), Step::Retry { reason: FailReason::Status4xx, delay: settings.initial_backoff });
        assert_eq!(next_step(&Ok(StatusCode::BAD_REQUEST), 1, &settings), Step::GiveUp { reason: FailReason::Status4xx, refused: true });
        assert_eq!(next_step(&Ok(StatusCode::MOVED_PERMANENTLY), 1, &settings), Step::GiveUp { reason: FailReason::StatusOther, refused: true });
        let last = settings.max_attempts;
        assert_eq!(next_step(&Ok(StatusCode::BAD_GATEWAY), last, &settings), Step::GiveUp { reason: FailReason::Status5xx, refused: false });
    }
}
