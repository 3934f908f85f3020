//! Storage sync between replicas, by last-write-wins on the revision.
//!
//! A peer pulls from the main every entry whose revision is newer than its own: when a commit
//! notice shows a gap or comes without its entry (asked through `pulls`), when gossip shows its
//! digest differs from the main's, and every scan interval. The main pulls from every live peer
//! any entry newer than its own: entries an interim main wrote during a partition. Which keys to
//! pull is `rules::merge::keys_to_pull`. After a partition heals, the cluster converges on the
//! last write. The sync worker also publishes this node's digest as a gossip fact.
//!
//! [`CatchUp`] records when this node's state was first confirmed against the cluster: a pull
//! that succeeded, or a gossiped digest equal to its own. Agents are served configs only from
//! then on, so a new or wiped node never tells agents to delete what its empty store lacks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::cluster::gossip::keys::Fact;
use crate::cluster::gossip::view::Member;
use crate::base::ids::{NodeId, RuleKey};
use crate::control::rules::merge::{Version, keys_to_pull};
use crate::control::scan::Scanner;
use crate::store::Store;
use crate::base::worker::{Worker, WorkerState};
use crate::control::workflow::Workflow;

use super::pulls::PullRequest;
use super::{Cluster, summaries, version_of};

const FETCH_CHUNK: usize = 64;

pub use super::error::SyncError;

/// Fetches `keys` from `from` and applies them through the workflow's replicated-write path.
pub async fn pull_keys(cluster: &Cluster, workflow: &Workflow, from: &Member, keys: Vec<RuleKey>) -> Result<usize, SyncError> {
    let mut applied = 0;
    for chunk in keys.chunks(FETCH_CHUNK) {
        let request = BusRequest::FetchEntries { keys: chunk.to_vec() };
        match cluster.call(from, request, cluster.settings.sync_timeout).await {
            Ok(BusResponse::Entries { entries }) => applied += workflow.apply_replicated(entries).await?,
            Ok(other) => {
                return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "fetch", answer: other.name() });
            }
            Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "fetch", source }),
        }
    }
    Ok(applied)
}

/// Pulls from `from` every entry whose version there replaces this node's (`merge::keys_to_pull`).
pub async fn pull_newer(cluster: &Cluster, store: &Store, workflow: &Workflow, from: &Member) -> Result<usize, SyncError> {
    let request = BusRequest::Digest { sender: cluster.self_id().clone() };
    let remote = match cluster.call(from, request, cluster.settings.sync_timeout).await {
        Ok(BusResponse::DigestReply { entries }) => entries,
        Ok(other) => {
            return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "digest", answer: other.name() });
        }
        Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "digest", source }),
    };
    let local: BTreeMap<RuleKey, Version> =
        summaries(store).iter().map(|s| (s.key.clone(), version_of(s))).collect();
    let remote: Vec<(RuleKey, Version)> = remote.iter().map(|s| (s.key.clone(), version_of(s))).collect();
    let newer = keys_to_pull(&local, remote.iter().map(|(k, v)| (k, v)));
    if newer.is_empty() {
        return Ok(0);
    }
    pull_keys(cluster, workflow, from, newer).await
}

/// Whether this node's replicated state has been confirmed against the cluster since it started.
/// It only ever goes from false to true.
pub struct CatchUp {
    confirmed: tokio::sync::watch::Sender<bool>,
    started: Instant,
    alone_after: Duration,
}

impl CatchUp {
    /// Not caught up yet; the receiver tells the agent service when it is.
    pub fn new(alone_after: Duration) -> (CatchUp, tokio::sync::watch::Receiver<bool>) {
        let (confirmed, receiver) = tokio::sync::watch::channel(false);
        (CatchUp { confirmed, started: Instant::now(), alone_after }, receiver)
    }

    pub fn is_confirmed(&self) -> bool {
        *self.confirmed.borrow()
    }

    fn confirm(&self, how: &str) {
        if self.confirmed.send_if_modified(|c| !std::mem::replace(c, true)) {
            tracing::info!(how, after = ?self.started.elapsed(), "state confirmed against the cluster; serving agent configs");
        }
    }
}

pub struct Syncer {
    pub cluster: Arc<Cluster>,
    pub store: Arc<Store>,
    pub workflow: Arc<Workflow>,
    pub scanner: Arc<Scanner>,
    pub catch_up: CatchUp,
}

