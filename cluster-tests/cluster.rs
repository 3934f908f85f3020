//! In-process cluster scenarios: three nodes on chitchat's in-memory transport and the
//! in-memory bus (real encoding, cuttable links), each with its own store, talking through
//! their real admin HTTP APIs on ephemeral ports. Every wait is on a predicate with a bound;
//! each scenario is a sequence of logged phases.

mod harness;
#[path = "cluster/prepare_commit.rs"]
mod prepare_commit;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::bus::messages::{BusRequest, BusResponse, ForwardOp};
use hotrule::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use hotrule::base::ids::{Catalog, NodeId, RuleKey, RuleName};
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{BusWiring, ClusterWiring, NodeSettings};
use hotrule::cluster::replication::ReplicationSettings;
use hotrule::store::kv::{KvEngine, MemKv};

const WAIT: Duration = Duration::from_secs(20);

fn rule(prefix: &str, step: u32) -> String {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{step}M')\n"
    )
}

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40_000 + i as u16))
}

fn node_id(i: usize) -> NodeId {
    NodeId(format!("n{i}"))
}

struct TestCluster {
    gossip: GossipNetwork,
    bus: MemNetwork,
    stores: Vec<Arc<MemKv>>,
    nodes: Vec<Option<TestNode>>,
    size: usize,
    replication: ReplicationSettings,
}

impl TestCluster {
    async fn start(size: usize) -> TestCluster {
        TestCluster::start_with(size, 0).await
    }

    /// A cluster whose main waits for `commit_replicas` peer confirmations on every commit.
    async fn start_with(size: usize, commit_replicas: usize) -> TestCluster {
        let replication = ReplicationSettings { commit_replicas, ..TestCluster::replication() };
        TestCluster::start_tuned(size, replication).await
    }

    /// As [`TestCluster::start_with`], with notices carrying entries up to `notice_entry_limit`.
    async fn start_with_notice_limit(size: usize, commit_replicas: usize, notice_entry_limit: usize) -> TestCluster {
        let replication = ReplicationSettings { commit_replicas, notice_entry_limit, ..TestCluster::replication() };
        TestCluster::start_tuned(size, replication).await
    }

    fn replication() -> ReplicationSettings {
        ReplicationSettings { sync_timeout: Duration::from_secs(2), ..ReplicationSettings::default() }
    }

    /// A cluster whose nodes replicate and forward with `replication`.
    async fn start_tuned(size: usize, replication: ReplicationSettings) -> TestCluster {
        let mut cluster = TestCluster {
            gossip: GossipNetwork::new(),
            bus: MemNetwork::new(),
            stores: (0..size).map(|_| Arc::new(MemKv::new())).collect(),
            nodes: (0..size).map(|_| None).collect(),
            size,
            replication,
        };
        for i in 1..=size {
            cluster.start_node(i).await;
        }
        cluster.wait_agreement(&(1..=size).collect::<Vec<_>>(), 1).await;
        cluster
    }

