//! `GET /metrics` on in-process nodes: the families render behind the admin token, and the
//! control plane's counters move with rule writes, scans and bus calls.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::MemNetwork;
use hotrule::api::client::AdminClient;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::base::ids::NodeId;
use hotrule::node::NodeSettings;

const WAIT: Duration = Duration::from_secs(20);

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: m
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

/// The control-plane families a lone node shows once it has answered one write (a labeled
/// family is rendered from its first series on; the data-plane families from their first event).
const FAMILIES: [&str; 5] =
    ["hotrule_rules", "hotrule_rule_writes", "hotrule_scan_seconds", "hotrule_scan_results", "hotrule_agents_connected"];

async fn metrics_text(client: &AdminClient) -> String {
    let reply = client.get("/metrics").await.expect("metrics");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    reply.text()
}

/// The value of the sample line `series` (name and labels exactly as rendered), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn every_family_renders_behind_the_admin_token() {
    let settings = NodeSettings { admin_token: Some("s3cret".into()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let anonymous = AdminClient::new(&node.node.admin_addr.to_string(), None).expect("client");
    let reply = anonymous.get("/metrics").await.expect("metrics");
    assert_eq!(reply.status.as_u16(), 401, "the admin read token guards /metrics");

    let (code, _) = node.push("otel-rules", "vm", RULE, &[]).await;
    assert_eq!(code, 200);
    let reply = node.client.get("/metrics").await.expect("metrics");
    assert_eq!(reply.status.as_u16(), 200);
    let content_type = reply.headers["content-type"].to_str().expect("header").to_string();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    let text = reply.text();
    for family in FAMILIES {
        assert!(text.contains(&format!("# TYPE {family} ")), "{family} missing from:\n{text}");
    }
    assert!(text.trim_end().ends_with("# EOF"));
    assert_eq!(sample(&text, "hotrule_agents_connected"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "hotrule_rules{state=\"RUNNING\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "hotrule_rules{state=\"SUSPENDED\"}"), Some(0.0), "every state is shown: {text}");
    assert_eq!(sample(&text, "hotrule_scan_results_total{result=\"storage_error\"}"), Some(0.0), "every result is shown: {text}");
}

#[tokio::test]
async fn rule_writes_scans_and_rule_states_move_the_metrics() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let boot = metrics_text(&node.client).await;
    assert_eq!(sample(&boot, "hotrule_scan_results_total{result=\"ok\"}"), Some(1.0), "the boot scan: {boot}");

    let (code, answer) = node.push("otel-rules", "vm", RULE, &[]).await;
    assert_eq!(code, 200, "{answer}");
    let applied = answer["applyStatus"].as_str().expect("applyStatus").to_string();
    let (code, answer) = node.push("otel-rules", "vm", RULE, &[]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("no_change")));
    let reply = node.client.post("/runtime/rule/addOrUpdate?catalog=otel-rules", RULE.as_bytes().to_vec()).await.expect("post");
    assert_eq!(reply.status.as_u16(), 400);
    let (code, answer) = node.post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "nope")]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("not_found")));
    let (code, _) = node.post("/runtime/mal/otel/inactivate", &[("name", "vm")]).await;
    assert_eq!(code, 200);
    let (code, _) = node.push("otel-rules", "other", RULE.replace("metricPrefix: m", "metricPrefix: o").as_str(), &[]).await;
    assert_eq!(code, 200);

    let text = metrics_text(&node.client).await;
    let writes = |status: &str| sample(&text, &format!("hotrule_rule_writes_total{{status=\"{status}\"}}"));
    assert_eq!(writes(&applied), Some(2.0), "the two new files: {text}");
    assert_eq!(writes("no_change"), Some(1.0), "{text}");
    assert_eq!(writes("missing_name"), Some(1.0), "{text}");
    assert_eq!(writes("not_found"), Some(1.0), "{text}");
    assert_eq!(writes("inactivated"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "hotrule_rules{state=\"RUNNING\"}"), Some(1.0), "one file left running: {text}");
    // Reads are not writes.
    node.list().await;
    let again = metrics_text(&node.client).await;
    let total = |text: &str| text.lines().filter(|l| l.starts_with("hotrule_rule_writes_total")).map(|l| l.rsplit(' ').next().unwrap_or("0").parse::<f64>().unwrap_or(0.0)).sum::<f64>();
    assert_eq!(total(&again), total(&text));

    // The periodic scan (every second in tests) is timed and counted.
    wait_until(WAIT, "a periodic scan is counted", || async {
        let text = metrics_text(&node.client).await;
        sample(&text, "hotrule_scan_results_total{result=\"ok\"}").is_some_and(|n| n >= 2.0)
            && sample(&text, "hotrule_scan_seconds_count").is_some_and(|n| n >= 2.0)
    })
    .await;
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 41_000 + i as u16))
}

async fn clustered_node(i: usize, size: usize, gossip: &GossipNetwork, bus: &MemNetwork) -> TestNode {
    let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), gossip_addr(i));
    membership.seeds = (1..=size).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
    let settings = NodeSettings { node_id: Some(format!("n{i}")), ..NodeSettings::for_test() };
    TestNode::clustered_in_memory(settings, membership, gossip, bus).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_write_is_counted_once_by_the_main_and_the_bus_call_by_its_sender() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let n1 = clustered_node(1, 2, &gossip, &bus).await;
    let n2 = clustered_node(2, 2, &gossip, &bus).await;
    for node in [&n1, &n2] {
        wait_until(WAIT, "both nodes see n1 as the main of two", || async {
            let status = node.client.get("/cluster/status").await.expect("status").json().expect("json");
            let live = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
            status["main"] == "n1" && live == 2
        })
        .await;
    }
    let (code, answer) = n2.push("otel-rules", "forwarded", RULE, &[]).await;
    assert_eq!(code, 200, "{answer}");
    let applied = answer["applyStatus"].as_str().expect("applyStatus").to_string();
    let series = format!("hotrule_rule_writes_total{{status=\"{applied}\"}}");

    let main = metrics_text(&n1.client).await;
    assert_eq!(sample(&main, &series), Some(1.0), "the main decided the write: {main}");
    let sender = metrics_text(&n2.client).await;
    assert_eq!(sample(&sender, &series), None, "the relaying node does not count it again: {sender}");
    assert!(sample(&sender, "hotrule_bus_calls_total{message=\"forward\"}").is_some_and(|n| n >= 1.0), "{sender}");
    assert_eq!(sample(&sender, "hotrule_bus_errors_total{message=\"forward\"}"), None, "{sender}");
    n2.node.shutdown().await;
    n1.node.shutdown().await;
}
