//! Table tests of every pure decision of a roll.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::base::ids::{Catalog, ContentHash, NodeId, Revision, RuleKey, RuleName};

const WINDOW: u64 = 1_000;
const TIMEOUT: u64 = 10_000;
const T0: u64 = 100_000;

fn n(id: &str) -> NodeId {
    NodeId(id.to_string())
}

fn nodes(ids: &[&str]) -> Vec<NodeId> {
    ids.iter().map(|id| n(id)).collect()
}

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse("vm").expect("name"))
}

fn settings() -> HealthSettings {
    HealthSettings { window_ms: WINDOW, unreachable_tries: 3, checks: HealthChecks { eval_errors: true, values: true } }
}

fn start_with(master: Option<&str>, ids: &[&str]) -> Result<RollRecord, StartError> {
    RollRecord::start(StartRoll {
        key: key(),
        master: master.map(|m| m.as_bytes().to_vec()),
        rolling: b"rolling: 2".to_vec(),
        nodes: nodes(ids),
        step_timeout_ms: TIMEOUT,
        health: settings(),
        now_ms: T0,
        revision: Revision { millis: T0, counter: 0, node: n("c") },
    })
}

fn roll(ids: &[&str]) -> RollRecord {
    start_with(Some("master: 1"), ids).expect("start")
}

fn rolling_hash() -> ContentHash {
    ContentHash::of(b"rolling: 2")
}

/// A report from a node running the rolling content since `since`, at `at`, all counters clean.
fn healthy_report(since: u64, at: u64) -> HealthReport {
    HealthReport {
        running_hash: Some(rolling_hash()),
        running_since_ms: since,
        reported_ms: at,
        apply_error: None,
        dispatch_running: true,
        eval_errors_rise: 0,
        samples_in: 10,
        values_out: 10,
    }
}

fn seen(node: &str, observation: Observation) -> BTreeMap<NodeId, Observation> {
    BTreeMap::from([(n(node), observation)])
}

#[test]
fn order_puts_new_nodes_first_then_the_others_then_the_main() {
    let runs = |ids: &[&str]| ids.iter().map(|id| n(id)).collect::<BTreeSet<_>>();
    // (members, nodes running the rule, main, expected order)
    type Case<'a> = (&'a [&'a str], &'a [&'a str], Option<&'a str>, &'a [&'a str]);
    let cases: &[Case] = &[
        (&["c", "a", "b"], &[], None, &["a", "b", "c"]),
        (&["c", "a", "b"], &["a", "b", "c"], Some("a"), &["b", "c", "a"]),
        (&["c", "a", "b", "d"], &["a", "c"], Some("a"), &["b", "d", "c", "a"]),
        (&["c", "a", "b"], &["b"], Some("b"), &["a", "c", "b"]),
        // A main that is not a member is not added; duplicates collapse.
        (&["b", "a", "b"], &["a"], Some("z"), &["b", "a"]),
        (&[], &["a"], Some("a"), &[]),
        // Byte order, as main selection uses: "10.0.0.10" sorts before "10.0.0.9".
        (&["10.0.0.9", "10.0.0.10"], &[], None, &["10.0.0.10", "10.0.0.9"]),
    ];
    for (members, running, main, want) in cases {
        let got = order_nodes(&nodes(members), &runs(running), main.map(n).as_ref());
        assert_eq!(got, nodes(want), "members {members:?} running {running:?} main {main:?}");
    }
}

#[test]
fn starting_validates_the_request() {
    let record = roll(&["a", "b"]);
    assert_eq!((record.index, record.state.clone()), (0, RollState::InProgress));
    assert!(record.nodes.iter().all(|s| s.state == NodeState::Pending));
    assert_eq!((record.started_ms, record.step_started_ms, record.finished_ms), (T0, T0, None));
    assert!(matches!(start_with(Some("rolling: 2"), &["a"]), Err(StartError::NoChange { .. })));
    assert_eq!(start_with(Some("m"), &[]), Err(StartError::NoNodes));
    assert_eq!(start_with(Some("m"), &["a", "b", "a"]), Err(StartError::DuplicateNode(n("a"))));
    assert!(start_with(None, &["a"]).is_ok(), "a file with no entry can be rolled");
    let mut request = StartRoll {
        key: key(),
        master: None,
        rolling: b"x".to_vec(),
        nodes: nodes(&["a"]),
        step_timeout_ms: 0,
        health: settings(),
        now_ms: T0,
        revision: Revision::zero(),
    };
    assert_eq!(RollRecord::start(request.clone()), Err(StartError::ZeroStepTimeout));
    request.step_timeout_ms = WINDOW;
    assert!(matches!(RollRecord::start(request), Err(StartError::TimeoutWithinWindow { .. })));
}

