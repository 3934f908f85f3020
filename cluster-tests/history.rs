//! Rule history (issue 26) end to end on in-process nodes: every route and each of its errors
//! on a lone node (history, one revision, diff, restore with the checks a write gets, the
//! compacted-revision 404, the dump, the self-metric), the caller a write records, history
//! surviving a restart, and history converging on every node of a 3-node cluster (a write taken
//! by a peer, a node that was down during writes, a restore through a peer). Waits are on
//! predicates with a bound.

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::api::client::with_query;
use hotrule::base::ids::NodeId;
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use hotrule::cluster::replication::ReplicationSettings;
use hotrule::control::history::retention::Retention;
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{BusWiring, ClusterWiring, NodeSettings};
use hotrule::store::kv::{KvEngine, MemKv};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);

/// Query pairs of a request.
type Pairs<'a> = &'a [(&'a str, &'a str)];

const V1: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: hist
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

/// A filter-only edit of [`V1`].
fn v2() -> String {
    V1.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')")
}

/// A reshape of [`V1`] (service → instance scope): it needs allowStorageChange.
fn reshaped() -> String {
    V1.replace("service(['svc'], Layer.GENERAL)", "instance(['svc'], ['inst'], Layer.GENERAL)")
}

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

async fn get(node: &TestNode, route: &str, pairs: &[(&str, &str)]) -> (u16, Value) {
    let reply = node.client.get(&with_query(route, pairs)).await.expect("get");
    (reply.status.as_u16(), reply.json().unwrap_or_default())
}

async fn history(node: &TestNode, name: &str) -> (u16, Value) {
    get(node, "/runtime/rule/history", &[("catalog", "otel-rules"), ("name", name)]).await
}

/// The revisions of a history answer, newest first.
fn revisions(body: &Value) -> Vec<Value> {
    body["revisions"].as_array().cloned().unwrap_or_default()
}

/// What every node must answer alike: each revision without the answering node's view of it.
fn comparable(body: &Value) -> Vec<Value> {
    revisions(body)
        .into_iter()
        .map(|mut r| {
            if let Some(map) = r.as_object_mut() {
                map.remove("current");
            }
            r
        })
        .collect()
}

