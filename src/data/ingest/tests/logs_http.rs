//! The log receivers over real HTTP on 127.0.0.1:0: `/v1/logs` and `/v3/logs` round trips,
//! every refusal with its status, body and counter, and the routes on a node's data listener.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use prost::Message;

use super::http::{GZIP, JSON, PROTOBUF, gzip, post, serve};
use super::native_logs::NATIVE_REQUEST;
use super::otlp_logs::LOGS_JSON_REQUEST;
use crate::data::seam::{LogProtocol, LogSink, SubmitError};
use crate::data::ingest::answer::RpcStatus;
use crate::data::ingest::logs_http::LOGS_UNAVAILABLE;
use crate::data::ingest::{BodyLimits, Ingest, RecordingLogSink, RecordingSink, native_logs, otlp_logs, otlp_logs_json};
use crate::base::self_metrics::{SelfMetrics, labels};
use hotrule_lal_engine::Body;

struct Server {
    addr: std::net::SocketAddr,
    sink: Arc<RecordingLogSink>,
    telemetry: Arc<SelfMetrics>,
}

impl Server {
    async fn start(limits: BodyLimits) -> Server {
        Server::start_with(limits, true).await
    }

    async fn start_with(limits: BodyLimits, with_log_sink: bool) -> Server {
        let sink = Arc::new(RecordingLogSink::new());
        let telemetry = Arc::new(SelfMetrics::new());
        let log_sink = with_log_sink.then(|| sink.clone() as Arc<dyn LogSink>);
        let ingest = Ingest::with_logs(Arc::new(RecordingSink::new()), log_sink, telemetry.clone(), limits);
        Server { addr: serve(ingest).await, sink, telemetry }
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> (StatusCode, HeaderMap, Bytes) {
        post(self.addr, path, headers, body).await
    }

    fn rejected(&self, protocol: LogProtocol, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.logs_rejected, &labels([("protocol", protocol.as_str()), ("reason", reason)]))
    }

    fn received(&self, protocol: LogProtocol) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.logs_received, &labels([("protocol", protocol.as_str())]))
    }
}

fn limits() -> BodyLimits {
    BodyLimits { max_body_bytes: 8192, max_decompressed_bytes: 32 * 1024 }
}

fn protobuf_request() -> Vec<u8> {
    otlp_logs_json::decode(LOGS_JSON_REQUEST.as_bytes()).expect("valid").encode_to_vec()
}

fn expected_otlp_batches(received_ms: i64) -> Vec<crate::data::seam::LogBatch> {
    let decoded = otlp_logs_json::decode(LOGS_JSON_REQUEST.as_bytes()).expect("valid");
    otlp_logs::map_request(&decoded, received_ms).expect("maps").batches
}

fn text(body: &Bytes) -> String {
    String::from_utf8_lossy(body).into_owned()
}

const PARTIAL: &str = "resourceLogs[1]: 2 log records refused: the resource has no service.name attribute (SkyWalking discards such logs)";

#[tokio::test]
async fn otlp_protobuf_logs_are_mapped_submitted_and_answered_with_partial_success() {
    let server = Server::start(limits()).await;
    let (status, headers, body) = server.post("/v1/logs", &[PROTOBUF], protobuf_request()).await;
    assert_eq!(status, StatusCode::OK, "{}", text(&body));
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let answer = ExportLogsServiceResponse::decode(body).expect("an ExportLogsServiceResponse");
    let partial = answer.partial_success.expect("the service-less resource is reported");
    assert_eq!((partial.rejected_log_records, partial.error_message.as_str()), (2, PARTIAL));
    let accepted = server.sink.accepted();
    assert_eq!(accepted.len(), 1, "one submission per request");
    let received_ms = accepted[0][0].received_ms;
    assert_eq!(accepted[0], expected_otlp_batches(received_ms));
    assert_eq!(accepted[0][0].logs[0].service, "checkout");
    assert_eq!(server.received(LogProtocol::Otlp), 2);
    assert_eq!(server.rejected(LogProtocol::Otlp, "missing_service"), 2);
}

