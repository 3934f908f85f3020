//! History records (issue 26): every committed revision of an entry, kept beside it under
//! `history/<catalog>/<name>#<revision>` (see `keys`). A record is immutable: its key names the
//! revision it holds, so replicas merge history by union, and retention removes records in the
//! batch of the write (or the replicated record, or the periodic round) that makes them surplus.
//! The workflow is the one writer; records are written in the same synced batch as their entry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kv::{KvEngine, KvOp};
use super::{EntryStatus, StoreError, codec, keys};
use crate::base::ids::{ContentHash, NodeId, Revision, RuleKey};

/// How a revision came to be and who made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOrigin {
    /// `addOrUpdate`, `inactivate`, `delete`, `revertToBundled`, `rollCommit`, `write` (agent
    /// objects, alarm settings, templates) or `restore`.
    pub action: String,
    /// The main that committed the revision.
    pub committed_by: NodeId,
    /// The node whose admin port took the request (None: a write no request made).
    pub taken_by: Option<NodeId>,
    /// The client's address as that node saw it.
    pub client: Option<String>,
    /// The fingerprint of the admin token the request presented.
    pub token: Option<String>,
    /// The revision a restore put back.
    pub restore_of: Option<Revision>,
    /// The applyStatus of the write at its commit point.
    pub apply_status: String,
    /// The classification of a rule file change (`NEW`, `FILTER_ONLY`, `STRUCTURAL`, ...).
    pub classification: Option<String>,
}

/// One committed revision of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub key: RuleKey,
    pub revision: Revision,
    pub status: EntryStatus,
    /// The content as committed (empty for a delete).
    pub content: Vec<u8>,
    pub content_hash: ContentHash,
    /// When the revision was committed (ms since the epoch).
    pub time_ms: u64,
    pub origin: WriteOrigin,
}

/// What the in-memory index keeps of a record (for retention, digests and listings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryMeta {
    pub time_ms: u64,
    pub status: EntryStatus,
}

impl HistoryRecord {
    pub fn meta(&self) -> HistoryMeta {
        HistoryMeta { time_ms: self.time_ms, status: self.status }
    }
}

/// A history change inside a [`super::Change`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryOp {
    Put(Box<HistoryRecord>),
    /// Retention compacts this revision.
    Delete { key: RuleKey, revision: Revision },
}

pub type HistoryIndex = BTreeMap<RuleKey, BTreeMap<Revision, HistoryMeta>>;

impl HistoryOp {
    pub(super) fn kv_op(&self) -> Result<KvOp, StoreError> {
        Ok(match self {
            HistoryOp::Put(record) => {
                let key = keys::history_key(&record.key, &record.revision);
                let value = codec::encode(record.as_ref()).map_err(|source| StoreError::Encode {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    source,
                })?;
                KvOp::Put { key, value }
            }
            HistoryOp::Delete { key, revision } => KvOp::Delete { key: keys::history_key(key, revision) },
        })
    }

    pub(super) fn cache(&self, index: &mut HistoryIndex) {
        match self {
            HistoryOp::Put(record) => {
                index.entry(record.key.clone()).or_default().insert(record.revision.clone(), record.meta());
            }
            HistoryOp::Delete { key, revision } => {
                if let Some(revisions) = index.get_mut(key) {
                    revisions.remove(revision);
                    if revisions.is_empty() {
                        index.remove(key);
                    }
                }
            }
        }
    }
}

pub(super) fn decode(raw_key: &[u8], bytes: &[u8]) -> Result<HistoryRecord, StoreError> {
    codec::decode(bytes).map_err(|source| StoreError::Corrupt { key: String::from_utf8_lossy(raw_key).into_owned(), source })
}

/// Every stored record. An unreadable one is logged and left out: history must not keep a node
/// from opening, and a peer's copy replaces it on the next pull.
pub(super) fn read_all(kv: &dyn KvEngine) -> Result<Vec<HistoryRecord>, StoreError> {
    Ok(kv
        .scan_prefix(keys::HISTORY_PREFIX)?
        .into_iter()
        .filter_map(|(key, value)| match decode(&key, &value) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(error = %e, "unreadable history record left out");
                None
            }
        })
        .collect())
}

/// The records of one key, oldest first.
pub(super) fn read_key(kv: &dyn KvEngine, key: &RuleKey) -> Result<Vec<HistoryRecord>, StoreError> {
    let mut records: Vec<HistoryRecord> = kv
        .scan_prefix(&keys::history_prefix(key))?
        .into_iter()
        .map(|(raw_key, value)| decode(&raw_key, &value))
        .collect::<Result<_, _>>()?;
    records.sort_by(|a, b| a.revision.cmp(&b.revision));
    Ok(records)
}

pub(super) fn index_of(records: &[HistoryRecord]) -> HistoryIndex {
    let mut index = HistoryIndex::new();
    for record in records {
        index.entry(record.key.clone()).or_default().insert(record.revision.clone(), record.meta());
    }
    index
}
