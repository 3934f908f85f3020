//! Requests forwarded to this node over the bus (writes, and apply-status reads that only the
//! main holds live): run here as the admin API would run them, and rendered here, so the
//! forwarding node relays the answer unchanged. The bus handler (`replication`) hands the
//! operation over and sends back what this returns; it neither runs operations nor renders.

use std::sync::{Arc, Weak};


use serde_json::Value;


use super::{AdminState, outcome_body, status_code};
use crate::cluster::bus::messages::ForwardOp;
use crate::base::ids::Catalog;
use crate::cluster::replication::handler::ForwardTarget;
use crate::BoxFuture;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::workflow::{AddOrUpdate, StatusQuery};

/// The admin API as a [`ForwardTarget`]. Weak: the bus (and the in-memory network) must not keep
/// the node's state alive.
pub struct ForwardedRequests {
    state: Weak<AdminState>,
}

impl ForwardedRequests {
    pub fn new(state: &Arc<AdminState>) -> ForwardedRequests {
        ForwardedRequests { state: Arc::downgrade(state) }
    }
}

impl ForwardTarget for ForwardedRequests {
    fn run<'a>(&'a self, op: ForwardOp) -> BoxFuture<'a, (u16, Vec<u8>)> {
        Box::pin(async move {
            match self.state.upgrade() {
                Some(state) => run(&state, op).await,
                None => {
                    let outcome = Outcome::new(ApplyStatus::NotReady, "this node is shutting down");
                    render(&outcome, op.key().map_or(Catalog::OtelRules, |k| k.catalog), "", false)
                }
            }
        })
    }
}

/// An outcome as the admin API answers it. The body echoes a catalog; a status read by applyId
/// has none, so its echo is blanked (`keyless`).
fn render(outcome: &Outcome, catalog: Catalog, name: &str, keyless: bool) -> (u16, Vec<u8>) {
    let body = rendered(outcome, catalog, name, keyless);
    (status_code(outcome.status).as_u16(), body.to_string().into_bytes())
}

fn rendered(outcome: &Outcome, catalog: Catalog, name: &str, keyless: bool) -> Value {
    let mut body = outcome_body(outcome, catalog.as_str(), name);
    if keyless {
        body["catalog"] = Value::String(String::new());
    }
    body
}

/// Runs an addOrUpdate, inactivate or delete on this node's workflow (the main's): for a
/// forwarded write and for a restore taken here. Any other operation is `invalid_parameter`.
pub(super) async fn run_rule_write(workflow: &crate::control::workflow::Workflow, op: ForwardOp) -> Outcome {
    match op {
        ForwardOp::AddOrUpdate { key, content, allow_storage_change, force } => {
            workflow.add_or_update(AddOrUpdate { key, content, allow_storage_change, force }).await
        }
        ForwardOp::Inactivate { key } => workflow.inactivate(&key).await,
        ForwardOp::Delete { key, revert_to_bundled } => workflow.delete(&key, revert_to_bundled).await,
        _ => Outcome::new(ApplyStatus::InvalidParameter, "not a rule write"),
    }
}

async fn run(state: &AdminState, op: ForwardOp) -> (u16, Vec<u8>) {
    let node = state.node_id.clone();
    let (catalog, name, keyless) = match op.key() {
        Some(key) => (key.catalog, key.name.as_str().to_string(), false),
        None => (Catalog::OtelRules, String::new(), true),
    };
    let rule_write = matches!(
        op,
        ForwardOp::AddOrUpdate { .. }
            | ForwardOp::Inactivate { .. }
            | ForwardOp::Delete { .. }
            | ForwardOp::RollStart { .. }
            | ForwardOp::RollRollback { .. }
            | ForwardOp::RollForceCommit { .. }
    );
    if let Some(cluster) = state.cluster.as_ref().filter(|c| !c.is_main()) {
        let main = cluster.view().main.map(|m| m.0).unwrap_or_default();
        let outcome = Outcome::new(
            ApplyStatus::ClusterViewSplit,
            format!("this node ({node}) is not the main either; its view says {main}. Retry once membership settles"),
        );
        let mut body = rendered(&outcome, catalog, &name, keyless);
        body["mainNode"] = Value::String(main);
        if rule_write {
            super::self_metrics::count_write(state, outcome.status);
        }
        return (status_code(outcome.status).as_u16(), body.to_string().into_bytes());
    }
    let workflow = &state.workflow;
    let outcome = match op {
        op @ (ForwardOp::AddOrUpdate { .. } | ForwardOp::Inactivate { .. } | ForwardOp::Delete { .. }) => run_rule_write(workflow, op).await,
        ForwardOp::Agent { op, .. } => match serde_json::from_slice::<crate::api::agents::AgentOp>(&op) {
            Ok(op) => workflow.agent_op(&op).await,
            Err(e) => Outcome::new(ApplyStatus::InvalidParameter, format!("forwarded agent operation: {e}")),
        },
        ForwardOp::AlarmSettings { content } => workflow.alarm_settings_op(content.as_deref()).await,
        ForwardOp::UiTemplate { op, .. } => match crate::control::ui_templates::TemplateOp::from_json(&op) {
            Ok(op) => super::ui_templates::run(workflow, state.graphql.bundled_templates(), &op).await,
            Err(e) => Outcome::new(ApplyStatus::InvalidParameter, format!("forwarded template operation: {e}")),
        },
        ForwardOp::ApplyStatus { apply_id, key, content_hash } => {
            let query = match (apply_id, key) {
                (Some(id), _) => StatusQuery::ById(id),
                (None, Some(key)) => StatusQuery::ByKey { key, content_hash },
                (None, None) => {
                    let outcome = Outcome::new(ApplyStatus::InvalidParameter, "a status read needs applyId, or catalog and name");
                    return render(&outcome, catalog, &name, keyless);
                }
            };
            let answer = workflow.apply_status(&query, &node).await;
            return (200, serde_json::to_vec(&answer).unwrap_or_default());
        }
        op @ (ForwardOp::RollStart { .. } | ForwardOp::RollRollback { .. } | ForwardOp::RollForceCommit { .. }) => {
            let (outcome, record) = match super::rolling::run_roll_op(workflow, op).await {
                Some(done) => done,
                None => (Outcome::new(ApplyStatus::InvalidParameter, "not a roll operation"), None),
            };
            super::self_metrics::count_write(state, outcome.status);
            let body = super::rolling::roll_body(&outcome, record.as_ref(), catalog.as_str(), &name);
            return (status_code(outcome.status).as_u16(), body.to_string().into_bytes());
        }
    };
    // A rule write forwarded from a peer is decided here, so it is counted here (the peer that
    // relays the answer does not count it).
    if rule_write {
        super::self_metrics::count_write(state, outcome.status);
    }
    render(&outcome, catalog, &name, keyless)
}
