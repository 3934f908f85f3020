//! The roll worker over scripted sequences (twin actions, twin board, a manual clock), and the
//! publisher over the runtime's facts, through the node's own board and through gossip.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::report::{Counters, FileFacts};
use super::worker::TickOutcome;
use crate::node::roll_boards::LocalBoard;
use super::*;
use crate::base::ids::{Catalog, ContentHash, Revision, RuleName};
use crate::control::rolling::{Decision, HealthSettings, NodeState, RollState, StartRoll, StopReason};

const STEP_TIMEOUT_MS: u64 = 300_000;
const T0: u64 = 1_700_000_000_000;

fn node(id: &str) -> NodeId {
    NodeId(id.into())
}

fn key(name: &str) -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name"))
}

fn record(name: &str, nodes: &[&str]) -> RollRecord {
    RollRecord::start(StartRoll {
        key: key(name),
        master: Some(b"old content".to_vec()),
        rolling: b"new content".to_vec(),
        nodes: nodes.iter().map(|n| node(n)).collect(),
        step_timeout_ms: STEP_TIMEOUT_MS,
        health: HealthSettings::default(),
        now_ms: T0,
        revision: Revision::zero(),
    })
    .expect("a valid roll")
}

/// The workflow's twin: records in a map, each put stamped with a growing revision, completion
/// marks the stored record completed (as the structural path does with the entry).
#[derive(Default)]
struct TwinActions {
    records: Mutex<BTreeMap<RuleKey, RollRecord>>,
    puts: AtomicU64,
    completions: Mutex<Vec<RuleKey>>,
    refuse_completion: AtomicBool,
}

impl TwinActions {
    fn with(records: &[RollRecord]) -> Arc<TwinActions> {
        let twin = TwinActions::default();
        *twin.records.lock().expect("lock") = records.iter().map(|r| (r.key.clone(), r.clone())).collect();
        Arc::new(twin)
    }

    fn get(&self, name: &str) -> RollRecord {
        self.records.lock().expect("lock").get(&key(name)).cloned().expect("a record")
    }

    fn puts(&self) -> u64 {
        self.puts.load(Ordering::SeqCst)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("refused by the twin")]
struct Refused;

#[async_trait::async_trait]
impl RollActions for TwinActions {
    async fn put_roll(&self, record: RollRecord) -> Result<(), RollerError> {
        let n = self.puts.fetch_add(1, Ordering::SeqCst) + 1;
        let stamped = record.stamped(Revision { millis: n, counter: 0, node: node("main") });
        self.records.lock().expect("lock").insert(stamped.key.clone(), stamped);
        Ok(())
    }

    async fn complete_roll(&self, key: &RuleKey) -> Result<(), RollerError> {
        if self.refuse_completion.load(Ordering::SeqCst) {
            return Err(RollerError::Action { operation: "complete_roll", key: key.to_string(), source: Box::new(Refused) });
        }
        let mut records = self.records.lock().expect("lock");
        let record = records.get_mut(key).expect("completing a known roll");
        assert_eq!(record.index as usize, record.nodes.len(), "completed only past the last node");
        record.state = RollState::Completed;
        self.completions.lock().expect("lock").push(key.clone());
        Ok(())
    }

    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError> {
        Ok(self.records.lock().expect("lock").values().cloned().collect())
    }
}

#[async_trait::async_trait]
impl RecordSource for TwinActions {
    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError> {
        RollActions::roll_records(self).await
    }
}

/// The gossip twin of the main: whether it is the main, and what it sees of each node (the
/// same for every file).
struct TwinBoard {
    main: AtomicBool,
    seen: Mutex<BTreeMap<NodeId, Observation>>,
}

impl TwinBoard {
    fn main() -> Arc<TwinBoard> {
        Arc::new(TwinBoard { main: AtomicBool::new(true), seen: Mutex::new(BTreeMap::new()) })
    }

    fn see(&self, id: &str, observation: Observation) {
        self.seen.lock().expect("lock").insert(node(id), observation);
    }

    fn forget(&self, id: &str) {
        self.seen.lock().expect("lock").remove(&node(id));
    }
}

#[async_trait::async_trait]
impl HealthBoard for TwinBoard {
    fn is_main(&self) -> bool {
        self.main.load(Ordering::SeqCst)
    }

    async fn publish(&self, _reports: &BTreeMap<RuleKey, HealthReport>) -> Result<(), RollerError> {
        Ok(())
    }

    async fn observations(&self, _key: &RuleKey) -> BTreeMap<NodeId, Observation> {
        self.seen.lock().expect("lock").clone()
    }
}

fn manual_clock(start: u64) -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(start));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