/// What a sync on a membership change compares: this node's published digest, and per source
/// the gossiped digest of its last successful pull.
pub struct DigestFilter<'a> {
    pub mine: &'a str,
    pub pulled_against: &'a mut BTreeMap<NodeId, String>,
    /// Per source, the differing digest first seen and when: a membership sync pulls only once
    /// the difference has stood for [`VIEW_PULL_GRACE`] (a commit notice in flight closes it
    /// sooner).
    pub differing_since: &'a mut BTreeMap<NodeId, (String, Instant)>,
    /// Set when a source was left for later: when to look again.
    pub recheck_at: Option<Instant>,
}

/// How long a digest difference seen on a membership change must stand before it is pulled.
/// The main publishes its digest as soon as it persists, often before its prepare or commit
/// notice reached this node; pulling at once fetched the entries those messages carry.
pub const VIEW_PULL_GRACE: Duration = Duration::from_millis(300);

/// Whether a sync on a membership change pulls from a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DigestStep {
    /// The source gossips this node's own digest: nothing to pull, and this node is confirmed.
    Same,
    /// The source's gossiped digest has not moved since this node last pulled from it
    /// successfully: that pull already took everything it stood for (a source's entries only
    /// get newer). Under a steady write load the view changes many times a second (every gossiped
    /// fact of every member), while the main's digest differs from a peer's almost all the time;
    /// pulling on each change fetched the entries whose notices were in flight, for nothing.
    AlreadyPulled,
    /// The difference is new: look again once it has stood for the grace.
    Wait,
    Pull,
}

fn digest_step(mine: &str, theirs: Option<&str>, pulled_against: Option<&String>) -> DigestStep {
    match theirs {
        Some(theirs) if theirs == mine => DigestStep::Same,
        Some(theirs) if pulled_against.is_some_and(|d| d == theirs) => DigestStep::AlreadyPulled,
        _ => DigestStep::Pull,
    }
}

/// A difference to pull ([`DigestStep::Pull`]) waits until the same source digest has differed
/// for `grace`: `since` is when this digest of the source was first seen differing.
fn after_grace(theirs: Option<&str>, since: Option<&(String, Instant)>, now: Instant, grace: Duration) -> DigestStep {
    match (theirs, since) {
        // A source that gossips no digest yet: pull, as before.
        (None, _) => DigestStep::Pull,
        (Some(theirs), Some((seen, at))) if seen == theirs && now.saturating_duration_since(*at) >= grace => DigestStep::Pull,
        _ => DigestStep::Wait,
    }
}

impl Syncer {
    /// One sync: the main pulls from live peers, a peer pulls from the main. With
    /// `only_differing`, sources whose gossiped digest equals this node's, or has not moved
    /// since the last pull from them, are skipped.
    pub async fn sync_once(&self, mut only_differing: Option<&mut DigestFilter<'_>>) -> usize {
        let view = self.cluster.view();
        let candidates: Vec<Member> = if view.is_main() {
            view.live_peers().cloned().collect()
        } else {
            view.main.as_ref().and_then(|m| view.member(m)).cloned().into_iter().collect()
        };
        if candidates.is_empty() && view.is_main() && self.catch_up.started.elapsed() >= self.catch_up.alone_after {
            self.catch_up.confirm("no live peer appeared; this node is the cluster");
        }
        let mut applied = 0;
        for source in candidates {
            if let Some(filter) = only_differing.as_deref_mut() {
                let theirs = source.digest.as_deref();
                let mut step = digest_step(filter.mine, theirs, filter.pulled_against.get(&source.node_id));
                if step == DigestStep::Pull {
                    let now = Instant::now();
                    step = after_grace(theirs, filter.differing_since.get(&source.node_id), now, VIEW_PULL_GRACE);
                    if step == DigestStep::Wait {
                        let first_seen = match filter.differing_since.get(&source.node_id) {
                            Some((seen, at)) if Some(seen.as_str()) == theirs => *at,
                            _ => now,
                        };
                        filter.differing_since.insert(source.node_id.clone(), (theirs.unwrap_or_default().to_string(), first_seen));
                        let at = first_seen + VIEW_PULL_GRACE;
                        filter.recheck_at = Some(filter.recheck_at.map_or(at, |t| t.min(at)));
                    }
                }
                match step {
                    DigestStep::Same => {
                        filter.differing_since.remove(&source.node_id);
                        self.catch_up.confirm("a peer gossips the same digest");
                        continue;
                    }
                    DigestStep::AlreadyPulled | DigestStep::Wait => continue,
                    DigestStep::Pull => {
                        filter.differing_since.remove(&source.node_id);
                    }
                }
            }
            // Roll records ride the periodic and membership syncs only (`rolls`).
            match super::rolling::pull_newer_rolls(&self.cluster, &self.workflow, &source).await {
                Ok(n) => applied += n,
                Err(e) => tracing::debug!(from = %source.node_id, error = %e, "roll record sync skipped"),
            }
            // History records: by union, on the same syncs (`history`).
            match super::history::pull_missing(&self.cluster, &self.store, &self.workflow, &source).await {
                Ok(n) => applied += n,
                Err(e) => tracing::debug!(from = %source.node_id, error = %e, "history sync skipped"),
            }
            match pull_newer(&self.cluster, &self.store, &self.workflow, &source).await {
                Ok(n) => {
                    applied += n;
                    self.catch_up.confirm("pulled from a peer");
                    if let (Some(filter), Some(theirs)) = (only_differing.as_deref_mut(), source.digest.as_ref()) {
                        filter.pulled_against.insert(source.node_id.clone(), theirs.clone());
                    }
                }
                Err(e) => tracing::debug!(from = %source.node_id, error = %e, "sync skipped"),
            }
        }
        if applied > 0 {
            tracing::info!(applied, "replicated entries pulled");
            self.scanner.poke();
        }
        applied
    }

