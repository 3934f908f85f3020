//! Staged entries: the peer's side of prepare/commit (docs/consistency.md, "Prepare and
//! commit").
//!
//! With `cluster.commit_replicas` > 0 the main sends each new entry to its peers as a *prepare*
//! while it writes the entry itself. A peer stages it: a synced record under
//! `staged/<catalog>/<name>/<revision>`, outside `rule/`, so it is neither read by the scan, nor
//! served, nor in the digest. It becomes an entry only when the main's commit notice arrives
//! (the same entry through the workflow's write path, which removes the staged record in its
//! batch), or when the staged record's resolution says so (`rules::staged`). An abort removes it.
//!
//! The records are few (one per write in flight) and kept in memory as well, with the instant
//! they were staged (or the store was opened), so the resolution can tell an old record from one
//! whose commit is simply still on its way.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{RuleEntry, StoreError, codec, keys, kv::KvEngine};
use crate::base::ids::{NodeId, Revision, RuleKey};

pub const STAGED_PREFIX: &[u8] = b"staged/";

/// One staged record as stored: the entry and the node that prepared it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedRecord {
    pub entry: RuleEntry,
    pub sender: NodeId,
}

/// A staged record with the instant it was staged on this node (or the store was opened).
#[derive(Debug, Clone)]
pub struct Staged {
    pub record: StagedRecord,
    pub since: Instant,
}

/// `staged/<catalog>/<name>/<revision>`.
pub fn staged_key(key: &RuleKey, revision: &Revision) -> Vec<u8> {
    let mut out = STAGED_PREFIX.to_vec();
    out.extend_from_slice(&keys::rule_key(key)[keys::RULE_PREFIX.len()..]);
    out.push(b'/');
    out.extend_from_slice(revision.to_string().as_bytes());
    out
}

pub fn encode(record: &StagedRecord) -> Result<Vec<u8>, StoreError> {
    codec::encode(record).map_err(|source| StoreError::Encode {
        key: String::from_utf8_lossy(&staged_key(&record.entry.key, &record.entry.revision)).into_owned(),
        source,
    })
}

/// Every staged record in the engine. One that does not decode is logged and skipped: it is
/// not an entry, and the write it stood for was never acknowledged on its strength alone.
pub fn read_all(kv: &dyn KvEngine) -> Result<Vec<StagedRecord>, StoreError> {
    Ok(kv
        .scan_prefix(STAGED_PREFIX)?
        .into_iter()
        .filter_map(|(key, value)| match codec::decode::<StagedRecord>(&value) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(&key), error = %e, "unreadable staged record skipped");
                None
            }
        })
        .collect())
}
