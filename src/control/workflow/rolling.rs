//! Rolling changes (issue 15, docs/rolling.md): the workflow is the one writer of roll records,
//! as it is of entries. Everything here runs on the main under the file's lock.
//!
//! - **Start** (`addOrUpdate?rollout=rolling`, [`Workflow::start_roll`]): validated and compiled
//!   exactly like a normal write (see `add_or_update`), then the record is put instead of the
//!   entry; nothing is paused.
//! - **Steps** ([`Workflow::put_roll`]): the main's roll worker (`roller/`) puts each next record.
//! - **Rollback** ([`Workflow::rollback_roll`]): the record says rolled back; nodes return to
//!   the master on their next scan. No entry changes.
//! - **Completion and force-commit** ([`Workflow::complete_roll`],
//!   [`Workflow::force_commit_roll`]): the normal structural path with the rolling content
//!   (suspend, drain, persist the entry **and** the finished record in one synced batch, install,
//!   resume, notices).
//! - **Replicas** ([`Workflow::apply_replicated_rolls`]): records from peers, merged by
//!   last-write-wins on the revision, through the same store write.
//!
//! The seam for the roll worker is `put_roll`, `complete_roll` and `roll_records`: async, typed
//! errors ([`RollError`]).

use std::collections::BTreeSet;

use super::{AddOrUpdate, Phase, Workflow, compile_off_thread, loaded_rule};
use crate::base::clock::now_ms;
use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::control::rolling::codec::{self, RollCodecError};
use crate::control::rolling::{HealthSettings, RollConflict, RollRecord, RollState, StartError, TransitionError};
use crate::control::runtime::{LoaderKind, Origin};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::rolling::RollOp;
use crate::store::{Change, EntryStatus, StoreError};

/// The roll settings of a start request (`stepTimeout`, `healthWindow`, `healthChecks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollStart {
    pub step_timeout_ms: u64,
    pub health: HealthSettings,
}

impl Default for RollStart {
    fn default() -> RollStart {
        RollStart { step_timeout_ms: RollRecord::DEFAULT_STEP_TIMEOUT_MS, health: HealthSettings::default() }
    }
}

/// Why a roll operation was refused or failed. `status()` is its applyStatus for the admin API.
#[derive(Debug, thiserror::Error)]
pub enum RollError {
    #[error("this node is not the main; only the main writes roll records")]
    NotMain,
    #[error("{key} is being updated; the file lock was not free")]
    LockBusy { key: RuleKey },
    #[error("{key} has no roll")]
    NoRoll { key: RuleKey },
    #[error(transparent)]
    Finished(#[from] TransitionError),
    #[error(
        "the roll record of {key} moved (stored revision {stored:?}, the record put was read at {given}); read it again"
    )]
    Moved { key: RuleKey, stored: Option<Revision>, given: Revision },
    #[error("the roll record of {key}: {source}")]
    Store { key: RuleKey, source: StoreError },
    #[error("listing the roll records: {0}")]
    List(StoreError),
    #[error("the roll record of {key} is unreadable: {source}")]
    Codec { key: RuleKey, source: RollCodecError },
    /// The structural path of a completion or force-commit did not commit; nothing changed.
    #[error("{}", .0.message)]
    NotCommitted(Outcome),
}

impl RollError {
    pub fn status(&self) -> ApplyStatus {
        match self {
            RollError::NotMain => ApplyStatus::ClusterViewSplit,
            RollError::LockBusy { .. } => ApplyStatus::UpdateInProgress,
            RollError::NoRoll { .. } => ApplyStatus::RuleNotFound,
            RollError::Finished(_) | RollError::Moved { .. } => ApplyStatus::RollFinished,
            RollError::Store { .. } | RollError::List(_) | RollError::Codec { .. } => ApplyStatus::StorageUnavailable,
            RollError::NotCommitted(outcome) => outcome.status,
        }
    }
}

/// The 409 answer of a write to a file a roll holds.
pub fn conflict_outcome(conflict: &RollConflict) -> Outcome {
    Outcome::new(ApplyStatus::RollInProgress, conflict.to_string())
}

impl Workflow {
    /// `addOrUpdate?rollout=rolling`: validated and compiled exactly like a normal write (every
    /// refusal of a normal write applies, and the 409 of a roll already holding the file), then
    /// the roll record is persisted instead of the entry. Answers `roll_started` with the record.
    pub async fn start_roll(&self, request: AddOrUpdate, start: RollStart) -> (Outcome, Option<RollRecord>) {
        self.write(request, Some(start)).await
    }

