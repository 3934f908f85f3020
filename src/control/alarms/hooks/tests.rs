//! Delivery with the in-memory twin (retries, give-ups, refusals, a dead hook, a full queue,
//! shutdown), and the real sender against a real HTTP server on 127.0.0.1 port 0.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use bytes::Bytes;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::base::self_metrics::{LabelSet, SelfMetrics, labels};
use crate::base::worker::WorkerRunner;

/// Every wait of these tests ends by then.
const BOUND: Duration = Duration::from_secs(10);

/// Polls `check` until it holds; fails the test with `what` after [`BOUND`].
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    let mut pause = Duration::from_millis(2);
    while !check() {
        assert!(Instant::now() < deadline, "timed out after {BOUND:?} waiting for: {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

struct Rig {
    notifier: AlarmNotifier,
    metrics: Arc<SelfMetrics>,
    runner: WorkerRunner,
}

impl Rig {
    fn start(targets: Vec<HookTarget>, settings: DeliverySettings, sender: Arc<dyn HookSender>) -> Rig {
        let metrics = Arc::new(SelfMetrics::new());
        let (notifier, worker) = hook_delivery(targets, settings, sender, metrics.clone()).expect("valid hooks");
        let mut runner = WorkerRunner::new(CancellationToken::new());
        runner.spawn(worker);
        Rig { notifier, metrics, runner }
    }

    fn sent(&self, hook: &str, kind: &str) -> u64 {
        SelfMetrics::counter_value(&self.metrics.alarm_hook_sent, &labels([("hook", hook), ("kind", kind)]))
    }

    fn failures(&self, hook: &str, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.metrics.alarm_hook_failures, &labels([("hook", hook), ("reason", reason)]))
    }

    fn dropped(&self, hook: &str, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.metrics.alarm_hook_dropped, &labels([("hook", hook), ("reason", reason)]))
    }

    fn queue(&self, hook: &str) -> i64 {
        let set: LabelSet = labels([("hook", hook)]);
        self.metrics.alarm_hook_queue.get_or_create(&set).get()
    }
}

fn message(rule: &str, hooks: &[&str]) -> AlarmMessage {
    AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: "serviceA".into(),
        id0: "c2VydmljZUE=.1".into(),
        rule_name: rule.into(),
        alarm_message: format!("{rule} of serviceA"),
        tags: vec![Tag::new("level", "WARNING")],
        start_time: 1_795_816_800_000,
        period: 3,
        hooks: hooks.iter().map(ToString::to_string).collect(),
        expression: "sum(service_resp_time > 1000) >= 1".into(),
        uuid: format!("uuid-{rule}"),
        layers: vec!["GENERAL".into()],
        ..AlarmMessage::default()
    }
}

fn webhook(id: &str, url: &str) -> HookTarget {
    HookTarget::webhook(id, &[url], &[], &[]).expect("valid")
}

fn rules_in(body: &serde_json::Value) -> Vec<String> {
    body.as_array().into_iter().flatten().filter_map(|m| m["ruleName"].as_str().map(str::to_string)).collect()
}

#[tokio::test]
async fn a_failing_hook_is_retried_with_backoff_until_it_answers() {
    let twin = Arc::new(MemHookSender::new());
    twin.script([Behaviour::Answer(StatusCode::INTERNAL_SERVER_ERROR), Behaviour::Unreachable, Behaviour::Hang]);
    let settings = DeliverySettings { max_attempts: 4, ..DeliverySettings::for_test() };
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/alarm")], settings, twin.clone());

    let report = rig.notifier.notify(&[message("r1", &["webhook.a"])], &[]);
    assert_eq!(report, NotifyReport { queued: 1, ..NotifyReport::default() });
    eventually("the fourth attempt delivered", || rig.sent("webhook.a", "firing") == 1).await;

    let attempts = twin.recorded();
    assert_eq!(attempts.len(), 4);
    assert!(attempts.iter().all(|a| a.body == attempts[0].body && a.url == "http://a/alarm"), "the same body every time");
    assert_eq!(rules_in(&attempts[3].json()), ["r1"]);
    assert_eq!((rig.failures("webhook.a", "status_5xx"), rig.failures("webhook.a", "unreachable"), rig.failures("webhook.a", "timeout")), (1, 1, 1));
    eventually("the queue gauge back to 0", || rig.queue("webhook.a") == 0).await;
    assert_eq!(rig.dropped("webhook.a", "gave_up"), 0);
}