/// A report of the rolling content that covers the whole window by `now_ms`.
fn healthy(now_ms: u64) -> Observation {
    Observation::Report(HealthReport {
        running_hash: Some(ContentHash::of(b"new content")),
        running_since_ms: now_ms - HealthSettings::DEFAULT_WINDOW_MS - 1_000,
        reported_ms: now_ms,
        apply_error: None,
        dispatch_running: true,
        eval_errors_rise: 0,
        samples_in: 500,
        values_out: 120,
    })
}

fn erroring(now_ms: u64) -> Observation {
    match healthy(now_ms) {
        Observation::Report(report) => Observation::Report(HealthReport { eval_errors_rise: 3, ..report }),
        other => other,
    }
}

async fn tick(worker: &RollWorker) -> Vec<TickOutcome> {
    worker.tick_once().await.expect("a tick")
}

fn decisions(outcomes: &[TickOutcome]) -> Vec<Decision> {
    outcomes.iter().map(|o| o.decision.clone()).collect()
}

#[tokio::test]
async fn healthy_nodes_advance_the_roll_to_completion() {
    let actions = TwinActions::with(&[record("vm", &["a", "b", "c"])]);
    let board = TwinBoard::main();
    let (now, clock) = manual_clock(T0 + 40_000);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);

    eprintln!("[healthy] a runs the rolling content, window not yet covered: wait, record updated");
    let early = HealthReport { running_since_ms: T0 + 30_000, ..report_of(healthy(T0 + 40_000)) };
    board.see("a", Observation::Report(early));
    let outcomes = tick(&worker).await;
    assert!(matches!(decisions(&outcomes)[..], [Decision::Wait { .. }]), "{outcomes:?}");
    assert_eq!(actions.get("vm").nodes[0].state, NodeState::RunningRolling { since_ms: T0 + 30_000 });
    assert_eq!(actions.puts(), 1);
    now.store(T0 + 45_000, Ordering::SeqCst);
    let outcomes = tick(&worker).await;
    assert!(!outcomes[0].put, "the same wait is not put again");
    assert_eq!(actions.puts(), 1);

    eprintln!("[healthy] a healthy: advance to b");
    now.store(T0 + 65_000, Ordering::SeqCst);
    board.see("a", healthy(T0 + 65_000));
    board.see("b", Observation::NoReport);
    let outcomes = tick(&worker).await;
    assert_eq!(decisions(&outcomes), [Decision::Advance { from: node("a"), to: node("b") }]);
    let stored = actions.get("vm");
    assert_eq!((stored.index, stored.step_started_ms), (1, T0 + 65_000));
    assert_eq!(stored.nodes[0].state, NodeState::Healthy { at_ms: T0 + 65_000 });

    eprintln!("[healthy] b, then c healthy: complete");
    now.store(T0 + 100_000, Ordering::SeqCst);
    board.see("b", healthy(T0 + 100_000));
    assert_eq!(decisions(&tick(&worker).await), [Decision::Advance { from: node("b"), to: node("c") }]);
    now.store(T0 + 140_000, Ordering::SeqCst);
    board.see("c", healthy(T0 + 140_000));
    let outcomes = tick(&worker).await;
    assert_eq!(decisions(&outcomes), [Decision::Complete { skipped: None }]);
    assert!(outcomes[0].put && outcomes[0].completed);
    assert_eq!(*actions.completions.lock().expect("lock"), [key("vm")]);
    let done = actions.get("vm");
    assert_eq!((done.index, &done.state), (3, &RollState::Completed));
    assert!(done.nodes.iter().all(|n| matches!(n.state, NodeState::Healthy { .. })));

    eprintln!("[healthy] a finished roll is left alone");
    let puts = actions.puts();
    assert!(tick(&worker).await.is_empty());
    assert_eq!(actions.puts(), puts);
}

fn report_of(observation: Observation) -> HealthReport {
    match observation {
        Observation::Report(report) => report,
        other => panic!("not a report: {other:?}"),
    }
}

