//! Roll records (`roll/<catalog>/<name>`, issue 15): at most one per rule file, its bytes
//! encoded and versioned by `rolling::codec` and kept opaque here, so the store imports nothing
//! above it.
//!
//! A record is written as a [`RollOp`] inside a [`Change`](super::Change): one synced batch, with
//! the entry and measures of the same logical change when there are any (a completion or
//! force-commit persists the committed entry and the finished record together). Every write
//! moves the change counter ([`Store::subscribe`]) so a node's scan reacts to a roll's step as
//! it does to an entry. Only the workflow writes roll records (the one writer of everything under
//! a rule file's lock). The store keeps the hash of each record's bytes in memory
//! ([`Store::roll_hashes`]) for the replication digest, which covers `roll/` keys next to the
//! entries (docs/rolling.md, "Replication").

use std::collections::BTreeMap;

use super::kv::{KvEngine, KvOp};
use super::{Change, Store, StoreError, blocking, keys, read_lock};
use crate::base::ids::{ContentHash, RuleKey};

/// One stored roll record: the file it rolls and the record's encoded bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoll {
    pub key: RuleKey,
    pub bytes: Vec<u8>,
}

/// A roll record write inside a [`Change`](super::Change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollOp {
    /// Writes the record of `key` (encoded bytes), replacing any previous one.
    Put { key: RuleKey, bytes: Vec<u8> },
    /// Removes the record of `key` (absent is fine).
    Delete { key: RuleKey },
}

impl RollOp {
    pub(super) fn kv_op(&self) -> KvOp {
        match self {
            RollOp::Put { key, bytes } => KvOp::Put { key: keys::roll_key(key), value: bytes.clone() },
            RollOp::Delete { key } => KvOp::Delete { key: keys::roll_key(key) },
        }
    }
}

/// Applies written roll ops to the in-memory hash cache.
pub(super) fn cache(hashes: &mut BTreeMap<RuleKey, ContentHash>, ops: &[RollOp]) {
    for op in ops {
        match op {
            RollOp::Put { key, bytes } => {
                hashes.insert(key.clone(), ContentHash::of(bytes));
            }
            RollOp::Delete { key } => {
                hashes.remove(key);
            }
        }
    }
}

/// The hash of every stored record's bytes, read at open.
pub(super) fn read_roll_hashes(kv: &dyn KvEngine) -> Result<BTreeMap<RuleKey, ContentHash>, StoreError> {
    Ok(kv
        .scan_prefix(keys::ROLL_PREFIX)?
        .into_iter()
        .filter_map(|(raw, bytes)| keys::parse_roll_key(&raw).map(|key| (key, ContentHash::of(&bytes))))
        .collect())
}

impl Store {
    /// Writes the roll record of `key`, replacing any previous one, synced before returning
    /// (a [`Change`] holding only that record).
    pub async fn put_roll(&self, key: &RuleKey, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.commit(Change { rolls: vec![RollOp::Put { key: key.clone(), bytes }], ..Change::default() }).await
    }

    /// Removes the roll record of `key` (absent is fine), synced before returning.
    pub async fn delete_roll(&self, key: &RuleKey) -> Result<(), StoreError> {
        self.commit(Change { rolls: vec![RollOp::Delete { key: key.clone() }], ..Change::default() }).await
    }

