//! `/query/logs` and `hotrule logs query` over real HTTP against an in-process node whose log
//! store (the `logs` key space of an in-memory database) holds kept logs: filters, paging with
//! cursors, the 400s naming the parameter, the admin token, and the CLI's first page and
//! follow polls printing each log once.

mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use harness::TestNode;
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
