//! Issue 23's dry run, `POST /runtime/alarm/test` and `hotrule alarm test`, over real HTTP
//! against in-process nodes (in-memory stores): values pushed for twenty past minutes through
//! a MAL rule, an alarm rule replayed over them fires, repeats after its silence and recovers at
//! the expected minutes; nothing reaches the webhook the rule names, no record is stored, and
//! the node's running rules keep their states. Refusals name the rule or the parameter. In a
//! cluster, every node answers the same replay: the values are read cluster-wide, for every
//! entity, not only the ones the asked node owns.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use harness::{TestNode, start_with_data_listener, wait_until};
use hotrule::api::client::{AdminClient, with_query};
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::control::alarms::config::AlarmsConfig;
use hotrule::node::NodeSettings;
use serde_json::Value;

#[allow(dead_code)]
#[path = "components/webhook.rs"]
mod webhook;

const WAIT: Duration = Duration::from_secs(30);

const MAL_RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: dr
metricsRules:
  - name: load
    exp: load.sum(['svc']).downsampling(LATEST)
";

/// Minutes `-20..=-1` before the current one: 10, then 150 from -10 to -6, then 10 again.
const SERIES: [i64; 20] = [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 150, 150, 150, 150, 150, 10, 10, 10, 10, 10];

/// The dry-run file: above 100 fires; a silence of 2 checks, a recovery after 1 + 1 false checks.
fn tested(webhook: &str) -> String {
    format!(
        "rules:
  load_rule:
    expression: sum(dr_load > 100) >= 1
    period: 1
    silence-period: 2
    recovery-observation-period: 1
    message: Load of {{name}} is above 100
    hooks: [webhook.test]
  waiting_rule:
    expression: sum(dr_nothing > 1) >= 1
hooks:
  webhook:
    test:
      urls: [{webhook}/fire]
      recovery-urls: [{webhook}/recover]
"
    )
}

/// The node's own (running) rules: one on the same metric that never matches.
fn running(webhook: &str) -> String {
    format!(
        "rules:
  running_rule:
    expression: sum(dr_load > 1000000) >= 1
    hooks: [webhook.test]
hooks:
  webhook:
    test:
      urls: [{webhook}/fire]
      recovery-urls: [{webhook}/recover]
"
    )
}

fn settings_with_alarms(dir: &std::path::Path, webhook: &str) -> NodeSettings {
    let file = dir.join("alarm-settings.yml");
    std::fs::write(&file, running(webhook)).expect("settings");
    NodeSettings {
        alarms: AlarmsConfig { settings_file: file, settings_file_named: true, check_interval: Some(Duration::from_secs(1)) },
        ..NodeSettings::for_test()
    }
}

fn first_minute_ms() -> i64 {
    (hotrule::base::clock::wall_clock_ms() / 60_000 - 20) * 60_000
}

async fn push_rule(client: &AdminClient) {
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "dryrun")]);
    let reply = client.post(&path, MAL_RULE.as_bytes().to_vec()).await.expect("push rule");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
}

async fn wait_running(client: &AdminClient) {
    wait_until(WAIT, "the MAL rule runs", || async {
        let list = client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
        list["rules"].as_array().is_some_and(|rows| rows.iter().any(|r| r["name"] == "dryrun" && r["localState"] == "RUNNING"))
    })
    .await;
}

/// One push per minute of [`SERIES`], at second 30 of each.
async fn push_series(data: &SocketAddr, first_ms: i64) {
    let client = AdminClient::new(&data.to_string(), None).expect("client");
    let path = with_query("/ingest/prometheus", &[("job", "dryrun"), ("instance", "i")]);
    for (at, value) in SERIES.iter().enumerate() {
        let line = format!("load{{svc=\"s\"}} {value} {}\n", first_ms + at as i64 * 60_000 + 30_000);
        let reply = client.post(&path, line.into_bytes()).await.expect("push");
        assert_eq!(reply.status.as_u16(), 204, "{}", reply.text());
    }
}

/// `POST /runtime/alarm/test` over the twenty minutes.
async fn dry_run(client: &AdminClient, body: &str, first_ms: i64, extra: &[(&str, &str)]) -> (u16, Value) {
    let (start, end) = (first_ms.to_string(), (first_ms + 20 * 60_000 - 1).to_string());
    let mut pairs = vec![("start", start.as_str()), ("end", end.as_str())];
    pairs.extend_from_slice(extra);
    let reply = client.post(&with_query("/runtime/alarm/test", &pairs), body.as_bytes().to_vec()).await.expect("dry run");
    (reply.status.as_u16(), reply.json().unwrap_or_default())
}

