//! The log exporter against a loopback OTLP/HTTP receiver (port 0) that decodes every request
//! and answers from a script.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hotrule_lal_engine::{ContentType, LogRecord};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value as Any};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::data::export::FINAL_FLUSH_BOUND;
use crate::base::self_metrics::{LabelSet, SelfMetrics, labels};
use crate::base::worker::WorkerRunner;

const WAIT: Duration = Duration::from_secs(10);

/// One request as the receiver saw it.
#[derive(Clone)]
struct Received {
    at: Instant,
    headers: HeaderMap,
    request: ExportLogsServiceRequest,
    answered: u16,
}

impl Received {
    /// The bodies of every record, in order.
    fn bodies(&self) -> Vec<String> {
        self.request
            .resource_logs
            .iter()
            .flat_map(|r| &r.scope_logs)
            .flat_map(|s| &s.log_records)
            .map(|r| match r.body.as_ref().and_then(|b| b.value.as_ref()) {
                Some(Any::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }
}

type Scripted = (u16, Vec<(&'static str, &'static str)>, &'static str);

#[derive(Default)]
struct Receiver {
    script: Mutex<VecDeque<Scripted>>,
    received: Mutex<Vec<Received>>,
}

impl Receiver {
    fn then_answer(&self, status: u16, headers: Vec<(&'static str, &'static str)>, body: &'static str) {
        self.script.lock().expect("script").push_back((status, headers, body));
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }

    /// Every attempt that carried the log with this body.
    fn holding(&self, body: &str) -> Vec<Received> {
        self.received().into_iter().filter(|r| r.bodies().iter().any(|b| b == body)).collect()
    }
}

async fn receive(State(receiver): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = match <ExportLogsServiceRequest as prost::Message>::decode(body.as_ref()) {
        Ok(request) => request,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("undecodable: {e}")).into_response(),
    };
    let (status, extra, text) = receiver.script.lock().expect("script").pop_front().unwrap_or((200, Vec::new(), ""));
    receiver.received.lock().expect("received").push(Received { at: Instant::now(), headers, request, answered: status });
    let mut response = (StatusCode::from_u16(status).expect("status"), text).into_response();
    for (name, value) in extra {
        response.headers_mut().insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    response
}

async fn start_receiver() -> (Arc<Receiver>, String, CancellationToken) {
    let receiver = Arc::new(Receiver::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1/logs", listener.local_addr().expect("addr"));
    let app = Router::new().route("/v1/logs", post(receive)).with_state(receiver.clone());
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await;
    });
    (receiver, url, stop)
}

/// A URL on a port that was bound and released: connections are refused.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    format!("http://{}/v1/logs", listener.local_addr().expect("addr"))
}

fn log(service: &str, body: &str) -> KeptLog {
    KeptLog {
        rule: "NGINX:nginx-access-log".into(),
        file: "lal/nginx".into(),
        record: LogRecord {
            service: service.into(),
            layer: "NGINX".into(),
            timestamp_ms: 1_700_000_000_000,
            content_type: ContentType::Text,
            content: body.into(),
            ..LogRecord::default()
        },
        received_ms: 1_700_000_000_500,
    }
}

struct Harness {
    exporter: Arc<OtlpLogExporter>,
    telemetry: Arc<SelfMetrics>,
    runner: WorkerRunner,
}

fn start_exporter(settings: OtlpLogsSettings) -> Harness {
    let telemetry = Arc::new(SelfMetrics::new());
    let (exporter, worker) = build(settings, telemetry.clone()).expect("builds");
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(worker);
    Harness { exporter, telemetry, runner }
}

impl Harness {
    fn write(&self, logs: &[KeptLog]) {
        self.exporter.write(logs).expect("the exporter never fails a write");
    }

    fn dropped(&self, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.export_log_batches_dropped, &labels([("reason", reason)]))
    }

    fn sent(&self) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.export_logs_sent, &LabelSet::new())
    }

    fn depth(&self) -> i64 {
        self.telemetry.export_log_queue_depth.get_or_create(&LabelSet::new()).get()
    }

    async fn stop(self) -> Arc<SelfMetrics> {
        let report = self.runner.shutdown(Duration::from_secs(10)).await;
        assert!(report.aborted.is_empty(), "the exporter stops within its bound");
        self.telemetry
    }
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn string_attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attributes.iter().find(|a| a.key == key)?.value.as_ref()?.value.as_ref()? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

