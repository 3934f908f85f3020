//! The workflow on the in-memory twins: every workflow-level applyStatus, the order of the
//! structural path, rollback on failure, and the ownership and guardrail checks.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;
use crate::base::ids::{Catalog, RuleName};
use crate::control::rules::compile::compile_for;
use crate::control::runtime::{LoaderKind, SuspendOrigin};
use crate::store::kv::MemKv;

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: wf
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

/// A peers twin that records every call and can refuse suspends.
#[derive(Default)]
struct RecordingPeers {
    calls: Mutex<Vec<String>>,
    reject: Mutex<bool>,
}

impl RecordingPeers {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls").clone()
    }
}

impl Peers for RecordingPeers {
    fn suspend_all<'a>(&'a self, key: &'a RuleKey) -> peers::BoxFuture<'a, SuspendVote> {
        Box::pin(async move {
            self.calls.lock().expect("calls").push(format!("suspend {key}"));
            if *self.reject.lock().expect("reject") {
                SuspendVote::Rejected { peer: crate::base::ids::NodeId("peer-1".into()), detail: "ORIGIN CONFLICT".into() }
            } else {
                SuspendVote::Accepted
            }
        })
    }
    fn resume_all<'a>(&'a self, key: &'a RuleKey) -> peers::BoxFuture<'a, ()> {
        Box::pin(async move { self.calls.lock().expect("calls").push(format!("resume {key}")) })
    }
    fn notify_committed<'a>(&'a self, entry: &'a RuleEntry, _previous: Option<&'a Revision>) -> peers::BoxFuture<'a, usize> {
        Box::pin(async move {
            self.calls.lock().expect("calls").push(format!("notify {}", entry.key));
            0
        })
    }
}

struct Fixture {
    kv: Arc<MemKv>,
    store: Arc<Store>,
    runtime: Arc<Runtime>,
    peers: Arc<RecordingPeers>,
    locks: Arc<FileLocks>,
    workflow: Workflow,
    _rules_dir: tempfile::TempDir,
}

fn fixture(bundled_files: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, content) in bundled_files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, content).expect("write");
    }
    let (bundled, warnings) = Bundled::load(dir.path()).expect("bundled");
    assert!(warnings.is_empty(), "{warnings:?}");
    let kv = Arc::new(MemKv::new());
    let store = Arc::new(Store::open(kv.clone()).expect("store"));
    let runtime = Arc::new(Runtime::new());
    let peers = Arc::new(RecordingPeers::default());
    let locks = Arc::new(FileLocks::default());
    let bundled = Arc::new(bundled);
    // Bundled files claim their names as boot would.
    for rule in bundled.iter() {
        if let Ok(compiled) = compile_for(&rule.key, &rule.content) {
            runtime.claims.set(&rule.key, FileClaims::of(&compiled, false, true));
        }
    }
    let workflow = Workflow::new(
        store.clone(),
        runtime.clone(),
        bundled,
        Arc::new(RevisionClock::new(crate::base::ids::NodeId("n1".into()))),
        peers.clone(),
        locks.clone(),
    )
    .with_lock_timeout(Duration::from_millis(50));
    Fixture { kv, store, runtime, peers, locks, workflow, _rules_dir: dir }
}

fn key(catalog: Catalog, name: &str) -> RuleKey {
    RuleKey::new(catalog, RuleName::parse(name).expect("name"))
}

fn otel(name: &str) -> RuleKey {
    key(Catalog::OtelRules, name)
}

fn push(k: &RuleKey, content: &str) -> AddOrUpdate {
    AddOrUpdate { key: k.clone(), content: content.as_bytes().to_vec(), allow_storage_change: false, force: false }
}

fn status(o: Outcome) -> ApplyStatus {
    o.status
}