#[test]
fn content_follows_the_index_and_the_final_state() {
    let mut record = roll(&["a", "b", "c"]);
    record.index = 1;
    let label = |record: &RollRecord, node: &str| match content_for(record, &n(node)) {
        Assignment::Rolling(c) => format!("rolling:{}", c.hash == rolling_hash()),
        Assignment::Master(c) => format!("master:{}", c.hash == ContentHash::of(b"master: 1")),
        Assignment::NoMaster => "none".to_string(),
    };
    let table: &[(RollState, [&str; 4])] = &[
        (RollState::InProgress, ["rolling:true", "rolling:true", "master:true", "master:true"]),
        (
            RollState::Stopped(StopReason::StepTimeout { node: n("b"), waited_ms: 1, last: HealthFailure::NoReport }),
            ["rolling:true", "rolling:true", "master:true", "master:true"],
        ),
        (RollState::Completed, ["rolling:true"; 4]),
        (RollState::ForceCommitted, ["rolling:true"; 4]),
        (RollState::RolledBack, ["master:true"; 4]),
    ];
    for (state, want) in table {
        record.state = state.clone();
        // "z" is not in the list (it joined after the start).
        let got: Vec<String> = ["a", "b", "c", "z"].iter().map(|node| label(&record, node)).collect();
        assert_eq!(got, want.to_vec(), "{}", state.label());
    }
    let mut fresh = start_with(None, &["a", "b"]).expect("start");
    assert_eq!(label(&fresh, "b"), "none", "no master: the far side runs nothing");
    fresh.state = RollState::RolledBack;
    assert_eq!(label(&fresh, "a"), "none");
}

#[test]
fn health_checks_in_order() {
    let ok = healthy_report(T0, T0 + WINDOW);
    let other = ContentHash::of(b"master: 1");
    let with = |f: &dyn Fn(&mut HealthReport)| {
        let mut report = ok.clone();
        f(&mut report);
        judge(&report, &rolling_hash(), &settings())
    };
    use HealthFailure::*;
    let table: Vec<(&str, Verdict)> = vec![
        ("clean, window covered", with(&|_| {})),
        ("apply error wins over everything", with(&|r| {
            r.apply_error = Some("boom".into());
            r.running_hash = None;
        })),
        ("old content", with(&|r| r.running_hash = Some(other.clone()))),
        ("nothing loaded", with(&|r| r.running_hash = None)),
        ("dispatch stopped", with(&|r| r.dispatch_running = false)),
        ("errors rose", with(&|r| r.eval_errors_rise = 2)),
        ("errors rose, window still open", with(&|r| {
            r.eval_errors_rise = 1;
            r.reported_ms = T0 + 1;
        })),
        ("window open", with(&|r| r.reported_ms = T0 + WINDOW - 1)),
        ("traffic, no values", with(&|r| r.values_out = 0)),
        ("no traffic, no values", with(&|r| {
            r.samples_in = 0;
            r.values_out = 0;
        })),
    ];
    let want: Vec<Verdict> = vec![
        Verdict::Healthy,
        Verdict::Unhealthy(ApplyError { message: "boom".into() }),
        Verdict::NotYet(NotRunningRolling { running: Some(other.clone()) }),
        Verdict::NotYet(NotRunningRolling { running: None }),
        Verdict::Unhealthy(DispatchNotRunning),
        Verdict::Unhealthy(EvalErrorsRose { by: 2 }),
        Verdict::Unhealthy(EvalErrorsRose { by: 1 }),
        Verdict::NotYet(WindowOpen { observed_ms: WINDOW - 1, window_ms: WINDOW }),
        Verdict::Unhealthy(NoValues { samples_in: 10 }),
        Verdict::Healthy,
    ];
    for ((case, got), want) in table.into_iter().zip(want) {
        assert_eq!(got, want, "{case}");
    }
    let lax = HealthSettings { checks: HealthChecks { eval_errors: false, values: false }, ..settings() };
    let mut noisy = ok.clone();
    noisy.eval_errors_rise = 5;
    noisy.values_out = 0;
    assert_eq!(judge(&noisy, &rolling_hash(), &lax), Verdict::Healthy, "disabled checks are not applied");
}

