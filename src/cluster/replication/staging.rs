//! Resolving staged entries a commit or abort never reached (prepare/commit, docs/consistency.md).
//!
//! The sync worker runs [`resolve_staged`] on every interval and membership change. For each
//! staged record it gathers the facts, asks the pure decision (`rules::staged::resolve`), asks
//! the sender when the decision says so, and carries the resolution out: the staged entry goes
//! through the workflow's replicated-write path (last-write-wins), or its record is removed.

use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::cluster::gossip::view::ClusterView;
use crate::control::rules::staged::{Resolution, SenderAnswer, StagedFacts, resolve};
use crate::store::Store;
use crate::store::staged::Staged;
use crate::control::workflow::Workflow;

use super::Cluster;

/// What one pass over the staged records did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub applied: usize,
    pub discarded: usize,
    pub waiting: usize,
}

/// Resolves every staged record that is spent or overdue (older than the main's wait for
/// confirmations, `replica_deadline`).
pub async fn resolve_staged(cluster: &Cluster, store: &Store, workflow: &Workflow) -> Resolved {
    let mut resolved = Resolved::default();
    let staged = store.staged();
    if staged.is_empty() {
        return resolved;
    }
    let view = cluster.view();
    for record in staged {
        let entry = &record.record.entry;
        let mut facts = StagedFacts {
            held: store.entry_meta(&entry.key).is_some_and(|m| m.revision >= entry.revision),
            overdue: record.since.elapsed() >= cluster.settings.replica_deadline,
            sender: None,
            sender_is_main: view.main.as_ref() == Some(&record.record.sender),
        };
        let mut resolution = resolve(facts);
        if resolution == Resolution::AskSender {
            facts.sender = Some(ask_sender(cluster, &view, &record).await);
            resolution = resolve(facts);
        }
        let (key, revision) = (&entry.key, &entry.revision);
        match resolution {
            Resolution::Apply => {
                tracing::info!(rule = %key, %revision, from = %record.record.sender, ?facts, "staged entry applied");
                let result = match workflow.apply_replicated(vec![entry.clone()]).await {
                    Ok(_) => store.release_staged(key, revision).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match result {
                    Ok(()) => resolved.applied += 1,
                    Err(error) => tracing::warn!(rule = %key, %revision, %error, "staged entry not applied; retried"),
                }
            }
            Resolution::Discard => {
                tracing::info!(rule = %key, %revision, from = %record.record.sender, ?facts, "staged entry discarded");
                match store.unstage(key, revision).await {
                    Ok(()) => resolved.discarded += 1,
                    Err(e) => tracing::warn!(rule = %key, %revision, error = %e, "staged record not removed; retried"),
                }
            }
            Resolution::Wait | Resolution::AskSender => resolved.waiting += 1,
        }
    }
    resolved
}

/// Asks the node that prepared `record` what became of it.
async fn ask_sender(cluster: &Cluster, view: &ClusterView, record: &Staged) -> SenderAnswer {
    let Some(sender) = view.member(&record.record.sender).filter(|m| m.live) else {
        return SenderAnswer::Unreachable;
    };
    let entry = &record.record.entry;
    let request = BusRequest::ResolveStaged { key: entry.key.clone(), revision: entry.revision.clone() };
    match cluster.call(sender, request, cluster.settings.sync_timeout).await {
        Ok(BusResponse::StagedFate { fate }) => SenderAnswer::Answered(fate),
        Ok(other) => {
            tracing::debug!(sender = %sender.node_id, answer = other.name(), "unexpected answer to a staged resolution");
            SenderAnswer::Unreachable
        }
        Err(e) => {
            tracing::debug!(sender = %sender.node_id, error = %e, "staged resolution: sender not reached");
            SenderAnswer::Unreachable
        }
    }
}
