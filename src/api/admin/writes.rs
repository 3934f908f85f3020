//! Write routes: addOrUpdate, inactivate, delete, and their catalog shortcuts.
// Handlers answer early with a ready `Response` as their error: built once per request, it never
// travels far, so its size does not matter.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::forward::forward_if_not_main;
use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};
use crate::control::bundled::MAX_CONTENT_BYTES;
use crate::cluster::bus::messages::ForwardOp;
use crate::base::ids::Catalog;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::workflow::AddOrUpdate;

/// The query parameters of a write, with the catalog and name its answer echoes (a shortcut
/// route echoes its fixed catalog).
fn parse(raw: RawQuery, fixed: Option<Catalog>) -> Result<(Params, String, String), Response> {
    let params = Params::from(raw).map_err(|outcome| outcome_response(&outcome, "", ""))?;
    let (catalog_echo, name_echo) = params.echo();
    let catalog_echo = fixed.map(|c| c.as_str().to_string()).unwrap_or(catalog_echo);
    Ok((params, catalog_echo, name_echo))
}

async fn add_or_update_in(
    state: Arc<AdminState>,
    raw: RawQuery,
    fixed: Option<Catalog>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut timer = crate::control::workflow::timing::PhaseTimer::start("http_add_or_update");
    let (params, catalog_echo, name_echo) = match parse(raw, fixed) {
        Ok(parsed) => parsed,
        Err(response) => return response,
    };
    let key = match params.key(fixed) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    let rollout = match super::rolling::rollout(&params) {
        Ok(rollout) => rollout,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    // A declared length over the limit is refused before a byte of the body is read.
    if crate::base::listen::declares_more_than(&headers, MAX_CONTENT_BYTES as u64) {
        let outcome =
            Outcome::new(ApplyStatus::PayloadTooLarge, format!("content is larger than {MAX_CONTENT_BYTES} bytes"));
        return outcome_response(&outcome, &catalog_echo, &name_echo);
    }
    let content = match axum::body::to_bytes(body, MAX_CONTENT_BYTES).await {
        Ok(bytes) => bytes.to_vec(),
        Err(e) => {
            let too_large = std::iter::successors(std::error::Error::source(&e), |s| s.source())
                .any(|s| s.is::<http_body_util::LengthLimitError>());
            let outcome = if too_large {
                Outcome::new(ApplyStatus::PayloadTooLarge, format!("content is larger than {MAX_CONTENT_BYTES} bytes"))
            } else {
                Outcome::new(ApplyStatus::InvalidParameter, format!("reading the body: {e}"))
            };
            return outcome_response(&outcome, &catalog_echo, &name_echo);
        }
    };
    timer.mark("body");
    if content.iter().all(u8::is_ascii_whitespace) {
        let outcome = Outcome::new(ApplyStatus::EmptyBody, "the body must hold the rule file's YAML");
        return outcome_response(&outcome, &catalog_echo, &name_echo);
    }
    let request = AddOrUpdate {
        key,
        content,
        allow_storage_change: params.flag("allowStorageChange"),
        force: params.flag("force"),
    };
    if let Some(start) = rollout {
        let op = ForwardOp::RollStart {
            key: request.key,
            content: request.content,
            allow_storage_change: request.allow_storage_change,
            force: request.force,
            step_timeout_ms: start.step_timeout_ms,
            health: start.health,
        };
        return super::rolling::roll_here_or_forward(&state, op, &catalog_echo, &name_echo).await;
    }
    if let Some(response) = forward_if_not_main(&state, || ForwardOp::AddOrUpdate {
        key: request.key.clone(),
        content: request.content.clone(),
        allow_storage_change: request.allow_storage_change,
        force: request.force,
    })
    .await
    {
        return response;
    }
    timer.mark("forward_check");
    let outcome = state.workflow.add_or_update(request).await;
    timer.mark("workflow");
    let response = outcome_response(&outcome, &catalog_echo, &name_echo);
    timer.mark("render");
    response
}

async fn inactivate_in(state: Arc<AdminState>, raw: RawQuery, fixed: Option<Catalog>) -> Response {
    let (params, catalog_echo, name_echo) = match parse(raw, fixed) {
        Ok(parsed) => parsed,
        Err(response) => return response,
    };
    let outcome = match params.key(fixed) {
        Ok(key) => {
            if let Some(response) = forward_if_not_main(&state, || ForwardOp::Inactivate { key: key.clone() }).await {
                return response;
            }
            state.workflow.inactivate(&key).await
        }
        Err(outcome) => outcome,
    };
    outcome_response(&outcome, &catalog_echo, &name_echo)
}

async fn delete_in(state: Arc<AdminState>, raw: RawQuery, fixed: Option<Catalog>) -> Response {
    let (params, catalog_echo, name_echo) = match parse(raw, fixed) {
        Ok(parsed) => parsed,
        Err(response) => return response,
    };
    let key = match params.key(fixed) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    // A shortcut delete always uses the default mode.
    let revert = match (fixed, params.get("mode").map(str::trim)) {
        (Some(_), _) | (None, None) | (None, Some("")) => false,
        (None, Some("revertToBundled")) => true,
        (None, Some(other)) => {
            let outcome =
                Outcome::new(ApplyStatus::InvalidMode, format!("mode {other:?} is not one of '' or 'revertToBundled'"));
            return outcome_response(&outcome, &catalog_echo, &name_echo);
        }
    };
    if let Some(response) =
        forward_if_not_main(&state, || ForwardOp::Delete { key: key.clone(), revert_to_bundled: revert }).await
    {
        return response;
    }
    let outcome = state.workflow.delete(&key, revert).await;
    outcome_response(&outcome, &catalog_echo, &name_echo)
}

macro_rules! write_routes {
    ($add:ident, $inactivate:ident, $delete:ident, $catalog:expr) => {
        pub async fn $add(State(state): State<Arc<AdminState>>, raw: RawQuery, headers: HeaderMap, body: Body) -> Response {
            add_or_update_in(state, raw, $catalog, headers, body).await
        }
        pub async fn $inactivate(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
            inactivate_in(state, raw, $catalog).await
        }
        pub async fn $delete(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
            delete_in(state, raw, $catalog).await
        }
    };
}

write_routes!(add_or_update, inactivate, delete, None);
write_routes!(otel_add_or_update, otel_inactivate, otel_delete, Some(Catalog::OtelRules));
write_routes!(log_add_or_update, log_inactivate, log_delete, Some(Catalog::LogMalRules));
write_routes!(lal_add_or_update, lal_inactivate, lal_delete, Some(Catalog::Lal));

/// `POST /debug/drop?peer=ID&drop=true|false`: drop (or restore) this node's outgoing
/// Suspend/Resume messages to one peer (builds with the `failpoints` feature only).
#[cfg(feature = "failpoints")]
pub async fn set_drop(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let Some(switch) = state.cluster.as_ref().and_then(|c| c.drop_switch.clone()) else {
        return outcome_response(&Outcome::new(ApplyStatus::InvalidParameter, "this node is not clustered"), "", "");
    };
    let peer = crate::base::ids::NodeId(params.get("peer").unwrap_or("").to_string());
    if params.flag("drop") {
        switch.drop_calls_to(peer.clone());
    } else {
        switch.restore(&peer);
    }
    outcome_response(&Outcome::new(ApplyStatus::NoChange, format!("dropping suspend/resume to: {:?}", switch.dropped_peers())), "", "")
}

/// `POST /debug/failpoints?name=N&action=A` (builds with the `failpoints` feature only).
#[cfg(feature = "failpoints")]
pub async fn set_failpoint(raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let name = params.get("name").unwrap_or("");
    if !crate::control::workflow::faults::ALL.contains(&name) {
        let outcome = Outcome::new(
            ApplyStatus::InvalidParameter,
            format!("unknown failpoint {name:?}; known: {}", crate::control::workflow::faults::ALL.join(", ")),
        );
        return outcome_response(&outcome, "", "");
    }
    let action = params.get("action").unwrap_or("off");
    match fail::cfg(name, action) {
        Ok(()) => outcome_response(&Outcome::new(ApplyStatus::NoChange, format!("{name}={action}")), "", ""),
        Err(e) => outcome_response(&Outcome::new(ApplyStatus::InvalidParameter, e), "", ""),
    }
}
