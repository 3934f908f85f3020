//! Management storage: the typed facade over the embedded key-value engine.
//!
//! This is the only module that reads or writes the engine. It holds two record kinds:
//! runtime rule entries (one per catalog/name, tombstones included) and schema-registry
//! measures (metric name → shape and owning rule), plus the roll records of rolling changes
//! (`rolls`, opaque bytes). A logical change is one [`Change`], written
//! as one atomic batch and synced before `commit` returns, so an acknowledged write survives a
//! crash at any moment. Concurrent changes share one synced batch (group commit, `committer`).
//!
//! A metadata index of all entries (no content) and the whole registry are cached in memory,
//! so list and registry lookups never touch the disk. The cache is updated only after a
//! successful synced write; [`Store::read_all_entries`] always reads the engine itself, which
//! is what the periodic scan relies on.

pub mod codec;
mod committer;
pub mod history;
pub mod keys;
pub mod kv;
pub mod kv_error;
pub mod rolling;
pub mod series;
pub mod staged;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::compiler::MetricShape;
use crate::base::ids::{ContentHash, RuleKey, Revision};
use kv::{KvEngine, KvError, KvOp};

/// The persisted status of an entry. `Deleted` is a tombstone, kept for last-write-wins merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EntryStatus {
    Active,
    Inactive,
    Deleted,
}

impl EntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Active => "ACTIVE",
            EntryStatus::Inactive => "INACTIVE",
            EntryStatus::Deleted => "DELETED",
        }
    }
}

/// One runtime rule entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleEntry {
    pub key: RuleKey,
    /// The content bytes exactly as posted (empty for a tombstone).
    pub content: Vec<u8>,
    pub status: EntryStatus,
    pub update_time_ms: u64,
    pub content_hash: ContentHash,
    pub revision: Revision,
}

impl RuleEntry {
    pub fn meta(&self) -> EntryMeta {
        EntryMeta {
            key: self.key.clone(),
            status: self.status,
            update_time_ms: self.update_time_ms,
            content_hash: self.content_hash.clone(),
            revision: self.revision.clone(),
        }
    }

    pub fn is_live(&self) -> bool {
        self.status != EntryStatus::Deleted
    }
}

/// An entry without its content: what list views and the scan plan need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryMeta {
    pub key: RuleKey,
    pub status: EntryStatus,
    pub update_time_ms: u64,
    pub content_hash: ContentHash,
    pub revision: Revision,
}

/// A schema-registry measure: the storage shape a metric was created with, and its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measure {
    pub metric: String,
    pub shape: MetricShape,
    pub owner: RuleKey,
    pub revision: Revision,
}