#[tokio::test]
async fn otlp_json_logs_plain_and_gzip_answer_in_json() {
    let server = Server::start(limits()).await;
    for (headers, body) in [(vec![JSON], LOGS_JSON_REQUEST.as_bytes().to_vec()), (vec![JSON, GZIP], gzip(LOGS_JSON_REQUEST.as_bytes()))] {
        let (status, answer_headers, answer) = server.post("/v1/logs", &headers, body).await;
        assert_eq!(status, StatusCode::OK, "{}", text(&answer));
        assert_eq!(answer_headers["content-type"], "application/json");
        let answer: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
        assert_eq!(answer, serde_json::json!({"partialSuccess": {"rejectedLogRecords": "2", "errorMessage": PARTIAL}}));
    }
    let batches = server.sink.batches();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[1], expected_otlp_batches(batches[1].received_ms)[0]);
    assert_eq!(server.received(LogProtocol::Otlp), 4);
}

#[tokio::test]
async fn a_fully_taken_otlp_request_has_no_partial_success() {
    let server = Server::start(limits()).await;
    let body = r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
        "scopeLogs": [{"logRecords": [{"body": {"stringValue": "hello"}}]}]}]}"#;
    let (status, _, answer) = server.post("/v1/logs", &[JSON], body.into()).await;
    assert_eq!((status, text(&answer).as_str()), (StatusCode::OK, "{}"));
    let decoded = otlp_logs_json::decode(body.as_bytes()).expect("valid");
    let (status, _, answer) = server.post("/v1/logs", &[PROTOBUF], decoded.encode_to_vec()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ExportLogsServiceResponse::decode(answer).expect("decodes").partial_success, None);
    // An empty request is taken and submits nothing.
    let (status, _, answer) = server.post("/v1/logs", &[JSON], b"{}".to_vec()).await;
    assert_eq!((status, text(&answer).as_str()), (StatusCode::OK, "{}"));
    assert_eq!(server.sink.seen(), 2);
    assert_eq!(server.sink.batches()[0].logs[0].body, Body::Text("hello".into()));
}

#[tokio::test]
async fn native_logs_are_submitted_as_one_batch_and_answered_with_empty_commands() {
    let server = Server::start(limits()).await;
    for headers in [vec![JSON], vec![], vec![("content-type", "application/json; charset=utf-8"), GZIP]] {
        let body = if headers.contains(&GZIP) { gzip(NATIVE_REQUEST.as_bytes()) } else { NATIVE_REQUEST.as_bytes().to_vec() };
        let (status, answer_headers, answer) = server.post("/v3/logs", &headers, body).await;
        assert_eq!((status, text(&answer).as_str()), (StatusCode::OK, "{}"), "{headers:?}");
        assert_eq!(answer_headers["content-type"], "application/json");
    }
    let accepted = server.sink.accepted();
    assert_eq!(accepted.len(), 3);
    assert_eq!(accepted[0].len(), 1, "one batch per native request");
    let batch = &accepted[0][0];
    assert_eq!(batch, &native_logs::decode(NATIVE_REQUEST.as_bytes(), batch.received_ms).expect("valid"));
    assert_eq!(server.received(LogProtocol::SkyWalking), 12);
    // An empty array is taken and submits nothing.
    let (status, _, _) = server.post("/v3/logs", &[JSON], b"[]".to_vec()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(server.sink.seen(), 3);
}

#[tokio::test]
async fn otlp_refusals_answer_a_status_in_the_requests_format_and_are_counted() {
    let server = Server::start(limits()).await;
    let otlp = LogProtocol::Otlp;
    // 415: no or a foreign Content-Type (answered in JSON), an unsupported encoding.
    for headers in [vec![], vec![("content-type", "text/plain")]] {
        let (status, answer_headers, body) = server.post("/v1/logs", &headers, b"{}".to_vec()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(answer_headers["content-type"], "application/json");
        let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON status");
        assert_eq!(answer["code"], 12);
        assert!(answer["message"].as_str().expect("message").contains("is not application/x-protobuf or application/json"), "{answer}");
    }
    let (status, _, body) = server.post("/v1/logs", &[PROTOBUF, ("content-encoding", "br")], protobuf_request()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(RpcStatus::decode(body).expect("a google.rpc.Status").message.contains("\"br\""));
    assert_eq!(server.rejected(otlp, "unsupported_media_type"), 3);
    // 400: not protobuf, not OTLP/JSON (the field named), not gzip, a repeated resource attribute.
    let (status, _, body) = server.post("/v1/logs", &[PROTOBUF], vec![0xff, 0xff, 0xff]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let rpc = RpcStatus::decode(body).expect("a google.rpc.Status");
    assert_eq!(rpc.code, 3);
    assert!(rpc.message.starts_with("not an ExportLogsServiceRequest in protobuf"), "{}", rpc.message);
    let bad_json = r#"{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": true}]}]}]}"#;
    let (status, _, body) = server.post("/v1/logs", &[JSON], bad_json.into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON status");
    assert_eq!(answer["code"], 3);
    assert!(answer["message"].as_str().expect("message").starts_with("resourceLogs[0].scopeLogs[0].logRecords[0].timeUnixNano:"), "{answer}");
    let (status, _, _) = server.post("/v1/logs", &[JSON, GZIP], b"not gzip".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(server.rejected(otlp, "decode"), 3);
    let twice = r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}},
        {"key": "service.name", "value": {"stringValue": "b"}}]}, "scopeLogs": [{"logRecords": [{}]}]}]}"#;
    let (status, _, body) = server.post("/v1/logs", &[JSON], twice.into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text(&body).contains("resourceLogs[0].resource.attributes: the key \\\"service.name\\\" appears more than once"), "{}", text(&body));
    assert_eq!(server.rejected(otlp, "bad_request"), 1);
    // A repeated record attribute refuses that record only: 200 with partial success.
    let repeated = r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},
        "scopeLogs": [{"logRecords": [{}, {"attributes": [{"key": "k"}, {"key": "k"}]}]}]}]}"#;
    let (status, _, body) = server.post("/v1/logs", &[JSON], repeated.into()).await;
    assert_eq!(status, StatusCode::OK);
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(answer["partialSuccess"]["rejectedLogRecords"], "1");
    assert_eq!(
        answer["partialSuccess"]["errorMessage"],
        "resourceLogs[0].scopeLogs[0].logRecords[1]: the attribute key \"k\" appears more than once"
    );
    assert_eq!(server.rejected(otlp, "invalid_record"), 1);
    assert_eq!(server.sink.batches().len(), 1, "only the repeated-attribute request reached the sink");
    assert_eq!(server.received(otlp), 1);
}

