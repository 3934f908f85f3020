//! The typed store over the in-memory twin: round trips, tombstones, caches, faults.

use super::*;
use crate::compiler::{DataType, Downsampling, ScopeType};
use crate::ids::{Catalog, NodeId, RuleName};
use kv::MemKv;

fn key(n: &str) -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse(n).expect("name"))
}

fn entry(n: &str, status: EntryStatus, content: &str, millis: u64) -> RuleEntry {
    RuleEntry {
        key: key(n),
        content: content.as_bytes().to_vec(),
        status,
        update_time_ms: millis,
        content_hash: ContentHash::of(content.as_bytes()),
        revision: Revision { millis, counter: 0, node: NodeId("n1".into()) },
    }
}

fn measure(metric: &str) -> Measure {
    Measure {
        metric: metric.into(),
        shape: MetricShape { scope: ScopeType::Service, downsampling: Downsampling::Avg, data_type: DataType::Single },
        owner: key("a"),
        revision: Revision::zero(),
    }
}

#[tokio::test]
async fn a_change_round_trips_and_survives_reopening_the_engine() {
    let kv = Arc::new(MemKv::new());
    let store = Store::open(kv.clone()).expect("open");
    let change = Change {
        entries: vec![entry("a", EntryStatus::Active, "x: 1", 10), entry("b/c", EntryStatus::Inactive, "y", 11)],
        measures: vec![measure("m1")],
        ..Change::default()
    };
    store.commit(change).await.expect("commit");
    assert_eq!(store.get_entry(&key("a")).await.expect("get").map(|e| e.content), Some(b"x: 1".to_vec()));
    assert_eq!(store.entry_index().len(), 2);
    assert!(store.measure("m1").is_some());

    let reopened = Store::open(kv).expect("reopen");
    let all = reopened.read_all_entries().await.expect("read all");
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].key.name.as_str(), "b/c");
    assert_eq!(reopened.entry_meta(&key("b/c")).map(|m| m.status), Some(EntryStatus::Inactive));
    assert_eq!(reopened.measures().len(), 1);
}

#[tokio::test]
async fn tombstones_are_entries_until_purged() {
    let store = Store::open(Arc::new(MemKv::new())).expect("open");
    store.commit(Change { entries: vec![entry("a", EntryStatus::Deleted, "", 5)], ..Change::default() }).await.expect("commit");
    let got = store.get_entry(&key("a")).await.expect("get").expect("tombstone kept");
    assert!(!got.is_live());
    store.commit(Change { purge_entries: vec![key("a")], ..Change::default() }).await.expect("purge");
    assert!(store.get_entry(&key("a")).await.expect("get").is_none());
    assert!(store.entry_index().is_empty());
}

#[tokio::test]
async fn a_failed_write_changes_neither_storage_nor_the_caches() {
    let kv = Arc::new(MemKv::new());
    let store = Store::open(kv.clone()).expect("open");
    kv.set_fail_writes(true);
    let change = Change { entries: vec![entry("a", EntryStatus::Active, "x", 1)], measures: vec![measure("m")], ..Change::default() };
    assert!(store.commit(change).await.is_err());
    kv.set_fail_writes(false);
    assert!(store.get_entry(&key("a")).await.expect("get").is_none());
    assert!(store.entry_index().is_empty());
    assert!(store.measure("m").is_none());
}

#[tokio::test]
async fn read_failures_are_errors_never_empty_answers() {
    let kv = Arc::new(MemKv::new());
    let store = Store::open(kv.clone()).expect("open");
    kv.set_fail_reads(true);
    assert!(store.get_entry(&key("a")).await.is_err());
    assert!(store.read_all_entries().await.is_err());
}

#[tokio::test]
async fn an_unreadable_record_is_reported_with_its_key() {
    let kv = Arc::new(MemKv::new());
    kv.write(&[kv::KvOp::Put { key: keys::rule_key(&key("bad")), value: vec![99, 1, 2] }], true).expect("raw write");
    let err = Store::open(kv).err().expect("corrupt record");
    assert!(err.to_string().contains("rule/otel-rules/bad"), "{err}");
    assert!(err.to_string().contains("format version 99"), "{err}");
}
