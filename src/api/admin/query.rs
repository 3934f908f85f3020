//! The metric query JSON routes (`/query/metrics`, `/query/metrics/list`,
//! `/query/metrics/entities`), `/query/logs` and `/query/alarms`: thin handlers over
//! `query::json_api`, `query::logs_api` and `query::alarms_api`, answering errors with the admin API's `applyStatus` body. The Prometheus
//! API routes are `query::prom_api`'s own router, mounted by [`super::router`] behind the same
//! token.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};

pub async fn metrics(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::api::query::json_api::metrics(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

pub async fn list(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::api::query::json_api::list(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

pub async fn entities(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::api::query::json_api::entities(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

/// `GET /query/logs`: its parameters (`tag` repeats) are checked by `query::logs_api`.
pub async fn logs(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match raw {
        Ok(axum::extract::Query(pairs)) => answer(crate::api::query::logs_api::logs(&state.query, &pairs).await),
        Err(e) => outcome_response(&crate::control::outcome::Outcome::new(crate::control::outcome::ApplyStatus::InvalidParameter, format!("query string: {e}")), "", ""),
    }
}

/// `GET /query/alarms`: its parameters (`rule` and `tag` repeat) are checked by
/// `query::alarms_api`.
pub async fn alarms(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match raw {
        Ok(axum::extract::Query(pairs)) => answer(crate::api::query::alarms_api::alarms(&state.query, &pairs).await),
        Err(e) => outcome_response(&crate::control::outcome::Outcome::new(crate::control::outcome::ApplyStatus::InvalidParameter, format!("query string: {e}")), "", ""),
    }
}

fn answer<T: serde::Serialize>(result: Result<T, crate::control::outcome::Outcome>) -> Response {
    match result {
        Ok(body) => axum::Json(body).into_response(),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}
