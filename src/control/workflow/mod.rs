//! The on-demand workflow: addOrUpdate, inactivate and delete. It is the only writer of rule
//! entries; replicated entries from peers go through the same write path (`apply_replicated`),
//! and so does the purge of old tombstones the scan asks for (`purge_tombstone`).
//!
//! Every operation runs on the main under the file's lock, decides with the pure functions in
//! `rules` (lifecycle, layers, classification, guardrail, ownership), and treats the synced store write
//! as the commit point. Everything before the commit is reversible and is rolled back on
//! failure; everything after it is finishing work that the periodic scan retries if it fails.
//!
//! Structural path: local suspend (SELF) → Suspend broadcast (each peer drains before it
//! answers) → local drain (the evaluations of the old content finish) → schema change
//! prepared → persist entry and measures in one batch (commit) → finalize locally → notify and
//! resume peers → reset alarm windows. Filter-only path: persist → apply locally; no pause (a
//! batch evaluates one version whole). Inactivate suspends and drains like a structural apply.

mod add_or_update;
pub mod agent_objects;
mod alarm_settings;
mod ui_templates;
pub mod apply_phase;
pub mod error;
pub mod faults;
pub mod history;
mod layers;
pub mod peers;
mod purge;
mod remove;
pub mod rolling;
pub mod timing;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::control::bundled::Bundled;
use crate::base::clock::{RevisionClock, now_ms};
use crate::compiler::Compiled;
use crate::base::ids::{ContentHash, Revision, RuleKey};
use crate::control::rules::classify::{Holder, Registered};
use crate::control::rules::lifecycle::Row;
use crate::control::rules::merge;
use crate::control::rules::ownership::FileClaims;
use crate::control::runtime::locks::{FileGuard, FileLocks};
use crate::control::runtime::{Origin, Runtime};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::{Change, EntryStatus, Measure, RuleEntry, Store};
pub use apply_phase::{Phase, StatusAnswer, StatusQuery};
// The submodules compile through these (`super::compile_off_thread`); the helpers live below the
// workflow, shared with the scan.
use crate::control::compile_pool::{compile_new_off_thread, compile_off_thread};
use crate::control::runtime::loaded_rule;
pub use peers::{CommitOutcome, NoPeers, Peers, PersistFuture, SuspendVote};
pub use rolling::{RollError, RollStart};

use apply_phase::{ApplyLog, Durable};
use error::{PersistError, ReplicatedError};

/// How long a write waits for the file's lock before answering `update_in_progress`.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(35);

/// An addOrUpdate request, validated by the HTTP layer.
#[derive(Debug, Clone)]
pub struct AddOrUpdate {
    pub key: RuleKey,
    pub content: Vec<u8>,
    pub allow_storage_change: bool,
    pub force: bool,
}

pub struct Workflow {
    store: Arc<Store>,
    runtime: Arc<Runtime>,
    bundled: Arc<Bundled>,
    clock: Arc<RevisionClock>,
    peers: Arc<dyn Peers>,
    locks: Arc<FileLocks>,
    lock_timeout: Duration,
    /// The live status of structural applies run on this node (as the main).
    apply_log: ApplyLog,
    /// Serializes applies of files that declare layers, from their layer check to their commit,
    /// so two files cannot claim one name or ordinal differently at the same time.
    layer_lock: tokio::sync::Mutex<()>,
    /// How many revisions, and how old, history keeps (`history`).
    history_retention: crate::control::history::retention::Retention,
}

/// The stored row and bundled file of a key, read under its lock.
struct Prior {
    entry: Option<RuleEntry>,
    /// The previous entry revision, tombstones included, for ordering the next write.
    last_revision: Option<Revision>,
}

impl Prior {
    fn row(&self) -> Row {
        match self.entry.as_ref().map(|e| e.status) {
            Some(EntryStatus::Active) => Row::Active,
            Some(EntryStatus::Inactive) => Row::Inactive,
            Some(EntryStatus::Deleted) | None => Row::None,
        }
    }
}

impl Workflow {
    pub fn new(
        store: Arc<Store>,
        runtime: Arc<Runtime>,
        bundled: Arc<Bundled>,
        clock: Arc<RevisionClock>,
        peers: Arc<dyn Peers>,
        locks: Arc<FileLocks>,
    ) -> Workflow {
        Workflow {
            store,
            runtime,
            bundled,
            clock,
            peers,
            locks,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            apply_log: ApplyLog::default(),
            layer_lock: tokio::sync::Mutex::new(()),
            history_retention: crate::control::history::retention::Retention::default(),
        }
    }

    pub fn with_lock_timeout(mut self, timeout: Duration) -> Workflow {
        self.lock_timeout = timeout;
        self
    }

