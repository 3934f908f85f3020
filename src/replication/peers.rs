//! The workflow's `Peers` over the cluster bus: Suspend/Resume broadcasts (best effort, a
//! deadline per peer, unreachable peers logged and skipped) and commit notices that carry the
//! committed entry (up to `notice_entry_limit` bytes of content). With `commit_replicas` N, the
//! answer waits for the first N peers that confirm, not for every peer; the other notices finish
//! on the commit-notice worker.

use std::sync::Arc;

use crate::bus::messages::{BusRequest, BusResponse, SuspendState};
use crate::ids::{NodeId, Revision, RuleKey};
use crate::store::RuleEntry;
use crate::workflow::peers::BoxFuture;
use crate::workflow::{Peers, SuspendVote};
use crate::worker::JobQueue;

use super::Cluster;
use super::notice_order::NoticeOrder;

pub struct ClusterPeers {
    cluster: Arc<Cluster>,
    /// Best-effort commit notices go out on the node's commit-notice worker.
    notices: JobQueue,
    /// One key's notices reach each peer in commit order.
    order: Arc<NoticeOrder>,
}

impl ClusterPeers {
    pub fn new(cluster: Arc<Cluster>, notices: JobQueue) -> ClusterPeers {
        ClusterPeers { cluster, notices, order: Arc::default() }
    }
}

impl ClusterPeers {
    /// Sends `request(sender)` to every live peer at once, each with the Suspend/Resume
    /// deadline, and returns every answer with the peer it came from.
    async fn broadcast(
        &self,
        request: impl Fn(NodeId) -> BusRequest,
    ) -> Vec<(NodeId, Result<BusResponse, crate::bus::BusError>)> {
        let timeout = self.cluster.settings.suspend_timeout;
        let view = self.cluster.view();
        let calls = view.live_peers().cloned().map(|peer| {
            let cluster = self.cluster.clone();
            let request = request(cluster.self_id().clone());
            async move {
                let answer = cluster.call(&peer, request, timeout).await;
                (peer.node_id, answer)
            }
        });
        futures_join(calls).await
    }
}

impl Peers for ClusterPeers {
    fn suspend_all<'a>(&'a self, key: &'a RuleKey) -> BoxFuture<'a, SuspendVote> {
        Box::pin(async move {
            let answers = self
                .broadcast(|sender| BusRequest::Suspend { key: key.clone(), sender, issued_at_ms: crate::clock::now_ms() })
                .await;
            for (peer, answer) in answers {
                match answer {
                    Ok(BusResponse::SuspendAck { state: SuspendState::Rejected, .. }) => {
                        return SuspendVote::Rejected { peer, detail: "ORIGIN CONFLICT: already suspended by another origin".into() };
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(%peer, rule = %key, error = %e, "suspend not delivered; the peer's scan covers it"),
                }
            }
            SuspendVote::Accepted
        })
    }

    fn resume_all<'a>(&'a self, key: &'a RuleKey) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let answers = self
                .broadcast(|sender| BusRequest::Resume { key: key.clone(), sender, issued_at_ms: crate::clock::now_ms() })
                .await;
            for (peer, answer) in answers {
                if let Err(e) = answer {
                    tracing::warn!(%peer, rule = %key, error = %e, "resume not delivered; the peer self-heals");
                }
            }
        })
    }

    fn notify_committed<'a>(&'a self, entry: &'a RuleEntry, previous: Option<&'a Revision>) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let view = self.cluster.view();
            let required = self.cluster.settings.commit_replicas;
            let timeout = if required > 0 { self.cluster.settings.replica_deadline } else { self.cluster.settings.sync_timeout };
            let peers: Vec<_> = view.live_peers().cloned().collect();
            let request = notice(entry, previous, self.cluster.settings.notice_entry_limit, self.cluster.self_id());
            let notices = peers.into_iter().map(|peer| {
                let cluster = self.cluster.clone();
                let request = request.clone();
                let order = self.order.clone();
                // Taken now, in commit order (the iterator is consumed before any await below).
                let mut ticket = order.enter(&peer.node_id, &entry.key);
                async move {
                    // Bounded: behind a hung peer's notice, timeouts must not add up.
                    let _ = tokio::time::timeout(timeout, ticket.wait_turn()).await;
                    let held = matches!(cluster.call(&peer, request, timeout).await, Ok(BusResponse::Ack));
                    order.leave(ticket);
                    held
                }
            });
            if required == 0 {
                // Best effort and off the answer's path: peers also converge by gossip and scan.
                let notices: Vec<_> = notices.collect();
                self.notices.push(Box::pin(async move {
                    futures_join(notices.into_iter()).await;
                }));
                return 0;
            }
            let mut pending: tokio::task::JoinSet<bool> = tokio::task::JoinSet::new();
            for notice in notices {
                pending.spawn(notice);
            }
            let confirmed = first_confirmations(&mut pending, required).await;
            if !pending.is_empty() {
                // The slower peers' notices finish off the answer's path (dropping the set
                // would abort them).
                self.notices.push(Box::pin(async move { while pending.join_next().await.is_some() {} }));
            }
            confirmed
        })
    }

    fn replicas_required(&self) -> usize {
        self.cluster.settings.commit_replicas
    }

    fn is_main(&self) -> bool {
        self.cluster.is_main()
    }

    fn live_members(&self) -> Vec<NodeId> {
        self.cluster.view().live_peers().map(|m| m.node_id.clone()).collect()
    }

    /// A roll notice to every live peer, off the answer's path on the commit-notice worker
    /// (order does not matter: peers keep the record with the newest revision).
    fn notify_roll<'a>(&'a self, key: &'a RuleKey, revision: &'a Revision, record: &'a [u8]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let timeout = self.cluster.settings.sync_timeout;
            let request = BusRequest::RollNotice { record: record.to_vec(), sender: self.cluster.self_id().clone() };
            let calls: Vec<_> = self
                .cluster
                .view()
                .live_peers()
                .cloned()
                .map(|peer| {
                    let cluster = self.cluster.clone();
                    let request = request.clone();
                    let (key, revision) = (key.clone(), revision.clone());
                    async move {
                        if let Err(e) = cluster.call(&peer, request, timeout).await {
                            tracing::debug!(peer = %peer.node_id, rule = %key, %revision, error = %e, "roll notice not delivered; the sync covers it");
                        }
                    }
                })
                .collect();
            self.notices.push(Box::pin(async move {
                futures_join(calls.into_iter()).await;
            }));
        })
    }
}

