//! Rolling changes over HTTP (issue 15, docs/rolling.md).
//!
//! - `GET /runtime/rule/rolling`: the rolls this node holds. Without parameters, every roll
//!   (`{"rolls": [...]}`); with `catalog` and `name`, that file's roll (the view itself), or
//!   `404 not_found` when it has none. Served from this node's store, like every read; the shape
//!   is `rolling::view::RollView`, which the CLI reads back.
//! - The writes, run on the main (forwarded like every write): `addOrUpdate?rollout=rolling`
//!   (its parameters are read here, [`rollout`]; the route is the normal write's),
//!   `POST /runtime/rule/rollback-rolling` and `POST /runtime/rule/force-commit-rolling`. Each
//!   answers the write's usual body plus `roll`, the record's view ([`roll_body`]).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_body, outcome_response, status_code};
use crate::cluster::bus::messages::ForwardOp;
use crate::base::ids::RuleKey;
use crate::control::rolling::view::RollView;
use crate::control::rolling::{HealthChecks, HealthSettings, RollRecord, codec};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::rolling::StoredRoll;
use crate::control::workflow::{RollStart, Workflow};

pub async fn rolling(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog_echo, name_echo) = params.echo();
    if params.get("catalog").is_none() && params.get("name").is_none() {
        return match state.store.list_rolls().await {
            Ok(stored) => match stored.iter().map(view).collect::<Result<Vec<_>, _>>() {
                Ok(rolls) => axum::Json(json!({ "rolls": rolls })).into_response(),
                Err(outcome) => outcome_response(&outcome, "", ""),
            },
            Err(e) => outcome_response(&Outcome::new(ApplyStatus::StorageUnavailable, e.to_string()), "", ""),
        };
    }
    let key = match params.key(None) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    let answer = match state.store.get_roll(&key).await {
        Ok(Some(bytes)) => view(&StoredRoll { key: key.clone(), bytes }),
        Ok(None) => Err(Outcome::new(ApplyStatus::RuleNotFound, format!("{key} has no roll"))),
        Err(e) => Err(Outcome::new(ApplyStatus::StorageUnavailable, e.to_string())),
    };
    match answer {
        Ok(view) => axum::Json(view).into_response(),
        Err(outcome) => outcome_response(&outcome, &catalog_echo, &name_echo),
    }
}

/// A stored record as served; an unreadable one fails the read, naming its file.
fn view(stored: &StoredRoll) -> Result<RollView, Outcome> {
    codec::decode(&stored.bytes)
        .map(|record| RollView::of(&record))
        .map_err(|e| Outcome::new(ApplyStatus::ListFailed, format!("the roll record of {} is unreadable: {e}", stored.key)))
}

/// The roll parameters of an addOrUpdate: `None` without `rollout` (a normal write);
/// `rollout=rolling` with `stepTimeout` and `healthWindow` (`5m`, `30s`, `500ms`, or seconds) and
/// `healthChecks` (a comma list of `evalErrors` and `values`; `none` or empty turns both off).
pub(super) fn rollout(params: &Params) -> Result<Option<RollStart>, Outcome> {
    let invalid = |message: String| Outcome::new(ApplyStatus::InvalidParameter, message);
    match params.get("rollout").map(str::trim) {
        None | Some("") => {
            for name in ["stepTimeout", "healthWindow", "healthChecks"] {
                if params.get(name).is_some() {
                    return Err(invalid(format!("{name} applies to rollout=rolling only")));
                }
            }
            return Ok(None);
        }
        Some("rolling") => {}
        Some(other) => return Err(invalid(format!("rollout {other:?} is not 'rolling'"))),
    }
    let duration = |name: &str, default: u64| -> Result<u64, Outcome> {
        let Some(text) = params.get(name) else { return Ok(default) };
        match crate::api::query::time::parse_duration(text) {
            Ok(ms) if ms > 0 => Ok(ms as u64),
            _ => Err(invalid(format!("{name}={text:?} is not a positive duration (5m, 30s, 500ms)"))),
        }
    };
    let mut checks = HealthChecks { eval_errors: true, values: true };
    if let Some(list) = params.get("healthChecks") {
        checks = HealthChecks { eval_errors: false, values: false };
        for check in list.split(',').map(str::trim).filter(|c| !c.is_empty() && *c != "none") {
            match check {
                "evalErrors" => checks.eval_errors = true,
                "values" => checks.values = true,
                other => return Err(invalid(format!("healthChecks: {other:?} is not evalErrors or values"))),
            }
        }
    }
    let health = HealthSettings {
        window_ms: duration("healthWindow", HealthSettings::DEFAULT_WINDOW_MS)?,
        checks,
        ..HealthSettings::default()
    };
    Ok(Some(RollStart { step_timeout_ms: duration("stepTimeout", RollRecord::DEFAULT_STEP_TIMEOUT_MS)?, health }))
}

