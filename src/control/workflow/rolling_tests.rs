//! The workflow's roll records on the in-memory twins (a lone node, `NoPeers`): last-write-wins
//! on replicated records, the all-or-nothing batch of a force-commit, and the compare-and-set of
//! `put_roll`. The cluster behaviour is in `cluster-tests/rolling_control.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::super::{AddOrUpdate, NoPeers, Workflow};
use super::{RollError, RollStart};
use crate::control::bundled::Bundled;
use crate::base::clock::RevisionClock;
use crate::base::ids::{Catalog, ContentHash, NodeId, Revision, RuleKey, RuleName};
use crate::control::rolling::RollState;
use crate::control::runtime::Runtime;
use crate::control::runtime::locks::FileLocks;
use crate::control::outcome::ApplyStatus;
use crate::store::Store;
use crate::store::kv::MemKv;

const V1: &str = "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: wr\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc'])\n";

fn v2() -> String {
    V1.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')")
}

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse("wr").expect("name"))
}

fn lone() -> (Arc<MemKv>, Arc<Store>, Arc<Runtime>, Workflow, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (bundled, _) = Bundled::load(dir.path()).expect("bundled");
    let kv = Arc::new(MemKv::new());
    let store = Arc::new(Store::open(kv.clone()).expect("store"));
    let runtime = Arc::new(Runtime::new());
    let workflow = Workflow::new(
        store.clone(),
        runtime.clone(),
        Arc::new(bundled),
        Arc::new(RevisionClock::new(NodeId("n1".into()))),
        Arc::new(NoPeers),
        Arc::new(FileLocks::default()),
    )
    .with_lock_timeout(Duration::from_millis(200));
    (kv, store, runtime, workflow, dir)
}

fn write(content: &str) -> AddOrUpdate {
    AddOrUpdate { key: key(), content: content.as_bytes().to_vec(), allow_storage_change: false, force: false }
}

async fn started(workflow: &Workflow) -> crate::control::rolling::RollRecord {
    assert_eq!(workflow.add_or_update(write(V1)).await.status, ApplyStatus::StructuralApplied);
    let (outcome, record) = workflow.start_roll(write(&v2()), RollStart::default()).await;
    assert_eq!(outcome.status, ApplyStatus::RollStarted, "{}", outcome.message);
    record.expect("a started roll returns its record")
}

#[tokio::test]
async fn replicated_records_merge_by_last_write_wins_and_later_stamps_order_after_them() {
    let (_kv, _store, _runtime, workflow, _dir) = lone();
    let record = started(&workflow).await;
    let at = |millis: u64| Revision { millis, counter: 0, node: NodeId("n2".into()) };
    let far = record.revision.millis + 1_000_000;

    let newer = record.clone().stamped(at(far));
    assert_eq!(workflow.apply_replicated_rolls(vec![newer.clone()]).await.expect("apply"), 1);
    let older = record.clone().stamped(at(far - 1));
    assert_eq!(workflow.apply_replicated_rolls(vec![older, newer.clone()]).await.expect("apply"), 0, "older or equal: kept");
    assert_eq!(workflow.stored_roll(&key()).await.expect("read").map(|r| r.revision), Some(at(far)));

    // The writer observed the replica's revision: its next stamp orders after it.
    let back = workflow.rollback_roll(&key()).await.expect("rollback");
    assert!(back.revision > at(far), "{} after {}", back.revision, at(far));
    assert_eq!(back.state, RollState::RolledBack);
}

#[tokio::test]
async fn a_force_commit_persists_the_entry_and_the_finished_record_together_or_neither() {
    let (kv, store, runtime, workflow, _dir) = lone();
    let record = started(&workflow).await;
    let v1_hash = ContentHash::of(V1.as_bytes());

    kv.set_fail_writes(true);
    let refused = workflow.force_commit_roll(&key()).await;
    assert!(matches!(&refused, Err(RollError::NotCommitted(o)) if o.status == ApplyStatus::PersistFailed), "{refused:?}");
    kv.set_fail_writes(false);
    let held = workflow.stored_roll(&key()).await.expect("read").expect("held");
    assert_eq!((held.state, held.revision), (RollState::InProgress, record.revision.clone()), "the record did not move");
    assert_eq!(store.get_entry(&key()).await.expect("read").map(|e| e.content_hash), Some(v1_hash), "nor the entry");
    assert_eq!(runtime.get(&key()).map(|s| s.local_state()), Some("RUNNING"), "everyone resumed");

    // put_roll is a compare-and-set on the revision read.
    let mut stale = record.clone();
    stale.revision = Revision::zero();
    assert!(matches!(workflow.put_roll(stale).await, Err(RollError::Moved { .. })));

    let done = workflow.force_commit_roll(&key()).await.expect("force-commit");
    assert_eq!(done.state, RollState::ForceCommitted);
    let entry = store.get_entry(&key()).await.expect("read").expect("entry");
    assert_eq!(entry.content_hash, ContentHash::of(v2().as_bytes()), "the rolling content is the entry");
    assert_eq!(runtime.get(&key()).and_then(|s| s.loaded).map(|l| l.content_hash), Some(entry.content_hash));
    assert!(matches!(workflow.put_roll(done.clone()).await, Err(RollError::Finished(_))), "a finished roll is not advanced");
    assert!(matches!(workflow.rollback_roll(&key()).await, Err(RollError::Finished(_))));
    let other = RuleKey::new(Catalog::Lal, RuleName::parse("none").expect("name"));
    assert!(matches!(workflow.complete_roll(&other).await, Err(RollError::NoRoll { .. })));
    // A finished roll holds nothing: a normal write passes.
    assert_eq!(workflow.add_or_update(write(V1)).await.status, ApplyStatus::FilterOnlyApplied);
}
