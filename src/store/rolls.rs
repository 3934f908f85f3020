//! Roll records (`roll/<catalog>/<name>`, issue 15): at most one per rule file, its bytes
//! encoded and versioned by `rolling::codec` and kept opaque here, so the store imports nothing
//! above it.
//!
//! Each put or delete is one synced batch, like an entry commit, and moves the change counter
//! ([`Store::subscribe`]) so a node's scan reacts to a roll's step as it does to an entry. Only
//! the workflow writes roll records (the one writer of everything under a rule file's lock).
//! Roll records sit outside `rule/`, so the entry digest and the replication fetch do not see
//! them yet: replicating them like entries is the next step (docs/rolling.md).

use super::kv::{KvError, KvOp};
use super::{Store, StoreError, blocking, keys};
use crate::ids::RuleKey;

/// One stored roll record: the file it rolls and the record's encoded bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoll {
    pub key: RuleKey,
    pub bytes: Vec<u8>,
}

impl Store {
    /// Writes the roll record of `key`, replacing any previous one, synced before returning.
    pub async fn put_roll(&self, key: &RuleKey, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.write_roll(KvOp::Put { key: keys::roll_key(key), value: bytes }).await
    }

    /// Removes the roll record of `key` (absent is fine), synced before returning.
    pub async fn delete_roll(&self, key: &RuleKey) -> Result<(), StoreError> {
        self.write_roll(KvOp::Delete { key: keys::roll_key(key) }).await
    }

    /// The roll record of `key`, read from the engine.
    pub async fn get_roll(&self, key: &RuleKey) -> Result<Option<Vec<u8>>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
        Ok(self.kv.get(&keys::roll_key(key))?)
    }

    /// Every roll record, in key order, read from the engine. A record under a key that does not
    /// name a rule file (written by a build with other catalogs) is skipped and logged.
    pub async fn list_rolls(&self) -> Result<Vec<StoredRoll>, StoreError> {
        fail::fail_point!("store::read", |_| Err(StoreError::Kv(KvError::injected_read("failpoint store::read"))));
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

    async fn write_roll(&self, op: KvOp) -> Result<(), StoreError> {
        let kv = self.kv.clone();
        blocking(move || kv.write(&[op], true).map_err(StoreError::from)).await?;
        self.changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ids::{Catalog, RuleName};
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
        assert!(reopened.read_all_entries().await.expect("entries").is_empty());

        reopened.delete_roll(&key("b")).await.expect("delete");
        reopened.delete_roll(&key("never")).await.expect("deleting nothing is fine");
        assert_eq!(reopened.get_roll(&key("b")).await.expect("get"), None);
        assert_eq!(reopened.list_rolls().await.expect("list").len(), 1);
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