/// One logical change: written as one atomic, synced batch.
#[derive(Debug, Clone, Default)]
pub struct Change {
    pub entries: Vec<RuleEntry>,
    pub measures: Vec<Measure>,
    /// Entries to remove physically (tombstone collection).
    pub purge_entries: Vec<RuleKey>,
    /// Roll records to put or remove in the same batch (a roll's start, step, or its final
    /// record next to the committed entry of a completion or force-commit; see `rolls`).
    pub rolls: Vec<rolling::RollOp>,
    /// History records to put (the revisions this change commits) or compact, in the same batch.
    pub history: Vec<history::HistoryOp>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Kv(#[from] KvError),
    #[error("stored record under {key} is unreadable: {source}")]
    Corrupt { key: String, source: codec::CodecError },
    #[error("value for {key} does not encode: {source}")]
    Encode { key: String, source: codec::CodecError },
    #[error("storage task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("the prepare of {key} at {revision} was aborted")]
    Aborted { key: RuleKey, revision: Revision },
    #[error("starting the store's committer thread: {0}")]
    Committer(std::io::Error),
}

/// How many aborted prepares a node remembers (see [`Store::abort_stage`]).
pub const ABORTS_REMEMBERED: usize = 1024;

/// The typed management store.
pub struct Store {
    kv: Arc<dyn KvEngine>,
    index: RwLock<BTreeMap<RuleKey, EntryMeta>>,
    measures: RwLock<BTreeMap<String, Measure>>,
    /// Entries staged by a prepare, by key and revision (see `staged`).
    staged: RwLock<BTreeMap<(RuleKey, Revision), staged::Staged>>,
    /// The last prepares aborted here, so one that arrives after its abort is refused.
    aborted: std::sync::Mutex<std::collections::VecDeque<(RuleKey, Revision)>>,
    changes_tx: tokio::sync::watch::Sender<u64>,
    /// Moves after every commit that puts or deletes a roll record (see [`Store::subscribe_rolls`]).
    roll_changes_tx: tokio::sync::watch::Sender<u64>,
    /// The hash of every stored roll record's bytes (for the replication digest), kept like
    /// the entry index: loaded at open, updated after each synced write.
    roll_hashes: RwLock<BTreeMap<RuleKey, ContentHash>>,
    /// Every stored history record's revision and time, by key: loaded at open, updated after
    /// each synced write, like the entry index.
    history: RwLock<history::HistoryIndex>,
    /// History records removed by retention since the store opened (`hotrule_history_compacted`).
    history_compacted: std::sync::atomic::AtomicU64,
    /// Writes every change's synced batch, grouping concurrent ones.
    committer: committer::Committer,
}

impl Store {
    /// Opens the store on `kv` and loads the entry index and the registry.
    pub fn open(kv: Arc<dyn KvEngine>) -> Result<Store, StoreError> {
        purge_invalid_names(kv.as_ref())?;
        let entries = read_entries(kv.as_ref())?;
        let measures = read_measures(kv.as_ref())?;
        let roll_hashes = rolling::read_roll_hashes(kv.as_ref())?;
        let history = history::index_of(&history::read_all(kv.as_ref())?);
        let opened = std::time::Instant::now();
        let staged = staged::read_all(kv.as_ref())?
            .into_iter()
            .map(|record| ((record.entry.key.clone(), record.entry.revision.clone()), staged::Staged { record, since: opened }))
            .collect();
        Ok(Store {
            roll_hashes: RwLock::new(roll_hashes),
            history: RwLock::new(history),
            history_compacted: std::sync::atomic::AtomicU64::new(0),
            staged: RwLock::new(staged),
            aborted: std::sync::Mutex::default(),
            changes_tx: tokio::sync::watch::channel(0).0,
            roll_changes_tx: tokio::sync::watch::channel(0).0,
            committer: committer::Committer::start(kv.clone()).map_err(StoreError::Committer)?,
            kv,
            index: RwLock::new(entries.into_iter().map(|e| (e.key.clone(), e.meta())).collect()),
            measures: RwLock::new(measures.into_iter().map(|m| (m.metric.clone(), m)).collect()),
        })
    }

    /// Reads one entry (tombstones included) from the engine.
    pub async fn get_entry(&self, key: &RuleKey) -> Result<Option<RuleEntry>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
        // A point read is a memtable or block-cache lookup: no thread hop for it.
        let raw_key = keys::rule_key(key);
        let raw = self.kv.get(&raw_key)?;
        raw.map(|bytes| decode_entry(&raw_key, &bytes)).transpose()
    }

