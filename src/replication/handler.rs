//! Answers peers over the bus: Forward (only the main runs writes; a non-main answers 421),
//! Suspend/Resume through the origin lattice, commit notices (pull now), storage sync, and the
//! read-only views behind cluster-wide admin reads (so those never carry an operator's token).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::bus::messages::{BusRequest, BusResponse, EntrySummary, ForwardOp, NodeView, ResumeState, SuspendState};
use crate::bus::server::BusHandler;
use crate::ids::{Catalog, RuleKey};
use crate::runtime::locks::FileLocks;
use crate::runtime::{Origin, ResumeResult, Runtime, SuspendResult};
use crate::scan::Scanner;
use crate::status::{ApplyStatus, Outcome};
use crate::store::Store;
use crate::workflow::peers::BoxFuture;
use crate::workflow::{AddOrUpdate, StatusQuery, Workflow};

use super::Cluster;
use super::sync::pull_keys;

/// Renders a workflow outcome as the admin API would: (HTTP status, JSON body).
pub type Renderer = Arc<dyn Fn(&Outcome, Catalog, &str) -> (u16, Value) + Send + Sync>;

/// Renders a read-only view of this node as JSON (what a peer fanning out an admin read sees).
pub type ViewSource = Arc<dyn Fn(NodeView) -> Vec<u8> + Send + Sync>;

/// How long a Suspend waits for the file's lock before refusing.
const SUSPEND_LOCK_WAIT: Duration = Duration::from_millis(500);

pub struct NodeBusHandler {
    pub cluster: Arc<Cluster>,
    pub workflow: Arc<Workflow>,
    pub store: Arc<Store>,
    pub runtime: Arc<Runtime>,
    pub locks: Arc<FileLocks>,
    pub scanner: Arc<Scanner>,
    pub render: Renderer,
    pub views: ViewSource,
}

impl NodeBusHandler {
    async fn forward(&self, op: ForwardOp) -> BusResponse {
        let node = self.cluster.self_id().clone();
        // The renderer echoes a catalog; a status read by applyId has none, so its echo is
        // blanked after rendering.
        let (catalog, name, keyless) = match op.key() {
            Some(key) => (key.catalog, key.name.as_str().to_string(), false),
            None => (Catalog::OtelRules, String::new(), true),
        };
        let render = |outcome: &Outcome| {
            let (status, mut body) = (self.render)(outcome, catalog, &name);
            if keyless {
                body["catalog"] = Value::String(String::new());
            }
            (status, body)
        };
        if !self.cluster.is_main() {
            let main = self.cluster.view().main.map(|m| m.0).unwrap_or_default();
            let outcome = Outcome::new(
                ApplyStatus::ClusterViewSplit,
                format!("this node ({node}) is not the main either; its view says {main}. Retry once membership settles"),
            );
            let (status, mut body) = render(&outcome);
            body["mainNode"] = Value::String(main);
            return BusResponse::Forwarded { http_status: status, body: body.to_string().into_bytes(), node };
        }
        let outcome = match op {
            ForwardOp::AddOrUpdate { key, content, allow_storage_change, force } => {
                self.workflow.add_or_update(AddOrUpdate { key, content, allow_storage_change, force }).await
            }
            ForwardOp::Inactivate { key } => self.workflow.inactivate(&key).await,
            ForwardOp::Delete { key, revert_to_bundled } => self.workflow.delete(&key, revert_to_bundled).await,
            ForwardOp::Agent { op, .. } => match serde_json::from_slice::<crate::agent::AgentOp>(&op) {
                Ok(op) => self.workflow.agent_op(&op).await,
                Err(e) => Outcome::new(ApplyStatus::InvalidParameter, format!("forwarded agent operation: {e}")),
            },
            ForwardOp::ApplyStatus { apply_id, key, content_hash } => {
                let query = match (apply_id, key) {
                    (Some(id), _) => StatusQuery::ById(id),
                    (None, Some(key)) => StatusQuery::ByKey { key, content_hash },
                    (None, None) => {
                        let outcome = Outcome::new(ApplyStatus::InvalidParameter, "a status read needs applyId, or catalog and name");
                        let (status, body) = render(&outcome);
                        return BusResponse::Forwarded { http_status: status, body: body.to_string().into_bytes(), node };
                    }
                };
                let answer = self.workflow.apply_status(&query, &node).await;
                let body = serde_json::to_vec(&answer).unwrap_or_default();
                return BusResponse::Forwarded { http_status: 200, body, node };
            }
        };
        let (status, body) = render(&outcome);
        BusResponse::Forwarded { http_status: status, body: body.to_string().into_bytes(), node }
    }