    /// Carries out one pull a commit notice asked for.
    async fn pull_for_notice(&self, request: PullRequest) {
        let from = match &request {
            PullRequest::Newer { from } | PullRequest::Keys { from, .. } => from.clone(),
        };
        let member = self.cluster.view().member(&from).cloned();
        let result = match (&member, &request) {
            (None, _) => Err(SyncError::NotMember { peer: from.clone() }),
            (Some(member), PullRequest::Newer { .. }) => pull_newer(&self.cluster, &self.store, &self.workflow, member).await,
            (Some(member), PullRequest::Keys { keys, .. }) => pull_keys(&self.cluster, &self.workflow, member, keys.clone()).await,
        };
        if result.as_ref().is_ok_and(|applied| *applied > 0) {
            self.scanner.poke();
        }
        match (result, request) {
            (result, PullRequest::Keys { done, .. }) => {
                // The notice may have stopped waiting (its bound passed): nobody to tell.
                let _ = done.send(result);
            }
            (Err(e), PullRequest::Newer { .. }) => tracing::debug!(%from, error = %e, "sync after a notice's gap skipped"),
            (Ok(_), PullRequest::Newer { .. }) => {}
        }
    }

    /// Resolves the staged records no commit or abort reached (see `staging`).
    async fn resolve_staged(&self) {
        let resolved = super::staging::resolve_staged(&self.cluster, &self.store, &self.workflow).await;
        if resolved.applied > 0 {
            self.scanner.poke();
        }
    }

    fn digest(&self) -> String {
        let base = super::rolling::digest(&summaries(&self.store), &self.store.roll_hashes());
        super::history::digest(base, &super::history::ids(&self.store))
    }
}

/// The pulls to carry out for `requests`, in order: every fetch of keys (a notice waits for
/// each), and one pull of everything newer per sender (the first; later ones from the same sender
/// would pull the same entries again). Under `commit_replicas` the main answers before its
/// slower peer confirms, so that peer can take a key's notices out of order and see a "gap" for
/// every reordered pair: without this, each became a digest call and a fetch of its own.
fn coalesce(requests: Vec<PullRequest>) -> Vec<PullRequest> {
    let mut senders = std::collections::BTreeSet::new();
    requests
        .into_iter()
        .filter(|request| match request {
            PullRequest::Newer { from } => senders.insert(from.clone()),
            PullRequest::Keys { .. } => true,
        })
        .collect()
}

/// What woke the sync worker.
enum SyncReason {
    /// The interval passed: pull from every source.
    Interval,
    /// The membership changed: pull from the sources whose digest differs from ours.
    ViewChanged,
    /// A local commit: only the digest needs publishing.
    StoreChanged,
    /// A commit notice asked for a pull (see `pulls`).
    Pull(PullRequest),
}

