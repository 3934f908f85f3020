//! Issue 23 on a real `hotrule serve` process (three scenarios; the second scrapes Debian's
//! node_exporter into the bundled `vm.yaml`): `alarm-settings.yml` from the node's config, a
//! MAL rule pushed at runtime, samples pushed to the data port, and an alarm rule on the
//! computed metric that fires to a webhook receiver and to a real Alertmanager (Debian's
//! `prometheus-alertmanager`; without it that part prints why and is skipped), then recovers
//! once the next minute's value falls back. A structural change of the metric another alarm
//! rule reads resets that rule: `alarmResets` rises and its alarm never gets a recovery. The
//! third is the dry run through the real CLI (`hotrule alarm test`) over pushed past minutes.
//!
//! The node checks every second (`alarms.check_interval: 1s`, a test knob) instead of once a
//! minute after second 15, and `al_load` keeps the latest sample of the minute, so the fire and
//! the recovery both happen within one minute of samples.
#![cfg(feature = "rocksdb")]

mod components;
mod harness;

use std::time::Duration;

use components::alertmanager::{Alertmanager, require_alertmanager};
use components::hotrule_node::HotruleNode;
use harness::wait_until;
use hotrule::api::client::with_query;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: al
metricsRules:
  - name: load
    exp: load.sum(['svc']).downsampling(LATEST)
  - name: peak
    exp: load.sum(['svc']).downsampling(MAX)
";

/// The same file with `al_peak` reshaped (MAX to MIN): a structural change.
fn reshaped() -> String {
    RULE.replace("downsampling(MAX)", "downsampling(MIN)")
}

/// The `hooks:` section (the test webhook, and Alertmanager when there is one) and the hook list
/// a rule names.
fn hooks(webhook: &str, alertmanager: Option<&str>) -> (String, String) {
    let mut section = format!("hooks:\n  webhook:\n    test:\n      urls: [{webhook}/fire]\n      recovery-urls: [{webhook}/recover]\n");
    let mut names = "webhook.test".to_string();
    if let Some(url) = alertmanager {
        section.push_str(&format!("  alertmanager:\n    am:\n      urls: [{url}]\n"));
        names.push_str(", alertmanager.am");
    }
    (section, names)
}

fn settings(webhook: &str, alertmanager: Option<&str>) -> String {
    let (hooks, names) = hooks(webhook, alertmanager);
    format!(
        "rules:
  load_rule:
    expression: sum(al_load > 100) >= 1
    period: 1
    silence-period: 0
    message: Load of {{name}} is above 100
    tags:
      level: WARNING
    hooks: [{names}]
  peak_rule:
    expression: sum(al_peak > 40) >= 1
    hooks: [webhook.test]
{hooks}"
    )
}

/// `load{svc="s"}` at `value`, `seconds` into the minute starting at `minute_ms`.
fn sample(value: i64, minute_ms: i64, seconds: i64) -> String {
    format!("load{{svc=\"s\"}} {value} {}\n", minute_ms + seconds * 1000)
}

async fn push(node: &HotruleNode, text: &str) {
    let client = hotrule::api::client::AdminClient::new(&node.data_addr().expect("data").to_string(), None).expect("client");
    let path = with_query("/ingest/prometheus", &[("job", "alarms"), ("instance", "i")]);
    let reply = client.post(&path, text.as_bytes().to_vec()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 204, "{}", reply.text());
}

