//! Alarm notifications delivered to a real Prometheus Alertmanager (Debian's
//! `prometheus-alertmanager`) through hotrule's hook delivery (`control::alarms::hooks`): a
//! firing alarm becomes an active alert with the rule's labels, a repeat of it (new uuid, later
//! startTime) refreshes the same alert, and its recovery resolves it.
//!
//! Needs no `hotrule serve` process and no RocksDB: `cargo test --no-default-features --test
//! alarm_hooks`. Without Alertmanager the test prints `SKIP: …` and passes; `.ci/run` installs it.

mod components;
mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use components::alertmanager::{Alertmanager, require_alertmanager};
use components::unix_now_ms;
use harness::wait_until;
use hotrule::base::self_metrics::{SelfMetrics, labels};
use hotrule::base::worker::WorkerRunner;
use hotrule::control::alarms::hooks::{
    AlarmMessage, AlarmRecoveryMessage, DeliverySettings, HookTarget, HttpHookSender, Tag, hook_delivery,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const HOOK: &str = "alertmanager.e2e";
const RULE: &str = "service_resp_time_rule";

fn firing(uuid: &str, start_time: i64) -> AlarmMessage {
    AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: "serviceA".into(),
        id0: "c2VydmljZUE=.1".into(),
        rule_name: RULE.into(),
        alarm_message: "Response time of service serviceA is more than 1000ms in 2 minutes of last 10 minutes".into(),
        tags: vec![Tag::new("level", "WARNING"), Tag::new("team", "core")],
        start_time,
        period: 10,
        hooks: [HOOK.to_string()].into(),
        expression: "sum(service_resp_time > 1000) >= 2".into(),
        uuid: uuid.into(),
        layers: vec!["GENERAL".into()],
        ..AlarmMessage::default()
    }
}

/// The alerts of `rule` that Alertmanager lists (active, not resolved).
async fn alerts_of(alertmanager: &Alertmanager, rule: &str) -> Option<Vec<Value>> {
    let alerts = alertmanager.alerts().await?;
    Some(alerts.into_iter().filter(|alert| alert["labels"]["alertname"] == rule).collect())
}

fn label_map(alert: &Value) -> BTreeMap<String, String> {
    alert["labels"].as_object().into_iter().flatten().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_fire_refresh_and_resolve_in_a_real_alertmanager() {
    if !require_alertmanager("alarms_fire_refresh_and_resolve_in_a_real_alertmanager") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let alertmanager = Alertmanager::start(dir.path()).await;
    eprintln!("phase 1: Alertmanager ready at {}", alertmanager.url());

    let hook = HookTarget::alertmanager(HOOK, &[&alertmanager.url()], &[]).expect("valid hook");
    let sender = Arc::new(HttpHookSender::new().expect("client"));
    let metrics = Arc::new(SelfMetrics::new());
    let settings = DeliverySettings { timeout: Duration::from_secs(5), ..DeliverySettings::for_test() };
    let (notifier, worker) = hook_delivery(vec![hook], settings, sender, metrics.clone()).expect("hooks");
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(worker);
    let sent = |kind: &str| SelfMetrics::counter_value(&metrics.alarm_hook_sent, &labels([("hook", HOOK), ("kind", kind)]));

    eprintln!("phase 2: a firing alarm becomes an active alert");
    let first_start = unix_now_ms() - 60_000;
    let report = notifier.notify(&[firing("uuid-1", first_start)], &[]);
    assert_eq!(report.queued, 1);
    wait_until(WAIT, "the alert active in Alertmanager", || async {
        alerts_of(&alertmanager, RULE).await.is_some_and(|alerts| alerts.len() == 1 && alerts[0]["status"]["state"] == "active")
    })
    .await;
    let alert = alerts_of(&alertmanager, RULE).await.and_then(|mut a| a.pop()).expect("the alert");
    let want: BTreeMap<String, String> = [
        ("alertname", RULE),
        ("rule", RULE),
        ("scope", "SERVICE"),
        ("name", "serviceA"),
        ("id0", "c2VydmljZUE=.1"),
        ("level", "WARNING"),
        ("team", "core"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(label_map(&alert), want);
    assert_eq!(alert["annotations"]["uuid"], "uuid-1");
    assert_eq!(alert["annotations"]["expression"], "sum(service_resp_time > 1000) >= 2");
    assert!(alert["annotations"]["summary"].as_str().is_some_and(|s| s.starts_with("Response time of service serviceA")), "{alert}");
    let starts_at = alert["startsAt"].clone();
    let fingerprint = alert["fingerprint"].clone();
    assert_eq!(sent("firing"), 1);

    eprintln!("phase 3: a repeat (new uuid, later startTime) refreshes the same alert");
    notifier.notify(&[firing("uuid-2", first_start + 30_000)], &[]);
    wait_until(WAIT, "the repeat merged into the same alert", || async {
        alerts_of(&alertmanager, RULE).await.is_some_and(|alerts| alerts.len() == 1 && alerts[0]["annotations"]["uuid"] == "uuid-2")
    })
    .await;
    let alert = alerts_of(&alertmanager, RULE).await.and_then(|mut a| a.pop()).expect("the alert");
    assert_eq!(alert["fingerprint"], fingerprint, "same labels, same alert");
    assert_eq!(alert["startsAt"], starts_at, "Alertmanager keeps the first startsAt");
    assert_eq!(alert["status"]["state"], "active");

    eprintln!("phase 4: the recovery resolves it");
    let recovery = AlarmRecoveryMessage::of(firing("uuid-2", first_start + 30_000), unix_now_ms());
    notifier.notify(&[], &[recovery]);
    wait_until(WAIT, "the alert resolved (no longer listed)", || async {
        alerts_of(&alertmanager, RULE).await.is_some_and(|alerts| alerts.is_empty())
    })
    .await;
    assert_eq!(sent("recovery"), 1);
    assert_eq!(SelfMetrics::counter_value(&metrics.alarm_hook_dropped, &labels([("hook", HOOK), ("reason", "gave_up")])), 0);

    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty(), "{report:?}");
}