#[tokio::test]
async fn create_then_no_change_then_force_then_filter_only() {
    let f = fixture(&[]);
    let k = otel("a");
    let created = f.workflow.add_or_update(push(&k, RULE)).await;
    assert_eq!(created.status, ApplyStatus::StructuralApplied, "{}", created.message);
    assert_eq!(f.peers.calls(), vec!["suspend otel-rules/a", "notify otel-rules/a", "resume otel-rules/a"]);
    let state = f.runtime.get(&k).expect("loaded");
    assert_eq!(state.local_state(), "RUNNING");
    assert_eq!(state.origin, SuspendOrigin::None);
    assert_eq!(status(f.workflow.add_or_update(push(&k, RULE)).await), ApplyStatus::NoChange);
    let forced = AddOrUpdate { force: true, ..push(&k, RULE) };
    assert_eq!(status(f.workflow.add_or_update(forced).await), ApplyStatus::StructuralApplied);
    let edited = RULE.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    assert_eq!(status(f.workflow.add_or_update(push(&k, &edited)).await), ApplyStatus::FilterOnlyApplied);
    let stored = f.store.get_entry(&k).await.expect("read").expect("entry");
    assert_eq!(stored.content, edited.as_bytes());
    assert_eq!(f.runtime.get(&k).and_then(|s| s.loaded).map(|l| l.content_hash), Some(stored.content_hash));
}

#[tokio::test]
async fn compile_errors_are_400_with_a_position_and_touch_nothing() {
    let f = fixture(&[]);
    let k = otel("a");
    let broken = RULE.replace("requests_total.sum(['svc'])", "requests_total.sum(['svc']");
    let outcome = f.workflow.add_or_update(push(&k, &broken)).await;
    assert_eq!(outcome.status, ApplyStatus::CompileFailed);
    assert!(outcome.message.contains("line 5"), "{}", outcome.message);
    assert!(f.peers.calls().is_empty(), "no pause before a compile error");
    assert!(f.store.entry_index().is_empty());
}

#[tokio::test]
async fn a_shape_break_needs_approval_then_applies_and_reshapes_the_measure() {
    let f = fixture(&[]);
    let k = otel("a");
    f.workflow.add_or_update(push(&k, RULE)).await;
    let rescoped = RULE.replace("service(['svc'], Layer.GENERAL)", "instance(['svc'], ['inst'], Layer.GENERAL)");
    let refused = f.workflow.add_or_update(push(&k, &rescoped)).await;
    assert_eq!(refused.status, ApplyStatus::StorageChangeRequiresExplicitApproval);
    assert!(refused.message.contains("wf_requests"), "{}", refused.message);
    let approved = AddOrUpdate { allow_storage_change: true, ..push(&k, &rescoped) };
    assert_eq!(status(f.workflow.add_or_update(approved).await), ApplyStatus::StructuralApplied);
    assert_eq!(
        f.store.measure("wf_requests").map(|m| m.shape.scope),
        Some(crate::compiler::ScopeType::ServiceInstance)
    );
    assert_eq!(f.runtime.alarm_reset_count(), 1, "NEW resets nothing; the approved reshape resets once");
    assert!(f.runtime.last_alarm_reset().is_some_and(|r| r.metrics.contains("wf_requests")));
}

#[tokio::test]
async fn ownership_conflicts_name_the_holder_even_when_inactive() {
    let f = fixture(&[]);
    f.workflow.add_or_update(push(&otel("a"), RULE)).await;
    let conflict = f.workflow.add_or_update(push(&otel("b"), RULE)).await;
    assert_eq!(conflict.status, ApplyStatus::OwnershipConflict);
    assert!(conflict.message.contains("held by otel-rules/a"), "{}", conflict.message);
    assert_eq!(status(f.workflow.inactivate(&otel("a")).await), ApplyStatus::Inactivated);
    let conflict = f.workflow.add_or_update(push(&otel("b"), RULE)).await;
    assert!(conflict.message.contains("held by inactive otel-rules/a"), "{}", conflict.message);
    assert_eq!(status(f.workflow.delete(&otel("a"), false).await), ApplyStatus::Deleted);
    assert_eq!(status(f.workflow.add_or_update(push(&otel("b"), RULE)).await), ApplyStatus::StructuralApplied);
}