#[tokio::test]
async fn a_sender_that_ignores_its_timeout_is_bounded_by_the_worker() {
    let twin = Arc::new(MemHookSender::new());
    twin.script([Behaviour::HangForever]);
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], DeliverySettings::for_test(), twin.clone());
    rig.notifier.notify(&[message("r1", &["webhook.a"])], &[]);
    eventually("delivered on the second attempt", || rig.sent("webhook.a", "firing") == 1).await;
    assert_eq!(rig.failures("webhook.a", "timeout"), 1);
    assert_eq!(twin.recorded().len(), 2);
}

#[tokio::test]
async fn attempts_are_bounded_then_the_notification_is_given_up() {
    let twin = Arc::new(MemHookSender::new());
    twin.answer_all(Behaviour::Answer(StatusCode::SERVICE_UNAVAILABLE));
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], DeliverySettings::for_test(), twin.clone());
    rig.notifier.notify(&[message("r1", &["webhook.a"])], &[]);
    eventually("given up", || rig.dropped("webhook.a", "gave_up") == 1).await;
    assert_eq!(twin.recorded().len(), 3, "max_attempts");
    assert_eq!(rig.failures("webhook.a", "status_5xx"), 3);
    assert_eq!(rig.sent("webhook.a", "firing"), 0);
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_the_lane_goes_on() {
    let twin = Arc::new(MemHookSender::new());
    twin.script([Behaviour::Answer(StatusCode::BAD_REQUEST)]);
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], DeliverySettings::for_test(), twin.clone());
    rig.notifier.notify(&[message("refused", &["webhook.a"])], &[]);
    eventually("refused", || rig.dropped("webhook.a", "refused") == 1).await;
    assert_eq!(rig.failures("webhook.a", "status_4xx"), 1);
    // The lane is free again: the next round is delivered, and the refused one was tried once.
    rig.notifier.notify(&[message("next", &["webhook.a"])], &[]);
    eventually("the next round delivered", || rig.sent("webhook.a", "firing") == 1).await;
    let rules: Vec<Vec<String>> = twin.recorded().iter().map(|a| rules_in(&a.json())).collect();
    assert_eq!(rules, [vec!["refused".to_string()], vec!["next".to_string()]]);
}

#[tokio::test]
async fn a_dead_hook_neither_blocks_the_caller_nor_the_other_hooks() {
    let twin = Arc::new(MemHookSender::new());
    twin.answer_url("http://dead/", Behaviour::Hang);
    // Attempts to the dead hook hang for a minute; nothing below waits for that.
    let settings = DeliverySettings { timeout: Duration::from_secs(60), ..DeliverySettings::for_test() };
    let rig = Rig::start(vec![webhook("webhook.dead", "http://dead/"), webhook("webhook.live", "http://live/")], settings, twin.clone());

    let started = Instant::now();
    for round in 0..5 {
        rig.notifier.notify(&[message(&format!("r{round}"), &["webhook.dead", "webhook.live"])], &[]);
    }
    assert!(started.elapsed() < Duration::from_secs(1), "notify returned at once ({:?})", started.elapsed());
    eventually("every round delivered to the live hook", || rig.sent("webhook.live", "firing") == 5).await;
    let dead: Vec<_> = twin.recorded().into_iter().filter(|a| a.url == "http://dead/").collect();
    assert_eq!(dead.len(), 1, "one attempt hangs on the dead hook; its lane waits behind it");
    assert_eq!(rig.queue("webhook.dead"), 5, "4 waiting and 1 in flight");
    assert_eq!(rig.sent("webhook.dead", "firing"), 0);
}

