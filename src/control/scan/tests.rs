//! The scan on the in-memory store with the real writer: old tombstones are purged through the
//! workflow, and only while they are still the stored entry.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::base::clock::RevisionClock;
use crate::base::ids::{Catalog, ContentHash, NodeId, RuleName};
use crate::store::kv::MemKv;
use crate::control::workflow::{NoPeers, Workflow};

fn tombstone(key: &RuleKey, millis: u64) -> RuleEntry {
    RuleEntry {
        key: key.clone(),
        content: Vec::new(),
        status: EntryStatus::Deleted,
        update_time_ms: millis,
        content_hash: ContentHash::of(b""),
        revision: Revision { millis, counter: 0, node: NodeId("n1".into()) },
    }
}

/// A scanner over an empty in-memory store, with the real workflow as its writer: the store and
/// the file locks it shares with that workflow.
fn scanner_with(settings: ScanSettings) -> (Scanner, Arc<Store>, Arc<FileLocks>) {
    let store = Arc::new(Store::open(Arc::new(MemKv::new())).expect("store"));
    let runtime = Arc::new(Runtime::new());
    let bundled = Arc::new(Bundled::empty());
    let locks = Arc::new(FileLocks::default());
    let clock = Arc::new(RevisionClock::new(NodeId("n1".into())));
    let workflow = Arc::new(Workflow::new(store.clone(), runtime.clone(), bundled.clone(), clock, Arc::new(NoPeers), locks.clone()));
    (Scanner::new(store.clone(), runtime, bundled, locks.clone(), settings, workflow), store, locks)
}

#[tokio::test]
async fn tombstones_past_retention_are_purged_through_the_writer() {
    let settings = ScanSettings { tombstone_retention: Duration::from_secs(60), ..ScanSettings::default() };
    let (scanner, store, locks) = scanner_with(settings);
    let old = RuleKey::new(Catalog::OtelRules, RuleName::parse("old").expect("name"));
    let busy = RuleKey::new(Catalog::AgentGroups, RuleName::parse("busy").expect("name"));
    let fresh = RuleKey::new(Catalog::OtelRules, RuleName::parse("fresh").expect("name"));
    let entries = vec![tombstone(&old, 1), tombstone(&busy, 1), tombstone(&fresh, now_ms())];
    store.commit(Change { entries, ..Change::default() }).await.expect("commit");

    let guard = locks.try_lock(&busy).expect("free");
    let report = scanner.run_once(true).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.skipped_busy, vec![busy.clone()], "a locked file waits for the next scan");
    assert_eq!(store.get_entry(&old).await.expect("read"), None, "past retention: purged");
    assert!(store.get_entry(&busy).await.expect("read").is_some());
    assert!(store.get_entry(&fresh).await.expect("read").is_some(), "within retention: kept");

    drop(guard);
    scanner.run_once(true).await;
    assert_eq!(store.get_entry(&busy).await.expect("read"), None, "purged once the file is free");
}

#[tokio::test]
async fn every_scan_is_timed_and_counted_by_result() {
    let telemetry = Arc::new(SelfMetrics::new());
    let scanner = scanner_with(ScanSettings::default()).0.with_telemetry(telemetry.clone());
    scanner.run_once(true).await;
    scanner.run_once(false).await;
    assert_eq!(SelfMetrics::counter_value(&telemetry.scan_results, &labels([("result", "ok")])), 2);
    let text = telemetry.render();
    assert!(text.contains("hotrule_scan_seconds_count 2"), "{text}");
}

#[test]
fn a_scan_result_names_its_worst_outcome() {
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("a").expect("name"));
    let mut report = ScanReport::default();
    assert_eq!(scan_result(&report), "ok");
    report.failed.push((key, "compile_failed".into()));
    assert_eq!(scan_result(&report), "action_failed");
    report.storage_error = Some("unreadable".into());
    assert_eq!(scan_result(&report), "storage_error");
}

fn active(key: &RuleKey, prefix: &str, millis: u64) -> RuleEntry {
    let content = format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc'])\n"
    );
    RuleEntry {
        key: key.clone(),
        content_hash: ContentHash::of(content.as_bytes()),
        content: content.into_bytes(),
        status: EntryStatus::Active,
        update_time_ms: millis,
        revision: Revision { millis, counter: 0, node: NodeId("n1".into()) },
    }
}

#[tokio::test]
async fn a_scan_of_changed_keys_converges_only_them_and_a_full_scan_the_rest() {
    let (scanner, store, _locks) = scanner_with(ScanSettings::default());
    let changed = RuleKey::new(Catalog::OtelRules, RuleName::parse("changed").expect("name"));
    let other = RuleKey::new(Catalog::OtelRules, RuleName::parse("other").expect("name"));
    let entries = vec![active(&changed, "changed", 1), active(&other, "other", 1)];
    store.commit(Change { entries, ..Change::default() }).await.expect("commit");

    let report = scanner.run_keys(&[changed.clone()].into_iter().collect(), false).await;
    assert_eq!(report.actions, vec![Action::LoadEntry(changed.clone())], "{report:?}");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(scanner.runtime.get(&changed).and_then(|s| s.loaded).is_some(), "the changed key is loaded");
    assert!(scanner.runtime.get(&other).and_then(|s| s.loaded).is_none(), "no other key is read or loaded");
    assert_eq!(scanner.scan_count(), 0, "not counted as a scan");

    let report = scanner.run_once(false).await;
    assert_eq!(report.actions, vec![Action::LoadEntry(other.clone())], "the full scan finds the rest");
    let report = scanner.run_keys(&[changed.clone()].into_iter().collect(), false).await;
    assert!(report.actions.is_empty(), "nothing left to do for a loaded key: {report:?}");
}

#[test]
fn pokes_for_keys_collect_until_taken_and_a_plain_poke_asks_for_a_full_scan() {
    let (scanner, _store, _locks) = scanner_with(ScanSettings::default());
    let a = RuleKey::new(Catalog::OtelRules, RuleName::parse("a").expect("name"));
    let b = RuleKey::new(Catalog::OtelRules, RuleName::parse("b").expect("name"));
    scanner.poke_keys([a.clone()]);
    scanner.poke_keys([b.clone(), a.clone()]);
    assert_eq!(scanner.take_pokes(), ([a.clone(), b.clone()].into_iter().collect(), false));
    assert_eq!(scanner.take_pokes(), (Default::default(), false), "taken once");
    scanner.poke_keys([a.clone()]);
    scanner.poke();
    assert_eq!(scanner.take_pokes(), ([a].into_iter().collect(), true));
}
