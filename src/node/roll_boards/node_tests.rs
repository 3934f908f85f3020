//! The roller wired into a real node: a clustered in-memory node publishes its roll health in
//! gossip for a roll record in its store, from its runtime, without anything else asking.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use crate::compiler::{DslKind, compile};
use crate::base::ids::{Catalog, ContentHash, NodeId, Revision, RuleKey, RuleName};
use crate::node::testing::NodeBuilder;
use crate::node::{BusWiring, ClusterWiring, NodeSettings, RunningNode};
use crate::control::rolling::{HealthReport, HealthSettings, RollRecord, StartRoll, codec};
use crate::control::runtime::{LoaderKind, loaded_rule};
use crate::store::kv::{KvEngine, MemKv};

const WAIT: Duration = Duration::from_secs(15);
const NEW: &str = "metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";

async fn report_of(node: &RunningNode, key: &RuleKey, id: &NodeId) -> Option<HealthReport> {
    let cluster = node.state.cluster.as_ref().expect("clustered");
    cluster.membership.roll_health(key).await.into_iter().find(|h| &h.node == id).and_then(|h| h.report)
}

#[tokio::test]
async fn a_node_publishes_its_roll_health_from_its_store_and_runtime() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let admin = listener.local_addr().expect("addr").to_string();
    let id = NodeId("n1".into());
    let wiring = ClusterWiring {
        membership: MembershipSettings::for_test(id.clone(), SocketAddr::from(([127, 0, 0, 1], 51))),
        gossip: GossipTransport::InMemory(GossipNetwork::new()),
        bus: BusWiring::Memory { network: crate::cluster::bus::MemNetwork::new() },
        replication: crate::cluster::replication::ReplicationSettings::default(),
        admin_advertise: admin,
    };
    let settings = NodeSettings { node_id: Some(id.0.clone()), ..NodeSettings::for_test() };
    let kv: Arc<dyn KvEngine> = Arc::new(MemKv::new());
    let node = NodeBuilder::new(settings).start_clustered(kv, listener, wiring).await.expect("node starts");
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("vm").expect("name"));

    eprintln!("[node-roller] a roll of vm reaches n1 (index 0): its scan loads the rolling content, the report names it");
    let roll = RollRecord::start(StartRoll {
        key: key.clone(),
        master: None,
        rolling: NEW.as_bytes().to_vec(),
        nodes: vec![id.clone()],
        step_timeout_ms: 60_000,
        health: HealthSettings::default(),
        now_ms: crate::base::clock::now_ms(),
        revision: Revision::zero(),
    })
    .expect("starts");
    node.state.store.put_roll(&key, codec::encode(&roll).expect("encodes")).await.expect("put");
    let deadline = Instant::now() + WAIT;
    let rolling_hash = ContentHash::of(NEW.as_bytes());
    loop {
        let report = report_of(&node, &key, &id).await;
        if report.as_ref().is_some_and(|r| r.running_hash.as_ref() == Some(&rolling_hash) && r.dispatch_running) {
            break;
        }
        assert!(Instant::now() < deadline, "no report naming the rolling content in gossip: {report:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    eprintln!("[node-roller] the rolling content is applied: the report names its hash");
    let compiled = compile(DslKind::Mal, NEW.as_bytes()).expect("compiles");
    let hash = ContentHash::of(NEW.as_bytes());
    node.state.runtime.install(&key, loaded_rule(compiled, hash.clone(), None, LoaderKind::Runtime), Default::default());
    loop {
        let report = report_of(&node, &key, &id).await;
        if report.as_ref().is_some_and(|r| r.running_hash.as_ref() == Some(&hash) && r.dispatch_running) {
            break;
        }
        assert!(Instant::now() < deadline, "the report never named the rolling hash; last {report:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    eprintln!("[node-roller] the roll's record goes away: so does the report");
    node.state.store.delete_roll(&key).await.expect("delete");
    while report_of(&node, &key, &id).await.is_some() {
        assert!(Instant::now() < deadline, "the report stayed after the roll ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.shutdown().await;
}
