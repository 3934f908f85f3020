//! The workflow's `Peers` over the cluster bus: Suspend/Resume broadcasts (best effort, a
//! deadline per peer, unreachable peers logged and skipped) and commit notices that carry the
//! committed entry (up to `notice_entry_limit` bytes of content). With `commit_replicas` N, the
//! answer waits for the first N peers that confirm, not for every peer; the other notices finish
//! on the commit-notice worker.

use std::sync::Arc;

use crate::cluster::bus::messages::{BusRequest, BusResponse, SuspendState};
use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::store::RuleEntry;
use crate::control::workflow::peers::BoxFuture;
use crate::control::workflow::{CommitOutcome, Peers, PersistFuture, SuspendVote};
use crate::base::worker::JobQueue;

use super::Cluster;
use crate::cluster::gossip::view::Member;
use super::outbox::Outbox;
use crate::cluster::bus::messages::ReplicaItem;

pub struct ClusterPeers {
    cluster: Arc<Cluster>,
    /// Best-effort commit notices go out on the node's commit-notice worker.
    notices: JobQueue,
    /// Prepares and commit notices to a peer go out in batches, one call in flight per peer.
    outbox: Arc<Outbox>,
}

impl ClusterPeers {
    pub fn new(cluster: Arc<Cluster>, notices: JobQueue) -> ClusterPeers {
        ClusterPeers { cluster, notices, outbox: Arc::default() }
    }
}