    /// Reads every entry (tombstones included) from the engine, not the cache.
    pub async fn read_all_entries(&self) -> Result<Vec<RuleEntry>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
        let kv = self.kv.clone();
        blocking(move || read_entries(kv.as_ref())).await
    }

    /// Writes `change` atomically and durably, then updates the caches. Concurrent changes are
    /// written together in one synced batch, each answered once that batch is durable.
    pub async fn commit(&self, change: Change) -> Result<(), StoreError> {
        self.commit_with(change, true).await
    }

    /// Writes `change` atomically; unsynced when `sync` is false (then a crash may lose it:
    /// only for a change whose every entry is also held durably as a staged record, which the
    /// same batch removes, so a lost batch leaves that record for the resolution to apply).
    pub async fn commit_with(&self, change: Change, sync: bool) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(change.entries.len() + change.measures.len());
        for entry in &change.entries {
            let key = keys::rule_key(&entry.key);
            let value = codec::encode(entry).map_err(|source| StoreError::Encode {
                key: String::from_utf8_lossy(&key).into_owned(),
                source,
            })?;
            ops.push(KvOp::Put { key, value });
        }
        for measure in &change.measures {
            let key = keys::measure_key(&measure.metric);
            let value = codec::encode(measure).map_err(|source| StoreError::Encode {
                key: String::from_utf8_lossy(&key).into_owned(),
                source,
            })?;
            ops.push(KvOp::Put { key, value });
        }
        for key in &change.purge_entries {
            ops.push(KvOp::Delete { key: keys::rule_key(key) });
        }
        ops.extend(change.rolls.iter().map(rolling::RollOp::kv_op));
        for op in &change.history {
            ops.push(op.kv_op()?);
        }
        // An entry written replaces every staged record of its key up to its revision (the
        // commit of a prepare, or a later write): they go in the same batch.
        let unstaged = self.staged_up_to(&change.entries);
        for (key, revision) in &unstaged {
            ops.push(KvOp::Delete { key: staged::staged_key(key, revision) });
        }
        self.committer.write_with(ops, sync).await?;
        if !unstaged.is_empty() {
            let mut staged = write_lock(&self.staged);
            for id in &unstaged {
                staged.remove(id);
            }
        }

        let mut index = write_lock(&self.index);
        for entry in &change.entries {
            index.insert(entry.key.clone(), entry.meta());
        }
        for key in &change.purge_entries {
            index.remove(key);
        }
        drop(index);
        let mut measures = write_lock(&self.measures);
        for measure in change.measures {
            measures.insert(measure.metric.clone(), measure);
        }
        drop(measures);
        if !change.history.is_empty() {
            let mut index = write_lock(&self.history);
            for op in &change.history {
                op.cache(&mut index);
            }
            let compacted = change.history.iter().filter(|op| matches!(op, history::HistoryOp::Delete { .. })).count();
            self.history_compacted.fetch_add(compacted as u64, std::sync::atomic::Ordering::Relaxed);
        }
        let rolls_moved = !change.rolls.is_empty();
        if rolls_moved {
            rolling::cache(&mut write_lock(&self.roll_hashes), &change.rolls);
        }
        self.changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        if rolls_moved {
            self.roll_changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        }
        Ok(())
    }

    /// The staged records of `entries`' keys at or below their revisions.
    fn staged_up_to(&self, entries: &[RuleEntry]) -> Vec<(RuleKey, Revision)> {
        let staged = read_lock(&self.staged);
        if staged.is_empty() {
            return Vec::new();
        }
        entries.iter().flat_map(|entry| staged_ids(&staged, &entry.key, &entry.revision)).collect()
    }

    /// Removes every staged record of `key` at or below `revision` (its commit came, or a later
    /// write replaced it). Nothing to write when there is none.
    pub async fn release_staged(&self, key: &RuleKey, revision: &Revision) -> Result<(), StoreError> {
        let ids = staged_ids(&read_lock(&self.staged), key, revision);
        if ids.is_empty() {
            return Ok(());
        }
        let ops = ids.iter().map(|(key, revision)| KvOp::Delete { key: staged::staged_key(key, revision) }).collect();
        self.committer.write(ops).await?;
        let mut staged = write_lock(&self.staged);
        for id in &ids {
            staged.remove(id);
        }
        drop(staged);
        self.changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        Ok(())
    }

    /// Stages `record` durably (a synced write, grouped with concurrent ones). Not an entry: no
    /// cache or subscriber sees it.
    pub async fn stage(&self, record: staged::StagedRecord) -> Result<(), StoreError> {
        let id = (record.entry.key.clone(), record.entry.revision.clone());
        if self.aborted.lock().unwrap_or_else(|p| p.into_inner()).contains(&id) {
            return Err(StoreError::Aborted { key: id.0, revision: id.1 });
        }
        let key = staged::staged_key(&record.entry.key, &record.entry.revision);
        let value = staged::encode(&record)?;
        // In the map before the write is queued: a commit of the entry queued meanwhile then
        // deletes the record in its own batch, which the committer writes after this one.
        write_lock(&self.staged).insert(id.clone(), staged::Staged { record, since: std::time::Instant::now() });
        if let Err(e) = self.committer.write(vec![KvOp::Put { key, value }]).await {
            write_lock(&self.staged).remove(&id);
            return Err(e.into());
        }
        Ok(())
    }

    /// Removes the staged record of `key` at `revision` (an abort, or a resolution that
    /// discards it); nothing when there is none.
    pub async fn unstage(&self, key: &RuleKey, revision: &Revision) -> Result<(), StoreError> {
        let id = (key.clone(), revision.clone());
        if !read_lock(&self.staged).contains_key(&id) {
            return Ok(());
        }
        self.committer.write(vec![KvOp::Delete { key: staged::staged_key(key, revision) }]).await?;
        write_lock(&self.staged).remove(&id);
        self.changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        Ok(())
    }

    /// An abort from the main: removes the staged record of `key` at `revision` and remembers
    /// it (in memory, the last [`ABORTS_REMEMBERED`]), so a prepare of it that arrives later is
    /// refused. After a restart none can arrive: the connection that carried it is gone.
    pub async fn abort_stage(&self, key: &RuleKey, revision: &Revision) -> Result<(), StoreError> {
        {
            let mut aborted = self.aborted.lock().unwrap_or_else(|p| p.into_inner());
            if aborted.len() >= ABORTS_REMEMBERED {
                aborted.pop_front();
            }
            aborted.push_back((key.clone(), revision.clone()));
        }
        self.unstage(key, revision).await
    }

    /// Whether `key` at exactly `revision` is staged here.
    pub fn is_staged(&self, key: &RuleKey, revision: &Revision) -> bool {
        read_lock(&self.staged).contains_key(&(key.clone(), revision.clone()))
    }

    /// Whether a staged record younger than `age` is still waiting for its commit.
    pub fn has_staged_younger_than(&self, age: std::time::Duration) -> bool {
        read_lock(&self.staged).values().any(|staged| staged.since.elapsed() < age)
    }

    /// Every staged record, oldest key first.
    pub fn staged(&self) -> Vec<staged::Staged> {
        read_lock(&self.staged).values().cloned().collect()
    }

    /// Whether `key` has a staged record newer than its stored entry: a write whose commit may
    /// still be on its way.
    pub fn has_pending_stage(&self, key: &RuleKey) -> bool {
        let stored = self.entry_meta(key).map(|m| m.revision);
        read_lock(&self.staged)
            .range((key.clone(), Revision::zero())..)
            .take_while(|((k, _), _)| k == key)
            .any(|((_, revision), _)| stored.as_ref().is_none_or(|s| revision > s))
    }

    /// Waits, up to `bound`, until `key` has no staged record newer than its entry: a read on a
    /// peer right after the main answered a prepared write sees it once its commit notice
    /// landed (a moment later). Past the bound (the commit is lost with its main, and the
    /// resolution has not run yet) the read serves what is stored. True when settled.
    pub async fn wait_staged_settled(&self, key: &RuleKey, bound: std::time::Duration) -> bool {
        let mut changes = self.subscribe();
        let deadline = tokio::time::Instant::now() + bound;
        while self.has_pending_stage(key) {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
        true
    }

    /// A counter that moves after every successful commit.
    pub fn version(&self) -> u64 {
        *self.changes_tx.borrow()
    }

    /// A receiver that sees a new value after every successful commit.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes_tx.subscribe()
    }

    /// A receiver that sees a new value after every commit that puts or deletes a roll record, whoever
    /// wrote it (the main's workflow, or a replicated record): each node's scan then loads the
    /// content the record assigns it.
    pub fn subscribe_rolls(&self) -> tokio::sync::watch::Receiver<u64> {
        self.roll_changes_tx.subscribe()
    }

    /// The cached metadata of every entry (tombstones included), in key order.
    pub fn entry_index(&self) -> Vec<EntryMeta> {
        read_lock(&self.index).values().cloned().collect()
    }

    /// Runs `f` over the cached entry metadata under one read lock (no copy).
    pub fn with_entry_index<T>(&self, f: impl FnOnce(&BTreeMap<RuleKey, EntryMeta>) -> T) -> T {
        f(&read_lock(&self.index))
    }

    pub fn entry_meta(&self, key: &RuleKey) -> Option<EntryMeta> {
        read_lock(&self.index).get(key).cloned()
    }

    /// The history records of `key`, oldest first, read from the engine.
    pub async fn history_of(&self, key: &RuleKey) -> Result<Vec<history::HistoryRecord>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
        history::read_key(self.kv.as_ref(), key)
    }

    /// One history record, read from the engine.
    pub async fn history_record(&self, key: &RuleKey, revision: &Revision) -> Result<Option<history::HistoryRecord>, StoreError> {
        let raw_key = keys::history_key(key, revision);
        self.kv.get(&raw_key)?.map(|bytes| history::decode(&raw_key, &bytes)).transpose()
    }

    /// Every history record (for dumps and pulls), read from the engine.
    pub async fn read_all_history(&self) -> Result<Vec<history::HistoryRecord>, StoreError> {
        let kv = self.kv.clone();
        blocking(move || history::read_all(kv.as_ref())).await
    }

    /// The cached revisions of `key`'s history records, oldest first.
    pub fn history_index_of(&self, key: &RuleKey) -> Vec<(Revision, history::HistoryMeta)> {
        read_lock(&self.history).get(key).map(|m| m.iter().map(|(r, m)| (r.clone(), m.clone())).collect()).unwrap_or_default()
    }

    /// History records removed by retention since the store opened.
    pub fn history_compacted(&self) -> u64 {
        self.history_compacted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `f` over the cached history index under one read lock.
    pub fn with_history_index<T>(&self, f: impl FnOnce(&history::HistoryIndex) -> T) -> T {
        f(&read_lock(&self.history))
    }

    /// The cached schema registry.
    pub fn measures(&self) -> BTreeMap<String, Measure> {
        read_lock(&self.measures).clone()
    }

    pub fn measure(&self, metric: &str) -> Option<Measure> {
        read_lock(&self.measures).get(metric).cloned()
    }
}

