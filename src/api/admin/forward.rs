//! Sending a write to the main: a node that is not the main relays the operation over the bus
//! and answers with the main's answer. (`forwarded` is the other side: what the main runs for
//! its peers.)

use axum::response::{IntoResponse, Response};

use super::AdminState;
use crate::cluster::bus::messages::ForwardOp;
use crate::cluster::replication::forward::Forwarded;

/// A write that reaches a node which is not the main goes to the main, one hop; the main's status
/// and body are relayed unchanged. During a failover it waits, at most `cluster.forward_wait`,
/// for the next main (and runs here if that is this node: `None`). When the bound passes, a
/// transport failure is `502 forward_failed` with `mainNode`, a split view the main's `421`.
pub(super) async fn forward_if_not_main(state: &AdminState, op: impl FnOnce() -> ForwardOp) -> Option<Response> {
    let cluster = state.cluster.as_ref().filter(|c| !c.is_main())?;
    let op = op();
    let (catalog, name) = op.key().map(|k| (k.catalog.as_str(), k.name.as_str().to_string())).unwrap_or_default();
    Some(match cluster.forward_write(op).await {
        Forwarded::RunHere => return None,
        Forwarded::Answer(status, body) => {
            let status = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
            (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Forwarded::Failed(outcome, main) => {
            let body = serde_json::json!({
                "applyStatus": outcome.status.as_str(),
                "catalog": catalog,
                "name": name,
                "message": outcome.message,
                "mainNode": main,
            });
            (super::status_code(outcome.status), axum::Extension(outcome.status), axum::Json(body)).into_response()
        }
    })
}