impl ClusterPeers {
    /// Sends `request(sender)` to every live peer at once, each with the Suspend/Resume
    /// deadline, and returns every answer with the peer it came from.
    async fn broadcast(
        &self,
        request: impl Fn(NodeId) -> BusRequest,
    ) -> Vec<(NodeId, Result<BusResponse, crate::cluster::bus::BusError>)> {
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
                .broadcast(|sender| BusRequest::Suspend { key: key.clone(), sender, issued_at_ms: crate::base::clock::now_ms() })
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
                .broadcast(|sender| BusRequest::Resume { key: key.clone(), sender, issued_at_ms: crate::base::clock::now_ms() })
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
            let required = self.cluster.settings.commit_replicas;
            if required == 0 {
                // Best effort and off the answer's path: peers also converge by gossip and scan.
                self.notify_in_background(entry, previous);
                return 0;
            }
            // These answers are the write's confirmations: each peer syncs its copy first.
            let notices = self.notices_of(entry, previous, self.cluster.settings.replica_deadline, true);
            self.await_notices(notices.into_iter(), required).await
        })
    }

    fn commit<'a>(&'a self, entry: &'a RuleEntry, previous: Option<&'a Revision>, persist: PersistFuture<'a>) -> BoxFuture<'a, CommitOutcome> {
        Box::pin(async move {
            // An entry too large for a notice is not prepared either (a prepare carries it
            // whole): it commits as before, persisted, then announced, and pulled by the peers.
            let settings = &self.cluster.settings;
            if settings.commit_replicas == 0 || entry.content.len() > settings.notice_entry_limit {
                return match persist.await {
                    Ok(()) => CommitOutcome::Committed { confirmed: self.notify_committed(entry, previous).await },
                    Err(error) => CommitOutcome::Failed { error, withdrawn: true },
                };
            }
            self.prepare_and_commit(entry, previous, persist).await
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

impl ClusterPeers {
    /// Waits for the first `required` of `notices` to confirm and leaves the rest to the
    /// commit-notice worker.
    async fn await_notices<F>(&self, notices: impl Iterator<Item = F>, required: usize) -> usize
    where
        F: std::future::Future<Output = bool> + Send + 'static,
    {
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
    }

    /// Prepare/commit (docs/consistency.md): the entry goes to every live peer as a prepare
    /// while `persist` writes it here, so the two synced writes overlap. The answer comes once
    /// `persist` is done and `commit_replicas` peers staged it (or every prepare ended); then the
    /// commit notices go out off the answer's path. If `persist` fails, every prepared peer is
    /// told to abort before the answer, and the answer says whether all of them confirmed.
    async fn prepare_and_commit(&self, entry: &RuleEntry, previous: Option<&Revision>, persist: PersistFuture<'_>) -> CommitOutcome {
        use futures_util::StreamExt;
        let required = self.cluster.settings.commit_replicas;
        let timeout = self.cluster.settings.replica_deadline;
        let hedge = timeout / PREPARE_HEDGE_DIVISOR;
        // The first `required` peers are prepared at once; the others only if those have not
        // all confirmed within the hedge (each staging is an fsync on a peer), or all answered
        // without enough of them staging.
        let mut first = prepare_order(self.cluster.view().live_peers().cloned().collect(), &entry.key);
        let mut hedged = first.split_off(required.min(first.len()));
        let prepare = |peer: Member| {
            let wait = self.outbox.enqueue(&self.cluster, &peer, ReplicaItem::Prepare { entry: entry.clone() }, timeout);
            async move {
                let answer = wait.wait().await;
                (peer, Prepared::of(&answer))
            }
        };
        let mut pending: futures_util::stream::FuturesUnordered<_> = first.into_iter().map(&prepare).collect();
        // Set when the main's own write failed: nothing more is prepared.
        let failed = std::sync::atomic::AtomicBool::new(false);
        let persist = async {
            let persisted = persist.await;
            if persisted.is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            persisted
        };
        let mut answered: Vec<(Member, Prepared)> = Vec::new();
        let hedge_passed = tokio::time::sleep(hedge);
        tokio::pin!(hedge_passed);
        let (persisted, ()) = tokio::join!(persist, async {
            while answered.iter().filter(|(_, p)| *p == Prepared::Staged).count() < required {
                if failed.load(std::sync::atomic::Ordering::Relaxed) {
                    hedged.clear();
                } else if pending.is_empty() && !hedged.is_empty() {
                    pending.extend(hedged.drain(..).map(&prepare));
                }
                tokio::select! {
                    Some(answer) = pending.next(), if !pending.is_empty() => answered.push(answer),
                    () = &mut hedge_passed, if !hedged.is_empty() => {
                        if !failed.load(std::sync::atomic::Ordering::Relaxed) {
                            pending.extend(hedged.drain(..).map(&prepare));
                        }
                        hedged.clear();
                    }
                    else => break,
                }
            }
        });
        let confirmed = answered.iter().filter(|(_, p)| *p == Prepared::Staged).count();
        match persisted {
            Ok(()) => {
                // The commit: the notices carry the entry (a staged peer applies it, any other
                // peer too). A prepare still queued is withdrawn; one in flight is answered
                // to nobody (its commit notice follows it in the same outbox).
                drop(pending);
                self.notify_in_background(entry, previous);
                CommitOutcome::Committed { confirmed }
            }
            Err(error) => {
                // Every prepare sent must end before the abort: its answer says whether the
                // peer may hold a staged copy.
                while let Some(answer) = pending.next().await {
                    answered.push(answer);
                }
                let withdrawn = self.abort(entry, answered).await;
                CommitOutcome::Failed { error, withdrawn }
            }
        }
    }

    /// Tells every peer that may hold a staged copy of `entry` to drop it; true when each of
    /// them confirmed (or provably holds none).
    async fn abort(&self, entry: &RuleEntry, answered: Vec<(Member, Prepared)>) -> bool {
        let timeout = self.cluster.settings.sync_timeout;
        let aborts = answered.into_iter().filter(|(_, p)| *p != Prepared::Refused).map(|(peer, _)| {
            let cluster = self.cluster.clone();
            let request = BusRequest::Abort {
                key: entry.key.clone(),
                revision: entry.revision.clone(),
                sender: cluster.self_id().clone(),
            };
            async move {
                let answer = cluster.call(&peer, request, timeout).await;
                if !matches!(answer, Ok(BusResponse::Ack)) {
                    tracing::warn!(peer = %peer.node_id, ?answer, "abort not confirmed; the peer may hold a staged copy");
                }
                matches!(answer, Ok(BusResponse::Ack))
            }
        });
        futures_join(aborts).await.into_iter().all(|confirmed| confirmed)
    }

    /// Sends the commit notices of `entry` to every live peer; their answers are awaited on the
    /// commit-notice worker (a notice whose wait is dropped is withdrawn).
    fn notify_in_background(&self, entry: &RuleEntry, previous: Option<&Revision>) {
        let notices = self.notices_of(entry, previous, self.cluster.settings.sync_timeout, false);
        self.notices.push(Box::pin(async move {
            for notice in notices {
                notice.await;
            }
        }));
    }

    /// The commit notice of `entry` to each live peer, each true once the peer holds it. Each
    /// notice is queued in its peer's outbox now, in commit order (the caller holds the file's
    /// lock), so one key's notices reach a peer in order.
    fn notices_of(
        &self,
        entry: &RuleEntry,
        previous: Option<&Revision>,
        timeout: std::time::Duration,
        durable: bool,
    ) -> Vec<impl std::future::Future<Output = bool> + Send + 'static + use<>> {
        let item = notice(entry, previous, self.cluster.settings.notice_entry_limit, durable);
        self.cluster
            .view()
            .live_peers()
            .map(|peer| {
                let pending = self.outbox.enqueue(&self.cluster, peer, item.clone(), timeout);
                async move { matches!(pending.wait().await, Ok(BusResponse::Ack)) }
            })
            .collect()
    }
}

/// The hedge before the other peers are prepared: `replica_deadline` / this (50 ms by default).
const PREPARE_HEDGE_DIVISOR: u32 = 100;

/// The order in which peers are prepared for `key`: by node id, rotated by a hash of the key, so
/// the stagings of different files spread over the peers while one file's go to the same ones.
fn prepare_order(mut peers: Vec<Member>, key: &RuleKey) -> Vec<Member> {
    peers.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    if !peers.is_empty() {
        let hash = key.to_string().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        let len = peers.len();
        peers.rotate_left((hash % len as u64) as usize);
    }
    peers
}

/// What a peer's answer to a prepare says about its staged copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prepared {
    /// Staged durably (or already held).
    Staged,
    /// Provably holds no staged copy: it answered without staging, or the call never reached it.
    Refused,
    /// No answer (timeout, broken connection): it may have staged it.
    Unknown,
}

impl Prepared {
    fn of(answer: &Result<BusResponse, crate::cluster::bus::BusError>) -> Prepared {
        use crate::cluster::bus::BusError;
        match answer {
            Ok(BusResponse::Staged) => Prepared::Staged,
            Ok(_) | Err(BusError::Unreachable { .. } | BusError::BadAddress { .. } | BusError::Encode(_) | BusError::TooLarge { .. }) => {
                Prepared::Refused
            }
            Err(_) => Prepared::Unknown,
        }
    }
}

/// The commit notice for `entry`: it carries the entry when its content fits in `limit` bytes,
/// so a healthy peer applies it from this one message; otherwise the peer pulls it.
pub fn notice(entry: &RuleEntry, previous: Option<&Revision>, limit: usize, durable: bool) -> ReplicaItem {
    ReplicaItem::Commit {
        key: entry.key.clone(),
        revision: entry.revision.clone(),
        previous: previous.cloned(),
        entry: (entry.content.len() <= limit).then(|| entry.clone()),
        durable,
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
    use crate::base::ids::{Catalog, ContentHash, RuleName};
    use crate::store::EntryStatus;

    #[test]
    fn each_file_prepares_its_own_peers_first_and_files_spread_over_the_peers() {
        let member = |id: &str| Member::new(NodeId(id.into()), 1, true, Default::default());
        let key = |n: &str| RuleKey::new(Catalog::OtelRules, RuleName::parse(n).expect("name"));
        let ids = |peers: Vec<Member>| peers.into_iter().map(|m| m.node_id.0).collect::<Vec<_>>();
        let first = ids(prepare_order(vec![member("n3"), member("n2")], &key("a")));
        assert_eq!(first, ids(prepare_order(vec![member("n2"), member("n3")], &key("a"))), "same order whatever the view's order");
        assert_eq!(first.len(), 2);
        let firsts: std::collections::BTreeSet<String> =
            (0..16).map(|n| ids(prepare_order(vec![member("n2"), member("n3")], &key(&format!("f{n}"))))[0].clone()).collect();
        assert_eq!(firsts.len(), 2, "16 files do not all start with the same peer");
        assert!(prepare_order(Vec::new(), &key("a")).is_empty());
    }

    #[test]
    fn a_prepare_answer_tells_staged_provably_not_staged_and_unknown_apart() {
        use crate::cluster::bus::BusError;
        let to = NodeId("n2".into());
        let cases = [
            (Ok(BusResponse::Staged), Prepared::Staged),
            (Ok(BusResponse::Error { message: "aborted".into() }), Prepared::Refused),
            (Err(BusError::Unreachable { to: to.clone(), reason: "refused".into() }), Prepared::Refused),
            // The call may have landed: only a confirmed abort rules a staged copy out.
            (Err(BusError::Timeout { to: to.clone(), after: std::time::Duration::from_secs(1) }), Prepared::Unknown),
            (Err(BusError::Transport { to: to.clone(), reason: "reset".into() }), Prepared::Unknown),
            (Err(BusError::Dropped { to: to.clone(), request: "prepare" }), Prepared::Unknown),
        ];
        for (answer, expected) in cases {
            assert_eq!(Prepared::of(&answer), expected, "{answer:?}");
        }
    }

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
        match notice(&entry, Some(&previous), 10, true) {
            ReplicaItem::Commit { key, revision: r, previous: p, entry: carried, durable } => {
                assert_eq!((key, r, p, carried, durable), (entry.key.clone(), revision.clone(), Some(previous), Some(entry.clone()), true));
            }
            other => panic!("not a notice: {other:?}"),
        }
        match notice(&entry, None, 9, false) {
            ReplicaItem::Commit { previous: None, entry: None, durable: false, .. } => {}
            other => panic!("an entry over the limit is not carried: {other:?}"),
        }
    }
}