fn any_attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attributes.iter().find(|a| a.key == key)?.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref())
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_field_arrives_as_skywalking_reads_it() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = OtlpLogsSettings::for_test(&url);
    settings.headers = crate::data::export::section::ExtraHeaders(vec![(
        HeaderName::from_static("x-scope-orgid"),
        HeaderValue::from_static("tenant-1"),
    )]);
    let harness = start_exporter(settings);
    let mut slow = log("mysql", "select sleep(3)");
    slow.rule = "MYSQL:mysql-slowsql".into();
    slow.file = "lal/mysql-slowsql".into();
    slow.record.instance = "db-1".into();
    slow.record.layer = "MYSQL".into();
    slow.record.endpoint = "/query".into();
    slow.record.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736".into();
    slow.record.segment_id = "seg-1".into();
    slow.record.span_id = Some(3);
    slow.record.content_type = ContentType::Json;
    slow.record.tags = vec![("level".into(), "ERROR".into()), ("http.status_code".into(), "500".into())];
    slow.record.output_type = Some("SlowSQL".into());
    slow.record.fields = BTreeMap::from([("latency".to_string(), json!(3000)), ("statement".to_string(), json!("select 1"))]);
    let mut plain = log("nginx", "GET / 200");
    plain.record.trace_id = "sw.trace.1".into();
    harness.write(&[slow, plain]);
    wait_until("both logs are sent", || harness.sent() == 2).await;

    let received = receiver.received();
    assert_eq!(received.len(), 1, "one batch (max_delay) for both");
    let request = &received[0];
    for (name, expected) in [
        ("content-type", "application/x-protobuf"),
        ("user-agent", concat!("hotrule/", env!("CARGO_PKG_VERSION"))),
        ("x-scope-orgid", "tenant-1"),
    ] {
        assert_eq!(request.headers.get(name).and_then(|v| v.to_str().ok()), Some(expected), "{name}");
    }
    let resources = &request.request.resource_logs;
    assert_eq!(resources.len(), 2, "one resource per service");
    let mysql = &resources[0];
    let resource = &mysql.resource.as_ref().expect("resource").attributes;
    assert_eq!(string_attr(resource, "service.name"), Some("mysql"));
    assert_eq!(string_attr(resource, "service.instance.id"), Some("db-1"));
    assert_eq!(string_attr(resource, "service.layer"), Some("MYSQL"));
    let scope = mysql.scope_logs[0].scope.as_ref().expect("scope");
    assert_eq!(scope.name, encode::SCOPE_NAME);
    assert_eq!(string_attr(&scope.attributes, "hotrule.rule"), Some("MYSQL:mysql-slowsql"));
    assert_eq!(string_attr(&scope.attributes, "hotrule.file"), Some("lal/mysql-slowsql"));
    let record = &mysql.scope_logs[0].log_records[0];
    assert_eq!(record.time_unix_nano, 1_700_000_000_000_000_000);
    assert_eq!(record.observed_time_unix_nano, 1_700_000_000_500_000_000);
    assert_eq!((record.severity_number, record.severity_text.as_str()), (17, "ERROR"));
    assert_eq!(record.body.as_ref().and_then(|b| b.value.as_ref()), Some(&Any::StringValue("select sleep(3)".into())));
    assert_eq!(record.trace_id, vec![0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36]);
    assert!(record.span_id.is_empty());
    let attrs = &record.attributes;
    let keys: Vec<&str> = attrs.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(
        keys,
        vec!["level", "http.status_code", "endpoint", "segment_id", "span_id", "output_type", "output.latency", "output.statement"]
    );
    assert_eq!(string_attr(attrs, "http.status_code"), Some("500"));
    assert_eq!(string_attr(attrs, "endpoint"), Some("/query"));
    assert_eq!(string_attr(attrs, "segment_id"), Some("seg-1"));
    assert_eq!(any_attr(attrs, "span_id"), Some(&Any::IntValue(3)));
    assert_eq!(string_attr(attrs, "output_type"), Some("SlowSQL"));
    assert_eq!(any_attr(attrs, "output.latency"), Some(&Any::IntValue(3000)));
    assert_eq!(string_attr(attrs, "output.statement"), Some("select 1"));

    let nginx = &resources[1];
    let resource = &nginx.resource.as_ref().expect("resource").attributes;
    assert_eq!(string_attr(resource, "service.name"), Some("nginx"));
    assert_eq!(string_attr(resource, "service.instance.id"), None);
    let record = &nginx.scope_logs[0].log_records[0];
    assert!(record.trace_id.is_empty(), "a SkyWalking trace id is not a W3C one");
    assert_eq!(string_attr(&record.attributes, "trace_id"), Some("sw.trace.1"));
    assert_eq!(record.severity_number, 0);

    let text = harness.telemetry.render();
    assert!(text.contains("hotrule_export_logs_sent_total 2"), "{text}");
    assert!(text.contains("hotrule_export_log_batches_dropped_total{reason=\"queue_full\"} 0"), "every reason from the start: {text}");
    harness.stop().await;
}

