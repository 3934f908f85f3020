//! The metric query JSON routes (`/query/metrics`, `/query/metrics/list`,
//! `/query/metrics/entities`): thin handlers over `query::json_api`, answering errors with the
//! admin API's `applyStatus` body. The Prometheus API routes are `query::prom_api`'s own router,
//! mounted by [`super::router`] behind the same token.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};

pub async fn metrics(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::query::json_api::metrics(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

pub async fn list(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::query::json_api::list(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

pub async fn entities(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    match Params::from(raw) {
        Ok(params) => answer(crate::query::json_api::entities(&state.query, &params.map).await),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}

fn answer<T: serde::Serialize>(result: Result<T, crate::status::Outcome>) -> Response {
    match result {
        Ok(body) => axum::Json(body).into_response(),
        Err(outcome) => outcome_response(&outcome, "", ""),
    }
}