#[tokio::test]
async fn history_routes_answer_each_revision_diff_and_restore_with_every_error() {
    let s = "routes";
    let settings = NodeSettings {
        history: Retention { max_revisions: 4, max_age: Duration::from_secs(3600) },
        ..NodeSettings::for_test()
    };
    let (node, kv) = TestNode::in_memory(settings.clone()).await;

    phase(s, "push v1, then v2 (filter only)");
    let (code, first) = node.push("otel-rules", "h", V1, &[]).await;
    assert_eq!(code, 200, "{first}");
    let r1 = first["revision"].as_str().expect("revision").to_string();
    let (code, second) = node.push("otel-rules", "h", &v2(), &[]).await;
    assert_eq!(code, 200, "{second}");
    let r2 = second["revision"].as_str().expect("revision").to_string();

    phase(s, "history lists both, newest first, with who made them");
    let (code, body) = history(&node, "h").await;
    assert_eq!(code, 200, "{body}");
    let listed = revisions(&body);
    assert_eq!(listed.len(), 2, "{body}");
    assert_eq!(listed[0]["revision"], r2.as_str());
    assert_eq!(listed[0]["current"], true);
    assert_eq!(listed[0]["classification"], "FILTER_ONLY");
    assert_eq!(listed[0]["applyStatus"], "filter_only_applied");
    assert_eq!(listed[1]["revision"], r1.as_str());
    assert_eq!(listed[1]["classification"], "NEW");
    assert_eq!(listed[1]["action"], "addOrUpdate");
    let me = node.node.admin_addr.to_string();
    assert_eq!(listed[1]["takenBy"], me.as_str(), "a lone node takes and commits: {body}");
    assert_eq!(listed[1]["committedBy"], me.as_str());
    assert!(listed[1]["client"].as_str().is_some_and(|c| c.starts_with("127.0.0.1:")), "{body}");
    assert_eq!(listed[1]["token"], Value::Null, "no token is configured");
    assert_eq!(body["oldestRevision"], r1.as_str());
    assert_eq!(body["retention"]["maxRevisions"], 4);

    phase(s, "one revision with its content, and the diff");
    let (code, one) =
        get(&node, "/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1)]).await;
    assert_eq!(code, 200, "{one}");
    assert_eq!(one["revision"]["content"], V1);
    let (code, diff) = get(
        &node,
        "/runtime/rule/history/diff",
        &[("catalog", "otel-rules"), ("name", "h"), ("from", &r1), ("to", &r2)],
    )
    .await;
    assert_eq!(code, 200, "{diff}");
    let text = diff["diff"].as_str().expect("diff");
    assert!(text.contains("-    exp: requests_total.sum(['svc'])\n+    exp: requests_total.sum(['svc']).rate('PT1M')\n"), "{text}");
    assert!(text.starts_with("--- otel-rules/h@"), "{text}");

    phase(s, "restore v1: a normal write, recorded as a restore of r1");
    let (code, restored) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1)]).await;
    assert_eq!((code, restored["applyStatus"].as_str()), (200, Some("filter_only_applied")), "{restored}");
    let row = node.row("otel-rules", "h").await.expect("row");
    assert_eq!(row["contentHash"], hotrule::base::ids::ContentHash::of(V1.as_bytes()).0.as_str());
    let (_, body) = history(&node, "h").await;
    let latest = &revisions(&body)[0];
    assert_eq!(latest["action"], "restore", "{body}");
    assert_eq!(latest["restoreOf"], r1.as_str());
    assert_eq!(latest["current"], true);
    // Restoring what is already active changes nothing, as a push of it would.
    let (code, same) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1)]).await;
    assert_eq!((code, same["applyStatus"].as_str()), (200, Some("no_change")), "{same}");

    phase(s, "a reshaped revision needs approval exactly as pushing it would");
    let (code, pushed) = node.push("otel-rules", "h", &reshaped(), &[("allowStorageChange", "true")]).await;
    assert_eq!(code, 200, "{pushed}");
    let r_reshaped = pushed["revision"].as_str().expect("revision").to_string();
    let (code, refused) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1)]).await;
    assert_eq!((code, refused["applyStatus"].as_str()), (409, Some("storage_change_requires_explicit_approval")), "{refused}");
    let (code, approved) = node
        .post(
            "/runtime/rule/restore",
            &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1), ("allowStorageChange", "true")],
        )
        .await;
    assert_eq!((code, approved["applyStatus"].as_str()), (200, Some("structural_applied")), "{approved}");

    phase(s, "retention kept 4: r1 is gone, and asking for it names the oldest kept");
    let (_, body) = history(&node, "h").await;
    assert_eq!(revisions(&body).len(), 4, "{body}");
    let oldest = body["oldestRevision"].as_str().expect("oldest").to_string();
    assert_eq!(oldest, r2, "r1 was compacted by the fifth revision");
    let (code, gone) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r1)]).await;
    assert_eq!((code, gone["applyStatus"].as_str()), (404, Some("revision_compacted")), "{gone}");
    assert_eq!(gone["oldestRevision"], oldest.as_str());
    assert!(gone["message"].as_str().is_some_and(|m| m.contains(&oldest)), "{gone}");
    let metrics = node.client.get("/metrics").await.expect("metrics").text();
    assert!(metrics.contains("hotrule_history_compacted 1"), "{metrics}");

    phase(s, "errors: bad parameters 400, unknown key or revision 404");
    let cases: &[(&str, Pairs, u16, &str)] = &[
        ("/runtime/rule/history", &[("name", "h")], 400, "missing_catalog"),
        ("/runtime/rule/history", &[("catalog", "oal"), ("name", "h")], 400, "invalid_catalog"),
        ("/runtime/rule/history", &[("catalog", "otel-rules")], 400, "missing_name"),
        ("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "../x")], 400, "invalid_name"),
        ("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "h"), ("revision", "nope")], 400, "invalid_parameter"),
        ("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "never")], 404, "history_not_found"),
        ("/runtime/rule/history/diff", &[("catalog", "otel-rules"), ("name", "h"), ("from", &r2)], 400, "invalid_parameter"),
        ("/runtime/rule/history/diff", &[("catalog", "otel-rules"), ("name", "h"), ("from", &r1), ("to", &r2)], 404, "revision_compacted"),
    ];
    for (route, pairs, code, status) in cases {
        let (got, body) = get(&node, route, pairs).await;
        assert_eq!((got, body["applyStatus"].as_str()), (*code, Some(*status)), "{route} {pairs:?}: {body}");
    }
    let far_future = format!("{}.0@{me}", u64::MAX / 2);
    let restores: &[(Pairs, u16, &str)] = &[
        (&[("catalog", "otel-rules"), ("name", "h")], 400, "invalid_parameter"),
        (&[("catalog", "otel-rules"), ("name", "h"), ("revision", "1.x@n")], 400, "invalid_parameter"),
        (&[("catalog", "agent-groups"), ("name", "h"), ("revision", &r2)], 400, "invalid_catalog"),
        (&[("catalog", "otel-rules"), ("name", "never"), ("revision", &r2)], 404, "history_not_found"),
        (&[("catalog", "otel-rules"), ("name", "h"), ("revision", &far_future)], 404, "revision_not_found"),
        (&[("catalog", "otel-rules"), ("name", "h"), ("revision", &r2), ("rollout", "sideways")], 400, "invalid_parameter"),
    ];
    for (pairs, code, status) in restores {
        let (got, body) = node.post("/runtime/rule/restore", pairs).await;
        assert_eq!((got, body["applyStatus"].as_str()), (*code, Some(*status)), "{pairs:?}: {body}");
    }

    phase(s, "restore of an INACTIVE revision inactivates, of a delete deletes");
    let (code, inactive) = node.post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "h")]).await;
    assert_eq!(code, 200, "{inactive}");
    let r_inactive = inactive["revision"].as_str().expect("revision").to_string();
    let (code, deleted) = node.post("/runtime/rule/delete", &[("catalog", "otel-rules"), ("name", "h")]).await;
    assert_eq!(code, 200, "{deleted}");
    let r_deleted = deleted["revision"].as_str().expect("revision").to_string();
    let (code, back) = node
        .post(
            "/runtime/rule/restore",
            &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r_reshaped), ("allowStorageChange", "true")],
        )
        .await;
    assert_eq!((code, back["applyStatus"].as_str()), (200, Some("structural_applied")), "{back}");
    let (code, again) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r_inactive)]).await;
    assert_eq!((code, again["applyStatus"].as_str()), (200, Some("inactivated")), "{again}");
    let (code, gone) =
        node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "h"), ("revision", &r_deleted)]).await;
    assert_eq!((code, gone["applyStatus"].as_str()), (200, Some("deleted")), "{gone}");
    assert!(node.row("otel-rules", "h").await.is_none(), "the file is deleted");

    phase(s, "the dump holds every kept revision");
    let (_, body) = history(&node, "h").await;
    let kept: Vec<String> = revisions(&body).iter().map(|r| r["revision"].as_str().unwrap_or("").to_string()).collect();
    let dump = node.client.get("/runtime/rule/dump").await.expect("dump");
    assert_eq!(dump.status.as_u16(), 200);
    let files = untar(&dump.body);
    let manifest = files.iter().find(|(p, _)| p == "runtime-rule-dump/manifest.yaml").map(|(_, c)| c.clone()).expect("manifest");
    for revision in &kept {
        assert!(manifest.contains(&format!("revision: \"{revision}\"")), "{revision} not in\n{manifest}");
    }
    let history_files = files.iter().filter(|(p, _)| p.starts_with("runtime-rule-dump/history/otel-rules/h/")).count();
    assert_eq!(history_files, kept.len());

    phase(s, "history survives a restart");
    let TestNode { node: running, client, kv: _ } = node;
    drop(client);
    running.shutdown().await;
    let node = TestNode::start(settings, kv).await;
    let (code, after) = history(&node, "h").await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(comparable(&after), comparable(&body));
}

