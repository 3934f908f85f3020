//! `GET /runtime/rule/rolling` on a real in-process node (port 0), over roll records put through
//! the store facade: the list, one file's roll, the validation codes, and an unreadable record.
//! The write endpoints of a roll land later (docs/rolling.md).

mod harness;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::TestNode;
use hotrule::api::client::with_query;
use hotrule::base::ids::{Catalog, NodeId, Revision, RuleKey, RuleName};
use hotrule::node::NodeSettings;
use hotrule::control::rolling::view::RollView;
use hotrule::cli::admin::rolling::{RollQuery, status_into};
use hotrule::control::rolling::{HealthReport, HealthSettings, Observation, RollRecord, StartRoll, advance, codec, force_commit};

fn key(catalog: Catalog, name: &str) -> RuleKey {
    RuleKey::new(catalog, RuleName::parse(name).expect("name"))
}

fn record(key: RuleKey, nodes: &[&str]) -> RollRecord {
    RollRecord::start(StartRoll {
        key,
        master: Some(b"metricPrefix: a".to_vec()),
        rolling: b"metricPrefix: b".to_vec(),
        nodes: nodes.iter().map(|n| NodeId(n.to_string())).collect(),
        step_timeout_ms: 60_000,
        health: HealthSettings { window_ms: 1_000, ..HealthSettings::default() },
        now_ms: 1_000,
        revision: Revision { millis: 1_000, counter: 0, node: NodeId("n3".into()) },
    })
    .expect("start")
}

#[tokio::test]
async fn the_rolling_route_serves_records_put_through_the_store() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let store = node.node.state.store.clone();

    // Phase 1: no roll.
    let reply = node.client.get("/runtime/rule/rolling").await.expect("get");
    assert_eq!(reply.status.as_u16(), 200);
    assert_eq!(reply.json().expect("json")["rolls"], serde_json::json!([]));

    // Phase 2: a roll one step in (n1 proven healthy), and a second file's fresh roll.
    let vm = key(Catalog::OtelRules, "vm");
    let fresh = record(vm.clone(), &["n1", "n2", "n3"]);
    let report = HealthReport {
        running_hash: Some(fresh.rolling.hash.clone()),
        running_since_ms: 1_000,
        reported_ms: 2_500,
        apply_error: None,
        dispatch_running: true,
        eval_errors_rise: 0,
        samples_in: 4,
        values_out: 4,
    };
    let observations = [(NodeId("n1".into()), Observation::Report(report))].into_iter().collect();
    let (stepped, _) = advance(&fresh, &observations, 2_600);
    store.put_roll(&vm, codec::encode(&stepped).expect("encode")).await.expect("put vm");
    let envoy = key(Catalog::Lal, "envoy-als");
    store.put_roll(&envoy, codec::encode(&record(envoy.clone(), &["n1"])).expect("encode")).await.expect("put lal");

    let reply = node.client.get("/runtime/rule/rolling").await.expect("get all");
    assert_eq!(reply.status.as_u16(), 200);
    let all = reply.json().expect("json");
    let rolls = all["rolls"].as_array().expect("rolls");
    let files: Vec<(&str, &str)> = rolls.iter().map(|r| (r["catalog"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or(""))).collect();
    assert_eq!(files, vec![("lal", "envoy-als"), ("otel-rules", "vm")], "in key order");

    let reply = node.client.get(&with_query("/runtime/rule/rolling", &[("catalog", "otel-rules"), ("name", "vm")])).await.expect("get one");
    assert_eq!(reply.status.as_u16(), 200);
    let view: RollView = serde_json::from_slice(&reply.body).expect("a roll view");
    assert_eq!(view, RollView::of(&stepped));
    assert_eq!((view.state.as_str(), view.index, view.percent_done), ("in_progress", 1, 33));
    assert_eq!(view.node_at_index.as_deref(), Some("n2"));
    let states: Vec<(&str, &str, &str)> = view.nodes.iter().map(|n| (n.node.as_str(), n.state.as_str(), n.content.as_str())).collect();
    assert_eq!(states, vec![("n1", "healthy", "rolling"), ("n2", "pending", "rolling"), ("n3", "pending", "master")]);
    assert_eq!((view.started_at_ms, view.step_started_at_ms, view.updated_at_ms), (1_000, 2_600, 2_600));
    let text = hotrule::cli::admin::rolling::render(&[view]);
    assert!(text.contains("otel-rules/vm") && text.contains(" 33% in_progress"), "{text}");

    // Phase 3: validation and absence.
    // (query pairs, HTTP status, applyStatus)
    type Case = (&'static [(&'static str, &'static str)], u16, &'static str);
    let cases: &[Case] = &[
        (&[("catalog", "otel-rules"), ("name", "other")], 404, "not_found"),
        (&[("catalog", "otel-rules")], 400, "missing_name"),
        (&[("name", "vm")], 400, "missing_catalog"),
        (&[("catalog", "oal"), ("name", "vm")], 400, "invalid_catalog"),
    ];
    for (pairs, code, apply_status) in cases {
        let reply = node.client.get(&with_query("/runtime/rule/rolling", pairs)).await.expect("get");
        let json = reply.json().expect("json");
        assert_eq!((reply.status.as_u16(), json["applyStatus"].as_str()), (*code, Some(*apply_status)), "{pairs:?}: {json}");
    }

    // Phase 4: an unreadable record fails the read and names its file; removing it heals it.
    let bad = key(Catalog::Lal, "bad");
    store.put_roll(&bad, vec![99, 0]).await.expect("put bad");
    let reply = node.client.get("/runtime/rule/rolling").await.expect("get all");
    let json = reply.json().expect("json");
    assert_eq!((reply.status.as_u16(), json["applyStatus"].as_str()), (500, Some("list_failed")), "{json}");
    assert!(json["message"].as_str().unwrap_or("").contains("lal/bad"), "{json}");
    store.delete_roll(&bad).await.expect("delete bad");
    let reply = node.client.get("/runtime/rule/rolling").await.expect("get all");
    assert_eq!(reply.json().expect("json")["rolls"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn roll_status_watch_redraws_until_no_roll_is_in_progress() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let store = node.node.state.store.clone();
    let vm = key(Catalog::OtelRules, "vm");
    let live = record(vm.clone(), &["n1", "n2"]);
    store.put_roll(&vm, codec::encode(&live).expect("encode")).await.expect("put");

    // Phase 1: the watch draws the roll in progress and keeps polling.
    let drawn = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = drawn.clone();
    let client = node.client.clone();
    let query = RollQuery::One { catalog: "otel-rules".into(), name: "vm".into() };
    let watch = tokio::spawn(async move {
        status_into(&client, &query, Some(Duration::from_millis(20)), false, |text| {
            sink.lock().expect("sink").push(text.to_string())
        })
        .await
    });
    harness::wait_until(Duration::from_secs(10), "the first drawing", || {
        let drawn = drawn.clone();
        async move { drawn.lock().expect("drawn").iter().any(|t| t.contains("  0% in_progress")) }
    })
    .await;
    assert!(!watch.is_finished(), "a roll in progress keeps the watch going");

    // Phase 2: the roll is force-committed; the watch draws it once more and ends.
    let done = force_commit(&live, 9_000).expect("force-commit");
    store.put_roll(&vm, codec::encode(&done).expect("encode")).await.expect("put");
    let ended = tokio::time::timeout(Duration::from_secs(10), watch).await.expect("the watch ends").expect("task");
    ended.expect("status");
    let drawn = drawn.lock().expect("drawn");
    assert!(drawn.last().is_some_and(|t| t.contains("100% force_committed")), "{drawn:?}");
}