    /// The record of a start, once every check of the write passed (called by the write path,
    /// under the file's lock). `master` is what runs for the file today (the ACTIVE entry, or
    /// the bundled file when there is no entry); `measures` those the rolling content creates,
    /// persisted in the record's batch.
    pub(super) async fn put_started_roll(
        &self,
        key: &RuleKey,
        master: Option<Vec<u8>>,
        rolling: Vec<u8>,
        start: RollStart,
        measures: Vec<crate::store::Measure>,
    ) -> (Outcome, Option<RollRecord>) {
        if !self.peers.is_main() {
            return (Outcome::new(ApplyStatus::ClusterViewSplit, RollError::NotMain.to_string()), None);
        }
        let me = self.clock.node().clone();
        let mut members: Vec<NodeId> = self.peers.live_members();
        members.push(me.clone());
        // Every live member runs the file when it has content today (gossip does not say per
        // node; a node that lags loads the master on its next scan anyway).
        let runs_rule: BTreeSet<NodeId> = if master.is_some() { members.iter().cloned().collect() } else { BTreeSet::new() };
        let nodes = crate::control::rolling::order_nodes(&members, &runs_rule, Some(&me));
        let previous = match self.stored_roll(key).await {
            Ok(previous) => previous,
            Err(e) => return (Outcome::new(e.status(), e.to_string()), None),
        };
        let now = now_ms();
        let revision = self.clock.next(now, previous.as_ref().map(|r| &r.revision));
        let record = match RollRecord::start(crate::control::rolling::StartRoll {
            key: key.clone(),
            master,
            rolling,
            nodes,
            step_timeout_ms: start.step_timeout_ms,
            health: start.health,
            now_ms: now,
            revision,
        }) {
            Ok(record) => record,
            Err(e @ StartError::NoChange { .. }) => return (Outcome::new(ApplyStatus::NoChange, e.to_string()), None),
            Err(e) => return (Outcome::new(ApplyStatus::InvalidParameter, e.to_string()), None),
        };
        if let Err(e) = self.persist_roll(&record, measures).await {
            return (Outcome::new(ApplyStatus::PersistFailed, format!("the roll of {key} did not start: {e}")), None);
        }
        let outcome = Outcome::new(
            ApplyStatus::RollStarted,
            format!(
                "rolling {key} over {} node(s), {} first; nothing else changed",
                record.nodes.len(),
                record.node_at_index().map(|n| n.0.as_str()).unwrap_or("-")
            ),
        )
        .at(&record.revision);
        (outcome, Some(record))
    }

    /// Every roll record the store holds, in key order. An unreadable record fails the read.
    pub async fn roll_records(&self) -> Result<Vec<RollRecord>, RollError> {
        let stored = self.store.list_rolls().await.map_err(RollError::List)?;
        stored
            .into_iter()
            .map(|s| codec::decode(&s.bytes).map_err(|source| RollError::Codec { key: s.key, source }))
            .collect()
    }

    /// The stored record of `key`, if any.
    pub async fn stored_roll(&self, key: &RuleKey) -> Result<Option<RollRecord>, RollError> {
        let bytes = self.store.get_roll(key).await.map_err(|source| RollError::Store { key: key.clone(), source })?;
        bytes
            .map(|bytes| codec::decode(&bytes).map_err(|source| RollError::Codec { key: key.clone(), source }))
            .transpose()
    }

    /// The 409 check of every write: a roll in progress or stopped holds its file. Only read
    /// when the store holds a record for the key (an in-memory check first).
    pub(super) async fn roll_conflict(&self, key: &RuleKey) -> Result<(), Outcome> {
        if !self.store.has_roll(key) {
            return Ok(());
        }
        match self.stored_roll(key).await {
            Ok(record) => crate::control::rolling::write_conflict(record.as_ref()).map_err(|c| conflict_outcome(&c)),
            Err(e) => Err(Outcome::new(ApplyStatus::StorageUnavailable, e.to_string())),
        }
    }

    /// **Roll worker seam.** Persists the next record of a roll and replicates it, on the main,
    /// under the file's lock. The writer stamps the revision (a fresh one, after the stored
    /// record's). A compare-and-set: `record.revision` must be the revision of the stored record
    /// it was computed from (as read through [`Workflow::roll_records`]; the pure transitions
    /// leave it alone), else [`RollError::Moved`] (an operator's rollback or force-commit got
    /// there first: read again). A record whose state is completed or force-committed goes
    /// through the completion path ([`Workflow::complete_roll`]'s): the entry and the record
    /// are persisted together. Refused with [`RollError::NotMain`] off the main.
    pub async fn put_roll(&self, record: RollRecord) -> Result<(), RollError> {
        let key = record.key.clone();
        let _guard = self.locks.lock(&key, self.lock_timeout).await.ok_or_else(|| RollError::LockBusy { key: key.clone() })?;
        if !self.peers.is_main() {
            return Err(RollError::NotMain);
        }
        let stored = self.stored_roll(&key).await?;
        if stored.as_ref().map(|s| &s.revision) != Some(&record.revision) {
            return Err(RollError::Moved { key, stored: stored.map(|s| s.revision), given: record.revision });
        }
        if let Some(stored) = stored.as_ref().filter(|s| !s.state.holds_the_file()) {
            return Err(TransitionError::Finished {
                key: key.to_string(),
                state: stored.state.label(),
                operation: "advance",
            }
            .into());
        }
        let stamped = self.stamp(record, stored.as_ref());
        match stamped.state {
            RollState::Completed | RollState::ForceCommitted => self.commit_rolling(stamped).await.map(|_| ()),
            _ => {
                self.persist_roll(&stamped, Vec::new()).await.map_err(|e| RollError::NotCommitted(persist_failed(&key, e)))?;
                Ok(())
            }
        }
    }