    /// `GET /runtime/rule/status`: the live record of a structural apply, or the stored row.
    /// `served_by` is this node, named in the answer.
    pub async fn apply_status(&self, query: &StatusQuery, served_by: &crate::base::ids::NodeId) -> StatusAnswer {
        let live = self.apply_log.find(query, now_ms());
        let durable = match (query, &live) {
            (StatusQuery::ByKey { key, .. }, None) => match self.store.get_entry(key).await {
                Ok(Some(entry)) if entry.is_live() => Durable::Row { status: entry.status, content_hash: entry.content_hash },
                Ok(_) => Durable::NoRow,
                Err(e) => Durable::Unreadable(e.to_string()),
            },
            _ => Durable::NoRow,
        };
        apply_phase::answer(query, live.as_ref(), &durable, served_by)
    }

    /// Opens the status record of a structural apply of `content_hash` to `key`.
    fn start_apply(&self, key: &RuleKey, content_hash: &ContentHash) -> String {
        self.apply_log.start(key, content_hash, now_ms())
    }

    /// Moves a structural apply to `phase`.
    fn apply_phase(&self, apply_id: &str, phase: Phase) {
        self.apply_log.set(apply_id, phase, None, now_ms());
    }

    /// Ends a structural apply FAILED (nothing committed) or DEGRADED (committed, finishing
    /// deferred), with the answer's message as the reason, and returns the answer.
    fn end_apply(&self, apply_id: &str, phase: Phase, outcome: Outcome) -> Outcome {
        self.apply_log.set(apply_id, phase, Some(outcome.message.clone()), now_ms());
        outcome
    }

    /// The per-file locks (shared with the scan).
    pub fn file_locks(&self) -> &Arc<FileLocks> {
        &self.locks
    }

    async fn lock(&self, key: &RuleKey) -> Result<FileGuard, Outcome> {
        self.locks.lock(key, self.lock_timeout).await.ok_or_else(|| {
            Outcome::new(
                ApplyStatus::UpdateInProgress,
                format!("{key} is being updated; the file lock was not free within {:?}", self.lock_timeout),
            )
        })
    }

    /// Every operation's start: the file's lock, then its prior row read under it.
    /// A file a roll holds refuses every write with `409 roll_in_progress` (`rolls`).
    async fn begin(&self, key: &RuleKey) -> Result<(FileGuard, Prior), Outcome> {
        let guard = self.lock(key).await?;
        self.roll_conflict(key).await?;
        let prior = self.prior(key).await?;
        Ok((guard, prior))
    }

    /// Reads the prior row. A read failure is `storage_unavailable`, never "no row": treating
    /// it as absent would let destructive changes slip past the guardrail.
    async fn prior(&self, key: &RuleKey) -> Result<Prior, Outcome> {
        match self.store.get_entry(key).await {
            Ok(entry) => {
                let last_revision = entry.as_ref().map(|e| e.revision.clone());
                Ok(Prior { entry: entry.filter(RuleEntry::is_live), last_revision })
            }
            Err(e) => Err(Outcome::new(ApplyStatus::StorageUnavailable, format!("reading {key}: {e}"))),
        }
    }

    fn new_entry(&self, key: &RuleKey, content: Vec<u8>, status: EntryStatus, prior: &Prior) -> RuleEntry {
        let now = now_ms();
        RuleEntry {
            key: key.clone(),
            content_hash: ContentHash::of(&content),
            content,
            status,
            update_time_ms: now,
            revision: self.clock.next(now, prior.last_revision.as_ref()),
        }
    }

    /// Measures to create or reshape so the registry matches `compiled` (guardrail already passed).
    fn measures_for(&self, key: &RuleKey, compiled: &Compiled, revision: &Revision) -> Vec<Measure> {
        let Compiled::Mal(file) = compiled else { return Vec::new() };
        file.metrics()
            .into_iter()
            .filter(|(metric, shape)| self.store.measure(metric).is_none_or(|m| m.shape != *shape))
            .map(|(metric, shape)| Measure { metric, shape, owner: key.clone(), revision: revision.clone() })
            .collect()
    }

