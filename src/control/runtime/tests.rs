//! The suspend-origin lattice, state by state (the reference has no unit tests for it).

use super::*;
use crate::base::ids::{Catalog, RuleName};

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse("vm").expect("name"))
}

fn loaded() -> LoadedRule {
    let compiled = crate::compiler::compile(crate::compiler::DslKind::Mal, b"metricsRules: []\n").expect("a file without rules compiles");
    LoadedRule {
        compiled: Arc::new(compiled),
        content_hash: ContentHash::of(b""),
        revision: None,
        kind: LoaderKind::Runtime,
        loaded_at_ms: 0,
    }
}

#[test]
fn suspend_and_resume_follow_the_origin_lattice() {
    let rt = Runtime::new();
    let k = key();
    assert_eq!(rt.suspend(&k, Origin::Peer, true), SuspendResult::NotPresent);
    rt.install(&k, loaded(), BTreeSet::new());
    assert_eq!(rt.get(&k).map(|s| s.local_state()), Some("RUNNING"));
    assert_eq!(rt.suspend(&k, Origin::Peer, true), SuspendResult::Suspended);
    assert_eq!(rt.suspend(&k, Origin::Peer, true), SuspendResult::AlreadySuspended);
    assert_eq!(rt.suspend(&k, Origin::SelfOrigin, true), SuspendResult::Rejected, "different origin");
    assert_eq!(rt.get(&k).map(|s| s.local_state()), Some("SUSPENDED"));
    assert_eq!(rt.resume(&k, Origin::SelfOrigin), ResumeResult::NotSuspendedBySender);
    assert_eq!(rt.resume(&k, Origin::Peer), ResumeResult::Resumed);
    assert_eq!(rt.get(&k).map(|s| s.origin), Some(SuspendOrigin::None));
    assert_eq!(rt.resume(&k, Origin::Peer), ResumeResult::NotSuspendedBySender);
}

#[test]
fn peer_suspension_age_is_measured_only_for_origin_peer() {
    let rt = Runtime::new();
    let k = key();
    rt.install(&k, loaded(), BTreeSet::new());
    rt.suspend(&k, Origin::SelfOrigin, true);
    let later = Instant::now() + Duration::from_secs(120);
    assert_eq!(rt.get(&k).and_then(|s| s.peer_suspended_for(later)), None);
    rt.resume(&k, Origin::SelfOrigin);
    rt.suspend(&k, Origin::Peer, true);
    let age = rt.get(&k).and_then(|s| s.peer_suspended_for(later)).expect("peer age");
    assert!(age >= Duration::from_secs(119));
}

#[test]
fn unloading_an_idle_rule_forgets_it_and_changes_are_published() {
    let rt = Runtime::new();
    let k = key();
    let rx = rt.subscribe();
    let before = *rx.borrow();
    rt.install(&k, loaded(), BTreeSet::new());
    rt.set_error(&k, "boom");
    assert_eq!(rt.get(&k).map(|s| s.last_apply_error), Some("boom".to_string()));
    rt.unload(&k);
    assert!(rt.get(&k).is_none());
    assert!(*rx.borrow() > before);
}

#[tokio::test]
async fn evaluations_open_only_while_running_and_a_drain_waits_for_the_open_ones() {
    let rt = Runtime::new();
    let k = key();
    assert!(matches!(rt.begin_eval(&k), Err(GateClosed::NotLoaded)));
    rt.install(&k, loaded(), BTreeSet::new());
    let open = rt.begin_eval(&k).expect("running: open");
    assert_eq!(rt.in_flight(&k), 1);
    assert_eq!(rt.suspend(&k, Origin::SelfOrigin, true), SuspendResult::Suspended);
    assert!(matches!(rt.begin_eval(&k), Err(GateClosed::Suspended(_))), "no evaluation starts after a suspend");
    assert!(!rt.wait_drained(&k, Instant::now()).await, "one still open");
    let waiter = {
        let rt = Arc::new(rt);
        let for_waiter = rt.clone();
        let waiter = tokio::spawn(async move { for_waiter.wait_drained(&key(), Instant::now() + Duration::from_secs(10)).await });
        drop(open);
        assert!(waiter.await.expect("waiter"), "drained when the guard closed");
        rt
    };
    assert_eq!(waiter.in_flight(&k), 0);
}

#[tokio::test]
async fn a_drain_after_an_unload_still_sees_the_evaluation_open_before_it() {
    let rt = Runtime::new();
    let k = key();
    rt.install(&k, loaded(), BTreeSet::new());
    let open = rt.begin_eval(&k).expect("open");
    rt.unload(&k);
    assert!(rt.get(&k).is_none(), "the state is gone");
    assert!(matches!(rt.begin_eval(&k), Err(GateClosed::NotLoaded)));
    assert!(!rt.wait_drained(&k, Instant::now()).await, "the gate outlives the state while open");
    drop(open);
    assert!(rt.wait_drained(&k, Instant::now()).await);
    // The next change sweeps the idle orphan gate.
    rt.set_error(&key(), "x");
    rt.unload(&k);
    assert_eq!(rt.in_flight(&k), 0);
}