#[tokio::test]
async fn a_full_queue_drops_its_oldest_and_counts_it() {
    let twin = Arc::new(MemHookSender::new());
    twin.answer_all(Behaviour::Hang);
    // r0 hangs for 2 s: long enough for the rounds below to meet a full queue on a slow machine.
    let settings = DeliverySettings { queue_capacity: 2, max_attempts: 1, timeout: Duration::from_secs(2), ..DeliverySettings::for_test() };
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], settings, twin.clone());

    rig.notifier.notify(&[message("r0", &["webhook.a"])], &[]);
    assert!(twin.wait_for_attempts(1, BOUND).await, "r0 in flight");
    let mut pushed_out = 0;
    for round in 1..=4 {
        pushed_out += rig.notifier.notify(&[message(&format!("r{round}"), &["webhook.a"])], &[]).pushed_out;
    }
    assert_eq!(pushed_out, 2, "r1 and r2 made room for r3 and r4");
    assert_eq!(rig.failures("webhook.a", "queue_full"), 2);
    assert_eq!(rig.dropped("webhook.a", "queue_full"), 2);
    assert_eq!(rig.queue("webhook.a"), 3, "2 queued and 1 in flight");

    // The receiver recovers: r0 times out (its only attempt), then the newest two arrive.
    twin.answer_all(Behaviour::Answer(StatusCode::OK));
    eventually("r3 and r4 delivered", || rig.sent("webhook.a", "firing") == 2).await;
    assert_eq!(rig.dropped("webhook.a", "gave_up"), 1);
    let delivered: Vec<Vec<String>> = twin.delivered().iter().map(|a| rules_in(&a.json())).collect();
    assert_eq!(delivered, [vec!["r3".to_string()], vec!["r4".to_string()]]);
}

#[tokio::test]
async fn unknown_hooks_and_missing_recovery_urls_send_nothing() {
    let twin = Arc::new(MemHookSender::new());
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], DeliverySettings::for_test(), twin.clone());
    let report = rig.notifier.notify(&[message("r1", &["webhook.nope"])], &[AlarmRecoveryMessage::of(message("r2", &["webhook.a"]), 1)]);
    assert_eq!(report.queued, 0, "webhook.a has no recovery-urls");
    assert_eq!(report.unknown_hooks, ["webhook.nope"]);
    assert_eq!(rig.dropped("webhook.nope", "unknown_hook"), 1);
    assert!(twin.recorded().is_empty());
}

#[tokio::test]
async fn shutdown_counts_what_was_not_delivered() {
    let twin = Arc::new(MemHookSender::new());
    twin.answer_all(Behaviour::Hang);
    let settings = DeliverySettings { timeout: Duration::from_secs(60), ..DeliverySettings::for_test() };
    let rig = Rig::start(vec![webhook("webhook.a", "http://a/")], settings, twin.clone());
    rig.notifier.notify(&[message("r0", &["webhook.a"])], &[]);
    assert!(twin.wait_for_attempts(1, BOUND).await);
    rig.notifier.notify(&[message("r1", &["webhook.a"])], &[]);
    let Rig { runner, metrics, .. } = rig;
    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty(), "the worker stopped in time: {report:?}");
    assert_eq!(SelfMetrics::counter_value(&metrics.alarm_hook_dropped, &labels([("hook", "webhook.a"), ("reason", "shutdown")])), 2);
}

/// What the test receiver saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A real HTTP server on 127.0.0.1 port 0 that records every request and answers 200.
async fn receiver() -> (String, Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let record = record.clone();
        async move {
            record.lock().unwrap_or_else(|p| p.into_inner()).push(Seen { method, path: uri.path().to_string(), headers, body });
            StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "test receiver stopped");
        }
    });
    (format!("http://{addr}"), seen, server)
}

