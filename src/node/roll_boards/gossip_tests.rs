//! The roller on real parts: a runtime's facts for a file, and a roll step carried by gossip
//! (two memberships on the in-memory gossip twin): b publishes its report, the main a reads it
//! and advances.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::control::rolling::roller::*;
use crate::cluster::gossip::{Fact, GossipNetwork, GossipTransport, Membership, MembershipSettings};
use crate::compiler::{DslKind, compile};
use crate::base::ids::{Catalog, ContentHash, Revision, RuleName};
use crate::control::rolling::{Decision, HealthSettings, NodeState, Observation, StartRoll};
use crate::control::runtime::{LoaderKind, Origin, Runtime, loaded_rule};

const WAIT: Duration = Duration::from_secs(15);
const OLD: &str = "metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";
const NEW: &str = "metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc', 'host']).service(['svc'], Layer.GENERAL)\n";

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse("vm").expect("name"))
}

fn install(runtime: &Runtime, content: &str) {
    let compiled = compile(DslKind::Mal, content.as_bytes()).expect("compiles");
    let hash = ContentHash::of(content.as_bytes());
    runtime.install(&key(), loaded_rule(compiled, hash, None, LoaderKind::Runtime), BTreeSet::new());
}

#[test]
fn the_runtime_facts_of_a_file() {
    let runtime = Runtime::new();
    assert_eq!(file_facts(&runtime, &key()), FileFacts::default(), "nothing loaded");
    install(&runtime, NEW);
    let facts = file_facts(&runtime, &key());
    assert_eq!(facts.loaded.as_ref().map(|(hash, _)| hash.clone()), Some(ContentHash::of(NEW.as_bytes())));
    assert!(facts.gate_running && facts.apply_error.is_empty());
    runtime.suspend(&key(), Origin::Peer, true);
    assert!(!file_facts(&runtime, &key()).gate_running, "paused by the main");
    runtime.resume(&key(), Origin::Peer);
    runtime.set_error(&key(), "line 2: unknown function");
    let failed = file_facts(&runtime, &key());
    assert_eq!((failed.gate_running, failed.apply_error.as_str()), (true, "line 2: unknown function"));
}

/// The node's runtime, with no traffic.
struct QuietRuntime(Arc<Runtime>);

impl LocalFacts for QuietRuntime {
    fn file(&self, key: &RuleKey) -> FileFacts {
        file_facts(&self.0, key)
    }

    fn counters(&self, _key: &RuleKey) -> Counters {
        Counters::default()
    }
}

/// The stored records of every node (replicated instantly, as far as this test cares) and the
/// workflow's actions on them.
#[derive(Default)]
struct SharedRecords(Mutex<BTreeMap<RuleKey, RollRecord>>);

#[async_trait::async_trait]
impl RecordSource for SharedRecords {
    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError> {
        Ok(self.0.lock().expect("lock").values().cloned().collect())
    }
}

#[async_trait::async_trait]
impl RollActions for SharedRecords {
    async fn put_roll(&self, record: RollRecord) -> Result<(), RollerError> {
        self.0.lock().expect("lock").insert(record.key.clone(), record);
        Ok(())
    }

    async fn complete_roll(&self, _key: &RuleKey) -> Result<(), RollerError> {
        Ok(())
    }

    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError> {
        RecordSource::roll_records(self).await
    }
}

fn settings(id: &str, port: u16, seed: u16) -> MembershipSettings {
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let mut settings = MembershipSettings::for_test(NodeId(id.into()), addr(port));
    settings.generation = 1;
    settings.seeds = vec![addr(seed).to_string()];
    settings.initial_facts = vec![(Fact::BusAddr, format!("127.0.0.1:{}", port + 1000))];
    settings
}