impl Store {
    /// Reads every entry of one catalog (tombstones included) from the engine, synchronously:
    /// a prefix scan of one small catalog, for callers that are not async (the agent config
    /// source rebuilding its snapshot after a change).
    pub fn read_catalog_now(&self, catalog: crate::base::ids::Catalog) -> Result<Vec<RuleEntry>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
        self.kv
            .scan_prefix(&keys::catalog_prefix(catalog))?
            .into_iter()
            .filter(|(key, _)| keys::has_valid_rule_name(key))
            .map(|(key, value)| decode_entry(&key, &value))
            .collect()
    }

    /// Writes node-local agent state in one synced batch: `upserts` are (instance id, encoded
    /// record), `removals` instance ids. Not an entry: it is never replicated, and it does not
    /// wake [`Store::subscribe`] receivers.
    pub fn write_agent_states(&self, upserts: &[(String, Vec<u8>)], removals: &[String]) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(upserts.len() + removals.len());
        for (id, value) in upserts {
            let key = keys::agent_state_key(id);
            let value = codec::encode(value).map_err(|source| StoreError::Encode {
                key: String::from_utf8_lossy(&key).into_owned(),
                source,
            })?;
            ops.push(KvOp::Put { key, value });
        }
        for id in removals {
            ops.push(KvOp::Delete { key: keys::agent_state_key(id) });
        }
        self.kv.write(&ops, true)?;
        Ok(())
    }

    /// Every stored agent state record: (instance id, encoded record).
    pub fn read_agent_states(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.kv
            .scan_prefix(keys::AGENT_STATE_PREFIX)?
            .into_iter()
            .map(|(key, value)| {
                let id = String::from_utf8_lossy(&key[keys::AGENT_STATE_PREFIX.len()..]).into_owned();
                let bytes: Vec<u8> = codec::decode(&value).map_err(|source| StoreError::Corrupt {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    source,
                })?;
                Ok((id, bytes))
            })
            .collect()
    }
}