    /// The registry's measures for the metrics `compiled` claims, each with who still answers
    /// for it (`key_exists`: the file being written has an entry or a bundled file). A measure
    /// whose recorded owner has neither is a leftover of a deleted file.
    async fn registered_measures(
        &self,
        key: &RuleKey,
        compiled: &Compiled,
        key_exists: bool,
    ) -> Result<BTreeMap<String, Registered>, Outcome> {
        let Compiled::Mal(file) = compiled else { return Ok(BTreeMap::new()) };
        let mut owners: BTreeMap<RuleKey, bool> = BTreeMap::new();
        let mut registered = BTreeMap::new();
        for (metric, _) in file.metrics() {
            let Some(measure) = self.store.measure(&metric) else { continue };
            let owner_is_candidate = measure.owner == *key;
            let owner_exists = match owners.get(&measure.owner) {
                _ if owner_is_candidate => key_exists,
                Some(known) => *known,
                None => {
                    let entry = self.store.get_entry(&measure.owner).await.map_err(|e| {
                        Outcome::new(ApplyStatus::StorageUnavailable, format!("reading {}: {e}", measure.owner))
                    })?;
                    let exists = entry.is_some_and(|e| e.is_live()) || self.bundled.contains(&measure.owner);
                    owners.insert(measure.owner.clone(), exists);
                    exists
                }
            };
            registered.insert(metric, Registered { shape: measure.shape, holder: Holder::of(owner_is_candidate, owner_exists) });
        }
        Ok(registered)
    }

    /// Persists `change`, honouring the persist failpoints. Every entry it commits gets its
    /// history record in the same batch (`history`).
    async fn persist(&self, mut change: Change) -> Result<(), PersistError> {
        self.complete_history(&mut change);
        for point in [faults::BEFORE_PERSIST, faults::PERSIST] {
            if let Some(argument) = faults::held(point).await {
                return Err(PersistError::Injected { point, argument });
            }
        }
        Ok(self.store.commit(change).await?)
    }

    /// Persists `change` (which writes `entry`) and tells the peers, through [`Peers::commit`]
    /// (with `commit_replicas`, the peers stage the entry while it is persisted here). Returns
    /// how many peers confirmed, or the operator's answer when nothing was persisted here.
    async fn commit(&self, change: Change, entry: &RuleEntry, prior: &Prior) -> Result<usize, Outcome> {
        let key = &entry.key;
        match self.peers.commit(entry, prior.last_revision.as_ref(), Box::pin(self.persist(change))).await {
            CommitOutcome::Committed { confirmed } => Ok(confirmed),
            CommitOutcome::Failed { error, withdrawn: true } => {
                Err(Outcome::new(ApplyStatus::PersistFailed, format!("{key} not persisted, nothing changed: {error}")))
            }
            CommitOutcome::Failed { error, withdrawn: false } => Err(Outcome::new(
                ApplyStatus::PersistUncertain,
                format!(
                    "{key} not persisted on the main ({error}), and a peer did not confirm dropping its staged copy: \
                     the write is withdrawn when that peer asks this node, but applied if this node is lost first"
                ),
            )),
        }
    }

    /// Suspends locally (SELF) and then every peer. On refusal everything is resumed and the
    /// refusal is returned as the operator's answer.
    async fn suspend_cluster(&self, key: &RuleKey) -> Result<(), Outcome> {
        use crate::control::runtime::SuspendResult;
        if self.runtime.suspend(key, Origin::SelfOrigin, false) == SuspendResult::Rejected {
            return Err(Outcome::new(
                ApplyStatus::OriginConflict,
                format!("{key} is suspended by a peer (another node is applying it); retry once it settles"),
            ));
        }
        if let SuspendVote::Rejected { peer, detail } = self.peers.suspend_all(key).await {
            self.resume_cluster(key).await;
            return Err(Outcome::new(
                ApplyStatus::SplitBrainDetected,
                format!("peer {peer} refused the suspend of {key} ({detail}); another node believes it is the main"),
            ));
        }
        Ok(())
    }

    /// Waits until this node's evaluations of `key` opened before its suspend have finished
    /// (their values written): after this, nothing is computed by the content being replaced.
    /// Past `dispatch.drain_timeout` the operation fails with `status`, before anything is
    /// persisted (the caller resumes): the answer never claims a boundary that did not hold.
    async fn drain_local(&self, key: &RuleKey, status: ApplyStatus) -> Result<(), Outcome> {
        let timeout = self.runtime.drain_timeout();
        if self.runtime.wait_drained(key, std::time::Instant::now() + timeout).await {
            return Ok(());
        }
        tracing::warn!(rule = %key, in_flight = self.runtime.in_flight(key), ?timeout, "drain timed out; operation refused");
        Err(Outcome::new(
            status,
            format!(
                "evaluations of {key}'s current content were still running after {timeout:?} (dispatch.drain_timeout); \
                 nothing changed, retry"
            ),
        ))
    }

    async fn resume_cluster(&self, key: &RuleKey) {
        self.runtime.resume(key, Origin::SelfOrigin);
        self.peers.resume_all(key).await;
    }