    /// **Roll worker seam.** Completes the roll of `key`: the rolling content becomes the
    /// committed entry everywhere through the normal structural path, with the finished record
    /// (completed) in the same synced batch. Allowed while the roll is in progress or stopped
    /// (the worker calls it when `advance` decides `Complete`); [`RollError::Finished`] once it
    /// finished, [`RollError::NoRoll`] without a record.
    pub async fn complete_roll(&self, key: &RuleKey) -> Result<RollRecord, RollError> {
        self.end_roll(key, completed).await
    }

    /// `force-commit-rolling`: [`crate::control::rolling::force_commit`], then the completion path.
    pub async fn force_commit_roll(&self, key: &RuleKey) -> Result<RollRecord, RollError> {
        self.end_roll(key, crate::control::rolling::force_commit).await
    }

    /// `rollback-rolling`: [`crate::control::rolling::rollback`], persisted and replicated; every node
    /// returns to the master on its next scan. No entry changes.
    pub async fn rollback_roll(&self, key: &RuleKey) -> Result<RollRecord, RollError> {
        self.end_roll(key, crate::control::rolling::rollback).await
    }

    async fn end_roll(
        &self,
        key: &RuleKey,
        transition: impl FnOnce(&RollRecord, u64) -> Result<RollRecord, TransitionError>,
    ) -> Result<RollRecord, RollError> {
        let _guard = self.locks.lock(key, self.lock_timeout).await.ok_or_else(|| RollError::LockBusy { key: key.clone() })?;
        if !self.peers.is_main() {
            return Err(RollError::NotMain);
        }
        let stored = self.stored_roll(key).await?.ok_or_else(|| RollError::NoRoll { key: key.clone() })?;
        let next = transition(&stored, now_ms())?;
        let stamped = self.stamp(next, Some(&stored));
        match stamped.state {
            RollState::Completed | RollState::ForceCommitted => self.commit_rolling(stamped).await,
            _ => {
                self.persist_roll(&stamped, Vec::new()).await.map_err(|e| RollError::NotCommitted(persist_failed(key, e)))?;
                Ok(stamped)
            }
        }
    }

    fn stamp(&self, record: RollRecord, stored: Option<&RollRecord>) -> RollRecord {
        let revision = self.clock.next(now_ms(), stored.map(|s| &s.revision));
        record.stamped(revision)
    }

    /// Persists `record` (with `measures`, in one synced batch) and tells peers.
    async fn persist_roll(&self, record: &RollRecord, measures: Vec<crate::store::Measure>) -> Result<(), super::error::PersistError> {
        let bytes = codec::encode(record).map_err(|e| super::error::PersistError::Encode(e.to_string()))?;
        let change = Change { measures, rolls: vec![RollOp::Put { key: record.key.clone(), bytes: bytes.clone() }], ..Change::default() };
        self.persist(change).await?;
        self.peers.notify_roll(&record.key, &record.revision, &bytes).await;
        Ok(())
    }

