//! Rule history routes (issue 26): `GET /runtime/rule/history` (the revisions of one entry,
//! newest first, or one revision with its content), `GET /runtime/rule/history/diff` (a unified
//! diff between two revisions) and `POST /runtime/rule/restore` (a normal write of an old
//! revision). Reads are served from this node's replica, like every read; history converges
//! like the entries, so every node answers the same once it has.
//!
//! A restore is turned into the write the revision stands for and runs exactly as that write
//! would (forwarded to the main, every check of the workflow): an ACTIVE revision is an
//! addOrUpdate of its content (with `allowStorageChange`, `force` and `rollout=rolling` as given),
//! an INACTIVE one an inactivate, a delete a delete, a revert to bundled a revert to bundled.
// Handlers answer early with a ready `Response` as their error.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::forward::forward_if_not_main;
use super::params::{Params, RawQuery};
use super::{AdminState, outcome_body, outcome_response, status_code};
use crate::base::clock::iso8601;
use crate::base::ids::{Catalog, Revision, RuleKey, RuleName};
use crate::cluster::bus::messages::ForwardOp;
use crate::control::history::{self, Located, diff};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::EntryStatus;
use crate::store::history::HistoryRecord;

/// Every catalog whose entries keep history: the rule catalogs, the agent catalogs, alarm
/// settings and dashboard templates.
fn history_catalog(text: &str) -> Option<Catalog> {
    Catalog::ALL
        .into_iter()
        .chain(Catalog::AGENT)
        .chain([Catalog::AlarmSettings, Catalog::UiTemplate])
        .find(|c| c.as_str() == text)
}

/// The key of a history read (any catalog with history).
fn history_key(params: &Params) -> Result<RuleKey, Outcome> {
    let catalog = match params.get("catalog").map(str::trim) {
        None | Some("") => return Err(Outcome::new(ApplyStatus::MissingCatalog, "query parameter catalog is required")),
        Some(text) => history_catalog(text)
            .ok_or_else(|| Outcome::new(ApplyStatus::InvalidCatalog, format!("unknown catalog {text:?}")))?,
    };
    let name = match params.get("name") {
        None | Some("") => return Err(Outcome::new(ApplyStatus::MissingName, "query parameter name is required")),
        Some(text) => RuleName::parse(text).map_err(|e| Outcome::new(ApplyStatus::InvalidName, e.to_string()))?,
    };
    Ok(RuleKey::new(catalog, name))
}

/// A required revision parameter.
fn revision_param(params: &Params, name: &str) -> Result<Revision, Outcome> {
    match params.get(name) {
        None | Some("") => Err(Outcome::new(ApplyStatus::InvalidParameter, format!("query parameter {name} is required"))),
        Some(text) => Revision::parse(text).map_err(|e| Outcome::new(ApplyStatus::InvalidParameter, format!("{name}: {e}"))),
    }
}

/// An error answer; a revision retention removed names the oldest revision kept.
fn refused(outcome: &Outcome, catalog: &str, name: &str, oldest: Option<&Revision>) -> Response {
    let mut body = outcome_body(outcome, catalog, name);
    if let Some(oldest) = oldest {
        body["oldestRevision"] = Value::String(oldest.to_string());
    }
    (status_code(outcome.status), axum::Extension(outcome.status), axum::Json(body)).into_response()
}

/// One revision of `key` from this node's replica, or the answer saying why not.
async fn one_revision(state: &AdminState, key: &RuleKey, revision: &Revision, echo: (&str, &str)) -> Result<HistoryRecord, Response> {
    let kept: Vec<Revision> = state.store.history_index_of(key).into_iter().map(|(r, _)| r).collect();
    let (catalog, name) = echo;
    match history::locate(&kept, revision) {
        Located::Kept => {}
        Located::NoHistory => {
            let outcome = Outcome::new(ApplyStatus::HistoryNotFound, format!("{key} has no history on this node"));
            return Err(refused(&outcome, catalog, name, None));
        }
        Located::Compacted { oldest } => {
            let outcome = Outcome::new(
                ApplyStatus::RevisionCompacted,
                format!("revision {revision} of {key} was removed by history retention; the oldest revision kept is {oldest}"),
            );
            return Err(refused(&outcome, catalog, name, Some(&oldest)));
        }
        Located::Unknown { oldest } => {
            let outcome = Outcome::new(ApplyStatus::RevisionNotFound, format!("{key} has no revision {revision}"));
            return Err(refused(&outcome, catalog, name, Some(&oldest)));
        }
    }
    match state.store.history_record(key, revision).await {
        Ok(Some(record)) => Ok(record),
        Ok(None) => {
            let outcome = Outcome::new(ApplyStatus::RevisionNotFound, format!("{key} has no revision {revision}"));
            Err(refused(&outcome, catalog, name, None))
        }
        Err(e) => Err(outcome_response(&Outcome::new(ApplyStatus::StorageUnavailable, e.to_string()), catalog, name)),
    }
}

/// A revision as the history answer shows it (`content` only when asked for one revision).
fn revision_view(record: &HistoryRecord, current: bool, with_content: bool) -> Value {
    let origin = &record.origin;
    let mut view = json!({
        "revision": record.revision.to_string(),
        "time": iso8601(record.time_ms),
        "timeMs": record.time_ms,
        "status": record.status.as_str(),
        "action": origin.action,
        "contentHash": record.content_hash.to_string(),
        "size": record.content.len(),
        "committedBy": origin.committed_by.0,
        "takenBy": origin.taken_by.as_ref().map(|n| n.0.clone()),
        "client": origin.client,
        "token": origin.token,
        "restoreOf": origin.restore_of.as_ref().map(Revision::to_string),
        "applyStatus": origin.apply_status,
        "classification": origin.classification,
        "current": current,
    });
    if with_content {
        view["content"] = Value::String(String::from_utf8_lossy(&record.content).into_owned());
    }
    view
}