#[tokio::test]
async fn native_refusals_name_the_element_and_field_and_are_counted() {
    let server = Server::start(limits()).await;
    let native = LogProtocol::SkyWalking;
    let (status, _, body) = server.post("/v3/logs", &[("content-type", "application/x-protobuf")], b"[]".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(text(&body).contains("is not application/json"), "{}", text(&body));
    let (status, _, _) = server.post("/v3/logs", &[JSON, ("content-encoding", "snappy")], b"[]".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(server.rejected(native, "unsupported_media_type"), 2);
    let cases = [
        (r#"{"service": "a"}"#, "the body must be a JSON array of LogData, found an object"),
        (r#"[{"service": "a"}, {"service": "b", "timestamp": "later"}]"#, "[1]: field 'timestamp' has the wrong type"),
        (r#"[{"service": "a", "tags": {"data": 1}}]"#, "[0]: field 'tags' has the wrong type"),
        ("[", "the body is not JSON"),
    ];
    for (body, expected) in cases {
        let (status, headers, answer) = server.post("/v3/logs", &[JSON], body.into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(text(&answer).starts_with(expected), "{body}: {}", text(&answer));
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    }
    assert_eq!(server.rejected(native, "decode"), 4);
    assert_eq!(server.sink.seen(), 0, "nothing of a refused request is submitted");
    assert_eq!(server.received(native), 0);
}

#[tokio::test]
async fn bodies_over_the_limits_are_413_on_both_routes() {
    let server = Server::start(BodyLimits { max_body_bytes: 1024, max_decompressed_bytes: 4096 }).await;
    let big_native = format!(r#"[{{"service": "s", "body": {{"text": {{"text": "{}"}}}}}}]"#, "x".repeat(8000));
    for (path, content_type) in [("/v1/logs", JSON), ("/v3/logs", JSON)] {
        // Sent too large (the declared length is refused before reading).
        let (status, _, _) = server.post(path, &[content_type], vec![b' '; 2000]).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        // Small when sent, too large once inflated.
        let (status, _, body) = server.post(path, &[content_type, GZIP], gzip(big_native.as_bytes())).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        assert!(text(&body).contains("once decompressed"), "{}", text(&body));
    }
    assert_eq!(server.rejected(LogProtocol::Otlp, "too_large"), 2);
    assert_eq!(server.rejected(LogProtocol::SkyWalking, "too_large"), 2);
    assert_eq!(server.sink.seen(), 0);
}

#[tokio::test]
async fn a_full_log_sink_is_429_with_retry_after_and_a_stopping_one_503() {
    let server = Server::start(limits()).await;
    server.sink.refuse_next(SubmitError::QueueFull { retry_after: Duration::from_millis(1500) });
    server.sink.refuse_next(SubmitError::QueueFull { retry_after: Duration::from_secs(3) });
    server.sink.refuse_next(SubmitError::Stopped);
    let (status, headers, body) = server.post("/v1/logs", &[PROTOBUF], protobuf_request()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(RpcStatus::decode(body).expect("a google.rpc.Status").code, 8);
    let (status, headers, _) = server.post("/v3/logs", &[JSON], NATIVE_REQUEST.into()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "3");
    let (status, headers, body) = server.post("/v1/logs", &[JSON], LOGS_JSON_REQUEST.into()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!headers.contains_key("retry-after"));
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(answer["code"], 14);
    assert_eq!(server.rejected(LogProtocol::Otlp, "queue_full"), 2);
    assert_eq!(server.rejected(LogProtocol::SkyWalking, "queue_full"), 4);
    assert_eq!(server.rejected(LogProtocol::Otlp, "stopped"), 2);
    // Received counts what was handed over, refused or not.
    assert_eq!(server.received(LogProtocol::Otlp), 4);
    assert!(server.sink.accepted().is_empty());
    // The retry is taken.
    let (status, _, _) = server.post("/v3/logs", &[JSON], NATIVE_REQUEST.into()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(server.sink.accepted().len(), 1);
}

#[tokio::test]
async fn without_a_log_sink_both_routes_answer_503_logs_unavailable() {
    let server = Server::start_with(limits(), false).await;
    let (status, _, body) = server.post("/v1/logs", &[PROTOBUF], protobuf_request()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let rpc = RpcStatus::decode(body).expect("a google.rpc.Status");
    assert_eq!((rpc.code, rpc.message.as_str()), (14, LOGS_UNAVAILABLE));
    let (status, _, body) = server.post("/v3/logs", &[JSON], NATIVE_REQUEST.into()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(text(&body), format!("{LOGS_UNAVAILABLE}\n"));
    assert!(LOGS_UNAVAILABLE.starts_with("logs_unavailable: "));
    assert_eq!(server.rejected(LogProtocol::Otlp, "unavailable"), 1);
    assert_eq!(server.rejected(LogProtocol::SkyWalking, "unavailable"), 1);
}

#[tokio::test]
async fn a_node_serves_the_log_receivers_on_its_data_listener() {
    use crate::node::testing::NodeBuilder;
    use crate::node::{Listeners, NodeSettings, RunningNode};
    async fn start(node: NodeBuilder) -> RunningNode {
        let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let listeners = Listeners { admin, data: Some(data), grpc: None };
        node.start_with_listeners(Arc::new(crate::store::kv::MemKv::new()), listeners, None).await.expect("starts")
    }
    let sink = Arc::new(RecordingLogSink::new());
    let node = start(NodeBuilder::new(NodeSettings::for_test()).log_sink(sink.clone())).await;
    let data_addr = node.data_addr.expect("data listener");
    let (status, _, _) = post(data_addr, "/v1/logs", &[PROTOBUF], protobuf_request()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = post(data_addr, "/v3/logs", &[JSON], NATIVE_REQUEST.into()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sink.wait_for_submissions(2, Duration::from_secs(5)).await, 2);
    let protocols: Vec<LogProtocol> = sink.batches().iter().map(|b| b.protocol).collect();
    assert_eq!(protocols, [LogProtocol::Otlp, LogProtocol::SkyWalking]);
    node.shutdown().await;
    // A node given no log sink hands the logs to its own dispatcher.
    let node = start(NodeBuilder::new(NodeSettings::for_test())).await;
    let (status, _, body) = post(node.data_addr.expect("data listener"), "/v3/logs", &[JSON], NATIVE_REQUEST.into()).await;
    assert_eq!(status, StatusCode::OK, "{}", text(&body));
    let received = labels([("protocol", "skywalking")]);
    assert!(SelfMetrics::counter_value(&node.telemetry.logs_received, &received) > 0, "received through the dispatcher");
    node.shutdown().await;
}
