//! The alarm routes of the admin port.
//!
//! - `GET /runtime/alarm/rules`: each alarm rule, its status and, per entity, its window values,
//!   state and countdowns (SkyWalking's `/status/alarm/rules`, one answer for all rules). Only
//!   the entities this node evaluates (in a cluster, those it owns) appear.
//! - `GET|POST|DELETE /runtime/alarm/settings`: the `alarm-settings.yml` in force on this node;
//!   a push or delete is a write on the main, in the rule API's envelope.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use super::forward::forward_if_not_main;
use super::{AdminState, outcome_response};
use crate::base::ids::Catalog;
use crate::cluster::bus::messages::ForwardOp;
use crate::control::alarms::live::{SETTINGS_NAME, Source};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::alarms::engine::RuleStatus;
use crate::control::alarms::window::MetricValue;

pub async fn rules(State(state): State<Arc<AdminState>>) -> Response {
    let Some(alarms) = state.runtime.alarms() else {
        return axum::Json(json!({"rules": [], "resets": 0})).into_response();
    };
    let (view, resets) = {
        let engine = alarms.lock().unwrap_or_else(|p| p.into_inner());
        (engine.view(), engine.reset_count())
    };
    let rules: Vec<Value> = view
        .into_iter()
        .map(|rule| {
            let (status, detail) = match &rule.status {
                RuleStatus::NotChecked => ("not_checked", Value::Null),
                RuleStatus::Running => ("running", Value::Null),
                RuleStatus::Waiting { missing } => ("waiting", json!({"missingMetrics": missing})),
                RuleStatus::Error { reason } => ("error", json!({"reason": reason})),
            };
            let entities: Vec<Value> = rule
                .entities
                .iter()
                .map(|(entity, held)| {
                    let window: Vec<Value> = held
                        .window
                        .slots()
                        .map(|(minute, slot)| {
                            let values: serde_json::Map<String, Value> = slot
                                .map(|slot| slot.iter().map(|(metric, value)| (metric.clone(), value_json(value))).collect())
                                .unwrap_or_default();
                            json!({"minute": minute.0 * 60_000, "values": values})
                        })
                        .collect();
                    json!({
                        "scope": entity.scope.name(),
                        "name": entity.name,
                        "id0": entity.id0,
                        "id1": entity.id1,
                        "currentState": held.state.phase,
                        "silenceCountdown": held.state.silence_countdown,
                        "recoveryObservationCountdown": held.state.recovery_countdown,
                        "lastAlarm": held.state.last_fired.map(|f| json!({"uuid": f.uuid.to_string(), "startTime": f.start_time_ms})),
                        "windowValues": window,
                    })
                })
                .collect();
            json!({
                "ruleName": rule.name,
                "expression": rule.expression,
                "metrics": rule.metrics,
                "status": status,
                "detail": detail,
                "size": rule.window_size,
                "entities": entities,
            })
        })
        .collect();
    axum::Json(json!({"rules": rules, "resets": resets})).into_response()
}

fn value_json(value: &MetricValue) -> Value {
    match value {
        MetricValue::Single(v) => json!(v),
        MetricValue::Labeled(pairs) => pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>().into(),
    }
}

/// `GET /runtime/alarm/settings`: the settings in force on this node, where they came from,
/// and the last settings it refused (if any).
pub async fn settings(State(state): State<Arc<AdminState>>) -> Response {
    let Some(live) = state.runtime.alarm_settings() else {
        return outcome_response(&Outcome::new(ApplyStatus::NotReady, "alarm settings are not loaded yet"), Catalog::AlarmSettings.as_str(), SETTINGS_NAME);
    };
    let in_force = live.in_force();
    let mut body = json!({
        "source": in_force.source.kind(),
        "contentHash": in_force.hash.to_string(),
        "content": in_force.content,
        "rules": in_force.rules,
        "hooks": in_force.hooks,
        "refused": in_force.refused.as_ref().map(|r| json!({"source": r.source.kind(), "contentHash": r.hash.to_string(), "reason": r.reason})),
    });
    match &in_force.source {
        Source::Runtime { revision } => body["revision"] = json!(revision.to_string()),
        Source::File { path } | Source::Empty { path } => body["path"] = json!(path.display().to_string()),
    }
    axum::Json(body).into_response()
}

/// `POST /runtime/alarm/settings`: the body (an `alarm-settings.yml`) becomes the settings of
/// every node; written on the main (forwarded there), replicated like a rule entry.
pub async fn push_settings(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    write_settings(&state, Some(body.to_vec())).await
}

/// `DELETE /runtime/alarm/settings`: every node returns to its boot file.
pub async fn delete_settings(State(state): State<Arc<AdminState>>) -> Response {
    write_settings(&state, None).await
}

async fn write_settings(state: &Arc<AdminState>, content: Option<Vec<u8>>) -> Response {
    let forwarded = forward_if_not_main(state, || ForwardOp::AlarmSettings { content: content.clone() }).await;
    if let Some(response) = forwarded {
        return response;
    }
    let outcome = state.workflow.alarm_settings_op(content.as_deref()).await;
    outcome_response(&outcome, Catalog::AlarmSettings.as_str(), SETTINGS_NAME)
}
