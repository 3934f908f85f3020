//! `GET /runtime/rule/status`: the phase of a structural apply (SkyWalking 11, PR #13911).
//!
//! The live status is on the main, so a node that is not the main forwards the read over the
//! bus, as it forwards writes, and relays the main's answer (`servedBy` names the main). When
//! the main cannot be reached the node answers from its own replica of the stored rows, as the
//! reference's durable fallback does. The answer is always a 200, except for a malformed query.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};
use crate::cluster::bus::messages::ForwardOp;
use crate::base::ids::ContentHash;
use crate::control::outcome::Outcome;
use crate::control::workflow::StatusQuery;

/// The query: `applyId`, or `catalog` and `name` with an optional `contentHash`.
fn query(params: &Params) -> Result<StatusQuery, Outcome> {
    if let Some(id) = params.get("applyId").map(str::trim).filter(|id| !id.is_empty()) {
        return Ok(StatusQuery::ById(id.to_string()));
    }
    let key = params.key(None)?;
    let content_hash =
        params.get("contentHash").map(str::trim).filter(|h| !h.is_empty()).map(|h| ContentHash(h.to_string()));
    Ok(StatusQuery::ByKey { key, content_hash })
}

pub async fn rule_status(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let query = match query(&params) {
        Ok(query) => query,
        Err(outcome) => {
            let (catalog_echo, name_echo) = params.echo();
            return outcome_response(&outcome, &catalog_echo, &name_echo);
        }
    };
    let mut unreachable_main = None;
    if let Some(cluster) = state.cluster.as_ref().filter(|c| !c.is_main()) {
        let op = match &query {
            StatusQuery::ById(id) => ForwardOp::ApplyStatus { apply_id: Some(id.clone()), key: None, content_hash: None },
            StatusQuery::ByKey { key, content_hash } => {
                ForwardOp::ApplyStatus { apply_id: None, key: Some(key.clone()), content_hash: content_hash.clone() }
            }
        };
        match cluster.forward(op).await {
            Ok((status, body)) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
            }
            Err((outcome, main)) => {
                tracing::warn!(%main, error = %outcome.message, "status read not forwarded; answering from this node's rows");
                unreachable_main = Some(main);
            }
        }
    }
    let mut answer = state.workflow.apply_status(&query, &state.node_id).await;
    if let Some(main) = unreachable_main {
        let note = answer.note.take().unwrap_or_default();
        answer.note = Some(format!("the main ({main}) could not be reached; answered from this node's replica. {note}"));
    }
    axum::Json(answer).into_response()
}
