//! `/query/logs` and `hotrule logs query` over real HTTP against an in-process node whose log
//! store (the `logs` key space of an in-memory database) holds kept logs: filters, paging with
//! cursors, the 400s naming the parameter, the admin token, and the CLI's first page and
//! follow polls printing each log once; and `cluster=true` across three in-process nodes on
//! the gossip and bus twins (merge by time, paging across nodes, following, a silent peer).

mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::cli::admin::logs::{LogsCommand, LogsQuery, first, follow_once};
use hotrule::api::client::with_query;
use hotrule_lal_engine::{ContentType, LogRecord};
use hotrule::data::logs::{KeptLog, LogWriter};
use hotrule::node::NodeSettings;
use hotrule::store::kv::MemKv;
use serde_json::Value as Json;

fn kept(service: &str, timestamp_ms: i64, content: &str, tags: &[(&str, &str)]) -> KeptLog {
    KeptLog {
        rule: "GENERAL:default".into(),
        file: "lal/default".into(),
        record: LogRecord {
            service: service.into(),
            instance: format!("{service}-1"),
            endpoint: "/api".into(),
            layer: "GENERAL".into(),
            timestamp_ms,
            trace_id: "trace".into(),
            segment_id: String::new(),
            span_id: None,
            content_type: ContentType::Text,
            content: content.into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            output_type: None,
            fields: BTreeMap::new(),
        },
        received_ms: timestamp_ms,
    }
}

fn now_ms() -> i64 {
    hotrule::base::clock::now_ms() as i64
}

async fn get(node: &TestNode, pairs: &[(&str, &str)]) -> (u16, Json) {
    let reply = node.client.get(&with_query("/query/logs", pairs)).await.expect("request");
    (reply.status.as_u16(), reply.json().unwrap_or(Json::Null))
}

