//! Taking a commit notice: the peer's side of "a healthy commit reaches a peer in one message".
//!
//! The decision is [`merge::on_notice`]; this module carries it out. A carried entry is applied
//! through the workflow's single write path ([`Workflow::apply_replicated`]) and the scan is
//! poked to load that key only (`Scanner::poke_keys`). A notice that shows a gap (this node's
//! revision for the key is not the one the notice says preceded the commit) also asks the sync
//! worker to pull everything newer from the sender; a notice without its entry asks the sync
//! worker to fetch that key and waits for it, bounded. The answer is `Ack` once this node holds the committed revision.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::cluster::bus::messages::BusResponse;
use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::control::rules::merge::{self, NoticePlan};
use crate::control::scan::Scanner;
use crate::store::{RuleEntry, Store};
use crate::control::workflow::Workflow;

use super::pulls::{PullQueue, PullRequest};

/// One commit notice, as received.
#[derive(Debug, Clone)]
pub struct Notice {
    pub key: RuleKey,
    pub revision: Revision,
    pub previous: Option<Revision>,
    pub entry: Option<RuleEntry>,
    /// The sender counts the answer as a confirmation: sync the copy before answering.
    pub durable: bool,
    pub sender: NodeId,
}

pub struct NoticeReceiver {
    pub workflow: Arc<Workflow>,
    pub store: Arc<Store>,
    pub scanner: Arc<Scanner>,
    pub pulls: PullQueue,
    /// How long a notice without its entry waits for the pull.
    pub pull_wait: Duration,
}

impl NoticeReceiver {
    pub async fn receive(&self, notice: Notice) -> BusResponse {
        let Notice { key, revision, previous, entry, durable, sender } = notice;
        let mut timer = crate::control::workflow::timing::PhaseTimer::start("notice");
        if let Some(entry) = &entry
            && (entry.key != key || entry.revision != revision)
        {
            return BusResponse::Error {
                message: format!("notice for {key} at {revision} carries {} at {}", entry.key, entry.revision),
            };
        }
        let stored = self.store.entry_meta(&key).map(|m| m.revision);
        let plan = merge::on_notice(stored.as_ref(), previous.as_ref(), &revision, entry.is_some());
        match (plan, entry) {
            (NoticePlan::AlreadyHeld, _) => {
                if let Err(e) = self.store.release_staged(&key, &revision).await {
                    tracing::warn!(rule = %key, error = %e, "staged record not removed; its resolution removes it");
                }
                return BusResponse::Ack;
            }
            (NoticePlan::Apply | NoticePlan::ApplyThenSync, Some(entry)) => {
                if let Err(message) = self.workflow.apply_notified(entry, durable).await {
                    return BusResponse::Error { message: message.to_string() };
                }
                self.scanner.poke_keys([key.clone()]);
                if plan == NoticePlan::ApplyThenSync {
                    // Also seen when notices to this node overtake each other (the main answers at
                    // its first `commit_replicas` confirmations): debug, the pull logs what it
                    // actually applied.
                    tracing::debug!(rule = %key, from = %sender, held = ?stored, follows = ?previous, "commit notice shows missed writes; syncing");
                    self.pulls.request(PullRequest::Newer { from: sender });
                }
            }
            (_, _) => {
                let (done_tx, done_rx) = oneshot::channel();
                if !self.pulls.request(PullRequest::Keys { from: sender, keys: vec![key.clone()], done: done_tx }) {
                    return BusResponse::Error { message: format!("{key}: pull queue full; the periodic sync covers it") };
                }
                match tokio::time::timeout(self.pull_wait, done_rx).await {
                    Ok(Ok(Ok(_))) => self.scanner.poke_keys([key.clone()]),
                    Ok(Ok(Err(e))) => return BusResponse::Error { message: format!("{key}: {e}") },
                    Ok(Err(_)) => return BusResponse::Error { message: format!("{key}: the sync worker stopped") },
                    Err(_) => return BusResponse::Error { message: format!("{key}: pull not done within {:?}", self.pull_wait) },
                }
            }
        }
        timer.mark("apply");
        // The commit of a prepare: its staged record is spent (applying the entry removed it
        // already, unless the entry was held before).
        if let Err(e) = self.store.release_staged(&key, &revision).await {
            tracing::warn!(rule = %key, error = %e, "staged record not removed; its resolution removes it");
        }
        let held = self.store.entry_meta(&key).is_some_and(|m| m.revision >= revision);
        if held { BusResponse::Ack } else { BusResponse::Error { message: format!("{key} at {revision} not held") } }
    }
}

#[cfg(test)]
mod tests;