#[tokio::test]
async fn a_node_unhealthy_past_the_step_timeout_stops_the_roll() {
    let actions = TwinActions::with(&[record("vm", &["a", "b"])]);
    let board = TwinBoard::main();
    let (now, clock) = manual_clock(T0 + 10_000);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);

    eprintln!("[unhealthy] a's evaluation errors rose: wait, unhealthy since the first such tick");
    board.see("a", erroring(T0 + 10_000));
    assert!(matches!(decisions(&tick(&worker).await)[..], [Decision::Wait { .. }]));
    assert!(matches!(actions.get("vm").nodes[0].state, NodeState::Unhealthy { since_ms, .. } if since_ms == T0 + 10_000));
    now.store(T0 + STEP_TIMEOUT_MS - 1, Ordering::SeqCst);
    board.see("a", erroring(T0 + STEP_TIMEOUT_MS - 1));
    let outcomes = tick(&worker).await;
    assert!(matches!(decisions(&outcomes)[..], [Decision::Wait { .. }]) && !outcomes[0].put, "{outcomes:?}");

    eprintln!("[unhealthy] the step timeout passes: stop, and the stopped roll is frozen");
    now.store(T0 + STEP_TIMEOUT_MS, Ordering::SeqCst);
    let outcomes = tick(&worker).await;
    assert!(matches!(&decisions(&outcomes)[..], [Decision::Stop(StopReason::StepTimeout { node: n, .. })] if *n == node("a")));
    let stopped = actions.get("vm");
    assert!(matches!(stopped.state, RollState::Stopped(_)) && stopped.index == 0);
    assert!(actions.completions.lock().expect("lock").is_empty());
    let puts = actions.puts();
    now.store(T0 + STEP_TIMEOUT_MS + 5_000, Ordering::SeqCst);
    board.see("a", healthy(T0 + STEP_TIMEOUT_MS + 5_000));
    assert!(tick(&worker).await.is_empty(), "a stopped roll waits for the operator");
    assert_eq!(actions.puts(), puts);
}

#[tokio::test]
async fn a_node_unreachable_for_its_tries_is_skipped() {
    let actions = TwinActions::with(&[record("vm", &["a", "b"])]);
    let board = TwinBoard::main();
    board.see("a", Observation::Unreachable);
    board.see("b", Observation::NoReport);
    let (now, clock) = manual_clock(T0);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);
    let tries = HealthSettings::DEFAULT_UNREACHABLE_TRIES;

    eprintln!("[unreachable] a is dead in gossip for {} ticks, then missing from it", tries - 1);
    for try_number in 1..tries {
        now.fetch_add(5_000, Ordering::SeqCst);
        if try_number == 2 {
            board.forget("a");
        }
        let outcomes = tick(&worker).await;
        assert_eq!(decisions(&outcomes), [Decision::WaitUnreachable { node: node("a"), tries: try_number, of: tries }]);
        assert!(outcomes[0].put, "the tries are persisted, so a new main keeps counting");
    }

    eprintln!("[unreachable] the {tries}th tick: skipped, b acts");
    now.fetch_add(5_000, Ordering::SeqCst);
    assert_eq!(decisions(&tick(&worker).await), [Decision::Skip { node: node("a"), tries, to: node("b") }]);
    let stored = actions.get("vm");
    assert_eq!((stored.index, &stored.nodes[0].state), (1, &NodeState::Skipped { tries }));
}

#[tokio::test]
async fn a_node_that_is_not_the_main_does_nothing() {
    let started = record("vm", &["a", "b"]);
    let actions = TwinActions::with(std::slice::from_ref(&started));
    let board = TwinBoard::main();
    board.main.store(false, Ordering::SeqCst);
    board.see("a", healthy(T0 + 60_000));
    let (_now, clock) = manual_clock(T0 + 60_000);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);
    assert!(tick(&worker).await.is_empty());
    assert_eq!((actions.puts(), actions.get("vm")), (0, started));
}