#[tokio::test]
async fn the_lifecycle_of_a_runtime_rule() {
    let f = fixture(&[]);
    let k = otel("a");
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::NotFound);
    assert_eq!(status(f.workflow.delete(&k, false).await), ApplyStatus::NotFound);
    f.workflow.add_or_update(push(&k, RULE)).await;
    assert_eq!(status(f.workflow.delete(&k, false).await), ApplyStatus::RequiresInactivateFirst);
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::Inactivated);
    assert!(f.runtime.get(&k).is_none(), "torn down locally");
    assert_eq!(f.store.entry_meta(&k).map(|m| m.status), Some(EntryStatus::Inactive));
    assert!(f.store.measure("wf_requests").is_some(), "inactivate keeps the measure");
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::AlreadyInactive);
    assert_eq!(status(f.workflow.delete(&k, true).await), ApplyStatus::NoBundledTwin);
    // Posting the same bytes over an INACTIVE row reactivates it.
    assert_eq!(status(f.workflow.add_or_update(push(&k, RULE)).await), ApplyStatus::StructuralApplied);
    assert_eq!(f.runtime.get(&k).map(|s| s.local_state()), Some("RUNNING"));
    f.workflow.inactivate(&k).await;
    assert_eq!(status(f.workflow.delete(&k, false).await), ApplyStatus::Deleted);
    assert!(f.store.measure("wf_requests").is_some(), "delete keeps the measure");
    assert_eq!(f.store.entry_meta(&k).map(|m| m.status), Some(EntryStatus::Deleted));
}

#[tokio::test]
async fn the_lifecycle_of_a_bundled_rule() {
    let f = fixture(&[("otel-rules/b.yaml", RULE)]);
    let k = otel("b");
    assert_eq!(status(f.workflow.add_or_update(push(&k, RULE)).await), ApplyStatus::NoChange);
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::StaticTombstoned);
    let tomb = f.store.get_entry(&k).await.expect("read").expect("row");
    assert_eq!(tomb.content, RULE.as_bytes(), "the tombstone holds the bundled content");
    assert_eq!(status(f.workflow.delete(&k, false).await), ApplyStatus::RequiresRevertToBundled);
    let reverted = f.workflow.delete(&k, true).await;
    assert_eq!(reverted.status, ApplyStatus::RevertedToBundled, "{}", reverted.message);
    assert_eq!(f.runtime.get(&k).and_then(|s| s.loaded).map(|l| l.kind), Some(LoaderKind::Bundled));
    // An override of the bundled file, then inactivate: the row keeps the override.
    let edited = RULE.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    assert_eq!(status(f.workflow.add_or_update(push(&k, &edited)).await), ApplyStatus::FilterOnlyApplied);
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::Inactivated);
    assert_eq!(f.store.get_entry(&k).await.expect("read").expect("row").content, edited.as_bytes());
}

#[tokio::test]
async fn a_failed_persist_rolls_back_and_resumes_everyone() {
    let f = fixture(&[]);
    let k = otel("a");
    f.workflow.add_or_update(push(&k, RULE)).await;
    let before = f.store.get_entry(&k).await.expect("read");
    f.kv.set_fail_writes(true);
    let rescoped = RULE.replace("metricsRules:", "metricsRules:\n  - name: extra\n    exp: extra_total.sum(['svc'])");
    let outcome = f.workflow.add_or_update(push(&k, &rescoped)).await;
    assert_eq!(outcome.status, ApplyStatus::PersistFailed);
    let calls = f.peers.calls();
    assert_eq!(calls[calls.len() - 2..], ["suspend otel-rules/a".to_string(), "resume otel-rules/a".to_string()]);
    assert_eq!(f.runtime.get(&k).map(|s| s.origin), Some(SuspendOrigin::None), "local SELF cleared");
    let edited = RULE.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    assert_eq!(status(f.workflow.add_or_update(push(&k, &edited)).await), ApplyStatus::PersistFailed);
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::InactivateFailed);
    f.kv.set_fail_writes(false);
    assert_eq!(f.store.get_entry(&k).await.expect("read"), before, "storage never moved");
    assert_eq!(f.runtime.get(&k).map(|s| s.local_state()), Some("RUNNING"));
}