    async fn suspend(&self, key: RuleKey) -> BusResponse {
        let node = self.cluster.self_id().clone();
        // The lock is only held to order the lattice change against a local apply in progress.
        let state = match self.locks.lock(&key, SUSPEND_LOCK_WAIT).await {
            None => SuspendState::Rejected,
            Some(_guard) => match self.runtime.suspend(&key, Origin::Peer, true) {
                SuspendResult::Suspended => SuspendState::Suspended,
                SuspendResult::AlreadySuspended => SuspendState::AlreadySuspended,
                SuspendResult::NotPresent => SuspendState::NotPresent,
                SuspendResult::Rejected => SuspendState::Rejected,
            },
        };
        if state == SuspendState::Rejected {
            tracing::warn!(rule = %key, "ORIGIN CONFLICT: suspend from a peer refused; another main may be applying it");
        }
        BusResponse::SuspendAck { node, state }
    }

    async fn notify_committed(&self, key: RuleKey, revision: crate::ids::Revision, sender: crate::ids::NodeId) -> BusResponse {
        let view = self.cluster.view();
        let Some(from) = view.member(&sender).cloned() else {
            return BusResponse::Error { message: format!("unknown sender {sender}") };
        };
        if let Err(e) = pull_keys(&self.cluster, &self.workflow, &from, vec![key.clone()]).await {
            return BusResponse::Error { message: e.to_string() };
        }
        self.scanner.poke();
        let held = self.store.entry_meta(&key).is_some_and(|m| m.revision >= revision);
        if held { BusResponse::Ack } else { BusResponse::Error { message: format!("{key} at {revision} not held") } }
    }
}

impl BusHandler for NodeBusHandler {
    fn handle<'a>(&'a self, request: BusRequest) -> BoxFuture<'a, BusResponse> {
        Box::pin(async move {
            let me = self.cluster.self_id().clone();
            match request {
                BusRequest::Forward { sender, .. } | BusRequest::Suspend { sender, .. } | BusRequest::Resume { sender, .. }
                    if sender == me =>
                {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::Forward { op, .. } => self.forward(op).await,
                BusRequest::Suspend { key, .. } => self.suspend(key).await,
                BusRequest::Resume { key, .. } => {
                    let state = match self.runtime.resume(&key, Origin::Peer) {
                        ResumeResult::Resumed => ResumeState::Resumed,
                        ResumeResult::NotSuspendedBySender => ResumeState::NotSuspendedBySender,
                        ResumeResult::NotPresent => ResumeState::NotPresent,
                        ResumeResult::PartiallyResumed => ResumeState::PartiallyResumed,
                    };
                    BusResponse::ResumeAck { node: me, state }
                }
                BusRequest::NotifyCommitted { key, revision, sender } => self.notify_committed(key, revision, sender).await,
                BusRequest::Digest { .. } => BusResponse::DigestReply { entries: summaries(&self.store) },
                BusRequest::FetchEntries { keys } => {
                    let mut entries = Vec::with_capacity(keys.len());
                    for key in keys {
                        match self.store.get_entry(&key).await {
                            Ok(Some(entry)) => entries.push(entry),
                            Ok(None) => {}
                            Err(e) => return BusResponse::Error { message: format!("reading {key}: {e}") },
                        }
                    }
                    BusResponse::Entries { entries }
                }
                BusRequest::ConfirmHeld { key, revision } => {
                    BusResponse::Held { held: self.store.entry_meta(&key).is_some_and(|m| m.revision >= revision) }
                }
                BusRequest::View { what } => BusResponse::View { json: (self.views)(what) },
            }
        })
    }
}

/// Every stored entry's summary (tombstones included), from the store's index.
pub fn summaries(store: &Store) -> Vec<EntrySummary> {
    store.with_entry_index(|index| {
        index
            .values()
            .map(|m| EntrySummary { key: m.key.clone(), revision: m.revision.clone(), content_hash: m.content_hash.clone(), status: m.status })
            .collect()
    })
}