async fn post_rule(node: &HotruleNode, content: &str, allow_storage_change: bool) -> Value {
    let allow = if allow_storage_change { "true" } else { "false" };
    let (status, json, text) = node.post("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "alarms"), ("allowStorageChange", allow)], content).await;
    assert_eq!(status, 200, "{text}");
    json
}

/// The minute to push into: the current one between its seconds 5 and 20 (sample times, at
/// seconds 1 to 3, stay in the past; the rest of the test fits in the minute).
async fn current_minute() -> i64 {
    wait_until(Duration::from_secs(70), "seconds 5 to 20 of a minute", || async { (5_000..20_000).contains(&(hotrule::base::clock::wall_clock_ms() % 60_000)) }).await;
    hotrule::base::clock::wall_clock_ms() / 60_000 * 60_000
}

async fn alarm_rules(node: &HotruleNode) -> Value {
    node.client.get("/runtime/alarm/rules").await.ok().and_then(|r| r.json()).unwrap_or_default()
}

async fn alarm_resets(node: &HotruleNode) -> i64 {
    let list = node.client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
    list["alarmResets"].as_i64().unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_fires_to_a_webhook_and_alertmanager_recovers_and_a_structural_change_resets_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (webhook, received) = components::webhook::start().await;
    let alertmanager = match require_alertmanager("alarms_process") {
        true => Some(Alertmanager::start(&dir.path().join("alertmanager")).await),
        false => None,
    };
    let settings_file = dir.path().join("alarm-settings.yml");
    std::fs::write(&settings_file, settings(&webhook, alertmanager.as_ref().map(|a| a.url()).as_deref())).expect("settings");
    let config = format!("alarms:\n  settings_file: {}\n  check_interval: 1s\n", settings_file.display());
    let node = HotruleNode::start(&dir.path().join("node"), &dir.path().join("rules"), &config, &[]).await;

    // Before the MAL rule exists, the alarm rules wait for their metrics.
    let rules = alarm_rules(&node).await;
    assert_eq!(rules["rules"][0]["ruleName"], "load_rule", "{rules}");
    wait_until(WAIT, "the alarm rules wait for al_load and al_peak", || async {
        alarm_rules(&node).await["rules"].as_array().is_some_and(|r| r.iter().all(|r| r["status"] == "waiting"))
    })
    .await;

    post_rule(&node, RULE, false).await;
    let minute = current_minute().await;
    push(&node, &sample(110, minute, 1)).await;

    // al_load 110 > 100 and al_peak 110 > 40: both fire. With `silence-period: 0` load_rule
    // stays FIRING and notifies at every check (each with a new uuid), as SkyWalking does.
    wait_until(WAIT, "both rules fired to the webhook", || async {
        let fired = received.messages("fire");
        fired.iter().any(|m| m["ruleName"] == "load_rule") && fired.iter().any(|m| m["ruleName"] == "peak_rule")
    })
    .await;
    let fired = received.messages("fire");
    let load = fired.iter().find(|m| m["ruleName"] == "load_rule").expect("load_rule fired");
    assert_eq!((&load["scope"], &load["scopeId"], &load["name"], &load["id0"]), (&Value::from("SERVICE"), &Value::from(1), &Value::from("s"), &Value::from("cw==.1")));
    assert_eq!(load["alarmMessage"], "Load of s is above 100");
    assert_eq!(load["tags"], serde_json::json!([{"key": "level", "value": "WARNING"}]));
    assert!(load["startTime"].as_i64().is_some_and(|t| t >= minute), "{load}");
    assert!(load["uuid"].as_str().is_some_and(|u| u.len() == 36), "{load}");
    assert!(load.get("period").is_none(), "period is transient: {load}");
    if let Some(am) = &alertmanager {
        wait_until(WAIT, "Alertmanager holds load_rule's alert", || async {
            am.alerts().await.is_some_and(|alerts| alerts.iter().any(|a| a["labels"]["alertname"] == "load_rule" && a["labels"]["name"] == "s"))
        })
        .await;
    }
    let status = alarm_rules(&node).await;
    let load_status = status["rules"].as_array().and_then(|r| r.iter().find(|r| r["ruleName"] == "load_rule")).cloned().unwrap_or_default();
    assert_eq!(load_status["entities"][0]["currentState"], "FIRING", "{status}");
    assert_eq!(load_status["entities"][0]["name"], "s", "{status}");

    // A structural change of al_peak (MAX to MIN) resets peak_rule: its alarms so far never
    // get a recovery.
    let resets = alarm_resets(&node).await;
    let answer = post_rule(&node, &reshaped(), true).await;
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("alarm rules reset: peak_rule")), "the apply names the alarm rule it reset: {answer}");
    wait_until(WAIT, "alarmResets rises", || async { alarm_resets(&node).await > resets }).await;
    let peak_before_reset: Vec<String> =
        received.messages("fire").iter().filter(|m| m["ruleName"] == "peak_rule").filter_map(|m| m["uuid"].as_str().map(String::from)).collect();
    assert!(!peak_before_reset.is_empty());

    // A later sample of the minute falls back to 10: load_rule recovers once, with its last
    // fire's uuid.
    push(&node, &sample(10, minute, 3)).await;
    wait_until(WAIT, "load_rule recovered to the webhook's recovery url", || async {
        received.messages("recover").iter().any(|m| m["ruleName"] == "load_rule")
    })
    .await;
    let recovered: Vec<Value> = received.messages("recover").into_iter().filter(|m| m["ruleName"] == "load_rule").collect();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let last_load_fire = received.messages("fire").into_iter().filter(|m| m["ruleName"] == "load_rule").last().expect("fires");
    assert_eq!(recovered[0]["uuid"], last_load_fire["uuid"], "the recovery names the last fire");
    assert_eq!(recovered[0]["startTime"], last_load_fire["startTime"]);
    assert!(recovered[0]["recoveryTime"].as_i64().is_some_and(|t| t >= minute), "{recovered:?}");
    let all_recovered = received.messages("recover");
    assert!(!all_recovered.iter().any(|m| m["uuid"].as_str().is_some_and(|u| peak_before_reset.iter().any(|p| p == u))), "a reset alarm gets no recovery");
    if let Some(am) = &alertmanager {
        wait_until(WAIT, "Alertmanager resolved load_rule's alert", || async {
            am.alerts().await.is_some_and(|alerts| !alerts.iter().any(|a| a["labels"]["alertname"] == "load_rule" && a["status"]["state"] == "active"))
        })
        .await;
    }
}

