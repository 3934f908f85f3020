//! `GET /metrics`: the node's own metrics as Prometheus exposition (OpenMetrics text), behind
//! the same bearer token as every admin read.
//!
//! The counters are kept by the modules that count; this handler only refreshes the gauges that
//! mirror state held elsewhere (rules by local state, agents online, batches pending in dispatch)
//! and renders the registry.
//! Rule writes are counted by [`count_writes`], a layer on the write routes that reads the
//! `applyStatus` each answer carries as an extension.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AdminState;
use crate::api::agents::Liveness;
use crate::control::outcome::ApplyStatus;
use crate::base::self_metrics::{CONTENT_TYPE, LabelSet, labels};

/// Every local state a rule file can be in (`RuleRuntime::local_state`); each is rendered, at 0
/// when no file is in it, so a state that empties shows 0 rather than its last count.
const RULE_STATES: [&str; 3] = ["RUNNING", "SUSPENDED", "NOT_LOADED"];

pub async fn metrics(State(state): State<Arc<AdminState>>) -> Response {
    refresh_gauges(&state);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], state.telemetry.render()).into_response()
}

fn refresh_gauges(state: &AdminState) {
    let mut by_state: BTreeMap<&'static str, i64> = RULE_STATES.iter().map(|s| (*s, 0)).collect();
    state.runtime.with_all(|rules| {
        for rule in rules.values() {
            *by_state.entry(rule.local_state()).or_default() += 1;
        }
    });
    for (local_state, count) in by_state {
        state.telemetry.rules.get_or_create(&labels([("state", local_state)])).set(count);
    }
    let online = state.agents.agents().iter().filter(|agent| agent.liveness == Liveness::Online).count();
    state.telemetry.agents_connected.get_or_create(&LabelSet::new()).set(online as i64);
    let compacted = i64::try_from(state.store.history_compacted()).unwrap_or(i64::MAX);
    state.telemetry.history_compacted.get_or_create(&LabelSet::new()).set(compacted);
    for (queue, pending) in [("metrics", state.dispatcher.pending()), ("logs", state.dispatcher.pending_logs())] {
        let pending = i64::try_from(pending).unwrap_or(i64::MAX);
        state.telemetry.dispatch_pending_batches.get_or_create(&labels([("queue", queue)])).set(pending);
    }
}

/// Counts the answer of a write route in `rule_writes{status}`, when it carries its
/// `applyStatus` (every answer this node decided does; a write relayed from the main carries
/// none: the main counts it, in `forwarded`).
pub async fn count_writes(State(state): State<Arc<AdminState>>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(status) = response.extensions().get::<ApplyStatus>() {
        count_write(&state, *status);
    }
    response
}

/// One rule write answered by this node with `status`.
pub fn count_write(state: &AdminState, status: ApplyStatus) {
    state.telemetry.rule_writes.get_or_create(&labels([("status", status.as_str())])).inc();
}