    async fn start_node(&mut self, i: usize) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let admin = listener.local_addr().expect("addr").to_string();
        let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
        membership.seeds = (1..=self.size).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let wiring = ClusterWiring {
            membership,
            gossip: GossipTransport::InMemory(self.gossip.clone()),
            bus: BusWiring::Memory { network: self.bus.clone() },
            replication: self.replication.clone(),
            admin_advertise: admin.clone(),
        };
        let settings = NodeSettings { node_id: Some(format!("n{i}")), ..NodeSettings::for_test() };
        let kv: Arc<dyn KvEngine> = self.stores[i - 1].clone();
        let node = NodeBuilder::new(settings).start_clustered(kv.clone(), listener, wiring).await.expect("node starts");
        let client = hotrule::api::client::AdminClient::new(&admin, None).expect("client");
        self.nodes[i - 1] = Some(TestNode { node, client, kv });
    }

    async fn stop_node(&mut self, i: usize) {
        if let Some(node) = self.nodes[i - 1].take() {
            let TestNode { node, client, kv } = node;
            drop((client, kv));
            node.shutdown().await;
        }
    }

    fn node(&self, i: usize) -> &TestNode {
        self.nodes[i - 1].as_ref().expect("node is running")
    }

    async fn status(&self, i: usize) -> serde_json::Value {
        self.node(i).client.get("/cluster/status").await.expect("status").json().expect("json")
    }

    /// Waits until every node in `live` sees exactly `live` as live members and `main` as main.
    async fn wait_agreement(&self, live: &[usize], main: usize) {
        for &i in live {
            wait_until(WAIT, &format!("n{i} sees main n{main} and {} live members", live.len()), || async {
                let status = self.status(i).await;
                let live_count = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
                status["main"] == format!("n{main}") && live_count == live.len()
            })
            .await;
        }
    }

    /// Waits until node `i` stores and runs `content` for `otel-rules/name`.
    async fn wait_rule(&self, i: usize, name: &str, content: &str) {
        let hash = hotrule::base::ids::ContentHash::of(content.as_bytes()).0;
        wait_until(WAIT, &format!("n{i} runs {name} at {}", &hash[..8]), || async {
            self.node(i).row("otel-rules", name).await.is_some_and(|r| {
                r["contentHash"] == hash.as_str() && r["appliedContentHash"] == hash.as_str() && r["localState"] == "RUNNING"
            })
        })
        .await;
    }

    /// Waits, up to `bound`, until every node in `side` sees `main` as main; gives up quietly
    /// (chaos rounds go on either way; convergence is checked at the end).
    async fn settle(&self, side: &[usize], main: usize, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            let mut agreed = true;
            for &i in side {
                agreed &= self.status(i).await["main"] == format!("n{main}");
            }
            if agreed {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    async fn partition(&self, side_a: &[usize], side_b: &[usize]) {
        for &a in side_a {
            for &b in side_b {
                self.gossip.cut(gossip_addr(a), gossip_addr(b)).await;
                self.bus.cut(&node_id(a), &node_id(b));
            }
        }
    }

    async fn heal(&self, side_a: &[usize], side_b: &[usize]) {
        for &a in side_a {
            for &b in side_b {
                self.gossip.heal(gossip_addr(a), gossip_addr(b)).await;
                self.bus.heal(&node_id(a), &node_id(b));
            }
        }
    }

    async fn shutdown(mut self) {
        for i in 1..=self.size {
            self.stop_node(i).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_commit_reaches_every_node_and_writes_anywhere_are_forwarded() {
    let s = "healthy";
    let cluster = TestCluster::start(3).await;
    phase(s, "structural write on the main n1");
    let started = Instant::now();
    let (code, json) = cluster.node(1).push("otel-rules", "a", &rule("ha", 1), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "a", &rule("ha", 1)).await;
    }
    phase(s, &format!("visible on every node {:?} after the 200", started.elapsed()));

    phase(s, "a write sent to n3 is forwarded to the main and answered with the main's answer");
    let (code, json) = cluster.node(3).push("otel-rules", "a", &rule("ha", 2), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("filter_only_applied")), "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "a", &rule("ha", 2)).await;
    }
    let (code, json) = cluster.node(2).push("otel-rules", "b", "metricsRules: [", &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (400, Some("compile_failed")), "errors relay unchanged: {json}");

    phase(s, "a forwarded request that reaches a non-main answers 421 cluster_view_split");
    let client = cluster.bus.client(NodeId("outsider".into()));
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("a").expect("name"));
    let request = BusRequest::Forward { op: ForwardOp::Inactivate { key }, sender: NodeId("outsider".into()), issued_at_ms: 0 };
    match hotrule::cluster::bus::BusClient::call(&client, &node_id(2), "", request, Duration::from_secs(5)).await {
        Ok(BusResponse::Forwarded { http_status, body, .. }) => {
            assert_eq!(http_status, 421);
            let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
            assert_eq!((body["applyStatus"].as_str(), body["mainNode"].as_str()), (Some("cluster_view_split"), Some("n1")));
        }
        other => panic!("expected a 421 forward answer, got {other:?}"),
    }

    phase(s, "the cluster list shows every node converged");
    let list = cluster.node(2).client.get("/runtime/rule/list?cluster=true").await.expect("list").json().expect("json");
    let rows: Vec<_> = list["rules"].as_array().expect("rows").iter().filter(|r| r["name"] == "a").cloned().collect();
    assert_eq!(rows.len(), 3, "{list}");
    assert!(rows.iter().all(|r| r["converged"] == true), "{rows:?}");

    phase(s, "every node is ready (no dead worker) and the cluster stops within a bound");
    for i in 1..=3 {
        let ready = cluster.node(i).client.get("/readyz").await.expect("readyz");
        assert_eq!(ready.status.as_u16(), 200, "n{i}");
        let workers = cluster.node(i).node.state.workers.all();
        for name in ["scan", "agent-maintenance", "sync", "commit-notices"] {
            assert_eq!(workers.get(name), Some(&hotrule::base::worker::WorkerStatus::Running), "n{i} {name}: {workers:?}");
        }
    }
    tokio::time::timeout(Duration::from_secs(30), cluster.shutdown()).await.expect("3 nodes stop within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_pauses_split_brain_and_self_heal() {
    let s = "pauses";
    let cluster = TestCluster::start(3).await;
    cluster.node(1).push("otel-rules", "p", &rule("pp", 1), &[]).await;
    for i in 1..=3 {
        cluster.wait_rule(i, "p", &rule("pp", 1)).await;
    }
    phase(s, "the pause broadcast to n3 is dropped; n3 still converges on the structural change");
    cluster.node(1).post("/debug/drop", &[("peer", "n3"), ("drop", "true")]).await;
    let added = format!("{}  - name: extra\n    exp: extra_total.sum(['svc'])\n", rule("pp", 1));
    let (code, json) = cluster.node(1).push("otel-rules", "p", &added, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "p", &added).await;
    }
    cluster.node(1).post("/debug/drop", &[("peer", "n3"), ("drop", "false")]).await;

    phase(s, "a peer already suspended by SELF refuses the main's Suspend: 409 split_brain_detected");
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("p").expect("name"));
    let n2 = &cluster.node(2).node.state.runtime;
    n2.suspend(&key, hotrule::control::runtime::Origin::SelfOrigin, true);
    let (code, json) = cluster.node(1).push("otel-rules", "p", &rule("pp", 1), &[("allowStorageChange", "true")]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (409, Some("split_brain_detected")), "{json}");
    assert_eq!(cluster.node(1).row("otel-rules", "p").await.expect("row")["suspendOrigin"], "NONE", "the main resumed itself");
    n2.resume(&key, hotrule::control::runtime::Origin::SelfOrigin);

    phase(s, "a PEER suspension left behind by a crashed main self-heals after the threshold");
    let n3 = &cluster.node(3).node.state.runtime;
    n3.suspend(&key, hotrule::control::runtime::Origin::Peer, true);
    wait_until(WAIT, "n3 self-heals", || async {
        cluster.node(3).row("otel-rules", "p").await.is_some_and(|r| r["suspendOrigin"] == "NONE")
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_leaves_the_next_node_takes_writes_and_the_old_main_returns_with_nothing_lost() {
    let s = "failover";
    let mut cluster = TestCluster::start(3).await;
    cluster.node(1).push("otel-rules", "f", &rule("ff", 1), &[]).await;
    for i in 1..=3 {
        cluster.wait_rule(i, "f", &rule("ff", 1)).await;
    }
    phase(s, "n1 stops; n2 becomes the main");
    let stopped = Instant::now();
    cluster.stop_node(1).await;
    cluster.wait_agreement(&[2, 3], 2).await;
    phase(s, &format!("n2 is the main everywhere {:?} after n1 stopped", stopped.elapsed()));
    let (code, json) = cluster.node(3).push("otel-rules", "f", &rule("ff", 2), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("filter_only_applied")), "{json}");
    let (code, _) = cluster.node(3).push("otel-rules", "g", &rule("gg", 1), &[]).await;
    assert_eq!(code, 200);
    for i in 2..=3 {
        cluster.wait_rule(i, "f", &rule("ff", 2)).await;
        cluster.wait_rule(i, "g", &rule("gg", 1)).await;
    }
    phase(s, "n1 returns on its old store, becomes the main again and pulls what it missed");
    cluster.start_node(1).await;
    cluster.wait_agreement(&[1, 2, 3], 1).await;
    cluster.wait_rule(1, "f", &rule("ff", 2)).await;
    cluster.wait_rule(1, "g", &rule("gg", 1)).await;
    let (code, json) = cluster.node(2).push("otel-rules", "f", &rule("ff", 3), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("filter_only_applied")), "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "f", &rule("ff", 3)).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_both_sides_of_a_partition_converge_on_the_later_write() {
    let s = "partition";
    let cluster = TestCluster::start(3).await;
    cluster.node(1).push("otel-rules", "x", &rule("xx", 1), &[]).await;
    for i in 1..=3 {
        cluster.wait_rule(i, "x", &rule("xx", 1)).await;
    }
    phase(s, "cut n1 from n2 and n3: each side elects its own main");
    cluster.partition(&[1], &[2, 3]).await;
    wait_until(WAIT, "n2 sees itself as main", || async { cluster.status(2).await["main"] == "n2" }).await;
    wait_until(WAIT, "n3 follows n2", || async { cluster.status(3).await["main"] == "n2" }).await;
    wait_until(WAIT, "n1 still sees itself as main", || async { cluster.status(1).await["main"] == "n1" }).await;
    phase(s, "write on the n1 side, then later on the n2 side");
    let (code, _) = cluster.node(1).push("otel-rules", "x", &rule("xx", 2), &[]).await;
    assert_eq!(code, 200);
    let (code, _) = cluster.node(3).push("otel-rules", "x", &rule("xx", 3), &[]).await;
    assert_eq!(code, 200);
    let (code, _) = cluster.node(1).push("otel-rules", "only-a", &rule("oa", 1), &[]).await;
    assert_eq!(code, 200);
    phase(s, "heal: every node holds the later write, and the write only one side saw");
    cluster.heal(&[1], &[2, 3]).await;
    cluster.wait_agreement(&[1, 2, 3], 1).await;
    for i in 1..=3 {
        cluster.wait_rule(i, "x", &rule("xx", 3)).await;
        cluster.wait_rule(i, "only-a", &rule("oa", 1)).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_unreadable_storage_keeps_its_state_and_converges_when_storage_returns() {
    let s = "storage";
    let cluster = TestCluster::start(3).await;
    cluster.node(1).push("otel-rules", "st", &rule("st", 1), &[]).await;
    for i in 1..=3 {
        cluster.wait_rule(i, "st", &rule("st", 1)).await;
    }
    phase(s, "n2's storage becomes unreadable; a new commit lands on the others");
    cluster.stores[1].set_fail_reads(true);
    cluster.stores[1].set_fail_writes(true);
    cluster.node(1).push("otel-rules", "st", &rule("st", 2), &[]).await;
    cluster.wait_rule(3, "st", &rule("st", 2)).await;
    let row = cluster.node(2).row("otel-rules", "st").await.expect("row");
    assert_eq!(row["localState"], "RUNNING", "in-memory state held stable");
    phase(s, "storage returns; n2 converges");
    cluster.stores[1].set_fail_reads(false);
    cluster.stores[1].set_fail_writes(false);
    cluster.wait_rule(2, "st", &rule("st", 2)).await;
    cluster.shutdown().await;
}

/// A small deterministic PRNG (xorshift64*), so a failing chaos run can be replayed by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `millis.counter@node` → an orderable tuple.
fn parse_revision(text: &str) -> Option<(u64, u32, String)> {
    let (clock, node) = text.split_once('@')?;
    let (millis, counter) = clock.split_once('.')?;
    Some((millis.parse().ok()?, counter.parse().ok()?, node.to_string()))
}

/// Randomized rounds of writes, stops, restarts and partitions, then a check that no
/// acknowledged write was lost: for every key, every node holds the same entry, and its revision
/// is at or after every acknowledged write's revision (last-write-wins). Rounds and seed come
/// from HOTRULE_CHAOS_ROUNDS (default 100) and HOTRULE_CHAOS_SEED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_rounds_lose_no_acknowledged_write() {
    chaos("chaos", 0).await;
}

/// The same rounds with `commit_replicas` 1: writes go through prepare/commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_rounds_with_prepare_commit_lose_no_acknowledged_write() {
    chaos("chaos-prepared", 1).await;
}

async fn chaos(s: &str, commit_replicas: usize) {
    let rounds: usize = std::env::var("HOTRULE_CHAOS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let seed: u64 = std::env::var("HOTRULE_CHAOS_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_1234);
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut rng = Rng(seed | 1);
    let mut cluster = TestCluster::start_with(3, commit_replicas).await;
    let keys = ["k0", "k1", "k2", "k3", "k4"];
    // Every acknowledged write: (key, revision, content hash).
    let mut acked: Vec<(String, (u64, u32, String), String)> = Vec::new();
    let mut attempted = 0usize;
    let mut counter = 0u32;
    let mut rounds_run = 0;
    for round in 0..rounds {
        if Instant::now() > deadline {
            phase(s, &format!("time bound reached after {round} rounds"));
            break;
        }
        rounds_run += 1;
        let action = rng.below(4);
        let victim = 1 + rng.below(3);
        let others: Vec<usize> = (1..=3).filter(|i| *i != victim).collect();
        match action {
            1 => {
                cluster.stop_node(victim).await;
                // Let the survivors notice, so the next writes go to a new main if needed.
                cluster.settle(&others, others[0], Duration::from_secs(10)).await;
            }
            2 => {
                cluster.partition(&[victim], &others).await;
                // Both sides elect their own main and both accept writes: real divergence.
                cluster.settle(&[victim], victim, Duration::from_secs(10)).await;
                cluster.settle(&others, others[0], Duration::from_secs(10)).await;
            }
            _ => {}
        }
        for _ in 0..(2 + rng.below(4)) {
            let node = 1 + rng.below(3);
            if cluster.nodes[node - 1].is_none() {
                continue;
            }
            let key = keys[rng.below(keys.len())];
            counter += 1;
            let content = rule(&format!("chaos_{key}"), counter);
            attempted += 1;
            let (code, json) = cluster.node(node).push("otel-rules", key, &content, &[]).await;
            if code == 200 {
                let revision = json["revision"].as_str().and_then(parse_revision).expect("a committed write carries its revision");
                acked.push((key.to_string(), revision, hotrule::base::ids::ContentHash::of(content.as_bytes()).0));
            }
        }
        match action {
            1 => cluster.start_node(victim).await,
            2 => cluster.heal(&[victim], &others).await,
            3 => {
                // Restart whichever node is main right now.
                let main = cluster.status(1).await["main"].as_str().and_then(|m| m.trim_start_matches('n').parse::<usize>().ok()).unwrap_or(1);
                cluster.stop_node(main).await;
                cluster.start_node(main).await;
            }
            _ => {}
        }
    }
    phase(s, &format!("{rounds_run} rounds, {attempted} writes attempted, {} acknowledged; healing and converging", acked.len()));
    cluster.wait_agreement(&[1, 2, 3], 1).await;
    // Converged: every node holds the same (revision, hash) for every key.
    let snapshot = |list: serde_json::Value| -> std::collections::BTreeMap<String, (String, String)> {
        list["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                (s("name"), (s("revision"), s("contentHash")))
            })
            .collect()
    };
    let converge_deadline = Instant::now() + Duration::from_secs(60);
    let states = loop {
        let mut lists = Vec::new();
        for i in 1..=3 {
            lists.push(cluster.node(i).list().await);
        }
        let all_applied = lists.iter().all(|l| {
            l["rules"].as_array().is_some_and(|rows| rows.iter().all(|r| r["appliedContentHash"] == r["contentHash"]))
        });
        let views: Vec<_> = lists.into_iter().map(snapshot).collect();
        if all_applied && views.windows(2).all(|w| w[0] == w[1]) {
            break views;
        }
        assert!(Instant::now() < converge_deadline, "not converged within 60 s: {views:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let final_state = &states[0];
    let mut lost = Vec::new();
    for (key, revision, hash) in &acked {
        match final_state.get(key).and_then(|(rev, h)| parse_revision(rev).map(|r| (r, h))) {
            None => lost.push(format!("{key}: acknowledged at {revision:?} but absent")),
            Some((final_rev, final_hash)) => {
                if *revision > final_rev || (*revision == final_rev && hash != final_hash) {
                    lost.push(format!("{key}: acknowledged {revision:?} newer than the final {final_rev:?}"));
                }
            }
        }
    }
    phase(s, &format!("checked {} acknowledged writes against the converged state: {} lost", acked.len(), lost.len()));
    assert!(acked.len() > rounds_run, "too few acknowledged writes ({}) to mean anything", acked.len());
    assert!(lost.is_empty(), "lost acknowledged writes: {lost:#?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_writing_one_file_through_different_nodes_converge_on_the_last_write() {
    let s = "two-operators";
    let cluster = TestCluster::start(3).await;
    phase(s, "concurrent writes of one file through n2 and n3");
    let (first, second) = (rule("same", 1), rule("same", 2));
    let (a, b) = tokio::join!(
        cluster.node(2).push("otel-rules", "same", &first, &[]),
        cluster.node(3).push("otel-rules", "same", &second, &[]),
    );
    assert_eq!((a.0, b.0), (200, 200), "both operators get an honest 200: {a:?} {b:?}");
    let rev = |v: &serde_json::Value| v["revision"].as_str().and_then(parse_revision).expect("revision");
    let last = if rev(&a.1) > rev(&b.1) { first } else { second };
    for i in 1..=3 {
        cluster.wait_rule(i, "same", &last).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_node_serves_agent_configs_only_after_it_has_synced() {
    let scenario = "wiped node";
    let mut cluster = TestCluster::start(3).await;
    for i in 1..=3 {
        assert_eq!(cluster.status(i).await["agentConfigsServed"], true, "n{i} synced at start");
    }
    phase(scenario, "a write on the main makes the digests differ from an empty store's");
    let (status, body) = cluster.node(1).push("otel-rules", "wiped", &rule("wiped", 1), &[]).await;
    assert_eq!(status, 200, "{body}");
    cluster.wait_rule(3, "wiped", &rule("wiped", 1)).await;

    phase(scenario, "n3 restarts with an empty store and no bus to anyone");
    cluster.stop_node(3).await;
    cluster.stores[2] = Arc::new(MemKv::new());
    cluster.bus.isolate(&node_id(3));
    cluster.start_node(3).await;
    cluster.wait_agreement(&[1, 2, 3], 1).await;
    // Membership is back (gossip is not cut) but nothing can be pulled: n3 holds back. Watch it
    // for a few of its 1 s catch-up retries.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        assert_eq!(cluster.status(3).await["agentConfigsServed"], false, "an unsynced node must hold back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    phase(scenario, "the bus returns: n3 pulls, and serves from then on");
    cluster.bus.heal_all();
    wait_until(WAIT, "n3 serves agent configs", || async { cluster.status(3).await["agentConfigsServed"] == true }).await;
    cluster.wait_rule(3, "wiped", &rule("wiped", 1)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_replicas_make_the_main_wait_for_peers_to_hold_the_entry() {
    let s = "replicas";
    let cluster = TestCluster::start_with(3, 2).await;
    phase(s, "with --commit-replicas 2 the answer comes once both peers hold the commit");
    let (code, json) = cluster.node(1).push("otel-rules", "r", &rule("rr", 1), &[]).await;
    assert_eq!(code, 200, "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 2 peer(s), 2 required")), "{json}");
    // Held means stored: both peers already answer the new content, without waiting.
    let hash = hotrule::base::ids::ContentHash::of(rule("rr", 1).as_bytes()).0;
    for i in 2..=3 {
        let reply = cluster.node(i).client.get("/runtime/rule?catalog=otel-rules&name=r").await.expect("get");
        assert_eq!(reply.headers["x-sw-content-hash"].to_str().ok(), Some(hash.as_str()));
    }
    phase(s, "a peer cut off from the bus cannot confirm: the write still commits and says so");
    cluster.bus.cut(&node_id(1), &node_id(3));
    let (code, json) = cluster.node(1).push("otel-rules", "r", &rule("rr", 2), &[]).await;
    assert_eq!(code, 200, "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 1 peer(s), 2 required")), "{json}");
    cluster.bus.heal(&node_id(1), &node_id(3));
    cluster.wait_rule(3, "r", &rule("rr", 2)).await;
    cluster.shutdown().await;
}

/// Bus requests named `name` delivered from node `from` to node `to` so far.
fn delivered(cluster: &TestCluster, from: usize, to: usize, name: &'static str) -> u64 {
    cluster.bus.delivered(&node_id(from), &node_id(to), name)
}

/// What the main sent each peer, and each peer asked the main, per request name, for the peers
/// 2 and 3: `[(peer, name, main → peer, peer → main)]`.
fn bus_counts(cluster: &TestCluster) -> Vec<(usize, &'static str, u64, u64)> {
    let mut counts = Vec::new();
    for peer in 2..=3 {
        for name in ["suspend", "resume", "notify_committed", "fetch_entries", "confirm_held"] {
            counts.push((peer, name, delivered(cluster, 1, peer, name), delivered(cluster, peer, 1, name)));
        }
    }
    counts
}

/// The change of every count between two [`bus_counts`].
fn bus_delta(
    before: &[(usize, &'static str, u64, u64)],
    after: &[(usize, &'static str, u64, u64)],
) -> Vec<(usize, &'static str, u64, u64)> {
    before.iter().zip(after).map(|(b, a)| (a.0, a.1, a.2 - b.2, a.3 - b.3)).collect()
}

/// Waits until each of the peers 2 and 3 got one commit notice more than in `before`.
async fn wait_notices(cluster: &TestCluster, before: &[(usize, &'static str, u64, u64)]) {
    for peer in 2..=3 {
        let sent = before.iter().find(|b| b.0 == peer && b.1 == "notify_committed").map_or(0, |b| b.2);
        wait_until(WAIT, &format!("n{peer} got the commit notice"), || async {
            delivered(cluster, 1, peer, "notify_committed") > sent
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_commit_reaches_each_peer_in_one_bus_message() {
    let s = "one message";
    // Two confirmations required: the answer comes only once both peers staged the entry (a
    // prepare, counted apart below); its commit notice follows the answer, so the counts are read
    // once each peer got it.
    let cluster = TestCluster::start_with(3, 2).await;
    for i in 1..=3 {
        wait_until(WAIT, &format!("n{i} caught up"), || async { cluster.status(i).await["agentConfigsServed"] == true }).await;
    }
    phase(s, "a new file: suspend, one notice carrying the entry, resume; no fetch in either direction");
    let before = bus_counts(&cluster);
    let (code, json) = cluster.node(1).push("otel-rules", "one", &rule("one", 1), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 2 peer(s), 2 required")), "{json}");
    wait_notices(&cluster, &before).await;
    let delta = bus_delta(&before, &bus_counts(&cluster));
    for peer in 2..=3 {
        let expected = [
            (peer, "suspend", 1, 0),
            (peer, "resume", 1, 0),
            (peer, "notify_committed", 1, 0),
            (peer, "fetch_entries", 0, 0),
            (peer, "confirm_held", 0, 0),
        ];
        let got: Vec<_> = delta.iter().filter(|d| d.0 == peer).copied().collect();
        assert_eq!(got, expected, "structural commit, n{peer}");
    }

    phase(s, "a filter-only change: exactly one bus message to each peer, the notice (and the prepare before it)");
    let before = bus_counts(&cluster);
    let prepares_before: Vec<u64> = (2..=3).map(|p| delivered(&cluster, 1, p, "prepare")).collect();
    let (code, json) = cluster.node(1).push("otel-rules", "one", &rule("one", 2), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("filter_only_applied")), "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 2 peer(s), 2 required")), "{json}");
    wait_notices(&cluster, &before).await;
    let delta = bus_delta(&before, &bus_counts(&cluster));
    for (peer, prepares) in (2..=3).zip(prepares_before) {
        assert_eq!(delivered(&cluster, 1, peer, "prepare"), prepares + 1, "n{peer}: one prepare");
    }
    for peer in 2..=3 {
        let sent: u64 = delta.iter().filter(|d| d.0 == peer).map(|d| d.2).sum();
        let asked: u64 = delta.iter().filter(|d| d.0 == peer).map(|d| d.3).sum();
        assert_eq!((sent, asked), (1, 0), "filter-only commit, n{peer}: {delta:?}");
    }
    for i in 2..=3 {
        let reply = cluster.node(i).client.get("/runtime/rule?catalog=otel-rules&name=one").await.expect("get");
        let hash = hotrule::base::ids::ContentHash::of(rule("one", 2).as_bytes()).0;
        assert_eq!(reply.headers["x-sw-content-hash"].to_str().ok(), Some(hash.as_str()), "n{i} holds it");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_too_large_for_a_notice_is_pulled_by_each_peer() {
    let s = "notice-only";
    // Every entry is over a 16-byte limit: notices go without the entry and peers fetch it.
    let cluster = TestCluster::start_with_notice_limit(3, 2, 16).await;
    for i in 1..=3 {
        wait_until(WAIT, &format!("n{i} caught up"), || async { cluster.status(i).await["agentConfigsServed"] == true }).await;
    }
    phase(s, "one notice without the entry to each peer, then each peer fetches it from the main");
    let before = bus_counts(&cluster);
    let (code, json) = cluster.node(1).push("otel-rules", "big", &rule("big", 1), &[]).await;
    assert_eq!(code, 200, "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 2 peer(s), 2 required")), "{json}");
    let delta = bus_delta(&before, &bus_counts(&cluster));
    for peer in 2..=3 {
        let notices = delta.iter().find(|d| d.0 == peer && d.1 == "notify_committed").map(|d| d.2);
        let fetches = delta.iter().find(|d| d.0 == peer && d.1 == "fetch_entries").map(|d| d.3);
        assert_eq!((notices, fetches.is_some_and(|n| n >= 1)), (Some(1), true), "n{peer}: {delta:?}");
    }
    for i in 2..=3 {
        cluster.wait_rule(i, "big", &rule("big", 1)).await;
    }
    cluster.shutdown().await;
}

/// The names of the runtime layers node `i` reports.
async fn layer_names(cluster: &TestCluster, i: usize) -> Vec<String> {
    let body = cluster.node(i).client.get("/runtime/layers").await.expect("layers").json().expect("json");
    body["layers"].as_array().map_or(Vec::new(), |l| l.iter().filter_map(|l| l["name"].as_str().map(String::from)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_layers_replicate_with_their_entries() {
    let s = "layers";
    let mut cluster = TestCluster::start(3).await;
    let declaring = "expSuffix: service(['svc'], Layer.REPL_LAYER)\nmetricPrefix: repl\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc'])\nlayerDefinitions:\n  - name: REPL_LAYER\n    ordinal: 100900\n";
    phase(s, "a file declaring REPL_LAYER is written on the main");
    let (code, json) = cluster.node(1).push("otel-rules", "declares", declaring, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "declares", declaring).await;
        wait_until(WAIT, &format!("n{i} lists REPL_LAYER"), || async { layer_names(&cluster, i).await == ["REPL_LAYER"] }).await;
        let row = cluster.node(i).row("otel-rules", "declares").await.expect("row");
        assert_eq!(row["layers"][0]["ordinal"], 100900, "n{i}: {row}");
    }

    phase(s, "writes through peers are judged against the same registry");
    let user = rule("repl_user", 1).replace("Layer.GENERAL", "Layer.REPL_LAYER");
    let (code, json) = cluster.node(3).push("otel-rules", "user", &user, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    let colliding = rule("repl_other", 1) + "layerDefinitions:\n  - name: OTHER_LAYER\n    ordinal: 100900\n";
    let (code, json) = cluster.node(2).push("otel-rules", "other", &colliding, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (400, Some("layer_ordinal_collision")), "{json}");

    phase(s, "n3 restarts on its own store and still lists the layer");
    cluster.stop_node(3).await;
    cluster.start_node(3).await;
    assert_eq!(layer_names(&cluster, 3).await, ["REPL_LAYER"], "served from n3's own store at boot");

    phase(s, "inactivate and delete on the main: the layer is gone everywhere");
    for route in ["/runtime/rule/inactivate", "/runtime/rule/delete"] {
        let (code, json) = cluster.node(1).post(route, &[("catalog", "otel-rules"), ("name", "declares")]).await;
        assert_eq!(code, 200, "{route}: {json}");
    }
    for i in 1..=3 {
        wait_until(WAIT, &format!("n{i} lists no layer"), || async { layer_names(&cluster, i).await.is_empty() }).await;
    }
    cluster.shutdown().await;
}

/// One write every 50 ms through node `through`, each on its own task, until `stop` is set:
/// (sent at, HTTP status, applyStatus, how long it took).
type WriteLog = Arc<std::sync::Mutex<Vec<(Instant, u16, String, Duration)>>>;

fn write_every_50ms(cluster: &TestCluster, through: usize, name: &'static str, stop: Arc<std::sync::atomic::AtomicBool>) -> (WriteLog, tokio::task::JoinHandle<()>) {
    let log: WriteLog = Arc::default();
    let client = cluster.node(through).client.clone();
    let writer_log = log.clone();
    let writer = tokio::spawn(async move {
        let mut writes = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        // Bounded: 30 s of writes at most, whatever the test does.
        for step in 1..=600u32 {
            tick.tick().await;
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            let (client, log) = (client.clone(), writer_log.clone());
            writes.push(tokio::spawn(async move {
                let path = hotrule::api::client::with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", name)]);
                let sent = Instant::now();
                let (code, status) = match client.post(&path, rule("fo", step % 50 + 1).into_bytes()).await {
                    Ok(reply) => {
                        let json: serde_json::Value = reply.json().unwrap_or_default();
                        (reply.status.as_u16(), json["applyStatus"].as_str().unwrap_or("").to_string())
                    }
                    Err(e) => (0, e.to_string()),
                };
                log.lock().expect("log").push((sent, code, status, sent.elapsed()));
            }));
        }
        for write in writes {
            let _ = write.await;
        }
    });
    (log, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_a_peer_during_a_failover_all_succeed_within_the_bound() {
    let s = "failover-writes";
    let mut cluster = TestCluster::start(3).await;
    let bound = TestCluster::replication().forward_wait;
    cluster.node(1).push("otel-rules", "fo", &rule("fo", 1), &[]).await;
    cluster.wait_rule(3, "fo", &rule("fo", 1)).await;

    phase(s, "n3 takes one write every 50 ms; the main n1 stops in the middle");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (log, writer) = write_every_50ms(&cluster, 3, "fo", stop.clone());
    wait_until(WAIT, "a few writes through n3 before the failover", || async { log.lock().expect("log").len() >= 5 }).await;
    let stopped = Instant::now();
    cluster.stop_node(1).await;
    cluster.wait_agreement(&[2, 3], 2).await;
    phase(s, &format!("n2 is the main on n2 and n3 {:?} after n1 stopped", stopped.elapsed()));
    wait_until(WAIT, "20 writes sent after the stop accepted", || async {
        log.lock().expect("log").iter().filter(|(sent, code, ..)| *sent > stopped && *code == 200).count() >= 20
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.await.expect("writer");

    let log = log.lock().expect("log").clone();
    let during: Vec<_> = log.iter().filter(|(sent, ..)| *sent > stopped).collect();
    // A write in flight on the main when it stops may have run there: it is answered, as before,
    // with the error it met. Writes sent after the stop must all succeed.
    let errors: Vec<_> = during.iter().filter(|(_, code, ..)| *code != 200).collect();
    let in_flight_errors = log.iter().filter(|(sent, code, ..)| *sent <= stopped && *code != 200).count();
    let first_accepted = during.iter().filter(|(_, code, ..)| *code == 200).map(|(sent, _, _, took)| (*sent + *took) - stopped).min();
    let slowest = log.iter().map(|(.., took)| *took).max().unwrap_or_default();
    phase(
        s,
        &format!(
            "{} writes, {} sent after the stop, {} errors among them ({in_flight_errors} among writes sent before); first accepted {first_accepted:?} after the stop; slowest write {slowest:?}",
            log.len(),
            during.len(),
            errors.len()
        ),
    );
    assert!(during.len() >= 20, "writes were sent during the failover: {log:?}");
    assert!(errors.is_empty(), "client-visible errors during the failover: {errors:?}");
    assert!(slowest < bound + Duration::from_secs(1), "a write waited {slowest:?}, over the {bound:?} bound");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_an_unreachable_main_gives_up_after_the_bound_with_forward_failed() {
    let s = "forward-bound";
    let bound = Duration::from_millis(1500);
    let cluster = TestCluster::start_tuned(3, ReplicationSettings { forward_wait: bound, ..TestCluster::replication() }).await;
    phase(s, "the bus between n3 and the main n1 is cut; gossip still hears n1");
    cluster.bus.cut(&node_id(3), &node_id(1));
    let started = Instant::now();
    let (code, json) = cluster.node(3).push("otel-rules", "unreachable", &rule("un", 1), &[]).await;
    let took = started.elapsed();
    phase(s, &format!("answered {code} after {took:?}: {json}"));
    assert_eq!((code, json["applyStatus"].as_str(), json["mainNode"].as_str()), (502, Some("forward_failed"), Some("n1")), "{json}");
    assert!(took >= bound, "gave up after {took:?}, before the {bound:?} bound");
    assert!(took < bound + Duration::from_secs(2), "gave up only after {took:?}");
    phase(s, "a refusal while heartbeats still arrive deposes nobody: n1 is still n3's main");
    let status = cluster.status(3).await;
    assert_eq!(status["main"], "n1", "{status}");

    phase(s, "with the bound at zero the write fails at once, as before");
    let cluster_at_once = TestCluster::start_tuned(2, ReplicationSettings { forward_wait: Duration::ZERO, ..TestCluster::replication() }).await;
    cluster_at_once.bus.cut(&node_id(2), &node_id(1));
    let started = Instant::now();
    let (code, json) = cluster_at_once.node(2).push("otel-rules", "unreachable", &rule("un", 1), &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (502, Some("forward_failed")), "{json}");
    assert!(started.elapsed() < bound, "no wait with a zero bound: {:?}", started.elapsed());
    cluster_at_once.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_main_is_not_deposed_by_bus_timeouts() {
    let s = "slow-main";
    let replication = ReplicationSettings { forward_timeout: Duration::from_millis(300), ..TestCluster::replication() };
    let cluster = TestCluster::start_tuned(3, replication).await;
    phase(s, "every bus message between n3 and the main n1 takes 400 ms each way");
    cluster.bus.set_delay(&node_id(3), &node_id(1), Duration::from_millis(400));
    let started = Instant::now();
    let (code, json) = cluster.node(3).push("otel-rules", "slow", &rule("sl", 1), &[]).await;
    phase(s, &format!("answered {code} after {:?}", started.elapsed()));
    assert_eq!((code, json["applyStatus"].as_str()), (502, Some("forward_failed")), "a timeout is answered as before: {json}");
    assert!(started.elapsed() < Duration::from_secs(2), "a timed-out write is not retried: {:?}", started.elapsed());

    phase(s, "for 3 s of timeouts (writes and probes), n1 stays live and the main on n3");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut looks = 0;
    while Instant::now() < deadline {
        let status = cluster.status(3).await;
        let n1_live = status["members"].as_array().and_then(|m| m.iter().find(|m| m["nodeId"] == "n1")).map(|m| m["live"] == true);
        assert_eq!(status["main"], "n1", "n1 deposed on a timeout: {status}");
        assert_ne!(n1_live, Some(false), "n1 marked dead on a timeout: {status}");
        if looks % 5 == 0 {
            let _ = cluster.node(3).push("otel-rules", "slow", &rule("sl", 2), &[]).await;
        }
        looks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phase(s, "the delay goes: writes through n3 reach n1 again");
    cluster.bus.set_delay(&node_id(3), &node_id(1), Duration::ZERO);
    let (code, json) = cluster.node(3).push("otel-rules", "slow", &rule("sl", 3), &[]).await;
    assert_eq!(code, 200, "{json}");
    cluster.shutdown().await;
}

fn requests_batch(service: &str) -> Vec<hotrule::data::seam::Batch> {
    use hotrule::data::seam::{Batch, Catalog, Protocol, Sample};
    let sample = Sample::new("requests_total", hotrule_mal_engine::labels([("svc", service)]), 7.0, 1_795_598_820_000);
    vec![Batch { protocol: Protocol::Otlp, catalog: Catalog::Otel, samples: vec![sample], received_ms: 0 }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_drains_its_evaluations_before_it_answers_the_pause() {
    use hotrule::data::seam::BatchSink;
    let s = "peer-drain";
    // A long Suspend deadline, so n2's drain bound (half of it, at most dispatch.drain_timeout)
    // cannot pass while the test holds the batch.
    let cluster = TestCluster::start_tuned(2, ReplicationSettings { suspend_timeout: Duration::from_secs(10), ..TestCluster::replication() }).await;
    let old = "metricPrefix: pd\nmetricsRules:\n  - name: old_requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";
    let new = old.replace("old_requests", "new_requests");
    phase(s, "the old content runs on both nodes");
    let (code, json) = cluster.node(1).push("otel-rules", "pd", old, &[]).await;
    assert_eq!(code, 200, "{json}");
    cluster.wait_rule(2, "pd", old).await;
    let peer = cluster.node(2).node.state.dispatcher.clone();
    let writer = Arc::new(harness::SlowWriter::default());
    peer.add_writer(writer.clone());
    wait_until(WAIT, "n2 evaluates and writes (its registry holds the measure)", || {
        let (peer, writer) = (peer.clone(), writer.clone());
        async move {
            peer.submit(requests_batch("warm")).expect("accepted");
            tokio::task::spawn_blocking(move || peer.wait_idle(WAIT)).await.expect("idle");
            !writer.written().is_empty()
        }
    })
    .await;

    phase(s, "a batch of the old content is in flight on n2");
    writer.set_held(true);
    peer.submit(requests_batch("a")).expect("accepted");
    let blocked = writer.clone();
    tokio::task::spawn_blocking(move || blocked.wait_blocked()).await.expect("blocked");

    phase(s, "the structural apply on the main waits for n2's drain");
    let apply = {
        let client = cluster.node(1).client.clone();
        tokio::spawn(async move {
            let url = hotrule::api::client::with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "pd")]);
            let reply = client.post(&url, new.into_bytes()).await.expect("post");
            (reply.status.as_u16(), reply.json().unwrap_or_default(), Instant::now())
        })
    };
    wait_until(WAIT, "n2 is paused by the main (or the apply answered)", || async {
        apply.is_finished() || cluster.node(2).row("otel-rules", "pd").await.is_some_and(|row| row["localState"] == "SUSPENDED")
    })
    .await;
    let mut apply = apply;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut apply).await.is_err(),
        "the main must not answer while n2 still evaluates the old content"
    );
    writer.set_held(false);
    let (code, json, answered) = apply.await.expect("apply");
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    let last_old = writer.written().iter().filter(|(_, m)| m == "pd_old_requests").map(|(at, _)| *at).max().expect("old writes");
    assert!(last_old <= answered, "n2's last old-content value was written before the 200");
    cluster.shutdown().await;
}
