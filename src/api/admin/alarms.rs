//! `GET /runtime/alarm/rules`: each alarm rule, its status and, per entity, its window values,
//! state and countdowns (SkyWalking's `/status/alarm/rules`, one answer for all rules). Only
//! the entities this node evaluates (in a cluster, those it owns) appear.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AdminState;
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