#[tokio::test]
async fn a_new_main_continues_from_the_records_index_and_step_timer() {
    eprintln!("[failover] the old main advanced past a and b; c acts since T0 + 100 s");
    let mut handed_over = record("vm", &["a", "b", "c", "d"]);
    handed_over.index = 2;
    handed_over.step_started_ms = T0 + 100_000;
    handed_over.nodes[0].state = NodeState::Healthy { at_ms: T0 + 50_000 };
    handed_over.nodes[1].state = NodeState::Healthy { at_ms: T0 + 100_000 };
    let actions = TwinActions::with(&[handed_over]);
    let board = TwinBoard::main();
    let (now, clock) = manual_clock(T0 + 150_000);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);

    eprintln!("[failover] the new main judges c, not a");
    board.see("a", Observation::Unreachable);
    board.see("c", healthy(T0 + 150_000));
    assert_eq!(decisions(&tick(&worker).await), [Decision::Advance { from: node("c"), to: node("d") }]);
    assert_eq!(actions.get("vm").nodes[0].state, NodeState::Healthy { at_ms: T0 + 50_000 }, "a keeps its state");

    eprintln!("[failover] d's step timer is the record's: another new main stops on time");
    now.store(T0 + 150_000 + STEP_TIMEOUT_MS, Ordering::SeqCst);
    let (_, later_clock) = manual_clock(T0 + 150_000 + STEP_TIMEOUT_MS);
    let later = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), later_clock);
    board.see("d", Observation::NoReport);
    let outcomes = tick(&later).await;
    assert!(
        matches!(&decisions(&outcomes)[..], [Decision::Stop(StopReason::StepTimeout { node: n, waited_ms, .. })] if *n == node("d") && *waited_ms == STEP_TIMEOUT_MS),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn a_failed_completion_is_repeated_without_another_put() {
    let mut last = record("vm", &["a"]);
    last.updated_ms = T0;
    let actions = TwinActions::with(&[last]);
    actions.refuse_completion.store(true, Ordering::SeqCst);
    let board = TwinBoard::main();
    board.see("a", healthy(T0 + 60_000));
    let (now, clock) = manual_clock(T0 + 60_000);
    let worker = RollWorker::new(actions.clone(), board.clone(), Duration::from_secs(5), clock);

    let outcomes = tick(&worker).await;
    assert!(outcomes[0].put && !outcomes[0].completed);
    let pending = actions.get("vm");
    assert_eq!((pending.index, &pending.state, pending.finished_ms), (1, &RollState::InProgress, None));

    eprintln!("[completion] the retry: complete again, nothing new to put");
    actions.refuse_completion.store(false, Ordering::SeqCst);
    now.fetch_add(5_000, Ordering::SeqCst);
    let outcomes = tick(&worker).await;
    assert_eq!(decisions(&outcomes), [Decision::Complete { skipped: None }]);
    assert!(!outcomes[0].put && outcomes[0].completed);
    assert_eq!(actions.puts(), 1);
    assert_eq!(actions.get("vm").state, RollState::Completed);
}

/// What a node runs, scripted.
#[derive(Default)]
struct TwinFacts {
    files: Mutex<BTreeMap<RuleKey, (FileFacts, Counters)>>,
}

impl TwinFacts {
    fn set(&self, name: &str, facts: FileFacts, counters: Counters) {
        self.files.lock().expect("lock").insert(key(name), (facts, counters));
    }
}

impl LocalFacts for TwinFacts {
    fn file(&self, key: &RuleKey) -> FileFacts {
        self.files.lock().expect("lock").get(key).map(|(f, _)| f.clone()).unwrap_or_default()
    }

    fn counters(&self, key: &RuleKey) -> Counters {
        self.files.lock().expect("lock").get(key).map(|(_, c)| *c).unwrap_or_default()
    }
}

fn running(content: &[u8], loaded_at_ms: u64) -> FileFacts {
    FileFacts { loaded: Some((ContentHash::of(content), loaded_at_ms)), apply_error: String::new(), gate_running: true }
}

#[tokio::test]
async fn the_publisher_reports_from_the_baseline_and_withdraws_finished_rolls() {
    let mut at_b = record("vm", &["a", "b"]);
    at_b.index = 1;
    let actions = TwinActions::with(&[at_b, record("k8s", &["a", "b"])]);
    let facts = Arc::new(TwinFacts::default());
    let board = Arc::new(LocalBoard::new(node("b")));
    let (now, clock) = manual_clock(T0 + 1_000);
    let mut publisher =
        HealthPublisher::new(node("b"), actions.clone(), facts.clone(), board.clone(), Duration::from_secs(5), clock, vec![]);

    eprintln!("[publisher] b runs the rolling content of vm; k8s has not reached b");
    facts.set("vm", running(b"new content", T0 + 900), Counters { errors: 4, samples_in: 1_000, values_out: 200 });
    let reports = publisher.publish_once().await.expect("published");
    assert_eq!(reports.keys().collect::<Vec<_>>(), [&key("vm")]);
    assert_eq!(reports[&key("vm")].running_since_ms, T0 + 1_000, "the baseline is taken at first sight");

    eprintln!("[publisher] 31 s later the counters grew: the report covers the span");
    now.store(T0 + 32_000, Ordering::SeqCst);
    facts.set("vm", running(b"new content", T0 + 900), Counters { errors: 4, samples_in: 1_600, values_out: 350 });
    publisher.publish_once().await.expect("published");
    let seen = board.observations(&key("vm")).await;
    let report = report_of(seen[&node("b")].clone());
    assert_eq!(
        (report.running_since_ms, report.reported_ms, report.eval_errors_rise, report.samples_in, report.values_out),
        (T0 + 1_000, T0 + 32_000, 0, 600, 150)
    );
    assert_eq!(report.running_hash, Some(ContentHash::of(b"new content")));

    eprintln!("[publisher] the roll completes: the report is withdrawn");
    actions.records.lock().expect("lock").get_mut(&key("vm")).expect("vm").state = RollState::Completed;
    assert!(publisher.publish_once().await.expect("published").is_empty());
    assert_eq!(board.observations(&key("vm")).await[&node("b")], Observation::NoReport);
}