fn untar(bytes: &[u8]) -> Vec<(String, String)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut out = Vec::new();
    for entry in archive.entries().expect("entries") {
        let mut entry = entry.expect("entry");
        let path = entry.path().expect("path").display().to_string();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut entry, &mut text).expect("read");
        out.push((path, text));
    }
    out
}

#[tokio::test]
async fn a_token_is_recorded_by_its_fingerprint_never_itself() {
    let settings = NodeSettings { admin_token: Some("s3cret-token".into()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let (code, body) = node.push("otel-rules", "t", V1, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = history(&node, "t").await;
    assert_eq!(code, 200, "{body}");
    let fingerprint = hotrule::control::history::token_fingerprint("s3cret-token");
    assert_eq!(revisions(&body)[0]["token"], fingerprint.as_str());
    assert!(!body.to_string().contains("s3cret-token"));
}

/// Alarm settings replicate like rules, so they keep history too: the push and the delete are
/// revisions of the `alarm-settings` entry.
#[tokio::test]
async fn alarm_settings_keep_history_like_rule_files() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let settings = "rules:\n  hist_rule:\n    expression: sum(hist_requests > 1) >= 1\n";
    let reply = node.client.post("/runtime/alarm/settings", settings.as_bytes().to_vec()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let reply = node.client.send(hyper::Method::DELETE, "/runtime/alarm/settings", Vec::new(), None).await.expect("delete");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let (code, body) = get(&node, "/runtime/rule/history", &[("catalog", "alarm-settings"), ("name", "alarm-settings")]).await;
    assert_eq!(code, 200, "{body}");
    let listed = revisions(&body);
    let actions: Vec<&str> = listed.iter().map(|r| r["action"].as_str().unwrap_or("")).collect();
    assert_eq!(actions, vec!["delete", "write"], "{body}");
    assert_eq!(listed[1]["status"], "ACTIVE");
    let r = listed[1]["revision"].as_str().expect("revision");
    let (code, one) = get(&node, "/runtime/rule/history", &[("catalog", "alarm-settings"), ("name", "alarm-settings"), ("revision", r)]).await;
    assert_eq!(code, 200, "{one}");
    assert_eq!(one["revision"]["content"], settings);
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 41_000 + i as u16))
}

/// Three in-process nodes on the gossip and bus twins, each with its own store.
struct Trio {
    gossip: GossipNetwork,
    bus: MemNetwork,
    stores: Vec<Arc<MemKv>>,
    nodes: Vec<Option<TestNode>>,
}

impl Trio {
    async fn start() -> Trio {
        let mut trio = Trio {
            gossip: GossipNetwork::new(),
            bus: MemNetwork::new(),
            stores: (0..3).map(|_| Arc::new(MemKv::new())).collect(),
            nodes: (0..3).map(|_| None).collect(),
        };
        for i in 1..=3 {
            trio.start_node(i).await;
        }
        trio.wait_agreement(&[1, 2, 3]).await;
        trio
    }

    async fn start_node(&mut self, i: usize) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let admin = listener.local_addr().expect("addr").to_string();
        let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), gossip_addr(i));
        membership.seeds = (1..=3).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let wiring = ClusterWiring {
            membership,
            gossip: GossipTransport::InMemory(self.gossip.clone()),
            bus: BusWiring::Memory { network: self.bus.clone() },
            replication: ReplicationSettings { sync_timeout: Duration::from_secs(2), ..ReplicationSettings::default() },
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
        self.nodes[i - 1].as_ref().expect("running")
    }

    async fn wait_agreement(&self, live: &[usize]) {
        for &i in live {
            wait_until(WAIT, &format!("n{i} sees main n1 and {} live members", live.len()), || async {
                let status: Value = self.node(i).client.get("/cluster/status").await.expect("status").json().expect("json");
                let live_count = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
                status["main"] == "n1" && live_count == live.len()
            })
            .await;
        }
    }

    /// Waits until every node in `nodes` answers `name`'s history with `count` revisions, all alike.
    async fn wait_history_converged(&self, nodes: &[usize], name: &str, count: usize) -> Vec<Value> {
        wait_until(WAIT, &format!("{name}'s history of {count} revisions converges on {nodes:?}"), || async {
            let mut answers = Vec::new();
            for &i in nodes {
                let (code, body) = history(self.node(i), name).await;
                if code != 200 {
                    return false;
                }
                answers.push(comparable(&body));
            }
            answers[0].len() == count && answers.iter().all(|a| *a == answers[0])
        })
        .await;
        comparable(&history(self.node(nodes[0]), name).await.1)
    }
}