#[tokio::test]
async fn batches_are_cut_at_batch_size_and_the_rest_goes_after_max_delay() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = OtlpLogsSettings::for_test(&url);
    settings.batch_size = 3;
    settings.max_delay = Duration::from_millis(300);
    let harness = start_exporter(settings);
    let started = Instant::now();
    let logs: Vec<KeptLog> = (0..7).map(|i| log("s", &format!("line {i}"))).collect();
    harness.write(&logs);
    wait_until("the two full batches are sent", || harness.sent() == 6).await;
    wait_until("the last log is sent", || harness.sent() == 7).await;
    let received = receiver.received();
    let sizes: Vec<usize> = received.iter().map(|r| r.bodies().len()).collect();
    assert_eq!(sizes, vec![3, 3, 1]);
    let order: Vec<String> = received.iter().flat_map(Received::bodies).collect();
    assert_eq!(order, (0..7).map(|i| format!("line {i}")).collect::<Vec<_>>(), "in write order");
    let last_waited = received[2].at.duration_since(started);
    assert!(last_waited >= Duration::from_millis(290), "the partial batch waited max_delay: {last_waited:?}");
    harness.stop().await;
}

#[tokio::test]
async fn a_503_is_retried_and_the_batch_delivered_once() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(503, Vec::new(), "overloaded");
    let harness = start_exporter(OtlpLogsSettings::for_test(&url));
    harness.write(&[log("a", "first")]);
    wait_until("the retried batch is delivered", || harness.sent() == 1).await;
    harness.write(&[log("a", "second")]);
    wait_until("a later log is delivered", || harness.sent() == 2).await;
    let attempts: Vec<u16> = receiver.holding("first").iter().map(|r| r.answered).collect();
    assert_eq!(attempts, vec![503, 200], "one failure, one delivery");
    assert_eq!(harness.dropped("retries_exhausted") + harness.dropped("rejected"), 0);
    harness.stop().await;
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(429, vec![("retry-after", "1")], "slow down");
    let harness = start_exporter(OtlpLogsSettings::for_test(&url)); // backoff 10 ms .. 100 ms
    harness.write(&[log("a", "x")]);
    wait_until("the batch is delivered after the 429", || harness.sent() == 1).await;
    let attempts = receiver.holding("x");
    assert_eq!(attempts.iter().map(|r| r.answered).collect::<Vec<_>>(), vec![429, 200]);
    let waited = attempts[1].at.duration_since(attempts[0].at);
    assert!(waited >= Duration::from_millis(950), "Retry-After: 1 honoured, waited {waited:?}");
    harness.stop().await;
}

#[tokio::test]
async fn a_400_drops_the_batch_and_counts_it() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(400, Vec::new(), "bad data");
    let harness = start_exporter(OtlpLogsSettings::for_test(&url));
    harness.write(&[log("a", "refused")]);
    wait_until("the refused batch is counted", || harness.dropped("rejected") == 1).await;
    harness.write(&[log("a", "later")]);
    wait_until("a later log is delivered", || harness.sent() == 1).await;
    assert_eq!(receiver.holding("refused").len(), 1, "a 400 is never retried");
    harness.stop().await;
}

#[tokio::test]
async fn retries_stop_at_max_attempts_and_are_counted() {
    let (receiver, url, _stop) = start_receiver().await;
    for _ in 0..3 {
        receiver.then_answer(502, Vec::new(), "bad gateway");
    }
    let harness = start_exporter(OtlpLogsSettings::for_test(&url)); // max_attempts 3
    harness.write(&[log("a", "x")]);
    wait_until("the batch is given up", || harness.dropped("retries_exhausted") == 1).await;
    assert_eq!(receiver.holding("x").len(), 3);
    harness.stop().await;
}

#[tokio::test]
async fn a_full_queue_drops_its_oldest_batches_and_counts_them() {
    let mut settings = OtlpLogsSettings::for_test(&dead_url());
    settings.batch_size = 1;
    settings.queue_batches = 2;
    settings.retry.max_attempts = 1000; // the batch in flight never leaves: the queue must drop
    settings.retry.initial_backoff = Duration::from_millis(50);
    settings.retry.max_backoff = Duration::from_millis(50);
    let harness = start_exporter(settings);
    harness.write(&[log("a", "0")]);
    wait_until("the first batch is in flight", || harness.exporter.queued_batches() == 0 && harness.depth() == 1).await;
    let logs: Vec<KeptLog> = (1..=5).map(|i| log("a", &i.to_string())).collect();
    harness.write(&logs);
    assert_eq!(harness.dropped("queue_full"), 3, "five batches into a queue of two");
    assert_eq!(harness.exporter.queued_batches(), 2);
    assert_eq!(harness.depth(), 3, "two queued and one in flight");
    assert_eq!(harness.sent(), 0);
    let telemetry = harness.stop().await;
    assert_eq!(
        SelfMetrics::counter_value(&telemetry.export_log_batches_dropped, &labels([("reason", "shutdown")])),
        3,
        "what the dead receiver never took is counted at shutdown"
    );
    assert_eq!(telemetry.export_log_queue_depth.get_or_create(&LabelSet::new()).get(), 0);
}