/// The "Show": Debian's node_exporter scraped into the bundled `vm.yaml`, an alarm rule on
/// `meter_vm_cpu_total_percentage` with its threshold set to trip; it fires to the webhook and to
/// a real Alertmanager. A structural change of `vm.yaml` (the metric's function) resets it: the
/// apply names the rule, `alarmResets` rises, the first alarm never recovers, and the rule
/// starts fresh (its next fire has a new uuid). The recovery path is the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_exporter_cpu_trips_an_alarm_and_a_vm_yaml_change_resets_it() {
    let test = "node_exporter_cpu_trips_an_alarm";
    if !components::require(test, &["prometheus-node-exporter"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (webhook, received) = components::webhook::start().await;
    let alertmanager = match require_alertmanager(test) {
        true => Some(Alertmanager::start(&dir.path().join("alertmanager")).await),
        false => None,
    };
    let (hooks, names) = hooks(&webhook, alertmanager.as_ref().map(|a| a.url()).as_deref());
    let settings = format!(
        "rules:
  vm_cpu_rule:
    expression: sum(meter_vm_cpu_total_percentage >= 0) >= 1
    silence-period: 1000
    message: CPU of {{name}} trips the test threshold
    hooks: [{names}]
{hooks}"
    );
    let settings_file = dir.path().join("alarm-settings.yml");
    std::fs::write(&settings_file, settings).expect("settings");
    let exporter = components::NodeExporter::start(&dir.path().join("exporter")).await;
    let job = components::ScrapeJob {
        job_name: components::scenario::VM_JOB.into(),
        targets: vec![exporter.target()],
        labels: components::scenario::vm_labels("vm-e2e"),
    };
    let config = format!(
        "{}alarms:\n  settings_file: {}\n  check_interval: 1s\n",
        components::hotrule_node::node_config(&[job], None),
        settings_file.display()
    );
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(rules.join("otel-rules")).expect("rules dir");
    let vm = components::bundled_vm_yaml();
    std::fs::write(rules.join("otel-rules/vm.yaml"), &vm).expect("vm.yaml");
    let node = HotruleNode::start(&dir.path().join("node"), &rules, &config, &[]).await;

    wait_until(Duration::from_secs(120), "vm_cpu_rule fired to the webhook", || async { !received.of_rule("fire", "vm_cpu_rule").is_empty() }).await;
    let first = received.of_rule("fire", "vm_cpu_rule")[0].clone();
    assert_eq!((&first["name"], &first["scope"]), (&Value::from("vm-e2e"), &Value::from("SERVICE")), "{first}");
    assert_eq!(first["alarmMessage"], "CPU of vm-e2e trips the test threshold");
    assert!(first["mqeMetricsSnapshot"]["meter_vm_cpu_total_percentage"].is_string(), "{first}");
    if let Some(am) = &alertmanager {
        wait_until(WAIT, "Alertmanager holds vm_cpu_rule's alert", || async {
            am.alerts().await.is_some_and(|alerts| alerts.iter().any(|a| a["labels"]["alertname"] == "vm_cpu_rule" && a["labels"]["name"] == "vm-e2e"))
        })
        .await;
    }

    let resets = alarm_resets(&node).await;
    let cpu_line = "sum(['node_identifier_host_name']).rate('PT1M')\n  - name: cpu_average_used";
    assert!(vm.contains(cpu_line), "vm.yaml's cpu_total_percentage line");
    let changed = vm.replace(cpu_line, "sum(['node_identifier_host_name']).rate('PT1M').downsampling(MAX)\n  - name: cpu_average_used");
    let (status, answer, text) =
        node.post("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "vm"), ("allowStorageChange", "true")], &changed).await;
    assert_eq!(status, 200, "{text}");
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("alarm rules reset: vm_cpu_rule")), "{answer}");
    assert!(alarm_resets(&node).await > resets);
    // Fresh: the next fire has a new uuid; the first alarm is never recovered.
    wait_until(Duration::from_secs(120), "vm_cpu_rule fired again after the reset", || async { received.of_rule("fire", "vm_cpu_rule").len() >= 2 }).await;
    let fires = received.of_rule("fire", "vm_cpu_rule");
    assert_ne!(fires[1]["uuid"], first["uuid"]);
    assert!(!received.messages("recover").iter().any(|m| m["uuid"] == first["uuid"]), "no recovery for a reset alarm");
}

