//! The workflow's side of rule history (issue 26): it is the one writer of history records, as
//! it is of entries. Every change it persists carries a record of each entry it commits (built
//! here from the entry, the caller of the request and the note of the operation) and the
//! retention plan's compactions for those keys, in the entry's own synced batch. Records pulled
//! from peers, and the periodic age compaction, go through here too, under the file's lock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::base::clock::now_ms;
use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::base::worker::{Worker, WorkerState};
use crate::control::history::retention::{self, Kept, Retention};
use crate::control::history::{Caller, current_caller};
use crate::control::outcome::ApplyStatus;
use crate::store::history::{HistoryOp, HistoryRecord, WriteOrigin};
use crate::store::{Change, EntryStatus, RuleEntry, StoreError};

use super::Workflow;

/// What an operation says about the revision it commits.
#[derive(Debug, Clone)]
pub(super) struct Note {
    pub action: &'static str,
    pub apply_status: ApplyStatus,
    pub classification: Option<&'static str>,
}

impl Note {
    /// The note of a write that did not give one: read from the entry it commits.
    fn of(entry: &RuleEntry) -> Note {
        let (action, apply_status) = match entry.status {
            EntryStatus::Active if entry.key.catalog.is_rule() => ("addOrUpdate", ApplyStatus::StructuralApplied),
            EntryStatus::Active => ("write", ApplyStatus::Stored),
            EntryStatus::Inactive => ("inactivate", ApplyStatus::Inactivated),
            EntryStatus::Deleted => ("delete", ApplyStatus::Deleted),
        };
        Note { action, apply_status, classification: None }
    }
}

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{key} is being written; its lock was not free")]
    LockBusy { key: RuleKey },
    #[error("writing the history of {key}: {source}")]
    Store { key: RuleKey, source: StoreError },
}

impl Workflow {
    /// The retention history is kept with (`rules.history_max_revisions`, `rules.history_max_age`).
    pub fn with_history_retention(mut self, retention: Retention) -> Workflow {
        self.history_retention = retention;
        self
    }

    pub fn history_retention(&self) -> Retention {
        self.history_retention
    }

    /// Adds to `change` the record of `entry` with `note` (before it is persisted).
    pub(super) fn note_history(&self, change: &mut Change, entry: &RuleEntry, note: Note) {
        change.history.push(HistoryOp::Put(Box::new(self.record_of(entry, note))));
    }

    fn record_of(&self, entry: &RuleEntry, note: Note) -> HistoryRecord {
        let caller = current_caller().unwrap_or_default();
        let Caller { taken_by, client, token, restore_of } = caller;
        let action = if restore_of.is_some() { "restore" } else { note.action };
        HistoryRecord {
            key: entry.key.clone(),
            revision: entry.revision.clone(),
            status: entry.status,
            content: entry.content.clone(),
            content_hash: entry.content_hash.clone(),
            time_ms: entry.update_time_ms,
            origin: WriteOrigin {
                action: action.to_string(),
                committed_by: self.clock.node().clone(),
                taken_by,
                client,
                token,
                restore_of,
                apply_status: note.apply_status.as_str().to_string(),
                classification: note.classification.map(str::to_string),
            },
        }
    }

    /// Completes `change` before it is persisted: a record for every entry it commits that has
    /// none yet, and retention's compactions of those keys.
    pub(super) fn complete_history(&self, change: &mut Change) {
        let recorded: Vec<(RuleKey, Revision)> = change
            .history
            .iter()
            .filter_map(|op| match op {
                HistoryOp::Put(record) => Some((record.key.clone(), record.revision.clone())),
                HistoryOp::Delete { .. } => None,
            })
            .collect();
        let missing: Vec<HistoryOp> = change
            .entries
            .iter()
            .filter(|entry| !recorded.iter().any(|(key, revision)| *key == entry.key && *revision == entry.revision))
            .map(|entry| HistoryOp::Put(Box::new(self.record_of(entry, Note::of(entry)))))
            .collect();
        change.history.extend(missing);
        let compactions = self.compactions(&change.history, now_ms());
        change.history.extend(compactions);
    }

    /// Retention's compactions for the keys `ops` put records of, counting those records.
    fn compactions(&self, ops: &[HistoryOp], now_ms: u64) -> Vec<HistoryOp> {
        let mut adding: BTreeMap<RuleKey, Vec<Kept>> = BTreeMap::new();
        for op in ops {
            if let HistoryOp::Put(record) = op {
                adding.entry(record.key.clone()).or_default().push(kept(record.revision.clone(), record.time_ms, record.status));
            }
        }
        adding
            .into_iter()
            .flat_map(|(key, mut records)| {
                records.extend(
                    self.store.history_index_of(&key).into_iter().map(|(revision, meta)| kept(revision, meta.time_ms, meta.status)),
                );
                records.dedup_by(|a, b| a.revision == b.revision);
                retention::plan(&records, now_ms, self.history_retention)
                    .into_iter()
                    .map(move |revision| HistoryOp::Delete { key: key.clone(), revision })
            })
            .collect()
    }