/// The commit notice for `entry`: it carries the entry when its content fits in `limit` bytes,
/// so a healthy peer applies it from this one message; otherwise the peer pulls it.
pub fn notice(entry: &RuleEntry, previous: Option<&Revision>, limit: usize, sender: &NodeId) -> BusRequest {
    BusRequest::NotifyCommitted {
        key: entry.key.clone(),
        revision: entry.revision.clone(),
        previous: previous.cloned(),
        entry: (entry.content.len() <= limit).then(|| entry.clone()),
        sender: sender.clone(),
    }
}

/// Waits for notices in `pending` until `required` peers confirmed (or every notice is done), and
/// returns how many confirmed: the answer waits for the fastest `required` peers, not the slowest.
async fn first_confirmations(pending: &mut tokio::task::JoinSet<bool>, required: usize) -> usize {
    let mut confirmed = 0;
    while confirmed < required {
        match pending.join_next().await {
            Some(Ok(true)) => confirmed += 1,
            Some(Ok(false)) => {}
            // A panicked call counts as no answer; the panic itself is not swallowed.
            Some(Err(e)) => tracing::error!(error = %e, "commit notice task failed"),
            None => break,
        }
    }
    confirmed
}

/// Runs futures concurrently and collects their outputs in order.
pub(crate) async fn futures_join<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        match handle.await {
            Ok(value) => out.push(value),
            // A panicked call counts as no answer; the panic itself is not swallowed.
            Err(e) => tracing::error!(error = %e, "peer call task failed"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Catalog, ContentHash, RuleName};
    use crate::store::EntryStatus;

    #[tokio::test]
    async fn confirmations_return_at_the_first_required_peers_without_waiting_for_the_slowest() {
        let (slow_tx, slow_rx) = tokio::sync::oneshot::channel::<()>();
        let mut pending = tokio::task::JoinSet::new();
        pending.spawn(async { true });
        pending.spawn(async { false });
        // The slowest peer answers only when told; the wait must not need it.
        pending.spawn(async move { slow_rx.await.is_ok() });
        let confirmed = tokio::time::timeout(std::time::Duration::from_secs(10), first_confirmations(&mut pending, 1))
            .await
            .expect("returned without the slowest peer");
        assert_eq!(confirmed, 1);
        assert!(!pending.is_empty(), "the slow notice is still running");
        // With more required than can confirm, every notice is awaited and the count is honest.
        let _ = slow_tx.send(());
        let mut all = tokio::task::JoinSet::new();
        all.spawn(async { true });
        all.spawn(async { false });
        assert_eq!(first_confirmations(&mut all, 2).await, 1);
        assert!(all.is_empty());
    }

    #[test]
    fn a_notice_carries_its_entry_up_to_the_limit_and_names_what_preceded_it() {
        let content = b"0123456789".to_vec();
        let revision = Revision { millis: 2, counter: 0, node: NodeId("main".into()) };
        let previous = Revision { millis: 1, counter: 0, node: NodeId("main".into()) };
        let entry = RuleEntry {
            key: RuleKey::new(Catalog::OtelRules, RuleName::parse("n").expect("name")),
            content_hash: ContentHash::of(&content),
            content,
            status: EntryStatus::Active,
            update_time_ms: 2,
            revision: revision.clone(),
        };
        let sender = NodeId("main".into());
        match notice(&entry, Some(&previous), 10, &sender) {
            BusRequest::NotifyCommitted { key, revision: r, previous: p, entry: carried, sender: s } => {
                assert_eq!((key, r, p, carried, s), (entry.key.clone(), revision.clone(), Some(previous), Some(entry.clone()), sender.clone()));
            }
            other => panic!("not a notice: {other:?}"),
        }
        match notice(&entry, None, 9, &sender) {
            BusRequest::NotifyCommitted { previous: None, entry: None, .. } => {}
            other => panic!("an entry over the limit is not carried: {other:?}"),
        }
    }
}