fn contents(body: &Json) -> Vec<String> {
    body["logs"].as_array().into_iter().flatten().map(|l| l["content"].as_str().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn query_logs_filters_pages_and_names_bad_parameters() {
    let node = TestNode::start(NodeSettings::for_test(), Arc::new(MemKv::new())).await;
    let t0 = now_ms() - 60_000;
    let writer: Arc<dyn LogWriter> = node.node.log_store.clone();
    writer
        .write(&[
            kept("checkout", t0, "payment timeout", &[("level", "ERROR")]),
            kept("checkout", t0 + 1, "payment ok", &[("level", "INFO")]),
            kept("cart", t0 + 2, "cart timeout", &[("level", "ERROR"), ("region", "eu")]),
            kept("checkout", t0 + 3, "refund", &[("level", "INFO")]),
        ])
        .expect("write");

    // Newest first by default, over the last 15 minutes.
    let (status, body) = get(&node, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(contents(&body), ["refund", "cart timeout", "payment ok", "payment timeout"]);
    assert_eq!(body["logs"][0]["service"], "checkout");
    assert_eq!(body["logs"][0]["tags"], serde_json::json!([{"key": "level", "value": "INFO"}]));
    assert!(body["next"].is_null());

    let (_, body) = get(&node, &[("service", "checkout"), ("tag", "level:INFO"), ("order", "oldest")]).await;
    assert_eq!(contents(&body), ["payment ok", "refund"]);
    let (_, body) = get(&node, &[("tag", "level:ERROR"), ("tag", "region:eu")]).await;
    assert_eq!(contents(&body), ["cart timeout"]);
    let (_, body) = get(&node, &[("keyword", "timeout"), ("instance", "cart-1")]).await;
    assert_eq!(contents(&body), ["cart timeout"]);
    let start = (t0 + 1).to_string();
    let end = (t0 + 2).to_string();
    let (_, body) = get(&node, &[("start", &start), ("end", &end)]).await;
    assert_eq!(contents(&body), ["cart timeout", "payment ok"]);

    // Paging newest first with the cursor: no gaps, no repeats.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let mut pairs = vec![("limit", "3")];
        if let Some(after) = &after {
            pairs.push(("after", after.as_str()));
        }
        let (status, body) = get(&node, &pairs).await;
        assert_eq!(status, 200, "{body}");
        seen.extend(contents(&body));
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ["refund", "cart timeout", "payment ok", "payment timeout"]);

    for (pairs, needle) in [
        (vec![("limit", "0")], "limit"),
        (vec![("tag", "nocolon")], "tag"),
        (vec![("start", "yesterday")], "start"),
        (vec![("order", "up")], "order"),
        (vec![("after", "x")], "after"),
        (vec![("service", "a"), ("service", "b")], "service"),
        (vec![("sevice", "a")], "sevice"),
    ] {
        let (status, body) = get(&node, &pairs).await;
        assert_eq!(status, 400, "{pairs:?}: {body}");
        assert_eq!(body["applyStatus"], "invalid_parameter", "{body}");
        assert!(body["message"].as_str().unwrap_or("").contains(needle), "{needle}: {body}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn query_logs_needs_the_admin_token() {
    let settings = NodeSettings { admin_token: Some("secret".into()), ..NodeSettings::for_test() };
    let node = TestNode::start(settings, Arc::new(MemKv::new())).await;
    let (status, _) = get(&node, &[]).await;
    assert_eq!(status, 200, "the node's client carries the token");
    let anonymous = hotrule::api::client::AdminClient::new(&node.node.admin_addr.to_string(), None).expect("client");
    let reply = anonymous.get("/query/logs?tag=a:b&tag=c:d").await.expect("request");
    assert_eq!(reply.status.as_u16(), 401);
    node.node.shutdown().await;
}

fn cli_query(args: &[&str]) -> LogsQuery {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: LogsCommand,
    }
    let mut all = vec!["hotrule", "query"];
    all.extend(args);
    match Cli::try_parse_from(all).expect("flags").command {
        LogsCommand::Query(query) => query,
    }
}

#[tokio::test]
async fn the_cli_prints_the_last_logs_then_follows_each_new_one_once() {
    let node = TestNode::start(NodeSettings::for_test(), Arc::new(MemKv::new())).await;
    let writer: Arc<dyn LogWriter> = node.node.log_store.clone();
    let t0 = now_ms() - 60_000;
    writer.write(&[kept("a", t0, "first", &[]), kept("a", t0 + 1, "second", &[]), kept("b", t0 + 2, "other", &[])]).expect("write");

    let query = cli_query(&["--service", "a", "--limit", "5", "--follow"]);
    let mut out = Vec::new();
    let mut tail = first(&node.client, &query, now_ms(), &mut out).await.expect("first page");
    let text = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("TIME"), "{text}");
    assert!(lines[1].ends_with("first") && lines[2].ends_with("second"), "oldest at the top: {text}");

    // Nothing new: nothing printed.
    let mut out = Vec::new();
    assert_eq!(follow_once(&node.client, &query, &mut tail, &mut out).await.expect("poll"), 0);
    // New logs, one in the same millisecond as the last one shown: each printed once.
    writer.write(&[kept("a", t0 + 1, "third", &[]), kept("b", t0 + 3, "not mine", &[]), kept("a", t0 + 4, "fourth", &[])]).expect("write");
    assert_eq!(follow_once(&node.client, &query, &mut tail, &mut out).await.expect("poll"), 2);
    assert_eq!(follow_once(&node.client, &query, &mut tail, &mut out).await.expect("poll"), 0);
    let text = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].ends_with("third") && lines[1].ends_with("fourth"), "{text}");

    // --json: the answer as is; following, one log per line.
    let mut out = Vec::new();
    first(&node.client, &cli_query(&["--service", "b", "--json"]), now_ms(), &mut out).await.expect("json");
    let body: Json = serde_json::from_slice(&out).expect("json answer");
    assert_eq!(contents(&body), ["not mine", "other"]);
    let mut out = Vec::new();
    first(&node.client, &cli_query(&["--service", "b", "--json", "--follow"]), now_ms(), &mut out).await.expect("json lines");
    let lines: Vec<Json> = String::from_utf8(out).expect("utf8").lines().map(|l| serde_json::from_str(l).expect("a log")).collect();
    assert_eq!(lines.iter().map(|l| l["content"].as_str().unwrap_or("")).collect::<Vec<_>>(), ["other", "not mine"]);

    // A refused filter is the server's 400, named.
    let error = first(&node.client, &cli_query(&["--tag", "nocolon"]), now_ms(), &mut Vec::new()).await.expect_err("bad tag");
    assert!(error.to_string().contains("invalid_parameter") && error.to_string().contains("tag"), "{error}");
    node.node.shutdown().await;
}