    /// The roll record of `key`, read from the engine.
    pub async fn get_roll(&self, key: &RuleKey) -> Result<Option<Vec<u8>>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(super::kv::KvError::injected_read("failpoint store::read"))));
        Ok(self.kv.get(&keys::roll_key(key))?)
    }

    /// Whether a roll record of `key` is stored (from memory, no read).
    pub fn has_roll(&self, key: &RuleKey) -> bool {
        read_lock(&self.roll_hashes).contains_key(key)
    }

    /// The hash of every stored roll record's bytes, in key order, from memory (no read): what
    /// the replication digest covers of `roll/`.
    pub fn roll_hashes(&self) -> Vec<(RuleKey, ContentHash)> {
        read_lock(&self.roll_hashes).iter().map(|(k, h)| (k.clone(), h.clone())).collect()
    }

    /// Every roll record, in key order, read from the engine. A record under a key that does not
    /// name a rule file (written by a build with other catalogs) is skipped and logged.
    pub async fn list_rolls(&self) -> Result<Vec<StoredRoll>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(super::kv::KvError::injected_read("failpoint store::read"))));
        let kv = self.kv.clone();
        let pairs = blocking(move || Ok(kv.scan_prefix(keys::ROLL_PREFIX)?)).await?;
        Ok(pairs
            .into_iter()
            .filter_map(|(raw, bytes)| match keys::parse_roll_key(&raw) {
                Some(key) => Some(StoredRoll { key, bytes }),
                None => {
                    tracing::warn!(key = %String::from_utf8_lossy(&raw), "ignoring a roll record under an unknown key");
                    None
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::base::ids::{Catalog, RuleName};
    use crate::store::kv::{KvEngine, MemKv};

    fn key(name: &str) -> RuleKey {
        RuleKey::new(Catalog::Lal, RuleName::parse(name).expect("name"))
    }

    #[tokio::test]
    async fn roll_records_round_trip_list_in_order_and_survive_reopening() {
        let kv = Arc::new(MemKv::new());
        let store = Store::open(kv.clone()).expect("open");
        let before = store.version();
        store.put_roll(&key("b"), vec![1, 2]).await.expect("put b");
        store.put_roll(&key("a/x"), vec![3]).await.expect("put a/x");
        assert!(store.version() > before, "a roll write wakes the scan like an entry commit");
        assert_eq!(store.get_roll(&key("b")).await.expect("get"), Some(vec![1, 2]));
        store.put_roll(&key("b"), vec![9]).await.expect("replace b");

        let reopened = Store::open(kv).expect("reopen");
        let listed = reopened.list_rolls().await.expect("list");
        assert_eq!(listed, vec![
            StoredRoll { key: key("a/x"), bytes: vec![3] },
            StoredRoll { key: key("b"), bytes: vec![9] },
        ]);
        assert!(reopened.entry_index().is_empty(), "roll records are not entries");
        assert_eq!(
            reopened.roll_hashes(),
            vec![(key("a/x"), ContentHash::of(&[3])), (key("b"), ContentHash::of(&[9]))],
            "the hash cache is loaded at open"
        );
        assert!(reopened.read_all_entries().await.expect("entries").is_empty());

        reopened.delete_roll(&key("b")).await.expect("delete");
        reopened.delete_roll(&key("never")).await.expect("deleting nothing is fine");
        assert_eq!(reopened.get_roll(&key("b")).await.expect("get"), None);
        assert_eq!(reopened.list_rolls().await.expect("list").len(), 1);
        assert_eq!(reopened.roll_hashes(), vec![(key("a/x"), ContentHash::of(&[3]))], "and follows every write");
    }

    #[tokio::test]
    async fn a_change_writes_an_entry_and_a_roll_record_in_one_batch() {
        use crate::base::ids::Revision;
        use crate::store::{EntryStatus, RuleEntry};
        let kv = Arc::new(MemKv::new());
        let store = Store::open(kv.clone()).expect("open");
        let entry = RuleEntry {
            key: key("a"),
            content: b"x".to_vec(),
            status: EntryStatus::Active,
            update_time_ms: 1,
            content_hash: ContentHash::of(b"x"),
            revision: Revision::zero(),
        };
        kv.set_fail_writes(true);
        let change = Change {
            entries: vec![entry.clone()],
            rolls: vec![RollOp::Put { key: key("a"), bytes: vec![7] }],
            ..Change::default()
        };
        assert!(store.commit(change.clone()).await.is_err());
        assert!(store.roll_hashes().is_empty() && store.entry_meta(&key("a")).is_none(), "a failed batch writes neither");
        kv.set_fail_writes(false);
        store.commit(change).await.expect("commit");
        assert_eq!(store.get_roll(&key("a")).await.expect("roll"), Some(vec![7]));
        assert_eq!(store.get_entry(&key("a")).await.expect("entry"), Some(entry));
    }

    #[tokio::test]
    async fn roll_records_fail_loudly_and_skip_foreign_keys() {
        let kv = Arc::new(MemKv::new());
        let store = Store::open(kv.clone()).expect("open");
        kv.write(&[KvOp::Put { key: b"roll/oal/x".to_vec(), value: vec![1] }], true).expect("raw write");
        assert!(store.list_rolls().await.expect("list").is_empty(), "a key naming no rule file is skipped");

        kv.set_fail_writes(true);
        let version = store.version();
        assert!(store.put_roll(&key("a"), vec![1]).await.is_err());
        assert_eq!(store.version(), version, "a failed write moves nothing");
        kv.set_fail_writes(false);
        kv.set_fail_reads(true);
        assert!(store.get_roll(&key("a")).await.is_err());
        assert!(store.list_rolls().await.is_err(), "a read failure is an error, never an empty list");
    }

    #[test]
    fn roll_keys_parse_back() {
        let raw = keys::roll_key(&key("k8s/node"));
        assert_eq!(raw, b"roll/lal/k8s/node".to_vec());
        assert_eq!(keys::parse_roll_key(&raw), Some(key("k8s/node")));
        for bad in [&b"roll/lal"[..], b"roll/nope/x", b"roll/lal/../x", b"rule/lal/x", b"roll/lal/\xff"] {
            assert_eq!(keys::parse_roll_key(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