#[tokio::test]
async fn unreadable_storage_is_503_not_an_absent_row() {
    let f = fixture(&[]);
    f.kv.set_fail_reads(true);
    for outcome in [
        f.workflow.add_or_update(push(&otel("a"), RULE)).await,
        f.workflow.inactivate(&otel("a")).await,
        f.workflow.delete(&otel("a"), false).await,
    ] {
        assert_eq!(outcome.status, ApplyStatus::StorageUnavailable);
    }
}

#[tokio::test]
async fn a_held_file_lock_gives_update_in_progress_and_other_files_proceed() {
    let f = fixture(&[]);
    let _held = f.locks.try_lock(&otel("a")).expect("free");
    assert_eq!(status(f.workflow.add_or_update(push(&otel("a"), RULE)).await), ApplyStatus::UpdateInProgress);
    assert_eq!(status(f.workflow.add_or_update(push(&otel("b"), RULE)).await), ApplyStatus::StructuralApplied);
}

#[tokio::test]
async fn a_peer_suspension_gives_origin_conflict_and_a_rejecting_peer_split_brain() {
    let f = fixture(&[]);
    let k = otel("a");
    f.workflow.add_or_update(push(&k, RULE)).await;
    f.runtime.suspend(&k, Origin::Peer, true);
    let edited = RULE.replace("metricsRules:", "metricsRules:\n  - name: extra\n    exp: extra_total.sum(['svc'])");
    assert_eq!(status(f.workflow.add_or_update(push(&k, &edited)).await), ApplyStatus::OriginConflict);
    f.runtime.resume(&k, Origin::Peer);
    *f.peers.reject.lock().expect("reject") = true;
    let outcome = f.workflow.add_or_update(push(&k, &edited)).await;
    assert_eq!(outcome.status, ApplyStatus::SplitBrainDetected);
    assert!(outcome.message.contains("peer-1"), "{}", outcome.message);
    assert_eq!(f.peers.calls().last().map(String::as_str), Some("resume otel-rules/a"));
    assert_eq!(f.runtime.get(&k).map(|s| s.origin), Some(SuspendOrigin::None));
    assert_ne!(f.store.get_entry(&k).await.expect("read").map(|e| e.content), Some(edited.into_bytes()));
}

#[tokio::test]
async fn lal_rules_take_the_structural_path_and_guard_their_keys() {
    let f = fixture(&[]);
    let k = key(Catalog::Lal, "mine");
    let lal = "rules:\n  - name: r\n    layer: GENERAL\n    dsl: |\n      filter {\n        sink {\n        }\n      }\n";
    assert_eq!(status(f.workflow.add_or_update(push(&k, lal)).await), ApplyStatus::StructuralApplied);
    let body = lal.replace("filter {\n", "filter {\n        json {}\n");
    assert_eq!(status(f.workflow.add_or_update(push(&k, &body)).await), ApplyStatus::StructuralApplied);
    let renamed = lal.replace("name: r\n", "name: r2\n");
    assert_eq!(
        status(f.workflow.add_or_update(push(&k, &renamed)).await),
        ApplyStatus::StorageChangeRequiresExplicitApproval
    );
    let other = key(Catalog::Lal, "other");
    let outcome = f.workflow.add_or_update(push(&other, &body)).await;
    assert_eq!(outcome.status, ApplyStatus::OwnershipConflict, "{}", outcome.message);
    assert!(outcome.message.contains("GENERAL:r"), "{}", outcome.message);
}

#[tokio::test]
async fn revisions_order_every_write_to_a_key() {
    let f = fixture(&[]);
    let k = otel("a");
    let mut seen = BTreeSet::new();
    let mut last = None;
    f.workflow.add_or_update(push(&k, RULE)).await;
    for i in 0..5 {
        let edited = RULE.replace("sum(['svc'])", &format!("sum(['svc']).rate('PT{}M')", i + 1));
        f.workflow.add_or_update(push(&k, &edited)).await;
        let rev = f.store.entry_meta(&k).expect("meta").revision;
        assert!(last.as_ref().is_none_or(|l| *l < rev));
        seen.insert(rev.clone());
        last = Some(rev);
    }
    assert_eq!(seen.len(), 5);
}

