//! `/query/alarms` and `hotrule alarms list` over real HTTP against in-process nodes whose
//! alarm-record stores (the `alarms` key space of an in-memory database) hold records: filters,
//! paging with totals, recoveries joined, the 400s naming the parameter, the CLI's table and
//! follow polls; and the cluster read (the default on a clustered node) across two nodes on the
//! gossip and bus twins, with a silent peer named in `partial`.

mod harness;

use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::api::client::with_query;
use hotrule::cli::admin::alarms::{AlarmsCommand, AlarmsList, Follow, first, follow_once};
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::control::alarms::hooks::message::{AlarmMessage, AlarmRecoveryMessage, Tag};
use hotrule::data::alarm_records::AlarmRecordWriter;
use hotrule::node::NodeSettings;
use hotrule::store::kv::MemKv;
use serde_json::{Value as Json, json};

fn now_ms() -> i64 {
    hotrule::base::clock::now_ms() as i64
}

fn fire(rule: &str, name: &str, start_time: i64, uuid: &str) -> AlarmMessage {
    AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: name.into(),
        id0: format!("{name}.1"),
        id1: String::new(),
        rule_name: rule.into(),
        alarm_message: format!("Response time of service {name} is more than 1000ms"),
        tags: vec![Tag::new("level", if rule == "sla_rule" { "CRITICAL" } else { "WARNING" })],
        start_time,
        expression: "sum(service_resp_time > 1000) >= 3".into(),
        mqe_metrics_snapshot: [("service_resp_time".to_string(), "[{\"value\":\"1200\"}]".to_string())].into(),
        uuid: uuid.into(),
        ..AlarmMessage::default()
    }
}

async fn get(node: &TestNode, pairs: &[(&str, &str)]) -> (u16, Json) {
    let reply = node.client.get(&with_query("/query/alarms", pairs)).await.expect("request");
    (reply.status.as_u16(), reply.json().unwrap_or(Json::Null))
}

fn uuids(body: &Json) -> Vec<String> {
    body["msgs"].as_array().into_iter().flatten().map(|m| m["uuid"].as_str().unwrap_or("").to_string()).collect()
}

fn cli_list(args: &[&str]) -> AlarmsList {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: AlarmsCommand,
    }
    let mut all = vec!["hotrule", "list"];
    all.extend(args);
    match Cli::try_parse_from(all).expect("flags").command {
        AlarmsCommand::List(list) => list,
    }
}