    /// The structural path with the rolling content of a finished (completed or force-committed)
    /// `record`, already stamped: suspend the cluster, drain, persist the ACTIVE entry, its
    /// measures and the record in one synced batch, install, resume, notices. Caller holds the
    /// file's lock.
    async fn commit_rolling(&self, record: RollRecord) -> Result<RollRecord, RollError> {
        let key = record.key.clone();
        let prior = self.prior(&key).await.map_err(RollError::NotCommitted)?;
        let compiled = compile_off_thread(&key, &record.rolling.bytes).await.map_err(|e| {
            RollError::NotCommitted(Outcome::new(ApplyStatus::CompileFailed, format!("the rolling content of {key}: {e}")))
        })?;
        let bytes = codec::encode(&record)
            .map_err(|e| RollError::NotCommitted(Outcome::new(ApplyStatus::PersistFailed, e.to_string())))?;
        let apply_id = self.start_apply(&key, &record.rolling.hash);
        self.apply_phase(&apply_id, Phase::Fencing);
        if let Err(outcome) = self.suspend_cluster(&key).await {
            return Err(RollError::NotCommitted(self.end_apply(&apply_id, Phase::Failed, outcome)));
        }
        if let Err(outcome) = self.drain_local(&key, ApplyStatus::ApplyFailed).await {
            self.resume_cluster(&key).await;
            return Err(RollError::NotCommitted(self.end_apply(&apply_id, Phase::Failed, outcome)));
        }
        self.apply_phase(&apply_id, Phase::Ddl);
        let entry = self.new_entry(&key, record.rolling.bytes.clone(), EntryStatus::Active, &prior);
        let measures = self.measures_for(&key, &compiled, &entry.revision);
        let change = Change {
            entries: vec![entry.clone()],
            measures,
            rolls: vec![RollOp::Put { key: key.clone(), bytes: bytes.clone() }],
            ..Change::default()
        };
        if let Err(e) = self.persist(change).await {
            self.resume_cluster(&key).await;
            let outcome = self.end_apply(&apply_id, Phase::Failed, persist_failed(&key, e));
            return Err(RollError::NotCommitted(outcome));
        }
        self.apply_phase(&apply_id, Phase::RollingOut);
        self.set_claims(&key, &compiled, false);
        let names = super::all_names(&compiled);
        self.runtime.install(
            &key,
            loaded_rule(compiled, entry.content_hash.clone(), Some(entry.revision.clone()), LoaderKind::Runtime),
            BTreeSet::new(),
        );
        self.runtime.resume(&key, Origin::SelfOrigin);
        self.peers.notify_roll(&key, &record.revision, &bytes).await;
        self.announce(&entry, &prior).await;
        self.runtime.reset_alarm_windows(&key, names);
        self.apply_phase(&apply_id, Phase::Applied);
        Ok(record)
    }

    /// Applies roll records replicated from another node (carried by a roll notice, or pulled
    /// by the sync): for each, under the file's lock, it replaces the stored record only when
    /// its revision is newer (last-write-wins). Returns how many records moved storage.
    pub async fn apply_replicated_rolls(&self, records: Vec<RollRecord>) -> Result<usize, RollError> {
        let mut applied = 0;
        for record in records {
            let key = record.key.clone();
            let _guard =
                self.locks.lock(&key, self.lock_timeout).await.ok_or_else(|| RollError::LockBusy { key: key.clone() })?;
            self.clock.observe(&record.revision);
            let stored = self.stored_roll(&key).await?;
            if stored.is_some_and(|s| s.revision >= record.revision) {
                continue;
            }
            let bytes = codec::encode(&record).map_err(|source| RollError::Codec { key: key.clone(), source })?;
            let change = Change { rolls: vec![RollOp::Put { key: key.clone(), bytes }], ..Change::default() };
            self.store.commit(change).await.map_err(|source| RollError::Store { key, source })?;
            applied += 1;
        }
        Ok(applied)
    }
}

/// The finished form of a roll completed by the worker: every node passed.
fn completed(record: &RollRecord, now: u64) -> Result<RollRecord, TransitionError> {
    if !record.state.holds_the_file() {
        return Err(TransitionError::Finished {
            key: record.key.to_string(),
            state: record.state.label(),
            operation: "complete",
        });
    }
    let mut next = record.clone();
    next.index = u32::try_from(next.nodes.len()).unwrap_or(u32::MAX).max(next.index);
    next.state = RollState::Completed;
    next.updated_ms = now;
    next.finished_ms = Some(now);
    Ok(next)
}

fn persist_failed(key: &RuleKey, e: super::error::PersistError) -> Outcome {
    Outcome::new(ApplyStatus::PersistFailed, format!("the roll record of {key} was not persisted, nothing changed: {e}"))
}

/// The main's roll worker acts through the workflow, the one writer of roll records.
#[async_trait::async_trait]
impl crate::control::rolling::roller::RollActions for Workflow {
    async fn put_roll(&self, record: RollRecord) -> Result<(), crate::control::rolling::roller::RollerError> {
        let key = record.key.to_string();
        Workflow::put_roll(self, record).await.map_err(|e| action("put", key, e))
    }

    async fn complete_roll(&self, key: &RuleKey) -> Result<(), crate::control::rolling::roller::RollerError> {
        Workflow::complete_roll(self, key).await.map(|_| ()).map_err(|e| action("complete", key.to_string(), e))
    }

    async fn roll_records(&self) -> Result<Vec<RollRecord>, crate::control::rolling::roller::RollerError> {
        Workflow::roll_records(self).await.map_err(|e| crate::control::rolling::roller::RollerError::Records { source: Box::new(e) })
    }
}

fn action(operation: &'static str, key: String, error: RollError) -> crate::control::rolling::roller::RollerError {
    crate::control::rolling::roller::RollerError::Action { operation, key, source: Box::new(error) }
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