// ---- cluster=true: every node's logs, merged by time ----

fn node_id(i: usize) -> hotrule::base::ids::NodeId {
    hotrule::base::ids::NodeId(format!("l{i}"))
}

/// Three in-process nodes on the gossip and bus twins, once each sees all three live.
async fn start_cluster(gossip: &GossipNetwork, bus: &MemNetwork) -> Vec<TestNode> {
    let gossip_addr = |i: usize| std::net::SocketAddr::from(([127, 0, 0, 1], 42_000 + i as u16));
    let mut nodes = Vec::new();
    for i in 1..=3 {
        let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
        membership.seeds = (1..=3).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let settings = NodeSettings { node_id: Some(node_id(i).0), ..NodeSettings::for_test() };
        nodes.push(TestNode::clustered_in_memory(settings, membership, gossip, bus).await);
    }
    for node in &nodes {
        wait_until(Duration::from_secs(20), "every node sees 3 live members", || async {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
            status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 3)
        })
        .await;
    }
    nodes
}

/// `(node, content)` of each log of an answer.
fn node_contents(body: &Json) -> Vec<(String, String)> {
    let field = |log: &Json, key: &str| log[key].as_str().unwrap_or("").to_string();
    body["logs"].as_array().into_iter().flatten().map(|l| (field(l, "node"), field(l, "content"))).collect()
}