#[tokio::test]
async fn history_converges_on_every_node_and_survives_a_restart() {
    let s = "converge";
    let mut trio = Trio::start().await;

    phase(s, "v1 through n2 (forwarded to the main n1), v2 through n1");
    let (code, body) = trio.node(2).push("otel-rules", "c", V1, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = trio.node(1).push("otel-rules", "c", &v2(), &[]).await;
    assert_eq!(code, 200, "{body}");
    let converged = trio.wait_history_converged(&[1, 2, 3], "c", 2).await;
    assert_eq!(converged[1]["takenBy"], "n2", "the node that took the request: {converged:?}");
    assert_eq!(converged[1]["committedBy"], "n1", "the main that committed it");
    assert_eq!(converged[0]["takenBy"], "n1");

    phase(s, "n3 is down while two more revisions are written; it catches up when it returns");
    trio.stop_node(3).await;
    trio.wait_agreement(&[1, 2]).await;
    let (code, body) = trio.node(2).push("otel-rules", "c", V1, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = trio.node(1).post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "c")]).await;
    assert_eq!(code, 200, "{body}");
    trio.start_node(3).await;
    trio.wait_agreement(&[1, 2, 3]).await;
    let converged = trio.wait_history_converged(&[1, 2, 3], "c", 4).await;

    phase(s, "restore v1 through n3: forwarded, recorded with n3 as the taker, converges");
    let r1 = converged[3]["revision"].as_str().expect("r1").to_string();
    let (code, body) =
        trio.node(3).post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "c"), ("revision", &r1)]).await;
    assert_eq!(code, 200, "{body}");
    let converged = trio.wait_history_converged(&[1, 2, 3], "c", 5).await;
    assert_eq!(converged[0]["action"], "restore");
    assert_eq!(converged[0]["restoreOf"], r1.as_str());
    assert_eq!(converged[0]["takenBy"], "n3");
    assert_eq!(converged[0]["committedBy"], "n1");

    phase(s, "n2 restarts on its store: the same history at once");
    trio.stop_node(2).await;
    trio.start_node(2).await;
    let (code, body) = history(trio.node(2), "c").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(comparable(&body), converged);
    for i in [1, 2, 3] {
        trio.stop_node(i).await;
    }
}