/// The dry run on a real process: `al_load` pushed for twenty past minutes (above 100 from the
/// tenth on, for five minutes), then the real CLI, `hotrule alarm test --rule f.yml --since 30m`,
/// prints the FIRING at the minute the value crossed the threshold, and nothing else fires (a
/// silence of 30 checks). The webhook the rule names gets nothing, and the node stores no alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarm_test_replays_stored_values_and_sends_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (webhook, received) = components::webhook::start().await;
    let node = HotruleNode::start(&dir.path().join("node"), &dir.path().join("rules"), "", &[]).await;
    post_rule(&node, RULE, false).await;
    let first = (hotrule::base::clock::wall_clock_ms() / 60_000 - 20) * 60_000;
    let values = [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 150, 150, 150, 150, 150, 10, 10, 10, 10, 10];
    for (at, value) in values.iter().enumerate() {
        push(&node, &sample(*value, first + at as i64 * 60_000, 30)).await;
    }
    wait_until(WAIT, "twenty minutes of al_load stored", || async {
        node.query_points("al_load", "s", first, first + 20 * 60_000 - 1).await.is_some_and(|points| points.len() == 20)
    })
    .await;

    let rule_file = dir.path().join("f.yml");
    let (hooks, names) = hooks(&webhook, None);
    let tested = format!(
        "rules:
  load_rule:
    expression: sum(al_load > 100) >= 1
    period: 1
    silence-period: 30
    message: Load of {{name}} is above 100
    hooks: [{names}]
{hooks}"
    );
    std::fs::write(&rule_file, tested).expect("rule file");
    let server = node.admin_url();
    let rule_path = rule_file.display().to_string();
    let (code, stdout, stderr) = harness::hotrule_cli(&["alarm", "test", "--rule", &rule_path, "--since", "30m", "--server", &server], &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let fire_minute = hotrule::base::clock::iso8601((first + 10 * 60_000) as u64);
    let fire_minute = format!("{}Z", &fire_minute[..16]);
    let fires: Vec<&str> = stdout.lines().filter(|line| line.contains("FIRING dry-run")).collect();
    assert_eq!(fires.len(), 1, "{stdout}");
    let cells: Vec<&str> = fires[0].split_whitespace().collect();
    assert_eq!(cells[..7], [fire_minute.as_str(), "load_rule", "s", "yes", "NORMAL", "->", "FIRING"], "{stdout}");
    assert!(fires[0].ends_with("FIRING dry-run-1 \"Load of s is above 100\""), "{stdout}");
    assert!(stdout.contains("summary: 20 windows checked, 1 fire, 0 recoveries"), "{stdout}");

    // Nothing was sent or stored.
    let records = node.client.get(&with_query("/query/alarms", &[("start", "0")])).await.expect("records").json().unwrap_or_default();
    assert_eq!(records["total"], 0, "{records}");
    assert!(received.messages("fire").is_empty() && received.messages("recover").is_empty(), "the webhook got nothing");
}