#[tokio::test]
async fn query_alarms_filters_pages_joins_recoveries_and_names_bad_parameters() {
    let node = TestNode::start(NodeSettings::for_test(), Arc::new(MemKv::new())).await;
    let t0 = now_ms() - 10 * 60_000;
    let writer: Arc<dyn AlarmRecordWriter> = node.node.alarm_store.clone();
    let fires = [fire("resp_rule", "checkout", t0, "u0"), fire("sla_rule", "checkout", t0 + 1, "u1"), fire("resp_rule", "cart", t0 + 2, "u2")];
    writer.write(&fires, &[]).expect("write");
    writer.write(&[fire("resp_rule", "payment", t0 + 3, "u3")], &[AlarmRecoveryMessage::of(fires[1].clone(), t0 + 60_000)]).expect("write");

    // Newest first over the last hour, every field, the recovery joined.
    let (status, body) = get(&node, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(uuids(&body), ["u3", "u2", "u1", "u0"]);
    assert_eq!(body["total"], 4);
    assert_eq!(body["partial"], json!([]));
    let u1 = &body["msgs"][2];
    assert_eq!(u1["recoveryTime"], json!(t0 + 60_000), "{u1}");
    assert_eq!(u1["ruleName"], "sla_rule");
    assert_eq!(u1["scope"], "SERVICE");
    assert_eq!(u1["id"], "checkout.1");
    assert_eq!(u1["tags"], json!([{"key": "level", "value": "CRITICAL"}]));
    assert_eq!(u1["snapshot"]["metrics"][0]["name"], "service_resp_time");
    assert!(body["msgs"][0]["recoveryTime"].is_null());

    let (_, body) = get(&node, &[("rule", "sla_rule,nothing")]).await;
    assert_eq!(uuids(&body), ["u1"]);
    let (_, body) = get(&node, &[("rule", "sla_rule"), ("rule", "resp_rule"), ("entity", "checkout")]).await;
    assert_eq!(uuids(&body), ["u1", "u0"]);
    let (_, body) = get(&node, &[("id", "cart.1")]).await;
    assert_eq!(uuids(&body), ["u2"]);
    let (_, body) = get(&node, &[("tag", "level=WARNING"), ("keyword", "service payment")]).await;
    assert_eq!(uuids(&body), ["u3"]);
    let (_, body) = get(&node, &[("scope", "endpoint")]).await;
    assert_eq!((uuids(&body).len(), body["total"].clone()), (0, json!(0)));
    let (start, end) = ((t0 + 1).to_string(), (t0 + 2).to_string());
    let (_, body) = get(&node, &[("start", &start), ("end", &end)]).await;
    assert_eq!(uuids(&body), ["u2", "u1"]);
    let (_, body) = get(&node, &[("pageNum", "2"), ("pageSize", "3")]).await;
    assert_eq!((uuids(&body), body["total"].clone()), (vec!["u0".to_string()], json!(4)));

    for (pairs, needle) in [
        (vec![("pageSize", "0")], "pageSize"),
        (vec![("pageSize", "5000")], "pageSize"),
        (vec![("pageNum", "x")], "pageNum"),
        (vec![("tag", "nokey")], "tag"),
        (vec![("start", "yesterday")], "start"),
        (vec![("entity", "a"), ("entity", "b")], "entity"),
        (vec![("service", "a")], "service"),
        (vec![("cluster", "perhaps")], "cluster"),
    ] {
        let (status, body) = get(&node, &pairs).await;
        assert_eq!(status, 400, "{pairs:?}: {body}");
        assert_eq!(body["applyStatus"], "invalid_parameter", "{body}");
        assert!(body["message"].as_str().unwrap_or("").contains(needle), "{needle}: {body}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn the_cli_lists_then_follows_new_fires_and_recoveries_once() {
    let node = TestNode::start(NodeSettings::for_test(), Arc::new(MemKv::new())).await;
    let writer: Arc<dyn AlarmRecordWriter> = node.node.alarm_store.clone();
    let t0 = now_ms() - 60_000;
    let first_fire = fire("resp_rule", "checkout", t0, "u0");
    writer.write(&[first_fire.clone(), fire("resp_rule", "cart", t0 + 1, "u1")], &[]).expect("write");

    let list = cli_list(&["--rule", "resp_rule", "--follow"]);
    let (mut follow, mut partial, mut out) = (Follow::default(), Vec::new(), Vec::new());
    first(&node.client, &list, now_ms(), &mut follow, &mut partial, &mut out).await.expect("first page");
    let text = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("TIME") && lines[0].contains("STATE"), "{text}");
    assert!(lines[1].contains("FIRING") && lines[1].ends_with("u0") && lines[2].ends_with("u1"), "oldest at the top: {text}");

    let mut out = Vec::new();
    assert_eq!(follow_once(&node.client, &list, &mut follow, &mut partial, &mut out).await.expect("poll"), 0);
    // u0 recovers, u2 fires, another rule fires: two lines, once.
    writer.write(&[fire("resp_rule", "payment", t0 + 2, "u2"), fire("sla_rule", "payment", t0 + 3, "other")], &[AlarmRecoveryMessage::of(first_fire, now_ms())]).expect("write");
    assert_eq!(follow_once(&node.client, &list, &mut follow, &mut partial, &mut out).await.expect("poll"), 2);
    assert_eq!(follow_once(&node.client, &list, &mut follow, &mut partial, &mut out).await.expect("poll"), 0);
    let text = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("RECOVERED") && lines[0].ends_with("u0"), "{text}");
    assert!(lines[1].contains("FIRING") && lines[1].ends_with("u2"), "{text}");

    // --json: the answer as is.
    let mut out = Vec::new();
    first(&node.client, &cli_list(&["--json", "--rule", "sla_rule"]), now_ms(), &mut Follow::default(), &mut Vec::new(), &mut out).await.expect("json");
    let body: Json = serde_json::from_slice(&out).expect("json answer");
    assert_eq!(uuids(&body), ["other"]);
    let error = first(&node.client, &cli_list(&["--tag", "nokey"]), now_ms(), &mut Follow::default(), &mut Vec::new(), &mut Vec::new()).await.expect_err("bad tag");
    assert!(error.to_string().contains("invalid_parameter") && error.to_string().contains("tag"), "{error}");
    node.node.shutdown().await;
}

fn node_id(i: usize) -> hotrule::base::ids::NodeId {
    hotrule::base::ids::NodeId(format!("ar{i}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clustered_node_reads_every_node_s_records_and_names_a_silent_peer() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    eprintln!("[alarm-records] two nodes, waiting for each to see both live");
    let gossip_addr = |i: usize| std::net::SocketAddr::from(([127, 0, 0, 1], 43_100 + i as u16));
    let mut nodes = Vec::new();
    for i in 1..=2 {
        let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
        membership.seeds = vec![gossip_addr(3 - i).to_string()];
        let settings = NodeSettings { node_id: Some(node_id(i).0), ..NodeSettings::for_test() };
        nodes.push(TestNode::clustered_in_memory(settings, membership, &gossip, &bus).await);
    }
    for node in &nodes {
        wait_until(Duration::from_secs(20), "every node sees 2 live members", || async {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
            status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 2)
        })
        .await;
    }
    eprintln!("[alarm-records] each node keeps the records of the entities it owns");
    let t0 = now_ms() - 60_000;
    let write = |i: usize, fires: &[AlarmMessage]| {
        let writer: Arc<dyn AlarmRecordWriter> = nodes[i - 1].node.alarm_store.clone();
        writer.write(fires, &[]).expect("write");
    };
    write(1, &[fire("resp_rule", "a", t0, "a0"), fire("resp_rule", "a", t0 + 3, "a3")]);
    write(2, &[fire("resp_rule", "b", t0 + 1, "b1"), fire("resp_rule", "b", t0 + 2, "b2"), fire("sla_rule", "b", t0 + 4, "b4")]);

    for node in &nodes {
        let (status, body) = get(node, &[]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(uuids(&body), ["b4", "a3", "b2", "b1", "a0"], "cluster-wide by default: {body}");
        assert_eq!(body["total"], 5);
        assert_eq!(body["nodes"], json!(["ar1", "ar2"]));
        assert_eq!(body["msgs"][0]["node"], "ar2");
        let (_, body) = get(node, &[("pageNum", "2"), ("pageSize", "2"), ("rule", "resp_rule")]).await;
        assert_eq!((uuids(&body), body["total"].clone()), (vec!["b1".to_string(), "a0".to_string()], json!(4)), "{body}");
    }
    let (_, body) = get(&nodes[0], &[("cluster", "false")]).await;
    assert_eq!(uuids(&body), ["a3", "a0"], "cluster=false reads one node");
    assert_eq!(body["nodes"], json!(["ar1"]));

    eprintln!("[alarm-records] ar2 goes silent: its records are missing and it is named");
    bus.drop_responses(&node_id(1), &node_id(2), 1.0);
    let started = std::time::Instant::now();
    let (status, body) = get(&nodes[0], &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "the silent peer cost {:?}", started.elapsed());
    assert_eq!(uuids(&body), ["a3", "a0"], "{body}");
    assert_eq!(body["partial"][0]["node"], "ar2", "{body}");
    assert_eq!(body["nodes"], json!(["ar1"]));
    bus.heal_all();
    for node in nodes {
        node.node.shutdown().await;
    }
}