/// A roll write's answer: the write's body, plus `roll` (the record's view) when there is one.
pub(crate) fn roll_body(outcome: &Outcome, record: Option<&RollRecord>, catalog: &str, name: &str) -> serde_json::Value {
    let mut body = outcome_body(outcome, catalog, name);
    if let Some(record) = record {
        body["roll"] = serde_json::to_value(RollView::of(record)).unwrap_or_default();
    }
    body
}

pub(crate) fn roll_response(outcome: &Outcome, record: Option<&RollRecord>, catalog: &str, name: &str) -> Response {
    (status_code(outcome.status), axum::Extension(outcome.status), axum::Json(roll_body(outcome, record, catalog, name)))
        .into_response()
}

/// Runs a roll operation on this node (the main), for a direct request or a forwarded one.
/// `None` for an operation that is not a roll's.
pub(crate) async fn run_roll_op(workflow: &Workflow, op: ForwardOp) -> Option<(Outcome, Option<RollRecord>)> {
    let ended = |result: Result<RollRecord, crate::control::workflow::RollError>, status: ApplyStatus, what: &str| match result {
        Ok(record) => {
            let outcome = Outcome::new(status, format!("{} {what}", record.key)).at(&record.revision);
            (outcome, Some(record))
        }
        Err(e) => (Outcome::new(e.status(), e.to_string()), None),
    };
    Some(match op {
        ForwardOp::RollStart { key, content, allow_storage_change, force, step_timeout_ms, health } => {
            let request = crate::control::workflow::AddOrUpdate { key, content, allow_storage_change, force };
            workflow.start_roll(request, RollStart { step_timeout_ms, health }).await
        }
        ForwardOp::RollRollback { key } => ended(
            workflow.rollback_roll(&key).await,
            ApplyStatus::RollRolledBack,
            "rolled back; every node returns to the committed content on its next scan",
        ),
        ForwardOp::RollForceCommit { key } => ended(
            workflow.force_commit_roll(&key).await,
            ApplyStatus::RollForceCommitted,
            "force-committed; the rolling content is the committed entry everywhere",
        ),
        _ => return None,
    })
}

/// `POST /runtime/rule/rollback-rolling?catalog=&name=`.
pub async fn rollback_rolling(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    end_roll(state, raw, |key| ForwardOp::RollRollback { key }).await
}

/// `POST /runtime/rule/force-commit-rolling?catalog=&name=`.
pub async fn force_commit_rolling(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    end_roll(state, raw, |key| ForwardOp::RollForceCommit { key }).await
}

async fn end_roll(state: Arc<AdminState>, raw: RawQuery, op: impl FnOnce(RuleKey) -> ForwardOp) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog_echo, name_echo) = params.echo();
    let key = match params.key(None) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    roll_here_or_forward(&state, op(key), &catalog_echo, &name_echo).await
}

/// A roll operation a request made on this node: forwarded to the main when this node is not
/// it, else run here; answered as the roll routes answer.
pub(super) async fn roll_here_or_forward(state: &AdminState, op: ForwardOp, catalog: &str, name: &str) -> Response {
    if let Some(response) = super::forward::forward_if_not_main(state, || op.clone()).await {
        return response;
    }
    match run_roll_op(&state.workflow, op).await {
        Some((outcome, record)) => roll_response(&outcome, record.as_ref(), catalog, name),
        None => outcome_response(&Outcome::new(ApplyStatus::InvalidParameter, "not a roll operation"), catalog, name),
    }
}
