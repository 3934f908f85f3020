//! The control side of rolling changes (issue 15) on in-process nodes: a roll started through
//! the admin API on a 3-node cluster (gossip and bus twins), each node running the content the
//! record assigns it as the index moves (driven here with `Workflow::put_roll`, as the main's roll
//! worker does), 409 on normal writes while a roll holds the file, rollback, force-commit and
//! completion landing the rolling content as the entry everywhere, a record surviving a change
//! of main, and every 4xx of a normal write on a rolling start. Every wait is on a predicate
//! with a bound; each scenario is a sequence of logged phases.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::base::ids::{Catalog, ContentHash, NodeId, RuleKey, RuleName};
use hotrule::node::NodeSettings;
use hotrule::node::testing::NodeBuilder;
use hotrule::control::rolling::{NodeState, RollRecord, RollState};
use hotrule::control::workflow::RollError;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);
const NAME: &str = "rolled";

/// A rule whose versions differ in their rate window only (a filter-only change).
fn rule(step: u32) -> String {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: rc\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{step}M')\n"
    )
}

fn hash(content: &str) -> ContentHash {
    ContentHash::of(content.as_bytes())
}

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse(NAME).expect("name"))
}

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

const ROLLING: [(&str, &str); 3] = [("rollout", "rolling"), ("healthWindow", "1s"), ("stepTimeout", "1m")];

struct Cluster {
    nodes: Vec<Option<TestNode>>,
    bus: MemNetwork,
    _gossip: GossipNetwork,
}

impl Cluster {
    /// Three nodes whose roll index moves only by hand (`put_roll`): the main's roll worker is off.
    async fn start(base_port: u16) -> Cluster {
        Cluster::start_with(base_port, false).await
    }

    async fn start_with(base_port: u16, roll_worker: bool) -> Cluster {
        let gossip = GossipNetwork::new();
        let bus = MemNetwork::new();
        let addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], base_port + i as u16));
        let mut nodes = Vec::new();
        for i in 1..=3usize {
            let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), addr(i));
            membership.seeds = (1..=3).filter(|j| *j != i).map(|j| addr(j).to_string()).collect();
            let settings = NodeSettings { node_id: Some(format!("n{i}")), ..NodeSettings::for_test() };
            let node = NodeBuilder::new(settings).roll_worker(roll_worker);
            nodes.push(Some(TestNode::clustered_in_memory(node, membership, &gossip, &bus).await));
        }
        let cluster = Cluster { nodes, bus, _gossip: gossip };
        cluster.wait_agreement(&[1, 2, 3], 1).await;
        cluster
    }

    fn node(&self, i: usize) -> &TestNode {
        self.nodes[i - 1].as_ref().expect("node is running")
    }

    async fn wait_agreement(&self, live: &[usize], main: usize) {
        for &i in live {
            wait_until(WAIT, &format!("n{i} sees main n{main} and {} live members", live.len()), || async {
                let status =
                    self.node(i).client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or(Value::Null);
                let live_count = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
                status["main"] == format!("n{main}") && live_count == live.len()
            })
            .await;
        }
    }

    /// The content hash node `i` runs for the file.
    fn running(&self, i: usize) -> Option<ContentHash> {
        self.node(i).node.state.runtime.get(&key()).and_then(|s| s.loaded).map(|l| l.content_hash)
    }

    async fn wait_running(&self, i: usize, content: &str) {
        let want = hash(content);
        wait_until(WAIT, &format!("n{i} runs {}", &want.0[..8]), || async { self.running(i) == Some(want.clone()) }).await;
    }

    async fn stored_roll(&self, i: usize) -> Option<RollRecord> {
        self.node(i).node.state.workflow.stored_roll(&key()).await.expect("roll record readable")
    }

    /// Waits until node `i` holds a record in `state` at `revision` (any revision when `None`).
    async fn wait_record(&self, i: usize, state: &str, revision: Option<&hotrule::base::ids::Revision>) -> RollRecord {
        wait_until(WAIT, &format!("n{i} holds the record {state}"), || async {
            self.stored_roll(i)
                .await
                .is_some_and(|r| r.state.label() == state && revision.is_none_or(|rev| r.revision == *rev))
        })
        .await;
        self.stored_roll(i).await.expect("held")
    }

    async fn entry_hash(&self, i: usize) -> Option<ContentHash> {
        let entry = self.node(i).node.state.store.get_entry(&key()).await.expect("entry readable");
        entry.filter(|e| e.is_live()).map(|e| e.content_hash)
    }

    async fn stop(&mut self, i: usize) {
        if let Some(node) = self.nodes[i - 1].take() {
            let TestNode { node, client, kv } = node;
            drop((client, kv));
            node.shutdown().await;
        }
    }

    async fn shutdown(mut self) {
        for i in (1..=3).rev() {
            self.stop(i).await;
        }
    }
}

