//! Issue 22: counters that move between nodes. `increase` keeps its window per series on the node
//! that received the samples (the engine's `CounterState`, in memory); hotrule does not route raw
//! counter samples between nodes. This test pins what that means (docs/ingest.md, "Counters
//! (`rate`, `increase`, `irate`) in a cluster"):
//!
//! - **sticky routing** (every sample of a series to one node; different series to different
//!   nodes): the cluster read equals a lone reference node's;
//! - **round-robin** (consecutive samples of a series rotate over the three nodes): each node
//!   computes the increase over the points it received, and the cluster read is the value that
//!   predicts, below the reference's.
//!
//! Three series of one service, slopes 1, 2 and 3 per second (6 per second together), one point
//! every 15 s for three minutes. `downsampling(SUM)` makes a minute's value the sum of the
//! increases computed in it, however the samples were split into batches, so the reference can
//! take each step's three series in one push.
//!
//! The window (`counter.rs`, upstream's `CounterWindow`) with `PT1M`, per series of slope `r`:
//! - a node seeing every point (15 s apart): 0, 15r, 30r, 45r (warm-up: the reference point is the
//!   oldest), then 60r (a point sits exactly one window back). Per minute of four points:
//!   (0 + 15 + 30 + 45) × 6 = 540, then 4 × 60 × 6 = 1440, 1440.
//! - a node seeing every third point (45 s apart): its first point gives 0, its second 45r
//!   (warm-up), then 45r again (one window back lies between two of its points, 30 s after the
//!   older and 15 s before the newer: the newer, closer one is the reference). Each series' first
//!   three points are first points on their nodes, so per minute: (0 + 0 + 0 + 45) × 6 = 270, then
//!   4 × 45 × 6 = 1080, 1080.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use harness::{TestNode, start_with_data_listener, wait_until};
use hotrule::api::client::{AdminClient, with_query};
use hotrule::base::ids::NodeId;
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::node::NodeSettings;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: c
metricsRules:
  - name: requests
    exp: requests_total.increase('PT1M').sum(['svc']).downsampling(SUM)
";

const NODES: usize = 3;
const STEP_MS: i64 = 15_000;
/// Twelve points: four in each of three minutes.
const POINTS: i64 = 12;
/// Counters per second of the three series (`pod` p0, p1, p2).
const SLOPES: [i64; 3] = [1, 2, 3];

/// Per minute: what one node seeing every point computes, and what the cluster computes when the
/// points rotate over three nodes (see the module doc).
const REFERENCE: [f64; 3] = [540.0, 1440.0, 1440.0];
const ROUND_ROBIN: [f64; 3] = [270.0, 1080.0, 1080.0];

fn node_id(i: usize) -> NodeId {
    NodeId(format!("k{i}"))
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 43_000 + i as u16))
}

fn membership(i: usize) -> MembershipSettings {
    let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
    membership.seeds = (1..=NODES).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
    membership
}

fn settings(i: usize) -> NodeSettings {
    NodeSettings { node_id: Some(node_id(i).0), ..NodeSettings::for_test() }
}

/// The exposition line of series `pod` of service `svc` at point `k` (the first point at
/// `start_ms`).
fn point(svc: &str, pod: usize, k: i64, start_ms: i64) -> String {
    let value = 1_000 * (pod as i64 + 1) + SLOPES[pod] * k * STEP_MS / 1_000;
    let at = start_ms + k * STEP_MS;
    format!("requests_total{{svc=\"{svc}\",pod=\"p{pod}\"}} {value} {at}\n")
}

/// Evaluations of the rule file so far on the node behind `admin`.
async fn evaluations(admin: &AdminClient) -> u64 {
    let list: Value = admin.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
    let rows = list["rules"].as_array().cloned().unwrap_or_default();
    let row = rows.iter().find(|r| r["catalog"] == "otel-rules" && r["name"] == "counters");
    row.and_then(|r| r["evaluation"]["evaluations"].as_u64()).unwrap_or(0)
}

/// Pushes `text` (one batch) to `data` and waits until the node has evaluated it: dispatch has
/// several evaluation threads, and a counter window must see a series' points in order.
async fn push_evaluated(admin: &AdminClient, data: &SocketAddr, text: &str) {
    let before = evaluations(admin).await;
    let client = AdminClient::new(&data.to_string(), None).expect("client");
    let path = with_query("/ingest/prometheus", &[("job", "counters"), ("instance", "i")]);
    let reply = client.post(&path, text.as_bytes().to_vec()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 204, "{}", reply.text());
    wait_until(WAIT, "the push is evaluated", || async { evaluations(admin).await > before }).await;
}