#[tokio::test]
async fn tombstones_are_purged_by_the_writer_only_while_they_are_the_stored_entry() {
    use crate::control::scan::{Purged, TombstonePurger};
    let f = fixture(&[]);
    let k = otel("gone");
    assert_eq!(status(f.workflow.add_or_update(push(&k, RULE)).await), ApplyStatus::StructuralApplied);
    assert_eq!(status(f.workflow.inactivate(&k).await), ApplyStatus::Inactivated);
    assert_eq!(status(f.workflow.delete(&k, false).await), ApplyStatus::Deleted);
    let tombstone = f.store.get_entry(&k).await.expect("read").expect("tombstone");
    assert_eq!(tombstone.status, EntryStatus::Deleted);

    // A file being written is not waited for.
    let guard = f.locks.try_lock(&k).expect("free");
    assert_eq!(f.workflow.purge_tombstone(&k, &tombstone.revision).await.ok(), Some(Purged::Busy));
    drop(guard);

    // A later write replaced the tombstone the scan saw: kept.
    let replaced = RuleEntry {
        content: RULE.as_bytes().to_vec(),
        content_hash: ContentHash::of(RULE.as_bytes()),
        status: EntryStatus::Active,
        revision: Revision { millis: tombstone.revision.millis + 1, ..tombstone.revision.clone() },
        ..tombstone.clone()
    };
    assert_eq!(f.workflow.apply_replicated(vec![replaced.clone()]).await.ok(), Some(1));
    assert_eq!(f.workflow.purge_tombstone(&k, &tombstone.revision).await.ok(), Some(Purged::Moved));
    assert_eq!(f.store.get_entry(&k).await.expect("read"), Some(replaced.clone()));

    // The stored tombstone itself: purged.
    let newer_tombstone = RuleEntry {
        content: Vec::new(),
        content_hash: ContentHash::of(b""),
        status: EntryStatus::Deleted,
        revision: Revision { millis: replaced.revision.millis + 1, ..replaced.revision.clone() },
        ..replaced
    };
    assert_eq!(f.workflow.apply_replicated(vec![newer_tombstone.clone()]).await.ok(), Some(1));
    assert_eq!(f.workflow.purge_tombstone(&k, &newer_tombstone.revision).await.ok(), Some(Purged::Purged));
    assert_eq!(f.store.get_entry(&k).await.expect("read"), None);
}

#[tokio::test]
async fn replicated_entries_merge_by_last_write_wins_tombstones_included() {
    let f = fixture(&[]);
    let k = otel("lww");
    let at = |millis: u64, status: EntryStatus| {
        let content = if status == EntryStatus::Deleted { Vec::new() } else { format!("{RULE}# {millis}\n").into_bytes() };
        RuleEntry {
            key: k.clone(),
            content_hash: ContentHash::of(&content),
            content,
            status,
            update_time_ms: millis,
            revision: Revision { millis, counter: 0, node: crate::base::ids::NodeId("peer".into()) },
        }
    };
    assert_eq!(f.workflow.apply_replicated(vec![at(20, EntryStatus::Active)]).await.ok(), Some(1));
    assert_eq!(f.workflow.apply_replicated(vec![at(10, EntryStatus::Deleted)]).await.ok(), Some(0), "an older tombstone loses");
    assert_eq!(f.workflow.apply_replicated(vec![at(20, EntryStatus::Active)]).await.ok(), Some(0), "the same write is kept");
    assert_eq!(f.workflow.apply_replicated(vec![at(30, EntryStatus::Deleted)]).await.ok(), Some(1), "a newer tombstone wins");
    assert_eq!(f.workflow.apply_replicated(vec![at(25, EntryStatus::Active)]).await.ok(), Some(0), "an older live entry loses");
    assert_eq!(f.store.get_entry(&k).await.expect("read"), Some(at(30, EntryStatus::Deleted)));
    assert!(f.runtime.claims.get(&k).is_none(), "a tombstone claims nothing");
}