/// Entries are read only under keys whose name is valid: a record written under a name today's
/// rules refuse (by an older build, or replicated before names were checked on decode) would not
/// decode, and must neither fail every read nor stay where no API can reach it.
fn read_entries(kv: &dyn KvEngine) -> Result<Vec<RuleEntry>, StoreError> {
    kv.scan_prefix(keys::RULE_PREFIX)?
        .into_iter()
        .filter(|(key, _)| keys::has_valid_rule_name(key))
        .map(|(key, value)| decode_entry(&key, &value))
        .collect()
}

/// Deletes records stored under an invalid rule name (see [`read_entries`]), each logged.
fn purge_invalid_names(kv: &dyn KvEngine) -> Result<(), StoreError> {
    let doomed: Vec<KvOp> = kv
        .scan_prefix(keys::RULE_PREFIX)?
        .into_iter()
        .filter(|(key, _)| !keys::has_valid_rule_name(key))
        .map(|(key, _)| {
            tracing::warn!(key = %String::from_utf8_lossy(&key), "purging a stored entry whose name is not valid");
            KvOp::Delete { key }
        })
        .collect();
    if !doomed.is_empty() {
        kv.write(&doomed, true)?;
    }
    Ok(())
}

fn read_measures(kv: &dyn KvEngine) -> Result<Vec<Measure>, StoreError> {
    kv.scan_prefix(keys::MEASURE_PREFIX)?
        .into_iter()
        .map(|(key, value)| {
            codec::decode(&value).map_err(|source| StoreError::Corrupt {
                key: String::from_utf8_lossy(&key).into_owned(),
                source,
            })
        })
        .collect()
}

fn decode_entry(key: &[u8], bytes: &[u8]) -> Result<RuleEntry, StoreError> {
    codec::decode(bytes).map_err(|source| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        source,
    })
}

/// Runs blocking engine work (a full scan).
///
/// On the multi-threaded runtime it runs in place on the current worker, which hands its other
/// tasks to a fresh thread. On a current-thread runtime (unit tests) it goes to the blocking pool
/// instead.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        return tokio::task::block_in_place(work);
    }
    tokio::task::spawn_blocking(work).await?
}

/// The staged records of `key` at or below `revision`.
fn staged_ids(
    staged: &BTreeMap<(RuleKey, Revision), staged::Staged>,
    key: &RuleKey,
    revision: &Revision,
) -> Vec<(RuleKey, Revision)> {
    staged
        .range((key.clone(), Revision::zero())..)
        .take_while(|((k, _), _)| k == key)
        .filter(|((_, r), _)| r <= revision)
        .map(|(id, _)| id.clone())
        .collect()
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