/// The sync worker: syncs on every scan interval and on membership changes (a digest that
/// differs from the main's, a new main), carries out the pulls commit notices ask for, and
/// publishes this node's digest after every commit.
pub struct SyncWorker {
    syncer: Arc<Syncer>,
    pull_requests_rx: mpsc::Receiver<PullRequest>,
    store_changes: tokio::sync::watch::Receiver<u64>,
    view_changes: tokio::sync::watch::Receiver<crate::cluster::gossip::ClusterView>,
    published: String,
    published_scan: u64,
    /// Per source, the gossiped digest of the last successful pull on a membership change.
    pulled_against: BTreeMap<NodeId, String>,
    /// Per source, a differing digest waiting out [`VIEW_PULL_GRACE`], and when to look again.
    differing_since: BTreeMap<NodeId, (String, Instant)>,
    recheck_at: Option<Instant>,
    pending: Option<SyncReason>,
    /// When the digest was last computed for publishing, and when a commit since then is due
    /// to be published (see [`DIGEST_MIN_GAP`]).
    digest_at: Option<Instant>,
    digest_due: Option<Instant>,
}

/// The digest is published at most once per this gap: gossip carries it only every gossip
/// interval (300 ms by default), and computing it hashes every entry's summary, so under a
/// stream of commits (thousands per second) one computation per commit was wasted work whose
/// cost grew with the number of stored files. A commit's digest is published at most this
/// late; the commit notices, not the digest, carry a healthy commit to the peers.
const DIGEST_MIN_GAP: Duration = Duration::from_millis(50);

impl SyncWorker {
    pub fn new(syncer: Arc<Syncer>, pull_requests_rx: mpsc::Receiver<PullRequest>) -> SyncWorker {
        SyncWorker {
            store_changes: syncer.store.subscribe(),
            view_changes: syncer.cluster.membership.view(),
            syncer,
            pull_requests_rx,
            published: String::new(),
            published_scan: 0,
            pulled_against: BTreeMap::new(),
            differing_since: BTreeMap::new(),
            recheck_at: None,
            pending: None,
            digest_at: None,
            digest_due: None,
        }
    }
}