#[tokio::test]
async fn alarm_settings_are_validated_written_once_and_put_in_force_on_the_main() {
    use crate::control::alarms::live::{Boot, settings_key, test_live};
    let f = fixture(&[]);
    let boot = Boot { path: "config/alarm-settings.yml".into(), text: Some("rules:\n  a_rule:\n    expression: sum(m > 1) >= 1\n".into()) };
    let (live, alarms, _) = test_live(boot);
    f.runtime.set_alarm_settings(Arc::new(live));
    let names = || alarms.lock().expect("alarms").settings().rules.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    let pushed = "rules:\n  a_rule:\n    expression: sum(m > 1) >= 1\n  b_rule:\n    expression: sum(m > 2) >= 1\n";

    // Refused before anything is written: blank, unreadable, an invalid rule named.
    assert_eq!(status(f.workflow.alarm_settings_op(Some(b" \n")).await), ApplyStatus::EmptyBody);
    let refused = f.workflow.alarm_settings_op(Some(b"rules:\n  bad_rule:\n    expression: top_n(m, 3, des) > 1\n")).await;
    assert_eq!(refused.status, ApplyStatus::CompileFailed);
    assert!(refused.message.contains("bad_rule"), "{}", refused.message);
    assert_eq!(status(f.workflow.alarm_settings_op(None).await), ApplyStatus::NotFound);
    assert!(f.store.get_entry(settings_key()).await.expect("read").is_none());
    assert!(f.peers.calls().is_empty());

    // Stored, told to the peers, in force here at once; b_rule is the one that starts fresh.
    let stored = f.workflow.alarm_settings_op(Some(pushed.as_bytes())).await;
    assert_eq!(stored.status, ApplyStatus::Stored, "{}", stored.message);
    assert!(stored.message.contains("2 rule(s), 0 hook(s)") && stored.message.contains("(kept their state: a_rule; started fresh: b_rule)"), "{}", stored.message);
    assert!(stored.revision.is_some());
    let entry = f.store.get_entry(settings_key()).await.expect("read").expect("written");
    assert_eq!((entry.status, entry.content.as_slice()), (EntryStatus::Active, pushed.as_bytes()));
    assert_eq!(f.peers.calls(), vec![format!("notify {}", settings_key())]);
    assert_eq!(names(), vec!["a_rule", "b_rule"]);

    // The same text again writes nothing.
    assert_eq!(status(f.workflow.alarm_settings_op(Some(pushed.as_bytes())).await), ApplyStatus::NoChange);
    assert_eq!(f.peers.calls().len(), 1);

    // Deleted: a tombstone, and the boot file is back in force.
    let deleted = f.workflow.alarm_settings_op(None).await;
    assert_eq!(deleted.status, ApplyStatus::Deleted, "{}", deleted.message);
    assert!(deleted.message.ends_with("(kept their state: a_rule; removed: b_rule)"), "{}", deleted.message);
    let tombstone = f.store.get_entry(settings_key()).await.expect("read").expect("tombstone");
    assert_eq!(tombstone.status, EntryStatus::Deleted);
    assert!(tombstone.revision > entry.revision);
    assert_eq!(names(), vec!["a_rule"]);
    assert_eq!(status(f.workflow.alarm_settings_op(None).await), ApplyStatus::NotFound);
}