fn expect(got: (u16, Value), code: u16, status: &str) -> Value {
    assert_eq!((got.0, got.1["applyStatus"].as_str().unwrap_or("")), (code, status), "{}", got.1);
    got.1
}

/// The record moved one node on: the node at the index proven healthy, the next acting.
fn stepped(record: &RollRecord) -> RollRecord {
    let mut next = record.clone();
    let index = next.index as usize;
    next.nodes[index].state = NodeState::Healthy { at_ms: next.updated_ms + 1 };
    next.index += 1;
    next.step_started_ms = next.updated_ms + 1;
    next.updated_ms += 1;
    next
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_moves_node_by_node_refuses_normal_writes_and_force_commits_everywhere() {
    let s = "roll-force-commit";
    let cluster = Cluster::start(43_000).await;
    let (v1, v2, v3) = (rule(1), rule(2), rule(3));
    phase(s, "v1 committed everywhere by a normal write");
    expect(cluster.node(2).push("otel-rules", NAME, &v1, &[]).await, 200, "structural_applied");
    for i in 1..=3 {
        cluster.wait_running(i, &v1).await;
    }

    phase(s, "a rolling start on n3 is forwarded to the main and answered with the view");
    let json = expect(cluster.node(3).push("otel-rules", NAME, &v2, &ROLLING).await, 200, "roll_started");
    let order: Vec<&str> = json["roll"]["nodes"].as_array().expect("nodes").iter().filter_map(|n| n["node"].as_str()).collect();
    assert_eq!(order, vec!["n2", "n3", "n1"], "peers in byte order, the main last: {json}");
    assert_eq!((json["roll"]["index"].as_u64(), json["roll"]["state"].as_str()), (Some(0), Some("in_progress")));
    let started = cluster.wait_record(1, "in_progress", None).await;
    for i in 2..=3 {
        cluster.wait_record(i, "in_progress", Some(&started.revision)).await;
    }

    phase(s, "only the node at the index runs the rolling content; the entry is untouched");
    cluster.wait_running(2, &v2).await;
    for i in [1, 3] {
        assert_eq!(cluster.running(i), Some(hash(&v1)), "n{i} runs the master");
    }
    for i in 1..=3 {
        assert_eq!(cluster.entry_hash(i).await, Some(hash(&v1)), "n{i}'s entry is the master");
    }

    phase(s, "normal writes and a second roll answer 409 roll_in_progress, on the main and through a peer");
    for i in [1, 2] {
        let json = expect(cluster.node(i).push("otel-rules", NAME, &v3, &[]).await, 409, "roll_in_progress");
        assert!(json["message"].as_str().is_some_and(|m| m.contains("in_progress") && m.contains("node 1 of 3: n2")), "{json}");
        expect(cluster.node(i).push("otel-rules", NAME, &v3, &ROLLING).await, 409, "roll_in_progress");
        let pairs = [("catalog", "otel-rules"), ("name", NAME)];
        expect(cluster.node(i).post("/runtime/rule/inactivate", &pairs).await, 409, "roll_in_progress");
        expect(cluster.node(i).post("/runtime/rule/delete", &pairs).await, 409, "roll_in_progress");
    }

    phase(s, "the worker seam: put_roll moves the index on the main only, as a compare-and-set");
    let workflow = |i: usize| cluster.node(i).node.state.workflow.clone();
    let held = workflow(1).roll_records().await.expect("records");
    assert_eq!(held.len(), 1);
    let next = stepped(&held[0]);
    assert!(matches!(workflow(2).put_roll(next.clone()).await, Err(RollError::NotMain)), "only the main writes");
    // n3 misses the step's notice (every call between n1 and n3 is lost): it gets the record
    // from the periodic sync's roll pull once the link works again.
    let (n1, n3) = (NodeId("n1".into()), NodeId("n3".into()));
    cluster.bus.drop_requests(&n1, &n3, 1.0);
    workflow(1).put_roll(next.clone()).await.expect("the main puts the step");
    assert!(
        matches!(workflow(1).put_roll(next).await, Err(RollError::Moved { .. })),
        "a record read before the last put is refused"
    );
    let step = cluster.wait_record(1, "in_progress", None).await;
    assert_eq!(step.index, 1);
    cluster.wait_record(2, "in_progress", Some(&step.revision)).await;
    assert_eq!(cluster.stored_roll(3).await.map(|r| r.index), Some(0), "n3 missed the notice");
    let fetched_before = cluster.bus.delivered(&n3, &n1, "fetch_rolls");
    cluster.bus.drop_requests(&n1, &n3, 0.0);
    cluster.wait_record(3, "in_progress", Some(&step.revision)).await;
    assert!(cluster.bus.delivered(&n3, &n1, "fetch_rolls") > fetched_before, "n3 pulled the newer record");
    cluster.wait_running(3, &v2).await;
    assert_eq!(cluster.running(2), Some(hash(&v2)), "a node behind the index keeps the rolling content");
    assert_eq!(cluster.running(1), Some(hash(&v1)), "the main, last, still runs the master");

    phase(s, "force-commit through a peer: the rolling content is the committed entry everywhere");
    let pairs = [("catalog", "otel-rules"), ("name", NAME)];
    let json = expect(cluster.node(2).post("/runtime/rule/force-commit-rolling", &pairs).await, 200, "roll_force_committed");
    assert_eq!((json["roll"]["state"].as_str(), json["roll"]["percentDone"].as_u64()), (Some("force_committed"), Some(100)));
    assert_eq!(json["roll"]["index"].as_u64(), Some(1), "the index stays where the roll got to");
    let done = cluster.wait_record(1, "force_committed", None).await;
    for i in 1..=3 {
        cluster.wait_record(i, "force_committed", Some(&done.revision)).await;
        cluster.wait_running(i, &v2).await;
        wait_until(WAIT, &format!("n{i}'s entry is the rolling content"), || async {
            cluster.entry_hash(i).await == Some(hash(&v2))
        })
        .await;
    }

    phase(s, "a finished roll refuses rollback and force-commit; 404 without a roll; normal writes pass again");
    expect(cluster.node(3).post("/runtime/rule/force-commit-rolling", &pairs).await, 409, "roll_finished");
    expect(cluster.node(1).post("/runtime/rule/rollback-rolling", &pairs).await, 409, "roll_finished");
    let other = [("catalog", "otel-rules"), ("name", "never-rolled")];
    expect(cluster.node(2).post("/runtime/rule/rollback-rolling", &other).await, 404, "not_found");
    expect(cluster.node(3).push("otel-rules", NAME, &v3, &[]).await, 200, "filter_only_applied");
    for i in 1..=3 {
        cluster.wait_running(i, &v3).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_survives_a_main_change_rolls_back_and_completes_on_the_new_main() {
    let s = "roll-failover";
    let mut cluster = Cluster::start(43_100).await;
    let (v1, v2, v4) = (rule(1), rule(2), rule(4));
    expect(cluster.node(1).push("otel-rules", NAME, &v1, &[]).await, 200, "structural_applied");
    for i in 1..=3 {
        cluster.wait_running(i, &v1).await;
    }

    phase(s, "a roll, one step in: n2 and n3 run the rolling content, the main n1 the master");
    expect(cluster.node(2).push("otel-rules", NAME, &v2, &ROLLING).await, 200, "roll_started");
    let started = cluster.wait_record(1, "in_progress", None).await;
    cluster.node(1).node.state.workflow.put_roll(stepped(&started)).await.expect("step");
    let step = cluster.wait_record(1, "in_progress", None).await;
    assert_eq!(step.index, 1);
    for i in 2..=3 {
        cluster.wait_record(i, "in_progress", Some(&step.revision)).await;
        cluster.wait_running(i, &v2).await;
    }

    phase(s, "the main stops; n2, the new main, holds the record and goes on from its index");
    cluster.stop(1).await;
    cluster.wait_agreement(&[2, 3], 2).await;
    let records = cluster.node(2).node.state.workflow.roll_records().await.expect("records");
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].index, &records[0].state, &records[0].revision), (1, &RollState::InProgress, &step.revision));
    expect(cluster.node(3).push("otel-rules", NAME, &v4, &[]).await, 409, "roll_in_progress");

    phase(s, "rollback through n3 (forwarded to n2): every node returns to the master");
    let pairs = [("catalog", "otel-rules"), ("name", NAME)];
    let json = expect(cluster.node(3).post("/runtime/rule/rollback-rolling", &pairs).await, 200, "roll_rolled_back");
    assert_eq!(json["roll"]["percentDone"].as_u64(), Some(0), "{json}");
    let back = cluster.wait_record(2, "rolled_back", None).await;
    cluster.wait_record(3, "rolled_back", Some(&back.revision)).await;
    for i in 2..=3 {
        cluster.wait_running(i, &v1).await;
        assert_eq!(cluster.entry_hash(i).await, Some(hash(&v1)), "a rollback changes no entry");
    }

    phase(s, "a new roll replaces the finished record; complete_roll lands it as the entry");
    let json = expect(cluster.node(3).push("otel-rules", NAME, &v4, &ROLLING).await, 200, "roll_started");
    let order: Vec<&str> = json["roll"]["nodes"].as_array().expect("nodes").iter().filter_map(|n| n["node"].as_str()).collect();
    assert_eq!(order, vec!["n3", "n2"], "the live members, the new main last");
    cluster.wait_running(3, &v4).await;
    let completed = cluster.node(2).node.state.workflow.complete_roll(&key()).await.expect("complete");
    assert_eq!((completed.state.label(), completed.index), ("completed", 2));
    cluster.wait_record(3, "completed", Some(&completed.revision)).await;
    for i in 2..=3 {
        cluster.wait_running(i, &v4).await;
        wait_until(WAIT, &format!("n{i}'s entry is the rolled content"), || async {
            cluster.entry_hash(i).await == Some(hash(&v4))
        })
        .await;
    }
    assert!(matches!(
        cluster.node(2).node.state.workflow.complete_roll(&key()).await,
        Err(RollError::Finished(_))
    ));
    cluster.shutdown().await;
}