#[test]
fn a_healthy_node_advances_and_the_last_one_completes() {
    let record = roll(&["a", "b"]);
    let now = T0 + WINDOW + 5;
    let (record, decision) = advance(&record, &seen("a", Observation::Report(healthy_report(T0, now))), now);
    assert_eq!(decision, Decision::Advance { from: n("a"), to: n("b") });
    assert_eq!((record.index, record.step_started_ms), (1, now));
    assert_eq!(record.nodes[0].state, NodeState::Healthy { at_ms: now });
    assert_eq!(percent_done(&record), 50);

    let later = now + WINDOW + 5;
    let (record, decision) = advance(&record, &seen("b", Observation::Report(healthy_report(now, later))), later);
    assert_eq!(decision, Decision::Complete { skipped: None });
    assert_eq!((record.index, record.state.clone(), record.finished_ms), (2, RollState::Completed, Some(later)));
    assert_eq!(percent_done(&record), 100);
    let (again, decision) = advance(&record, &BTreeMap::new(), later + 1);
    assert_eq!((again, decision), (record, Decision::Idle), "a finished roll is left alone");
}

#[test]
fn a_node_not_yet_proven_waits_with_its_state() {
    let record = roll(&["a", "b"]);
    let now = T0 + 10;
    let open = Observation::Report(healthy_report(T0, now));
    let mut old = healthy_report(T0, now);
    old.running_hash = Some(ContentHash::of(b"master: 1"));
    let cases = [
        (Observation::NoReport, NodeState::Pending, HealthFailure::NoReport),
        (Observation::Report(old), NodeState::Pending, HealthFailure::NotRunningRolling {
            running: Some(ContentHash::of(b"master: 1")),
        }),
        (open, NodeState::RunningRolling { since_ms: T0 }, HealthFailure::WindowOpen { observed_ms: 10, window_ms: WINDOW }),
    ];
    for (observation, state, reason) in cases {
        let (next, decision) = advance(&record, &seen("a", observation), now);
        assert_eq!(decision, Decision::Wait { node: n("a"), reason });
        assert_eq!((next.index, next.nodes[0].state.clone(), next.updated_ms), (0, state, now));
    }
}

#[test]
fn an_unhealthy_node_keeps_its_since_and_stops_the_roll_at_the_timeout() {
    let record = roll(&["a", "b"]);
    let mut bad = healthy_report(T0, T0 + 50);
    bad.eval_errors_rise = 3;
    let reason = HealthFailure::EvalErrorsRose { by: 3 };
    let (record, decision) = advance(&record, &seen("a", Observation::Report(bad.clone())), T0 + 50);
    assert_eq!(decision, Decision::Wait { node: n("a"), reason: reason.clone() });
    assert_eq!(record.nodes[0].state, NodeState::Unhealthy { since_ms: T0 + 50, reason: reason.clone() });
    let (record, _) = advance(&record, &seen("a", Observation::Report(bad.clone())), T0 + 60);
    assert_eq!(record.nodes[0].state, NodeState::Unhealthy { since_ms: T0 + 50, reason: reason.clone() }, "since kept");

    let (stopped, decision) = advance(&record, &seen("a", Observation::Report(bad)), T0 + TIMEOUT);
    let want = StopReason::StepTimeout { node: n("a"), waited_ms: TIMEOUT, last: reason };
    assert_eq!(decision, Decision::Stop(want.clone()));
    assert_eq!((stopped.state.clone(), stopped.index, stopped.finished_ms), (RollState::Stopped(want), 0, None));
    assert_eq!(advance(&stopped, &BTreeMap::new(), T0 + TIMEOUT + 1).1, Decision::Idle, "stopped is frozen");

    let (timed_out, decision) = advance(&roll(&["a"]), &seen("a", Observation::NoReport), T0 + TIMEOUT + 1);
    assert!(matches!(decision, Decision::Stop(StopReason::StepTimeout { last: HealthFailure::NoReport, .. })));
    assert!(matches!(timed_out.state, RollState::Stopped(_)));
}