/// The value of `c_requests` for `svc` in the minute starting at `minute_ms` (the cluster's
/// merged read with `cluster`); None while there is none.
async fn minute_value(client: &AdminClient, svc: &str, minute_ms: i64, cluster: bool) -> Option<f64> {
    let at = minute_ms.to_string();
    let pairs = [
        ("name", "c_requests"),
        ("service", svc),
        ("start", at.as_str()),
        ("end", at.as_str()),
        ("cluster", if cluster { "true" } else { "false" }),
        ("step", "MINUTE"),
    ];
    let reply = client.get(&with_query("/query/metrics", &pairs)).await.ok()?;
    let body: Value = reply.json().unwrap_or_default();
    body["series"][0]["points"][0]["value"].as_f64()
}

/// The three minutes' values for `svc`.
async fn minutes(client: &AdminClient, svc: &str, first_minute_ms: i64, cluster: bool) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for m in 0..3 {
        out.push(minute_value(client, svc, first_minute_ms + m * 60_000, cluster).await);
    }
    out
}

/// Polls the three minutes' values until they are `want` or [`WAIT`] passes; returns the last
/// read (so a failed assertion shows what the cluster holds).
async fn settled(client: &AdminClient, svc: &str, first_minute_ms: i64, cluster: bool, want: &[Option<f64>]) -> Vec<Option<f64>> {
    let deadline = std::time::Instant::now() + WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        let got = minutes(client, svc, first_minute_ms, cluster).await;
        if got == want || std::time::Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_is_exact_with_sticky_routing_and_per_node_with_round_robin() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let mut nodes: Vec<TestNode> = Vec::new();
    for i in 1..=NODES {
        nodes.push(TestNode::clustered_in_memory(settings(i), membership(i), &gossip, &bus).await);
    }
    let reference = start_with_data_listener(NodeSettings::for_test()).await;
    let reference_client = AdminClient::new(&reference.admin_addr.to_string(), None).expect("client");
    wait_until(WAIT, "k1 sees three live members", || async {
        let status = nodes[0].client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
        status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == NODES)
    })
    .await;
    let (status, body) = nodes[0].push("otel-rules", "counters", RULE, &[]).await;
    assert_eq!(status, 200, "{body}");
    let reference_rule = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "counters")]);
    let reply = reference_client.post(&reference_rule, RULE.as_bytes().to_vec()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    wait_until(WAIT, "the rule runs on every node", || async {
        for node in &nodes {
            if !node.row("otel-rules", "counters").await.is_some_and(|row| row["localState"] == "RUNNING") {
                return false;
            }
        }
        true
    })
    .await;

    // Three whole minutes in the past, recent enough that no window is pruned as idle (the
    // engine judges idleness on the data's clock, capped by the wall clock).
    let now = hotrule::base::clock::wall_clock_ms();
    let first_minute_ms = (now / 60_000 - 4) * 60_000;
    let start_ms = first_minute_ms + 5_000;
    let data: Vec<SocketAddr> = nodes.iter().map(|n| n.node.data_addr.expect("data listener")).collect();
    let reference_data = reference.data_addr.expect("data listener");

    eprintln!("[counters] sticky: series p<j> always goes to node j; rotating: point k of p<j> goes to node (k + j) mod 3");
    for k in 0..POINTS {
        let mut both = String::new();
        for pod in 0..SLOPES.len() {
            let sticky = pod;
            let rotating = (k as usize + pod) % NODES;
            push_evaluated(&nodes[sticky].client, &data[sticky], &point("sticky", pod, k, start_ms)).await;
            push_evaluated(&nodes[rotating].client, &data[rotating], &point("rotating", pod, k, start_ms)).await;
            both.push_str(&point("sticky", pod, k, start_ms));
            both.push_str(&point("rotating", pod, k, start_ms));
        }
        push_evaluated(&reference_client, &reference_data, &both).await;
    }

    let want_reference: Vec<Option<f64>> = REFERENCE.iter().copied().map(Some).collect();
    let want_round_robin: Vec<Option<f64>> = ROUND_ROBIN.iter().copied().map(Some).collect();
    for svc in ["sticky", "rotating"] {
        let got = settled(&reference_client, svc, first_minute_ms, false, &want_reference).await;
        assert_eq!(got, want_reference, "the reference node's {svc} minutes");
    }

    eprintln!("[counters] sticky routing: every node's cluster read equals the reference");
    for node in &nodes {
        let got = settled(&node.client, "sticky", first_minute_ms, true, &want_reference).await;
        assert_eq!(got, want_reference, "{:?}: the cluster read of the sticky series", node.node.admin_addr);
    }

    eprintln!("[counters] round-robin: each node's windows cover only its own points");
    for node in &nodes {
        let got = settled(&node.client, "rotating", first_minute_ms, true, &want_round_robin).await;
        assert_eq!(got, want_round_robin, "{:?}: the cluster read of the rotating series", node.node.admin_addr);
    }

    for node in nodes {
        node.node.shutdown().await;
    }
    reference.shutdown().await;
}