const MAL: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: rs
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

#[tokio::test]
async fn a_rolling_start_answers_every_4xx_of_a_normal_write_and_a_lone_node_rolls_itself() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let rolling = |extra: &[(&'static str, &'static str)]| {
        let mut pairs: Vec<(&str, &str)> = vec![("rollout", "rolling")];
        pairs.extend_from_slice(extra);
        pairs
    };
    let post = |pairs: Vec<(&'static str, &'static str)>, body: Vec<u8>| {
        let node = &node;
        async move {
            let reply = node
                .client
                .post(&hotrule::api::client::with_query("/runtime/rule/addOrUpdate", &pairs), body)
                .await
                .expect("post");
            (reply.status.as_u16(), reply.json().unwrap_or_default())
        }
    };
    // (query, body, HTTP status, applyStatus)
    type Case = (Vec<(&'static str, &'static str)>, Vec<u8>, u16, &'static str);
    let broken = MAL.replace("sum(['svc'])", "sum(['svc']");
    let cases: Vec<Case> = vec![
        (rolling(&[("name", "a")]), MAL.into(), 400, "missing_catalog"),
        (rolling(&[("catalog", "oal"), ("name", "a")]), MAL.into(), 400, "invalid_catalog"),
        (rolling(&[("catalog", "otel-rules")]), MAL.into(), 400, "missing_name"),
        (rolling(&[("catalog", "otel-rules"), ("name", "../a")]), MAL.into(), 400, "invalid_name"),
        (rolling(&[("catalog", "otel-rules"), ("name", "a")]), b"  \n".to_vec(), 400, "empty_body"),
        (rolling(&[("catalog", "otel-rules"), ("name", "a")]), broken.into_bytes(), 400, "compile_failed"),
        (rolling(&[("catalog", "otel-rules"), ("name", "a")]), vec![b'#'; 1_000_001], 413, "payload_too_large"),
        (vec![("catalog", "otel-rules"), ("name", "a"), ("rollout", "canary")], MAL.into(), 400, "invalid_parameter"),
        (vec![("catalog", "otel-rules"), ("name", "a"), ("stepTimeout", "5m")], MAL.into(), 400, "invalid_parameter"),
        (rolling(&[("catalog", "otel-rules"), ("name", "a"), ("stepTimeout", "soon")]), MAL.into(), 400, "invalid_parameter"),
        (rolling(&[("catalog", "otel-rules"), ("name", "a"), ("healthChecks", "cpu")]), MAL.into(), 400, "invalid_parameter"),
        (
            rolling(&[("catalog", "otel-rules"), ("name", "a"), ("stepTimeout", "10s"), ("healthWindow", "30s")]),
            MAL.into(),
            400,
            "invalid_parameter",
        ),
    ];
    for (pairs, body, code, status) in cases {
        let what = format!("{pairs:?}");
        let got = post(pairs, body).await;
        assert_eq!((got.0, got.1["applyStatus"].as_str().unwrap_or("")), (code, status), "{what}: {}", got.1);
    }
    assert!(node.node.state.store.list_rolls().await.expect("rolls").is_empty(), "no refused start left a record");

    // The guardrail, ownership and no-change answers of a normal write, on a file with an entry.
    expect(node.push("otel-rules", "a", MAL, &[]).await, 200, "structural_applied");
    expect(node.push("otel-rules", "a", MAL, &[("rollout", "rolling")]).await, 200, "no_change");
    let rescoped = MAL.replace("service(['svc'], Layer.GENERAL)", "endpoint(['svc'], ['ep'], Layer.GENERAL)");
    expect(node.push("otel-rules", "a", &rescoped, &[("rollout", "rolling")]).await, 409, "storage_change_requires_explicit_approval");
    let json = expect(
        node.push("otel-rules", "a", &rescoped, &[("rollout", "rolling"), ("allowStorageChange", "true")]).await,
        400,
        "invalid_parameter",
    );
    assert!(json["message"].as_str().is_some_and(|m| m.contains("storage identity")), "{json}");
    expect(node.push("otel-rules", "thief", MAL, &[("rollout", "rolling")]).await, 409, "ownership_conflict");
    assert!(node.node.state.store.list_rolls().await.expect("rolls").is_empty());

    // A lone node rolls onto itself: it is the whole list, so it runs the rolling content at once.
    let filtered = MAL.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    let json = expect(node.push("otel-rules", "a", &filtered, &[("rollout", "rolling"), ("healthChecks", "none")]).await, 200, "roll_started");
    assert_eq!(json["roll"]["nodes"].as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(json["roll"]["healthWindowMs"].as_u64(), Some(30_000));
    let a = RuleKey::new(Catalog::OtelRules, RuleName::parse("a").expect("name"));
    wait_until(WAIT, "the lone node runs the rolling content", || async {
        node.node.state.runtime.get(&a).and_then(|s| s.loaded).is_some_and(|l| l.content_hash == hash(&filtered))
    })
    .await;
    let stored = node.node.state.store.get_entry(&a).await.expect("entry").expect("present");
    assert_eq!(stored.content_hash, hash(MAL), "the entry stays the master");
}

#[tokio::test]
async fn the_cli_starts_a_roll_shows_it_and_force_commits_it() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let server = format!("http://{}", node.node.admin_addr);
    let env = [("HOTRULE_SERVER", server.as_str())];
    let dir = tempfile::tempdir().expect("tempdir");
    let (v1, v2) = (dir.path().join("v1.yaml"), dir.path().join("v2.yaml"));
    std::fs::write(&v1, MAL).expect("write");
    std::fs::write(&v2, MAL.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')")).expect("write");
    let (v1, v2) = (v1.display().to_string(), v2.display().to_string());
    let push = ["rule", "push", "--catalog", "otel-rules", "--name", "cli"];

    let (code, out, err) = harness::hotrule_cli(&[&push[..], &[v1.as_str()]].concat(), &env).await;
    assert_eq!(code, 0, "{out}{err}");
    let rolling = [&push[..], &["--rolling", "--step-timeout", "2m", "--health-window", "10s", v2.as_str()]].concat();
    let (code, out, err) = harness::hotrule_cli(&rolling, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("roll_started otel-rules/cli"), "{out}");
    assert!(out.contains("  0% in_progress"), "the roll is drawn: {out}");
    let (code, out, err) = harness::hotrule_cli(&[&push[..], &[v1.as_str()]].concat(), &env).await;
    assert_eq!(code, 1, "a normal push to a rolling file is refused: {out}{err}");
    assert!(err.contains("409 roll_in_progress"), "{err}");

    let end = |how: &'static str| ["rule", "roll", how, "--catalog", "otel-rules", "--name", "cli"];
    let (code, out, err) = harness::hotrule_cli(&end("force-commit"), &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("roll_force_committed otel-rules/cli") && out.contains("100% force_committed"), "{out}");
    let (code, out, err) = harness::hotrule_cli(&end("rollback"), &env).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("409 roll_finished"), "{err}");
    let usage = harness::hotrule_cli(&[&push[..], &["--step-timeout", "2m", v1.as_str()]].concat(), &env).await;
    assert_eq!(usage.0, 2, "--step-timeout needs --rolling: {usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_s_roll_worker_takes_a_healthy_roll_node_by_node_to_completion() {
    let s = "roll-worker";
    let cluster = Cluster::start_with(43_300, true).await;
    let (v1, v2) = (rule(1), rule(2));
    expect(cluster.node(1).push("otel-rules", NAME, &v1, &[]).await, 200, "structural_applied");
    for i in 1..=3 {
        cluster.wait_running(i, &v1).await;
    }

    phase(s, "a rolling start: the worker advances on each node's health report (1 s window, no traffic)");
    expect(cluster.node(2).push("otel-rules", NAME, &v2, &ROLLING).await, 200, "roll_started");
    // While the roll is in progress no node past the index runs the rolling content.
    let seen_index = std::sync::Mutex::new(Vec::new());
    wait_until(WAIT, "the roll completes", || async {
        let Some(record) = cluster.stored_roll(1).await else { return false };
        let index = record.index as usize;
        if record.state == RollState::InProgress {
            for (position, node) in record.nodes.iter().enumerate().skip(index + 1) {
                let i: usize = node.node.0.trim_start_matches('n').parse().expect("node number");
                assert_ne!(cluster.running(i), Some(hash(&v2)), "{} at position {position} runs the rolling content past the index {index}", node.node);
            }
        }
        let mut seen = seen_index.lock().expect("seen");
        if seen.last() != Some(&index) {
            seen.push(index);
        }
        record.state == RollState::Completed
    })
    .await;
    let seen_index = seen_index.into_inner().expect("seen");
    assert!(seen_index.len() >= 2, "the index was seen moving: {seen_index:?}");
    let done = cluster.stored_roll(1).await.expect("record");
    assert!(done.nodes.iter().all(|n| n.state.label() == "healthy"), "every node proved healthy: {done:?}");

    phase(s, "the rolling content is the committed entry everywhere, and normal writes pass again");
    for i in 1..=3 {
        wait_until(WAIT, &format!("n{i} holds v2 as the entry"), || async { cluster.entry_hash(i).await == Some(hash(&v2)) }).await;
        cluster.wait_running(i, &v2).await;
    }
    expect(cluster.node(3).push("otel-rules", NAME, &rule(3), &[]).await, 200, "filter_only_applied");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_node_completes_its_own_roll_without_waiting_for_a_periodic_scan() {
    // An hour between periodic scans: only the stored roll record can wake the scan that loads
    // the rolling content (the main writes the record itself; no notice pokes it).
    let mut settings = NodeSettings::for_test();
    settings.scan.interval = Duration::from_secs(3600);
    let (node, _kv) = TestNode::in_memory(NodeBuilder::new(settings).roll_worker(true)).await;
    let (v1, v2) = (rule(1), rule(2));
    expect(node.push("otel-rules", NAME, &v1, &[]).await, 200, "structural_applied");
    expect(node.push("otel-rules", NAME, &v2, &ROLLING).await, 200, "roll_started");
    wait_until(WAIT, "the lone node's roll completes", || async {
        let record = node.node.state.workflow.stored_roll(&key()).await.expect("readable");
        record.is_some_and(|r| r.state == RollState::Completed)
    })
    .await;
    let entry = node.node.state.store.get_entry(&key()).await.expect("readable").expect("an entry");
    assert_eq!(entry.content_hash, hash(&v2), "the rolling content is the committed entry");
}