#[test]
fn an_unreachable_node_is_skipped_after_its_tries_and_never_timed_out() {
    let mut record = roll(&["a", "b"]);
    let late = T0 + TIMEOUT * 5;
    for tries in 1..=2 {
        let (next, decision) = advance(&record, &seen("a", Observation::Unreachable), late + u64::from(tries));
        assert_eq!(decision, Decision::WaitUnreachable { node: n("a"), tries, of: 3 });
        assert_eq!(next.nodes[0].state, NodeState::Unreachable { since_ms: late + 1, tries });
        record = next;
    }
    // Missing from the observations counts as unreachable.
    let (record, decision) = advance(&record, &BTreeMap::new(), late + 3);
    assert_eq!(decision, Decision::Skip { node: n("a"), tries: 3, to: n("b") });
    assert_eq!((record.index, record.nodes[0].state.clone()), (1, NodeState::Skipped { tries: 3 }));
    assert_eq!(percent_done(&record), 50);

    // A node that answers again starts its count over.
    let (flaky, _) = advance(&record, &seen("b", Observation::Unreachable), late + 4);
    let (flaky, _) = advance(&flaky, &seen("b", Observation::NoReport), late + 5);
    let (flaky, decision) = advance(&flaky, &seen("b", Observation::Unreachable), late + 6);
    assert_eq!(decision, Decision::WaitUnreachable { node: n("b"), tries: 1, of: 3 });

    let mut last = flaky;
    for at in 7..=8 {
        last = advance(&last, &BTreeMap::new(), late + at).0;
    }
    assert_eq!(last.state, RollState::Completed);
    assert_eq!(last.nodes[1].state, NodeState::Skipped { tries: 3 });
}

#[test]
fn every_node_unreachable_completes_the_roll_as_exhibitor_does() {
    let mut record = roll(&["a", "b", "c"]);
    record.health.unreachable_tries = 1;
    let mut decisions = Vec::new();
    for at in 1..=3 {
        let (next, decision) = advance(&record, &BTreeMap::new(), T0 + at);
        decisions.push(decision);
        record = next;
    }
    assert_eq!(decisions, vec![
        Decision::Skip { node: n("a"), tries: 1, to: n("b") },
        Decision::Skip { node: n("b"), tries: 1, to: n("c") },
        Decision::Complete { skipped: Some(n("c")) },
    ]);
    assert_eq!(percent_done(&record), 100);
}

#[test]
fn a_record_past_its_last_node_completes() {
    let mut record = roll(&["a"]);
    record.index = 1;
    let (done, decision) = advance(&record, &BTreeMap::new(), T0 + 1);
    assert_eq!((decision, done.state), (Decision::Complete { skipped: None }, RollState::Completed));
}

#[test]
fn rollback_and_force_commit_end_a_live_roll_only() {
    let stop = RollState::Stopped(StopReason::StepTimeout { node: n("a"), waited_ms: 1, last: HealthFailure::NoReport });
    for from in [RollState::InProgress, stop] {
        let mut record = roll(&["a", "b"]);
        record.state = from.clone();
        record.index = 1;
        let back = rollback(&record, T0 + 7).expect("rollback");
        assert_eq!((back.state.clone(), back.finished_ms, back.index), (RollState::RolledBack, Some(T0 + 7), 1));
        let forced = force_commit(&record, T0 + 8).expect("force-commit");
        assert_eq!((forced.state.clone(), forced.finished_ms), (RollState::ForceCommitted, Some(T0 + 8)));
        assert_eq!((percent_done(&back), percent_done(&forced)), (0, 100), "from {}", from.label());
    }
    for finished in [RollState::Completed, RollState::RolledBack, RollState::ForceCommitted] {
        let mut record = roll(&["a"]);
        record.state = finished.clone();
        let refused = rollback(&record, T0).expect_err("refused");
        assert!(refused.to_string().contains(finished.label()), "{refused}");
        assert!(force_commit(&record, T0).is_err());
    }
}