    /// Stores history records replicated from a peer that this node lacks, each key under its
    /// file's lock with its retention applied in the same batch (a record the plan would drop is
    /// not stored, so a compacted revision never comes back). Returns how many were stored.
    pub async fn apply_replicated_history(&self, records: Vec<HistoryRecord>) -> Result<usize, HistoryError> {
        let mut by_key: BTreeMap<RuleKey, Vec<HistoryRecord>> = BTreeMap::new();
        for record in records {
            // A record whose content does not match its hash is not one the main wrote.
            if crate::base::ids::ContentHash::of(&record.content) != record.content_hash {
                tracing::warn!(rule = %record.key, revision = %record.revision, "replicated history record whose content does not match its hash; skipped");
                continue;
            }
            by_key.entry(record.key.clone()).or_default().push(record);
        }
        let mut stored = 0;
        for (key, records) in by_key {
            let Ok(_guard) = self.lock(&key).await else { return Err(HistoryError::LockBusy { key }) };
            let held = self.store.history_index_of(&key);
            let new: Vec<HistoryRecord> =
                records.into_iter().filter(|r| !held.iter().any(|(revision, _)| *revision == r.revision)).collect();
            if new.is_empty() {
                continue;
            }
            let puts: Vec<HistoryOp> = new.into_iter().map(|r| HistoryOp::Put(Box::new(r))).collect();
            let compactions = self.compactions(&puts, now_ms());
            let dropped = |key: &RuleKey, revision: &Revision| {
                compactions.iter().any(|op| matches!(op, HistoryOp::Delete { key: k, revision: r } if k == key && r == revision))
            };
            let mut ops: Vec<HistoryOp> = puts
                .into_iter()
                .filter(|op| !matches!(op, HistoryOp::Put(r) if dropped(&r.key, &r.revision)))
                .collect();
            stored += ops.len();
            ops.extend(compactions.into_iter().filter(|op| match op {
                HistoryOp::Delete { revision, .. } => held.iter().any(|(r, _)| r == revision),
                HistoryOp::Put(_) => false,
            }));
            if ops.is_empty() {
                continue;
            }
            let change = Change { history: ops, ..Change::default() };
            self.store.commit(change).await.map_err(|source| HistoryError::Store { key: key.clone(), source })?;
        }
        Ok(stored)
    }

    /// Compacts every key's history by retention at `now_ms` (age moves on without writes).
    /// Returns how many records were removed.
    pub async fn compact_history(&self, now_ms: u64) -> Result<usize, HistoryError> {
        let plans: Vec<(RuleKey, Vec<Revision>)> = self.store.with_history_index(|index| {
            index
                .iter()
                .map(|(key, revisions)| {
                    let records: Vec<Kept> =
                        revisions.iter().map(|(revision, meta)| kept(revision.clone(), meta.time_ms, meta.status)).collect();
                    (key.clone(), retention::plan(&records, now_ms, self.history_retention))
                })
                .filter(|(_, doomed)| !doomed.is_empty())
                .collect()
        });
        let mut removed = 0;
        for (key, _) in plans {
            let Ok(_guard) = self.lock(&key).await else { return Err(HistoryError::LockBusy { key }) };
            // Planned again under the lock: a write may have come in meanwhile.
            let records: Vec<Kept> = self
                .store
                .history_index_of(&key)
                .into_iter()
                .map(|(revision, meta)| kept(revision, meta.time_ms, meta.status))
                .collect();
            let ops: Vec<HistoryOp> = retention::plan(&records, now_ms, self.history_retention)
                .into_iter()
                .map(|revision| HistoryOp::Delete { key: key.clone(), revision })
                .collect();
            if ops.is_empty() {
                continue;
            }
            removed += ops.len();
            let change = Change { history: ops, ..Change::default() };
            self.store.commit(change).await.map_err(|source| HistoryError::Store { key: key.clone(), source })?;
        }
        Ok(removed)
    }

    /// This node's id (the main that commits what this workflow writes).
    pub fn node_id(&self) -> &NodeId {
        self.clock.node()
    }
}

fn kept(revision: Revision, time_ms: u64, status: EntryStatus) -> Kept {
    Kept { revision, time_ms, deleted: status == EntryStatus::Deleted }
}

/// How often the age of history records is checked.
pub const HISTORY_RETENTION_INTERVAL: Duration = Duration::from_secs(600);

/// Compacts history by age every [`HISTORY_RETENTION_INTERVAL`] (count retention is applied by
/// every write; age moves on without one).
pub struct HistoryRetentionWorker {
    workflow: Arc<Workflow>,
    interval: Duration,
}

impl HistoryRetentionWorker {
    pub fn new(workflow: Arc<Workflow>, interval: Duration) -> HistoryRetentionWorker {
        HistoryRetentionWorker { workflow, interval }
    }
}

#[async_trait::async_trait]
impl Worker for HistoryRetentionWorker {
    fn name(&self) -> &'static str {
        "history-retention"
    }

    async fn work(&mut self) -> WorkerState {
        match self.workflow.compact_history(now_ms()).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "history records compacted by age"),
            Err(e) => tracing::warn!(error = %e, "history compaction skipped; the next round retries"),
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::time::sleep(self.interval).await;
        WorkerState::Busy
    }
}
