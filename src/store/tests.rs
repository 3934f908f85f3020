//! The typed store over the in-memory twin: round trips, tombstones, caches, faults.

use super::*;
use crate::compiler::{DataType, Downsampling, ScopeType};
use crate::base::ids::{Catalog, NodeId, RuleName};
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

fn staged_record(n: &str, content: &str, millis: u64) -> staged::StagedRecord {
    staged::StagedRecord { entry: entry(n, EntryStatus::Active, content, millis), sender: NodeId("n1".into()) }
}

fn staged_keys(kv: &MemKv) -> usize {
    kv.scan_prefix(staged::STAGED_PREFIX).expect("scan").len()
}

#[tokio::test]
async fn a_staged_entry_is_not_an_entry_survives_reopening_and_goes_with_the_commit_of_its_key() {
    let kv = Arc::new(MemKv::new());
    let store = Store::open(kv.clone()).expect("open");
    store.stage(staged_record("a", "x: 1", 10)).await.expect("stage");
    store.stage(staged_record("a", "x: 2", 12)).await.expect("stage a later one");
    store.stage(staged_record("b", "y", 10)).await.expect("stage b");
    assert!(store.get_entry(&key("a")).await.expect("get").is_none(), "staged is not stored");
    assert!(store.entry_index().is_empty() && store.read_all_entries().await.expect("all").is_empty());
    assert!(store.has_pending_stage(&key("a")) && store.is_staged(&key("a"), &entry("a", EntryStatus::Active, "", 10).revision));

    let reopened = Store::open(kv.clone()).expect("reopen");
    assert_eq!(reopened.staged().len(), 3, "read back on open");

    // The commit of a at 11 removes its records up to 11, not the later one, nor b's.
    let commit = Change { entries: vec![entry("a", EntryStatus::Active, "x: 1", 11)], ..Change::default() };
    reopened.commit_with(commit, false).await.expect("commit");
    let left: Vec<_> = reopened.staged().into_iter().map(|s| (s.record.entry.key.name.as_str().to_string(), s.record.entry.revision.millis)).collect();
    assert_eq!(left, vec![("a".to_string(), 12), ("b".to_string(), 10)]);
    assert_eq!(staged_keys(&kv), 2, "removed from the engine in the commit's batch");
    assert!(reopened.has_pending_stage(&key("a")), "a staged write newer than the entry is pending");

    reopened.release_staged(&key("a"), &entry("a", EntryStatus::Active, "", 12).revision).await.expect("release");
    assert!(!reopened.has_pending_stage(&key("a")));
    reopened.unstage(&key("b"), &entry("b", EntryStatus::Active, "", 10).revision).await.expect("unstage");
    assert_eq!((reopened.staged().len(), staged_keys(&kv)), (0, 0));
}

#[tokio::test]
async fn an_aborted_prepare_is_removed_and_refused_if_it_arrives_later() {
    let kv = Arc::new(MemKv::new());
    let store = Store::open(kv.clone()).expect("open");
    let staged_a = staged_record("a", "x", 10);
    store.stage(staged_a.clone()).await.expect("stage");
    store.abort_stage(&key("a"), &staged_a.entry.revision).await.expect("abort");
    assert_eq!(staged_keys(&kv), 0);
    let late = staged_record("b", "y", 10);
    store.abort_stage(&key("b"), &late.entry.revision).await.expect("abort before the prepare");
    assert!(matches!(store.stage(late).await, Err(StoreError::Aborted { .. })), "a prepare after its abort is refused");
    assert_eq!(staged_keys(&kv), 0);
    // A failed staging write leaves nothing behind either.
    kv.set_fail_writes(true);
    assert!(store.stage(staged_record("c", "z", 10)).await.is_err());
    kv.set_fail_writes(false);
    assert!(store.staged().is_empty());
}

#[tokio::test]
async fn a_read_waits_for_a_staged_write_to_settle_and_gives_up_at_its_bound() {
    let store = Arc::new(Store::open(Arc::new(MemKv::new())).expect("open"));
    assert!(store.wait_staged_settled(&key("a"), std::time::Duration::from_millis(1)).await, "nothing staged");
    store.stage(staged_record("a", "x", 10)).await.expect("stage");
    assert!(!store.wait_staged_settled(&key("a"), std::time::Duration::from_millis(20)).await, "bound passed");
    let committer = store.clone();
    let commit = tokio::spawn(async move {
        committer.commit(Change { entries: vec![entry("a", EntryStatus::Active, "x", 10)], ..Change::default() }).await
    });
    assert!(store.wait_staged_settled(&key("a"), std::time::Duration::from_secs(10)).await, "settled by the commit");
    commit.await.expect("task").expect("commit");
}
