//! `GET /runtime/rule/rolling`: the rolls this node holds (issue 15). Without parameters, every
//! roll (`{"rolls": [...]}`); with `catalog` and `name`, that file's roll (the view itself), or
//! `404 not_found` when it has none. Served from this node's store, like every read; the shape is
//! `rolling::view::RollView`, which the CLI reads back.
//!
//! The write side (`rollout=rolling` on addOrUpdate, `rollback-rolling`,
//! `force-commit-rolling`) is designed in docs/rolling.md and not routed yet.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};
use crate::rolling::codec;
use crate::rolling::view::RollView;
use crate::status::{ApplyStatus, Outcome};
use crate::store::rolls::StoredRoll;

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