#[async_trait::async_trait]
impl Worker for SyncWorker {
    fn name(&self) -> &'static str {
        "sync"
    }

    async fn work(&mut self) -> WorkerState {
        match self.pending.take() {
            Some(SyncReason::Interval) => {
                self.syncer.sync_once(None).await;
                self.syncer.resolve_staged().await;
            }
            Some(SyncReason::ViewChanged) => {
                // Writes prepared here and not yet committed make the main's digest differ from
                // this node's for a moment: their commit notices are on their way, and a pull now
                // would fetch the same entries. A real gap is still caught by the next notice
                // (it names the revision it follows) and by the interval's sync.
                let in_flight = self.syncer.store.has_staged_younger_than(self.syncer.cluster.settings.replica_deadline);
                if !in_flight {
                    // This node's digest now, not the one it last published: a commit notice
                    // applied since then already made it equal to the source's.
                    let mine = self.syncer.digest();
                    let mut filter = DigestFilter {
                        mine: &mine,
                        pulled_against: &mut self.pulled_against,
                        differing_since: &mut self.differing_since,
                        recheck_at: None,
                    };
                    self.syncer.sync_once(Some(&mut filter)).await;
                    self.recheck_at = filter.recheck_at;
                }
                self.syncer.resolve_staged().await;
            }
            Some(SyncReason::Pull(request)) => {
                // Requests queued meanwhile go with it; one pull of everything newer from a
                // sender covers every gap its notices showed.
                let mut requests = vec![request];
                while let Ok(more) = self.pull_requests_rx.try_recv() {
                    requests.push(more);
                }
                for request in coalesce(requests) {
                    self.syncer.pull_for_notice(request).await;
                }
            }
            Some(SyncReason::StoreChanged) | None => {}
        }
        let now = Instant::now();
        if let Some(at) = self.digest_at
            && now < at + DIGEST_MIN_GAP
        {
            self.digest_due = Some(at + DIGEST_MIN_GAP);
            return WorkerState::Idle;
        }
        self.digest_at = Some(now);
        self.digest_due = None;
        let digest = self.syncer.digest();
        if digest != self.published {
            if let Err(e) = self.syncer.cluster.membership.set_fact(Fact::Digest, digest.clone()).await {
                tracing::warn!(error = %e, "cannot publish the digest");
            }
            self.published = digest;
        }
        let last_scan = self.syncer.scanner.last_scan_ms();
        if last_scan != self.published_scan {
            if let Err(e) = self.syncer.cluster.membership.set_last_scan_ms(last_scan).await {
                tracing::debug!(error = %e, "cannot publish the last scan time");
            }
            self.published_scan = last_scan;
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        // Until caught up, retry every second rather than every scan interval.
        let interval = match self.syncer.catch_up.is_confirmed() {
            true => self.syncer.scanner.settings().interval,
            false => self.syncer.scanner.settings().interval.min(Duration::from_secs(1)),
        };
        let recheck = self.recheck_at;
        let digest_due = self.digest_due;
        self.pending = Some(tokio::select! {
            _ = sleep_until_some(digest_due) => SyncReason::StoreChanged,
            _ = tokio::time::sleep(interval) => SyncReason::Interval,
            _ = sleep_until_some(recheck) => {
                self.recheck_at = None;
                SyncReason::ViewChanged
            }
            Some(request) = self.pull_requests_rx.recv() => SyncReason::Pull(request),
            Ok(()) = self.store_changes.changed() => SyncReason::StoreChanged,
            Ok(()) = self.view_changes.changed() => {
                self.view_changes.borrow_and_update();
                SyncReason::ViewChanged
            }
        });
        WorkerState::Busy
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_difference_waits_out_the_grace_and_a_standing_one_is_pulled() {
        let t0 = Instant::now();
        let grace = Duration::from_millis(300);
        let seen = ("d1".to_string(), t0);
        assert_eq!(after_grace(Some("d1"), None, t0, grace), DigestStep::Wait, "first seen now");
        assert_eq!(after_grace(Some("d1"), Some(&seen), t0 + grace / 2, grace), DigestStep::Wait, "not yet");
        assert_eq!(after_grace(Some("d1"), Some(&seen), t0 + grace, grace), DigestStep::Pull, "stood for the grace");
        assert_eq!(after_grace(Some("d2"), Some(&seen), t0 + grace * 2, grace), DigestStep::Wait, "the source moved on: anew");
        assert_eq!(after_grace(None, None, t0, grace), DigestStep::Pull, "no digest gossiped yet");
    }

    #[test]
    fn a_membership_sync_pulls_only_from_a_source_whose_digest_differs_and_moved_since_the_last_pull() {
        let last = "d1".to_string();
        let cases = [
            ("mine", Some("mine"), None, DigestStep::Same),
            ("mine", Some("mine"), Some(&last), DigestStep::Same),
            ("mine", Some("d1"), Some(&last), DigestStep::AlreadyPulled),
            ("mine", Some("d2"), Some(&last), DigestStep::Pull),
            ("mine", Some("d1"), None, DigestStep::Pull),
            // A source that gossips no digest yet: pull, as before.
            ("mine", None, Some(&last), DigestStep::Pull),
        ];
        for (mine, theirs, pulled, expected) in cases {
            assert_eq!(digest_step(mine, theirs, pulled), expected, "{mine} {theirs:?} {pulled:?}");
        }
    }

    fn newer(from: &str) -> PullRequest {
        PullRequest::Newer { from: NodeId(from.into()) }
    }

    fn keys(from: &str) -> (PullRequest, tokio::sync::oneshot::Receiver<Result<usize, SyncError>>) {
        let (done, done_rx) = tokio::sync::oneshot::channel();
        (PullRequest::Keys { from: NodeId(from.into()), keys: Vec::new(), done }, done_rx)
    }

    fn shape(requests: &[PullRequest]) -> Vec<String> {
        requests
            .iter()
            .map(|r| match r {
                PullRequest::Newer { from } => format!("newer {from}"),
                PullRequest::Keys { from, .. } => format!("keys {from}"),
            })
            .collect()
    }

    #[test]
    fn coalescing_keeps_every_fetch_and_one_newer_pull_per_sender() {
        let (k1, _k1_rx) = keys("main");
        let (k2, _k2_rx) = keys("main");
        let cases: Vec<(Vec<PullRequest>, Vec<&str>)> = vec![
            (vec![], vec![]),
            (vec![newer("main")], vec!["newer main"]),
            (vec![newer("main"), newer("main"), newer("main")], vec!["newer main"]),
            (vec![newer("a"), newer("b"), newer("a")], vec!["newer a", "newer b"]),
            (vec![k1, newer("main"), k2, newer("main")], vec!["keys main", "newer main", "keys main"]),
        ];
        for (requests, expected) in cases {
            let before = shape(&requests);
            assert_eq!(shape(&coalesce(requests)), expected, "from {before:?}");
        }
    }
}