/// `GET /runtime/rule/history?catalog=&name=[&revision=]`.
pub async fn history(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(params) => params,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog, name) = params.echo();
    let key = match history_key(&params) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog, &name),
    };
    let retention = state.workflow.history_retention();
    let current = state.store.entry_meta(&key).map(|meta| meta.revision);
    let mut body = json!({
        "catalog": catalog,
        "name": name,
        "node": state.node_id.0,
        "retention": {
            "maxRevisions": retention.max_revisions,
            "maxAge": crate::base::duration::DurationSetting(retention.max_age).to_string(),
        },
    });
    if params.get("revision").is_some() {
        let revision = match revision_param(&params, "revision") {
            Ok(revision) => revision,
            Err(outcome) => return outcome_response(&outcome, &catalog, &name),
        };
        return match one_revision(&state, &key, &revision, (&catalog, &name)).await {
            Ok(record) => {
                body["revision"] = revision_view(&record, current.as_ref() == Some(&record.revision), true);
                axum::Json(body).into_response()
            }
            Err(response) => response,
        };
    }
    let records = match state.store.history_of(&key).await {
        Ok(records) => records,
        Err(e) => return outcome_response(&Outcome::new(ApplyStatus::StorageUnavailable, e.to_string()), &catalog, &name),
    };
    let Some(oldest) = records.first() else {
        let outcome = Outcome::new(ApplyStatus::HistoryNotFound, format!("{key} has no history on this node"));
        return outcome_response(&outcome, &catalog, &name);
    };
    body["oldestRevision"] = Value::String(oldest.revision.to_string());
    body["revisions"] =
        records.iter().rev().map(|r| revision_view(r, current.as_ref() == Some(&r.revision), false)).collect();
    axum::Json(body).into_response()
}

/// `GET /runtime/rule/history/diff?catalog=&name=&from=&to=`: `diff` is the unified diff from
/// `from`'s content to `to`'s (empty when equal).
pub async fn diff(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(params) => params,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog, name) = params.echo();
    let parsed = history_key(&params)
        .and_then(|key| Ok((key, revision_param(&params, "from")?, revision_param(&params, "to")?)));
    let (key, from, to) = match parsed {
        Ok(parsed) => parsed,
        Err(outcome) => return outcome_response(&outcome, &catalog, &name),
    };
    let old = match one_revision(&state, &key, &from, (&catalog, &name)).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let new = match one_revision(&state, &key, &to, (&catalog, &name)).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let text = diff::unified(
        &String::from_utf8_lossy(&old.content),
        &String::from_utf8_lossy(&new.content),
        &format!("{key}@{from} ({})", old.status.as_str()),
        &format!("{key}@{to} ({})", new.status.as_str()),
    );
    axum::Json(json!({
        "catalog": catalog,
        "name": name,
        "from": from.to_string(),
        "to": to.to_string(),
        "diff": text,
    }))
    .into_response()
}

/// `POST /runtime/rule/restore?catalog=&name=&revision=[&allowStorageChange][&force][&rollout=rolling]`.
pub async fn restore(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(params) => params,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog, name) = params.echo();
    let parsed = params.key(None).and_then(|key| Ok((key, revision_param(&params, "revision")?)));
    let (key, revision) = match parsed {
        Ok(parsed) => parsed,
        Err(outcome) => return outcome_response(&outcome, &catalog, &name),
    };
    let rollout = match super::rolling::rollout(&params) {
        Ok(rollout) => rollout,
        Err(outcome) => return outcome_response(&outcome, &catalog, &name),
    };
    let record = match one_revision(&state, &key, &revision, (&catalog, &name)).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let op = match (record.status, rollout) {
        (EntryStatus::Active, None) => ForwardOp::AddOrUpdate {
            key,
            content: record.content,
            allow_storage_change: params.flag("allowStorageChange"),
            force: params.flag("force"),
        },
        (EntryStatus::Active, Some(start)) => ForwardOp::RollStart {
            key,
            content: record.content,
            allow_storage_change: params.flag("allowStorageChange"),
            force: params.flag("force"),
            step_timeout_ms: start.step_timeout_ms,
            health: start.health,
        },
        (_, Some(_)) => {
            let outcome = Outcome::new(
                ApplyStatus::InvalidParameter,
                format!("revision {revision} is {}; only an ACTIVE revision can be restored with rollout=rolling", record.status.as_str()),
            );
            return outcome_response(&outcome, &catalog, &name);
        }
        (EntryStatus::Inactive, None) => ForwardOp::Inactivate { key },
        (EntryStatus::Deleted, None) => ForwardOp::Delete { key, revert_to_bundled: record.origin.action == "revertToBundled" },
    };
    let caller = history::Caller { restore_of: Some(revision), ..history::current_caller().unwrap_or_default() };
    history::with_caller(caller, run_write(state, op, catalog, name)).await
}

/// Runs a write here when this node is the main, else forwards it there.
async fn run_write(state: Arc<AdminState>, op: ForwardOp, catalog: String, name: String) -> Response {
    if matches!(op, ForwardOp::RollStart { .. }) {
        return super::rolling::roll_here_or_forward(&state, op, &catalog, &name).await;
    }
    if let Some(response) = forward_if_not_main(&state, || op.clone()).await {
        return response;
    }
    outcome_response(&super::forwarded::run_rule_write(&state.workflow, op).await, &catalog, &name)
}