/// Waits until the stored values give all twenty windows of `load_rule`; that answer.
async fn wait_replayable(client: &AdminClient, body: &str, first_ms: i64) -> Value {
    wait_until(WAIT, "the dry run sees twenty minutes of values", || async {
        let (status, answer) = dry_run(client, body, first_ms, &[]).await;
        status == 200 && answer["rules"][0]["windows"] == 20
    })
    .await;
    let (status, answer) = dry_run(client, body, first_ms, &[]).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// (minute offset from the first, state before -> after, what was sent) of each line.
fn story(answer: &Value, first_ms: i64) -> Vec<(i64, String, String)> {
    answer["lines"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|line| {
            let offset = (line["minute"].as_i64().unwrap_or(0) - first_ms) / 60_000;
            let states = format!("{} -> {}", line["before"]["state"].as_str().unwrap_or("?"), line["after"]["state"].as_str().unwrap_or("?"));
            let sent = match line["sent"]["type"].as_str() {
                Some(kind) => format!("{kind} {}", line["sent"]["uuid"].as_str().unwrap_or("")),
                None => String::new(),
            };
            (offset, states, sent)
        })
        .collect()
}

fn expected_story() -> Vec<(i64, String, String)> {
    [
        (10, "NORMAL -> FIRING", "FIRING dry-run-1"),
        (11, "FIRING -> SILENCED_FIRING", ""),
        (13, "SILENCED_FIRING -> FIRING", "FIRING dry-run-2"),
        (14, "FIRING -> SILENCED_FIRING", ""),
        (15, "SILENCED_FIRING -> OBSERVING_RECOVERY", ""),
        (16, "OBSERVING_RECOVERY -> RECOVERED", "RECOVERED dry-run-2"),
        (17, "RECOVERED -> NORMAL", ""),
    ]
    .into_iter()
    .map(|(m, s, sent)| (m, s.to_string(), sent.to_string()))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_replays_fires_and_recoveries_and_sends_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (webhook, received) = webhook::start().await;
    let node = start_with_data_listener(settings_with_alarms(dir.path(), &webhook)).await;
    let client = AdminClient::new(&node.admin_addr.to_string(), None).expect("client");
    push_rule(&client).await;
    wait_running(&client).await;
    let first_ms = first_minute_ms();
    push_series(&node.data_addr.expect("data listener"), first_ms).await;
    let rules_before = client.get("/runtime/alarm/rules").await.expect("rules").json().unwrap_or_default();

    let body = tested(&webhook);
    let answer = wait_replayable(&client, &body, first_ms).await;
    assert_eq!(answer["applyStatus"], "no_change", "{answer}");
    assert_eq!(story(&answer, first_ms), expected_story(), "{answer}");
    let fire = &answer["lines"][0];
    assert_eq!((&fire["scope"], &fire["name"], &fire["matched"]), (&Value::from("SERVICE"), &Value::from("s"), &Value::from(true)));
    assert_eq!(fire["sent"]["message"], "Load of s is above 100");
    assert_eq!(fire["sent"]["hooks"], serde_json::json!(["webhook.test"]));
    assert_eq!((&fire["after"]["silenceCountdown"], &fire["after"]["recoveryObservationCountdown"]), (&Value::from(2), &Value::from(1)));
    let summary = &answer["summary"];
    assert_eq!((&summary["minutes"], &summary["windows"], &summary["fires"], &summary["recoveries"]), (&Value::from(20), &Value::from(20), &Value::from(2), &Value::from(1)), "{answer}");
    assert_eq!((&summary["rulesWaiting"], &summary["rulesInError"]), (&Value::from(1), &Value::from(0)));
    assert_eq!(answer["rules"][1]["status"], "waiting");
    assert_eq!(answer["rules"][1]["missingMetrics"], serde_json::json!(["dr_nothing"]));

    // verbose: every check, one per minute.
    let (status, verbose) = dry_run(&client, &body, first_ms, &[("verbose", "true")]).await;
    assert_eq!(status, 200, "{verbose}");
    assert_eq!(verbose["lines"].as_array().map(Vec::len), Some(20));

    // The CLI's table, in process.
    let rule_file = dir.path().join("f.yml");
    std::fs::write(&rule_file, &body).expect("rule file");
    let test = hotrule::cli::admin::alarm::AlarmTest {
        rule: rule_file,
        since: "1h".into(),
        start: Some(first_ms.to_string()),
        end: Some((first_ms + 20 * 60_000 - 1).to_string()),
        verbose: false,
        json: false,
    };
    let mut out = Vec::new();
    hotrule::cli::admin::alarm::run_test(&client, &test, 0, &mut out).await.expect("alarm test");
    let text = String::from_utf8(out).expect("utf-8");
    let fire_minute = hotrule::base::clock::iso8601((first_ms + 10 * 60_000) as u64);
    let fire_line = text.lines().find(|l| l.contains("FIRING dry-run-1")).unwrap_or_default();
    assert!(fire_line.starts_with(&format!("{}Z", &fire_minute[..16])), "{text}");
    assert!(text.contains("summary: 20 windows checked, 2 fires, 1 recovery, 1 rule waiting, 0 in error"), "{text}");

    // Nothing sent, nothing stored, the running rules untouched (the running rule's checks go on).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(received.messages("fire").is_empty() && received.messages("recover").is_empty(), "the webhook got nothing");
    let records = client.get(&with_query("/query/alarms", &[("start", "0")])).await.expect("records").json().unwrap_or_default();
    assert_eq!(records["total"], 0, "{records}");
    let rules_after = client.get("/runtime/alarm/rules").await.expect("rules").json().unwrap_or_default();
    let names = |rules: &Value| rules["rules"].as_array().into_iter().flatten().map(|r| r["ruleName"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&rules_after), names(&rules_before));
    assert_eq!(names(&rules_after), [Value::from("running_rule")]);
    let phases: Vec<Value> = rules_after["rules"][0]["entities"].as_array().into_iter().flatten().map(|e| e["currentState"].clone()).collect();
    assert!(phases.iter().all(|p| p == "NORMAL"), "{rules_after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_rule_or_the_parameter() {
    let node = start_with_data_listener(NodeSettings::for_test()).await;
    let client = AdminClient::new(&node.admin_addr.to_string(), None).expect("client");
    let post = |pairs: Vec<(&'static str, String)>, body: &'static str| {
        let client = client.clone();
        async move {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let reply = client.post(&with_query("/runtime/alarm/test", &pairs), body.as_bytes().to_vec()).await.expect("post");
            (reply.status.as_u16(), reply.json().unwrap_or(Value::Null))
        }
    };
    let bad = "rules:\n  good_rule:\n    expression: sum(x > 1) >= 1\n  bad_rule:\n    expression: sum(x > \n";
    let (status, body) = post(vec![], bad).await;
    assert_eq!((status, body["applyStatus"].as_str()), (400, Some("compile_failed")), "{body}");
    assert_eq!(body["rule"], "bad_rule", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("bad_rule") && m.contains("does not parse")), "{body}");

    let ok = "rules:\n  cpu_rule:\n    expression: sum(x > 1) >= 1\n";
    let (status, body) = post(vec![("since", "2d".into())], ok).await;
    assert_eq!((status, body["applyStatus"].as_str()), (400, Some("invalid_parameter")), "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("24 h")), "{body}");
    let (status, body) = post(vec![("since", "1h".into()), ("start", "0".into())], ok).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("start or since")), "{body}");
    let (status, body) = post(vec![("sinse", "1h".into())], ok).await;
    assert!(status == 400 && body["message"].as_str().is_some_and(|m| m.contains("sinse")), "{body}");
    let (status, body) = post(vec![], "").await;
    assert_eq!((status, body["applyStatus"].as_str()), (400, Some("empty_body")), "{body}");
    let (status, body) = post(vec![], "hooks: {}\n").await;
    assert!(status == 400 && body["message"].as_str().is_some_and(|m| m.contains("no rule")), "{body}");
    // A metric nobody produces: the rule waits (no 400).
    let (status, body) = post(vec![("since", "5m".into())], ok).await;
    assert_eq!((status, &body["rules"][0]["status"]), (200, &Value::from("waiting")), "{body}");
}

fn node_id(i: usize) -> hotrule::base::ids::NodeId {
    hotrule::base::ids::NodeId(format!("d{i}"))
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 44_600 + i as u16))
}

fn membership(i: usize) -> MembershipSettings {
    let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
    membership.seeds = (1..=2).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
    membership
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_of_a_cluster_replays_every_entity() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let mut nodes = Vec::new();
    for i in 1..=2 {
        let settings = NodeSettings { node_id: Some(node_id(i).0), ..NodeSettings::for_test() };
        nodes.push(TestNode::clustered_in_memory(settings, membership(i), &gossip, &bus).await);
    }
    wait_until(WAIT, "d1 sees two live members", || async {
        let status = nodes[0].client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
        status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 2)
    })
    .await;
    push_rule(&nodes[0].client).await;
    for node in &nodes {
        wait_running(&node.client).await;
    }
    let first_ms = first_minute_ms();
    // Every value reaches d1; one of the two nodes owns `s`, the other does not.
    push_series(&nodes[0].node.data_addr.expect("data listener"), first_ms).await;
    let body = tested("http://127.0.0.1:9");
    for node in &nodes {
        let answer = wait_replayable(&node.client, &body, first_ms).await;
        assert_eq!(story(&answer, first_ms), expected_story(), "{answer}");
        assert_eq!(answer["nodes"].as_array().map(Vec::len), Some(2), "both nodes answered: {answer}");
    }
}