#[tokio::test]
async fn a_step_carried_by_gossip_b_reports_the_main_advances() {
    let network = GossipNetwork::new();
    let transport = GossipTransport::InMemory(network.clone());
    let a = Arc::new(Membership::start(settings("a", 41, 42), &transport).await.expect("a starts"));
    let b = Arc::new(Membership::start(settings("b", 42, 41), &transport).await.expect("b starts"));
    let mut view_rx = a.view();
    tokio::time::timeout(WAIT, view_rx.wait_for(|v| v.live_ids().len() == 2 && v.is_main())).await.expect("a is main of two").expect("view");

    eprintln!("[gossip-step] a roll of vm over b then a (the main last); b runs the master");
    let records = Arc::new(SharedRecords::default());
    let roll = RollRecord::start(StartRoll {
        key: key(),
        master: Some(OLD.as_bytes().to_vec()),
        rolling: NEW.as_bytes().to_vec(),
        nodes: vec![NodeId("b".into()), NodeId("a".into())],
        step_timeout_ms: 60_000,
        health: HealthSettings { window_ms: 0, ..HealthSettings::default() },
        now_ms: crate::base::clock::now_ms(),
        revision: Revision::zero(),
    })
    .expect("starts");
    records.0.lock().expect("lock").insert(key(), roll);
    let runtime_b = Arc::new(Runtime::new());
    install(&runtime_b, OLD);
    let mut publisher = HealthPublisher::new(
        NodeId("b".into()),
        records.clone(),
        Arc::new(QuietRuntime(runtime_b.clone())),
        Arc::new(GossipBoard::new(b.clone())),
        Duration::from_secs(5),
        system_clock(),
        vec![],
    );
    let main = RollWorker::new(records.clone(), Arc::new(GossipBoard::new(a.clone())), Duration::from_secs(5), system_clock());

    eprintln!("[gossip-step] b publishes the master's hash: the main waits on b, pending");
    publisher.publish_once().await.expect("published");
    let deadline = Instant::now() + WAIT;
    loop {
        let outcomes = main.tick_once().await.expect("tick");
        let stored = records.0.lock().expect("lock").get(&key()).cloned().expect("record");
        match &outcomes[0].decision {
            Decision::Wait { reason: crate::control::rolling::HealthFailure::NotRunningRolling { running: Some(_) }, .. } => {
                assert_eq!(stored.nodes[0].state, NodeState::Pending);
                break;
            }
            // b's report has not reached a yet.
            Decision::Wait { reason: crate::control::rolling::HealthFailure::NoReport, .. } => {}
            other => panic!("unexpected decision {other:?}"),
        }
        assert!(Instant::now() < deadline, "b's report never reached the main");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    eprintln!("[gossip-step] b's scan applies the rolling content: healthy, the main advances to a");
    install(&runtime_b, NEW);
    publisher.publish_once().await.expect("published");
    let deadline = Instant::now() + WAIT;
    loop {
        let outcomes = main.tick_once().await.expect("tick");
        if outcomes[0].decision == (Decision::Advance { from: NodeId("b".into()), to: NodeId("a".into()) }) {
            break;
        }
        assert!(Instant::now() < deadline, "never advanced; last {outcomes:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = records.0.lock().expect("lock").get(&key()).cloned().expect("record");
    assert_eq!(stored.index, 1);
    assert!(matches!(stored.nodes[0].state, NodeState::Healthy { .. }));

    a.shutdown().await.expect("a stops");
    b.shutdown().await.expect("b stops");
}

#[tokio::test]
async fn the_publisher_wakes_on_a_runtime_change_not_only_on_its_tick() {
    let records = Arc::new(SharedRecords::default());
    let mut roll = RollRecord::start(StartRoll {
        key: key(),
        master: Some(OLD.as_bytes().to_vec()),
        rolling: NEW.as_bytes().to_vec(),
        nodes: vec![NodeId("n".into())],
        step_timeout_ms: 60_000,
        health: HealthSettings::default(),
        now_ms: 0,
        revision: Revision::zero(),
    })
    .expect("starts");
    roll.index = 0;
    records.0.lock().expect("lock").insert(key(), roll);
    let runtime = Arc::new(Runtime::new());
    let board = Arc::new(LocalBoard::new(NodeId("n".into())));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut workers = crate::base::worker::WorkerRunner::new(stop.clone());
    // A tick of an hour: only the first round and the runtime's change can publish.
    workers.spawn(HealthPublisher::new(
        NodeId("n".into()),
        records,
        Arc::new(QuietRuntime(runtime.clone())),
        board.clone(),
        Duration::from_secs(3600),
        system_clock(),
        vec![runtime.subscribe()],
    ));
    let running_hash = async || match board.observations(&key()).await.get(&NodeId("n".into())) {
        Some(Observation::Report(report)) => Some(report.running_hash.clone()),
        _ => None,
    };
    let deadline = Instant::now() + WAIT;
    while running_hash().await != Some(None) {
        assert!(Instant::now() < deadline, "no first report");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    install(&runtime, NEW);
    while running_hash().await != Some(Some(ContentHash::of(NEW.as_bytes()))) {
        assert!(Instant::now() < deadline, "the runtime change did not wake the publisher");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = workers.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty());
}