#[test]
fn percent_counts_passed_nodes() {
    let mut record = roll(&["a", "b", "c"]);
    assert_eq!(percent_done(&record), 0);
    record.nodes[0].state = NodeState::Healthy { at_ms: 1 };
    assert_eq!(percent_done(&record), 33);
    record.nodes[1].state = NodeState::Skipped { tries: 4 };
    assert_eq!(percent_done(&record), 66);
    record.nodes[2].state = NodeState::Unhealthy { since_ms: 1, reason: HealthFailure::DispatchNotRunning };
    assert_eq!(percent_done(&record), 66);
}

#[test]
fn a_roll_in_progress_or_stopped_holds_the_file() {
    assert_eq!(write_conflict(None), Ok(()));
    let mut record = roll(&["a", "b", "c"]);
    record.index = 1;
    record.nodes[0].state = NodeState::Healthy { at_ms: 1 };
    let conflict = write_conflict(Some(&record)).expect_err("409");
    assert_eq!((conflict.state, conflict.percent), ("in_progress", 33));
    let message = conflict.to_string();
    assert!(message.contains("otel-rules/vm") && message.contains("node 2 of 3: b"), "{message}");
    record.state = RollState::Stopped(StopReason::StepTimeout { node: n("b"), waited_ms: 1, last: HealthFailure::NoReport });
    assert_eq!(write_conflict(Some(&record)).err().map(|c| c.state), Some("stopped"));
    for finished in [RollState::Completed, RollState::RolledBack, RollState::ForceCommitted] {
        record.state = finished;
        assert_eq!(write_conflict(Some(&record)), Ok(()));
    }
}

#[test]
fn the_record_round_trips_through_its_versioned_codec() {
    let mut record = roll(&["a", "b", "c"]);
    record.nodes[0].state = NodeState::Healthy { at_ms: 5 };
    record.nodes[1].state = NodeState::Unhealthy { since_ms: 6, reason: HealthFailure::ApplyError { message: "x".into() } };
    record.nodes[2].state = NodeState::Unreachable { since_ms: 7, tries: 2 };
    record.state = RollState::Stopped(StopReason::StepTimeout { node: n("b"), waited_ms: 9, last: HealthFailure::NoReport });
    let bytes = codec::encode(&record).expect("encode");
    assert_eq!(bytes[0], codec::ROLL_FORMAT_VERSION);
    assert_eq!(codec::decode(&bytes).expect("decode"), record);

    let fresh = start_with(None, &["a"]).expect("start");
    assert_eq!(codec::decode(&codec::encode(&fresh).expect("encode")).expect("decode"), fresh);

    assert!(matches!(codec::decode(&[]), Err(codec::RollCodecError::Empty)));
    let mut future = bytes.clone();
    future[0] = 2;
    assert!(matches!(codec::decode(&future), Err(codec::RollCodecError::UnknownVersion { found: 2 })));
    assert!(codec::decode(&bytes[..bytes.len() / 2]).is_err(), "a truncated record is an error, not a panic");
    let mut trailing = bytes;
    trailing.push(0);
    assert!(codec::decode(&trailing).is_err());
}

#[test]
fn the_view_shows_states_content_and_progress() {
    let mut record = roll(&["a", "b", "c"]);
    record.index = 1;
    record.nodes[0].state = NodeState::Healthy { at_ms: 5 };
    record.nodes[1].state = NodeState::Unhealthy { since_ms: 6, reason: HealthFailure::DispatchNotRunning };
    let view = view::RollView::of(&record);
    assert_eq!((view.catalog.as_str(), view.name.as_str(), view.state.as_str()), ("otel-rules", "vm", "in_progress"));
    assert_eq!((view.index, view.node_at_index.as_deref(), view.percent_done), (1, Some("b"), 33));
    assert_eq!(view.status, "applying to \"b\" (next will be \"c\")");
    let rows: Vec<(&str, &str, Option<u64>)> =
        view.nodes.iter().map(|v| (v.state.as_str(), v.content.as_str(), v.since_ms)).collect();
    assert_eq!(rows, vec![("healthy", "rolling", Some(5)), ("unhealthy", "rolling", Some(6)), ("pending", "master", None)]);
    assert_eq!(view.nodes[1].reason.as_deref(), Some("dispatch is not running"));
    let json = serde_json::to_value(&view).expect("json");
    assert_eq!(json["percentDone"], 33);
    assert_eq!(json["nodes"][2]["state"], "pending");
    let back: view::RollView = serde_json::from_value(json).expect("the client reads it back");
    assert_eq!(back, view);
}