/// History is stored by the real engine: it survives the process's store being closed and
/// reopened (RocksDB, synced batches).
#[cfg(feature = "rocksdb")]
#[tokio::test]
async fn history_survives_a_restart_on_rocksdb() {
    use hotrule::store::kv::RocksEngine;
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn KvEngine> { Arc::new(RocksEngine::open(&dir.path().join("db")).expect("rocksdb")) };
    let node = TestNode::start(NodeSettings::for_test(), open()).await;
    assert_eq!(node.push("otel-rules", "r", V1, &[]).await.0, 200);
    assert_eq!(node.push("otel-rules", "r", &v2(), &[]).await.0, 200);
    let (code, before) = history(&node, "r").await;
    assert_eq!(code, 200, "{before}");
    assert_eq!(revisions(&before).len(), 2);
    // Every handle on the engine must go before it can be reopened (RocksDB's LOCK file).
    let TestNode { node: running, client, kv } = node;
    drop((client, kv));
    running.shutdown().await;
    let node = TestNode::start(NodeSettings::for_test(), open()).await;
    let (code, after) = history(&node, "r").await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(comparable(&after), comparable(&before));
    let r1 = revisions(&after)[1]["revision"].as_str().expect("r1").to_string();
    let (code, restored) = node.post("/runtime/rule/restore", &[("catalog", "otel-rules"), ("name", "r"), ("revision", &r1)]).await;
    assert_eq!(code, 200, "{restored}");
}