/// Every page of a cluster read through `node` with `limit`, following `next`.
async fn page_through(node: &TestNode, order: &str, limit: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..50 {
        let mut pairs = vec![("cluster", "true"), ("order", order), ("limit", limit)];
        if let Some(after) = &after {
            pairs.push(("after", after.as_str()));
        }
        let (status, body) = get(node, &pairs).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["partial"], serde_json::json!([]), "{body}");
        seen.extend(node_contents(&body));
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return seen,
        }
    }
    panic!("paging did not end: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_reads_merge_every_node_s_logs_page_across_nodes_and_follow_new_ones() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    eprintln!("[logs-cluster] three nodes, waiting for each to see all live");
    let nodes = start_cluster(&gossip, &bus).await;
    let t0 = now_ms() - 60_000;
    let write = |i: usize, logs: &[KeptLog]| {
        let writer: Arc<dyn LogWriter> = nodes[i - 1].node.log_store.clone();
        writer.write(logs).expect("write");
    };
    eprintln!("[logs-cluster] each node keeps its own logs, several at the same millisecond across nodes");
    write(1, &[kept("a", t0, "l1-0", &[]), kept("a", t0 + 1, "l1-1", &[]), kept("b", t0 + 1, "l1-2", &[])]);
    write(2, &[kept("a", t0 + 1, "l2-0", &[]), kept("b", t0 + 2, "l2-1", &[])]);
    write(3, &[kept("b", t0, "l3-0", &[]), kept("a", t0 + 1, "l3-1", &[]), kept("a", t0 + 3, "l3-2", &[])]);
    let oldest: Vec<(String, String)> = [
        ("l1", "l1-0"),
        ("l3", "l3-0"),
        ("l1", "l1-1"),
        ("l1", "l1-2"),
        ("l2", "l2-0"),
        ("l3", "l3-1"),
        ("l2", "l2-1"),
        ("l3", "l3-2"),
    ]
    .iter()
    .map(|(n, c)| (n.to_string(), c.to_string()))
    .collect();
    let newest: Vec<(String, String)> = oldest.iter().rev().cloned().collect();

    eprintln!("[logs-cluster] cluster=true on any node: all logs, by (time, node, sequence), each naming its node");
    for node in &nodes {
        let (status, body) = get(node, &[("cluster", "true"), ("order", "oldest")]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(node_contents(&body), oldest, "{body}");
        assert_eq!(body["nodes"], serde_json::json!(["l1", "l2", "l3"]), "{body}");
        assert_eq!(body["partial"], serde_json::json!([]), "{body}");
        assert_eq!(body["logs"][1]["cursor"], format!("{t0}-l3-0"), "{body}");
        let (_, body) = get(node, &[("cluster", "true"), ("service", "b")]).await;
        assert_eq!(contents(&body), ["l2-1", "l1-2", "l3-0"], "filters apply on every node, newest first: {body}");
    }
    let (_, body) = get(&nodes[0], &[("order", "oldest")]).await;
    assert_eq!(contents(&body), ["l1-0", "l1-1", "l1-2"], "without cluster=true a node reads its own store");

    eprintln!("[logs-cluster] small pages across nodes: every log once, in order, both ways");
    for limit in ["1", "2", "3"] {
        assert_eq!(page_through(&nodes[1], "oldest", limit).await, oldest, "oldest, limit {limit}");
        assert_eq!(page_through(&nodes[2], "newest", limit).await, newest, "newest, limit {limit}");
    }
    let (status, body) = get(&nodes[0], &[("cluster", "true"), ("after", "12-3")]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap_or("").contains("not a cluster cursor"), "{body}");

    eprintln!("[logs-cluster] the CLI with --cluster --follow picks up a log pushed later to another node");
    let query = cli_query(&["--cluster", "--follow", "--limit", "2"]);
    let mut out = Vec::new();
    let mut tail = first(&nodes[1].client, &query, now_ms(), &mut out).await.expect("first page");
    let text = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("NODE"), "{text}");
    assert!(lines[1].contains("l2") && lines[1].ends_with("l2-1") && lines[2].contains("l3") && lines[2].ends_with("l3-2"), "{text}");
    let mut out = Vec::new();
    assert_eq!(follow_once(&nodes[1].client, &query, &mut tail, &mut out).await.expect("poll"), 0);
    write(1, &[kept("a", t0 + 4, "l1-late", &[])]);
    write(3, &[kept("a", t0 + 5, "l3-late", &[])]);
    // Polls go on from where the last one left off, as `--follow` does.
    let client = nodes[1].client.clone();
    let following = Arc::new(tokio::sync::Mutex::new((tail, Vec::<String>::new())));
    wait_until(Duration::from_secs(10), "the follow polls print both new logs", || {
        let (client, query, following) = (client.clone(), query.clone(), following.clone());
        async move {
            let mut following = following.lock().await;
            let (tail, printed) = &mut *following;
            let mut out = Vec::new();
            follow_once(&client, &query, tail, &mut out).await.expect("poll");
            printed.extend(String::from_utf8(out).expect("utf8").lines().map(str::to_string));
            printed.len() >= 2
        }
    })
    .await;
    let printed = following.lock().await.1.clone();
    assert_eq!(printed.len(), 2, "{printed:?}");
    assert!(printed[0].contains("l1") && printed[0].ends_with("l1-late"), "{printed:?}");
    assert!(printed[1].contains("l3") && printed[1].ends_with("l3-late"), "{printed:?}");

    eprintln!("[logs-cluster] l3 goes silent: its logs are missing and it is named, within the deadline");
    bus.drop_responses(&node_id(1), &node_id(3), 1.0);
    let started = std::time::Instant::now();
    let (status, body) = get(&nodes[0], &[("cluster", "true"), ("order", "oldest")]).await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "the silent peer cost {:?}", started.elapsed());
    assert_eq!(body["partial"][0]["node"], "l3", "{body}");
    assert_eq!(body["nodes"], serde_json::json!(["l1", "l2"]), "{body}");
    assert!(node_contents(&body).iter().all(|(node, _)| node != "l3"), "{body}");
    bus.heal_all();
    for node in nodes {
        node.node.shutdown().await;
    }
}