    /// After the commit: tell peers and let them resume. Returns a note for the answer when
    /// `--commit-replicas` asks for confirmations.
    async fn announce(&self, entry: &RuleEntry, prior: &Prior) -> String {
        let confirmed = self.peers.notify_committed(entry, prior.last_revision.as_ref()).await;
        self.peers.resume_all(&entry.key).await;
        replicas_note(self.peers.replicas_required(), confirmed)
    }

    /// Applies entries replicated from another node (pulled, or carried by a commit notice):
    /// the same single write path as operator requests, merged by [`merge::merge`]
    /// (last-write-wins on the revision). Returns how many entries moved storage. Runtime state
    /// follows on the next scan (callers poke it).
    pub async fn apply_replicated(&self, entries: Vec<RuleEntry>) -> Result<usize, ReplicatedError> {
        self.apply_entries(entries, true).await
    }

    /// Applies the entry a commit notice carried, as [`Workflow::apply_replicated`]; unless the
    /// sender counts the answer as a confirmation (`durable`), the batch is not synced: the
    /// write's confirmations came from the main's disk and the prepared peers', this copy is
    /// one more (it is in the engine's log, synced by this node's next synced write, and the
    /// sync worker restores it after a power loss).
    pub async fn apply_notified(&self, entry: RuleEntry, durable: bool) -> Result<usize, ReplicatedError> {
        self.apply_entries(vec![entry], durable).await
    }

    async fn apply_entries(&self, entries: Vec<RuleEntry>, durable: bool) -> Result<usize, ReplicatedError> {
        let mut applied = 0;
        for entry in entries {
            let key = entry.key.clone();
            let mut timer = timing::PhaseTimer::start("apply_replicated");
            let Ok(_guard) = self.lock(&key).await else {
                return Err(ReplicatedError::LockBusy { key });
            };
            timer.mark("lock");
            // The index holds what storage holds (it changes only after a write, under this
            // lock): the merge reads it, not the engine.
            let local = self.store.entry_meta(&key).map(|meta| merge::Version {
                revision: meta.revision,
                tombstone: meta.status == EntryStatus::Deleted,
                content_hash: meta.content_hash,
            });
            timer.mark("read");
            self.clock.observe(&entry.revision);
            if !merge::merge(local.as_ref(), &version(&entry)).writes() {
                continue;
            }
            let compiled = if entry.is_live() && key.catalog.is_rule() {
                compile_off_thread(&key, &entry.content).await.ok()
            } else {
                None
            };
            timer.mark("compile");
            let inactive = entry.status == EntryStatus::Inactive;
            let live = entry.is_live();
            let content_hash = entry.content_hash.clone();
            // The commit of a prepare: the staged record is durable already and this batch
            // removes it, so the batch need not be synced (lost in a crash, the record is still
            // there and its resolution applies it). The second fsync of a replicated write saved.
            let sync = durable && !self.store.is_staged(&key, &entry.revision);
            if let Err(source) = self.store.commit_with(Change { entries: vec![entry], ..Change::default() }, sync).await {
                return Err(ReplicatedError::Store { key, source });
            }
            timer.mark("commit");
            match (compiled, live) {
                (Some(compiled), true) => {
                    self.set_claims(&key, &compiled, inactive);
                    // The scan that loads this entry takes it instead of compiling it again.
                    self.runtime.handoff.put(&key, &content_hash, compiled);
                }
                _ if !key.catalog.is_rule() => {}
                _ => self.runtime.claims.remove(&key),
            }
            applied += 1;
        }
        Ok(applied)
    }

    fn set_claims(&self, key: &RuleKey, compiled: &Compiled, inactive: bool) {
        self.runtime.claims.set(key, FileClaims::of(compiled, inactive, self.bundled.contains(key)));
    }
}

/// What the last-write-wins merge compares of an entry.
pub fn version(entry: &RuleEntry) -> merge::Version {
    merge::Version {
        revision: entry.revision.clone(),
        tombstone: entry.status == EntryStatus::Deleted,
        content_hash: entry.content_hash.clone(),
    }
}

/// The answer's note on peer confirmations (empty unless confirmations are required).
pub fn replicas_note(required: usize, confirmed: usize) -> String {
    if required == 0 {
        return String::new();
    }
    format!("; held by {confirmed} peer(s), {required} required")
}

/// What an apply's message says of the alarm rules its reset reached (nothing when none).
fn alarm_reset_note(rules: &[String]) -> String {
    match rules {
        [] => String::new(),
        rules => format!("; alarm rules reset: {}", rules.join(", ")),
    }
}

/// Keys every metric of a file, for alarm resets on teardown.
fn all_names(compiled: &Compiled) -> std::collections::BTreeSet<String> {
    crate::control::rules::classify::Claims::of(compiled).names()
}

#[cfg(test)]
mod tests;