#[tokio::test]
async fn a_real_webhook_receiver_gets_skywalkings_json() {
    let (base, seen, server) = receiver().await;
    let hook = HookTarget::webhook(
        "webhook.default",
        &[&format!("{base}/alarm")],
        &[&format!("{base}/recovery")],
        &[("Authorization", "Bearer secret")],
    )
    .expect("valid");
    let sender = Arc::new(HttpHookSender::new().expect("client"));
    let rig = Rig::start(vec![hook], DeliverySettings::for_test(), sender);

    let firing = message("service_resp_time_rule", &["webhook.default"]);
    let recovery = AlarmRecoveryMessage::of(message("service_sla_rule", &["webhook.default"]), 1_795_817_100_000);
    rig.notifier.notify(&[firing], &[recovery]);
    eventually("both requests received", || seen.lock().unwrap_or_else(|p| p.into_inner()).len() == 2).await;

    let mut requests = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    requests.sort_by(|a, b| a.path.cmp(&b.path));
    let expected_message = |rule: &str| {
        json!({
            "scopeId": 1, "scope": "SERVICE", "name": "serviceA", "id0": "c2VydmljZUE=.1", "id1": "",
            "ruleName": rule, "alarmMessage": format!("{rule} of serviceA"),
            "tags": [{"key": "level", "value": "WARNING"}],
            "startTime": 1_795_816_800_000_i64,
            "hooks": ["webhook.default"],
            "expression": "sum(service_resp_time > 1000) >= 1",
            "mqeMetricsSnapshot": {},
            "uuid": format!("uuid-{rule}"),
            "layers": ["GENERAL"]
        })
    };
    let mut expected_recovery = expected_message("service_sla_rule");
    expected_recovery["recoveryTime"] = json!(1_795_817_100_000_i64);
    for (request, path, body) in [
        (&requests[0], "/alarm", json!([expected_message("service_resp_time_rule")])),
        (&requests[1], "/recovery", json!([expected_recovery])),
    ] {
        assert_eq!(request.method, Method::POST);
        assert_eq!(request.path, path);
        assert_eq!(request.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
        assert_eq!(request.headers.get("authorization").map(|v| v.as_bytes()), Some(&b"Bearer secret"[..]));
        let received: serde_json::Value = serde_json::from_slice(&request.body).expect("a JSON body");
        assert_eq!(received, body, "{path}");
    }
    eventually("counted", || rig.sent("webhook.default", "firing") == 1 && rig.sent("webhook.default", "recovery") == 1).await;
    let text = rig.metrics.render();
    assert!(text.contains("hotrule_alarm_hook_sent_total{hook=\"webhook.default\",kind=\"firing\"} 1"), "{text}");
    assert!(text.contains("hotrule_alarm_hook_queue{hook=\"webhook.default\"} 0"), "{text}");
    server.abort();
}

#[tokio::test]
async fn the_real_sender_tells_unreachable_from_timeout() {
    let sender = HttpHookSender::new().expect("client");
    // A port nobody listens on any more.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind port 0");
    let url: Uri = format!("http://{closed}/").parse().expect("uri");
    let refused = sender.post(&url, &[], Bytes::from_static(b"[]"), Duration::from_secs(5)).await;
    assert!(matches!(refused, Err(HookError::Unreachable { .. })), "{refused:?}");

    // A listener that accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let url: Uri = format!("http://{}/", silent.local_addr().expect("addr")).parse().expect("uri");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let timeout = Duration::from_millis(200);
    let silent_answer = sender.post(&url, &[], Bytes::from_static(b"[]"), timeout).await;
    assert_eq!(silent_answer, Err(HookError::Timeout { url: url.to_string(), timeout }));
    hold.abort();
}