#[tokio::test]
async fn shutdown_flushes_the_filling_batch_and_counts_later_writes() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = OtlpLogsSettings::for_test(&url);
    settings.max_delay = Duration::from_secs(3600);
    let harness = start_exporter(settings);
    harness.write(&[log("a", "one"), log("b", "two")]);
    assert!(receiver.received().is_empty(), "nothing before the (hour-long) delay");
    let exporter = harness.exporter.clone();
    let telemetry = harness.stop().await;
    assert_eq!(receiver.holding("one").len(), 1);
    assert_eq!(receiver.holding("two").len(), 1);
    assert_eq!(SelfMetrics::counter_value(&telemetry.export_logs_sent, &LabelSet::new()), 2);
    // Dispatch may still write after the worker stopped: counted, never silently kept.
    exporter.write(&[log("a", "late")]).expect("never fails");
    assert_eq!(SelfMetrics::counter_value(&telemetry.export_log_batches_dropped, &labels([("reason", "shutdown")])), 1);
}

#[tokio::test]
async fn shutdown_against_a_dead_receiver_is_bounded_and_counts_what_is_left() {
    let mut settings = OtlpLogsSettings::for_test(&dead_url());
    settings.max_delay = Duration::from_secs(3600);
    settings.batch_size = 2;
    settings.retry.max_attempts = 1000;
    settings.retry.initial_backoff = Duration::from_millis(200);
    settings.retry.max_backoff = Duration::from_secs(1);
    let harness = start_exporter(settings);
    harness.write(&[log("a", "1"), log("a", "2"), log("a", "3")]);
    let started = Instant::now();
    let telemetry = harness.stop().await;
    assert!(started.elapsed() < FINAL_FLUSH_BOUND + Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(
        SelfMetrics::counter_value(&telemetry.export_log_batches_dropped, &labels([("reason", "shutdown")])),
        2,
        "the full batch and the filling one"
    );
    assert_eq!(SelfMetrics::counter_value(&telemetry.export_logs_sent, &LabelSet::new()), 0);
}

#[tokio::test]
async fn wire_builds_the_exporter_only_when_configured() {
    let (receiver, url, _stop) = start_receiver().await;
    let telemetry = Arc::new(SelfMetrics::new());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    assert!(wire(None, telemetry.clone(), &mut runner).expect("wires").is_none());
    let exporter = wire(Some(OtlpLogsSettings::for_test(&url)), telemetry.clone(), &mut runner).expect("wires").expect("configured");
    let writer: Arc<dyn LogWriter> = exporter;
    writer.write(&[log("a", "through the trait")]).expect("writes");
    let sent = || SelfMetrics::counter_value(&telemetry.export_logs_sent, &LabelSet::new());
    wait_until("the log arrives", || sent() == 1).await;
    runner.shutdown(Duration::from_secs(10)).await;
    assert_eq!(receiver.holding("through the trait").len(), 1);
}

#[tokio::test]
async fn a_node_builds_the_exporter_from_its_settings_and_flushes_it_at_shutdown() {
    use crate::node::testing::NodeBuilder;
    use crate::node::NodeSettings;
    let start = |settings: NodeSettings| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        NodeBuilder::new(settings).start(Arc::new(crate::store::kv::MemKv::new()), listener).await.expect("node")
    };
    let plain = start(NodeSettings::for_test()).await;
    assert!(plain.log_exporter.is_none(), "no export.otlp_logs, no exporter");
    plain.shutdown().await;

    let (receiver, url, _stop) = start_receiver().await;
    let mut logs_export = OtlpLogsSettings::for_test(&url);
    logs_export.max_delay = Duration::from_secs(3600);
    let node = start(NodeSettings { otlp_logs_export: Some(logs_export), ..NodeSettings::for_test() }).await;
    let exporter = node.log_exporter.clone().expect("the exporter is built");
    exporter.write(&[log("a", "kept by a rule")]).expect("writes");
    let text = node.telemetry.render();
    assert!(text.contains("hotrule_export_log_batches_dropped_total{reason=\"queue_full\"} 0"), "on the node's /metrics: {text}");
    node.shutdown().await;
    assert_eq!(receiver.holding("kept by a rule").len(), 1, "the node's shutdown flushes the filling batch");
}