/// Rule history (issue 26): every committed revision is recorded in the entry's batch, with
/// who made it; retention compacts by count in the write's batch; a replicated record retention
/// would drop is not stored.
#[tokio::test]
async fn every_revision_is_recorded_with_its_caller_and_retention_compacts_by_count() {
    use crate::control::history::{Caller, with_caller};
    use crate::control::history::retention::Retention;
    let mut f = fixture(&[]);
    f.workflow = f.workflow.with_history_retention(Retention { max_revisions: 3, max_age: Duration::from_secs(3600) });
    let k = otel("h");
    let caller = Caller { taken_by: Some(crate::base::ids::NodeId("n2".into())), client: Some("10.0.0.9:5000".into()), token: Some("abcd1234".into()), restore_of: None };
    let first = with_caller(caller.clone(), f.workflow.add_or_update(push(&k, RULE))).await;
    assert_eq!(first.status, ApplyStatus::StructuralApplied, "{}", first.message);
    let edited = RULE.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    assert_eq!(f.workflow.add_or_update(push(&k, &edited)).await.status, ApplyStatus::FilterOnlyApplied);
    let records = f.store.history_of(&k).await.expect("history");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].content, RULE.as_bytes());
    assert_eq!(records[0].origin.taken_by, caller.taken_by);
    assert_eq!(records[0].origin.client, caller.client);
    assert_eq!(records[0].origin.token, caller.token);
    assert_eq!(records[0].origin.committed_by.0, "n1");
    assert_eq!(records[0].origin.classification.as_deref(), Some("NEW"));
    assert_eq!(records[1].origin.classification.as_deref(), Some("FILTER_ONLY"));
    assert_eq!(records[1].origin.apply_status, "filter_only_applied");
    assert_eq!(records[1].origin.client, None, "a write no request scoped records no caller");
    let stored = f.store.get_entry(&k).await.expect("read").expect("entry");
    assert_eq!(records[1].revision, stored.revision, "the record is the committed revision");

    assert_eq!(f.workflow.inactivate(&k).await.status, ApplyStatus::Inactivated);
    assert_eq!(f.workflow.delete(&k, false).await.status, ApplyStatus::Deleted);
    let records = f.store.history_of(&k).await.expect("history");
    let actions: Vec<&str> = records.iter().map(|r| r.origin.action.as_str()).collect();
    assert_eq!(actions, vec!["addOrUpdate", "inactivate", "delete"], "the oldest of four went with the fourth write");
    assert_eq!(f.store.history_compacted(), 1);

    // A peer's copy of the compacted revision does not come back.
    let first_revision = first.revision.clone().expect("revision");
    let mut old = records[0].clone();
    old.revision = first_revision.clone();
    old.content = RULE.as_bytes().to_vec();
    assert_eq!(f.workflow.apply_replicated_history(vec![old]).await.expect("applied"), 0);
    assert!(f.store.history_record(&k, &first_revision).await.expect("read").is_none());
    // Survives a reopen of the store.
    let reopened = Store::open(f.kv.clone()).expect("reopen");
    assert_eq!(reopened.history_index_of(&k).len(), 3);
}

#[tokio::test]
async fn age_compaction_keeps_the_current_revision_and_drops_a_long_deleted_file() {
    use crate::control::history::retention::Retention;
    let mut f = fixture(&[]);
    f.workflow = f.workflow.with_history_retention(Retention { max_revisions: 50, max_age: Duration::from_secs(60) });
    let (a, b) = (otel("old-a"), otel("old-b"));
    assert_eq!(f.workflow.add_or_update(push(&a, RULE)).await.status, ApplyStatus::StructuralApplied);
    let other = RULE.replace("metricPrefix: wf", "metricPrefix: wfb");
    assert_eq!(f.workflow.add_or_update(push(&b, &other)).await.status, ApplyStatus::StructuralApplied);
    assert_eq!(f.workflow.inactivate(&b).await.status, ApplyStatus::Inactivated);
    assert_eq!(f.workflow.delete(&b, false).await.status, ApplyStatus::Deleted);
    assert_eq!(f.workflow.compact_history(crate::base::clock::now_ms()).await.expect("compacted"), 0, "nothing is old yet");
    let later = crate::base::clock::now_ms() + 3_600_000;
    assert_eq!(f.workflow.compact_history(later).await.expect("compacted"), 3);
    assert_eq!(f.store.history_index_of(&a).len(), 1, "the current revision stays");
    assert!(f.store.history_index_of(&b).is_empty(), "a file deleted long ago takes its history with it");
}
