//! The receivers over real HTTP on 127.0.0.1:0: status codes with their bodies, counters, and
//! the routes merged with the agent config server on a node's data listener.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, Request, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prost::Message;

use super::otlp_json::JSON_REQUEST;
use super::remote_write::{encode, series};
use crate::data::seam::{Protocol, SubmitError};
use crate::data::ingest::answer::RpcStatus;
use crate::data::ingest::remote_write::STALE_NAN_BITS;
use crate::data::ingest::{BodyLimits, Ingest, RecordingSink, router};
use crate::base::self_metrics::{SelfMetrics, labels};

struct Server {
    addr: std::net::SocketAddr,
    sink: Arc<RecordingSink>,
    telemetry: Arc<SelfMetrics>,
}

impl Server {
    async fn start(limits: BodyLimits) -> Server {
        let sink = Arc::new(RecordingSink::new());
        let telemetry = Arc::new(SelfMetrics::new());
        let ingest = Ingest::new(sink.clone(), telemetry.clone(), limits);
        Server { addr: serve(ingest).await, sink, telemetry }
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> (StatusCode, HeaderMap, Bytes) {
        post(self.addr, path, headers, body).await
    }

    fn rejected(&self, protocol: Protocol, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.samples_rejected, &labels([("protocol", protocol.as_str()), ("reason", reason)]))
    }

    fn received(&self, protocol: Protocol) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.samples_received, &labels([("protocol", protocol.as_str())]))
    }
}

/// Serves the receivers of `ingest` on 127.0.0.1:0; their address.
pub(super) async fn serve(ingest: Arc<Ingest>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(ingest)).await });
    addr
}

pub(super) async fn post(addr: std::net::SocketAddr, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> (StatusCode, HeaderMap, Bytes) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut builder = Request::post(format!("http://{addr}{path}"));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client.request(builder.body(Full::new(Bytes::from(body))).expect("request")).await.expect("answered");
    let (parts, body) = response.into_parts();
    (parts.status, parts.headers, body.collect().await.expect("body").to_bytes())
}

fn small_limits() -> BodyLimits {
    BodyLimits { max_body_bytes: 4096, max_decompressed_bytes: 16 * 1024 }
}

pub(super) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

pub(super) const JSON: (&str, &str) = ("content-type", "application/json");
pub(super) const PROTOBUF: (&str, &str) = ("content-type", "application/x-protobuf");
pub(super) const GZIP: (&str, &str) = ("content-encoding", "gzip");

fn protobuf_request() -> Vec<u8> {
    let request = crate::data::ingest::otlp_metrics_json::decode(JSON_REQUEST.as_bytes()).expect("valid");
    request.encode_to_vec()
}

#[tokio::test]
async fn otlp_answers_in_the_request_type_and_counts_what_it_took() {
    let server = Server::start(BodyLimits::default()).await;
    let (status, headers, body) = server.post("/v1/metrics", &[PROTOBUF], protobuf_request()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/x-protobuf");
    assert!(body.is_empty(), "an empty ExportMetricsServiceResponse encodes to no bytes");

    let (status, headers, body) = server.post("/v1/metrics", &[("content-type", "application/json; charset=utf-8")], JSON_REQUEST.into()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(&body[..], b"{}");

    let (status, _, _) = server.post("/v1/metrics", &[JSON, GZIP], gzip(JSON_REQUEST.as_bytes())).await;
    assert_eq!(status, StatusCode::OK);

    let accepted = server.sink.accepted();
    assert_eq!(accepted.len(), 3);
    let normalized = |batches: &Vec<crate::data::seam::Batch>| -> Vec<crate::data::seam::Batch> {
        batches.iter().cloned().map(|mut b| { b.received_ms = 0; b }).collect()
    };
    assert_eq!(normalized(&accepted[0]), normalized(&accepted[1]), "protobuf and JSON of one request give the same batches");
    assert_eq!(normalized(&accepted[1]), normalized(&accepted[2]), "gzip changes nothing");
    assert_eq!(server.received(Protocol::Otlp), 3 * 8);
}

#[tokio::test]
async fn otlp_refusals_carry_a_status_body_and_are_counted() {
    let server = Server::start(small_limits()).await;
    // 415: neither protobuf nor JSON; the Status is JSON.
    let (status, headers, body) = server.post("/v1/metrics", &[("content-type", "text/plain")], b"x".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(headers["content-type"], "application/json");
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("json status");
    assert_eq!(answer["code"], 12);
    assert!(answer["message"].as_str().unwrap_or_default().contains("text/plain"), "{answer}");
    assert_eq!(server.rejected(Protocol::Otlp, "unsupported_media_type"), 1);
    let (status, _, _) = server.post("/v1/metrics", &[JSON, ("content-encoding", "br")], b"{}".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    // 400 in protobuf: a google.rpc.Status naming the problem.
    let (status, headers, body) = server.post("/v1/metrics", &[PROTOBUF], vec![0x0a, 0xff, 0x01]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let rpc = RpcStatus::decode(body).expect("a google.rpc.Status");
    assert_eq!(rpc.code, 3);
    assert!(rpc.message.contains("ExportMetricsServiceRequest"), "{}", rpc.message);

    // 400 in JSON, naming the field.
    let bad = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asInt":"x"}]}}]}]}]}"#;
    let (status, _, body) = server.post("/v1/metrics", &[JSON], bad.into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("json status");
    assert!(answer["message"].as_str().unwrap_or_default().starts_with("resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0].asInt"), "{answer}");
    assert_eq!(server.rejected(Protocol::Otlp, "decode"), 2);

    // 413: too large as sent, and too large once inflated (a small gzip of a big body).
    let (status, _, body) = server.post("/v1/metrics", &[JSON], vec![b' '; 5000]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("4096"));
    let mut inflating = b"{\"resourceMetrics\":[]".to_vec();
    inflating.extend(vec![b' '; 20_000]);
    inflating.push(b'}');
    let compressed = gzip(&inflating);
    assert!(compressed.len() < 4096);
    let (status, _, body) = server.post("/v1/metrics", &[JSON, GZIP], compressed).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("once decompressed"), "{body:?}");
    assert_eq!(server.rejected(Protocol::Otlp, "too_large"), 2);
    assert!(server.sink.accepted().is_empty());
}

#[tokio::test]
async fn a_full_queue_answers_429_with_retry_after_and_stopping_503() {
    let server = Server::start(BodyLimits::default()).await;
    server.sink.refuse_next(SubmitError::QueueFull { retry_after: Duration::from_millis(2500) });
    let (status, headers, body) = server.post("/v1/metrics", &[JSON], JSON_REQUEST.into()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "3");
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("json status");
    assert_eq!(answer["code"], 8);
    assert_eq!(server.rejected(Protocol::Otlp, "queue_full"), 8);

    server.sink.refuse_next(SubmitError::QueueFull { retry_after: Duration::from_secs(1) });
    let body = encode(vec![series("up", &[("job", "j")], &[(1.0, 1)])]);
    let (status, headers, _) = server.post("/api/v1/write", &[PROTOBUF, ("content-encoding", "snappy")], body.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(server.rejected(Protocol::RemoteWrite, "queue_full"), 1);

    server.sink.refuse_next(SubmitError::Stopped);
    let (status, _, _) = server.post("/api/v1/write", &[PROTOBUF, ("content-encoding", "snappy")], body).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(server.sink.accepted().is_empty());
}

/// A request arriving while the queue is full is refused before it is decoded: 429 with the
/// queue's retry-after, counted once per request as `busy`, nothing submitted.
#[tokio::test]
async fn a_request_meeting_a_full_queue_is_refused_before_decoding() {
    let server = Server::start(BodyLimits::default()).await;
    server.sink.set_full(true);
    let body = encode(vec![series("up", &[("job", "j")], &[(1.0, 1), (2.0, 2)])]);
    let (status, headers, _) = server.post("/api/v1/write", &[PROTOBUF, ("content-encoding", "snappy")], body.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    let (status, _, _) = server.post("/v1/metrics", &[JSON], JSON_REQUEST.into()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(server.rejected(Protocol::RemoteWrite, "busy"), 1);
    assert_eq!(server.rejected(Protocol::Otlp, "busy"), 1);
    assert_eq!(server.rejected(Protocol::RemoteWrite, "queue_full"), 0);
    assert_eq!(server.sink.seen(), 0, "nothing was decoded and submitted");
    server.sink.set_full(false);
    let (status, _, _) = server.post("/api/v1/write", &[PROTOBUF, ("content-encoding", "snappy")], body).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(server.sink.batches().iter().map(|b| b.samples.len()).sum::<usize>(), 2, "taken once there is room");
}

#[tokio::test]
async fn otlp_refused_points_are_a_partial_success() {
    let server = Server::start(BodyLimits::default()).await;
    let text = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
        {"name":"ok","gauge":{"dataPoints":[{"asInt":"1"}]}},
        {"name":"h","histogram":{"dataPoints":[{"bucketCounts":["1"],"explicitBounds":[1,2]}]}}
    ]}]}]}"#;
    let (status, _, body) = server.post("/v1/metrics", &[JSON], text.into()).await;
    assert_eq!(status, StatusCode::OK);
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(answer["partialSuccess"]["rejectedDataPoints"], "1");
    assert!(answer["partialSuccess"]["errorMessage"].as_str().unwrap_or_default().contains("metric \"h\""), "{answer}");
    assert_eq!(server.sink.batches()[0].samples.len(), 1);
    assert_eq!(server.rejected(Protocol::Otlp, "invalid_point"), 1);
}

#[tokio::test]
async fn a_prometheus_encoded_request_goes_through_the_route() {
    let server = Server::start(BodyLimits::default()).await;
    let stale = f64::from_bits(STALE_NAN_BITS);
    let body = encode(vec![
        series("node_load1", &[("job", "vm-monitoring"), ("instance", "node-a:9100")], &[(0.5, 1_700_000_000_000)]),
        series("node_memory_MemTotal_bytes", &[("job", "vm-monitoring"), ("instance", "node-a:9100")], &[(8e9, 1_700_000_000_000), (stale, 1_700_000_015_000)]),
    ]);
    let headers = [
        ("content-type", "application/x-protobuf"),
        ("content-encoding", "snappy"),
        ("user-agent", "Prometheus/3.0.0"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    let (status, _, answer) = server.post("/api/v1/write", &headers, body).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer:?}");
    let batches = server.sink.batches();
    assert_eq!(batches.len(), 1);
    let names: Vec<&str> = batches[0].samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["node_load1", "node_memory_MemTotal_bytes"]);
    assert!(batches[0].samples.iter().all(|s| s.label("node_identifier_host_name") == "node-a" && s.label("job_name") == "vm-monitoring"));
    assert_eq!(server.received(Protocol::RemoteWrite), 2);
    assert_eq!(server.rejected(Protocol::RemoteWrite, "stale"), 1);
}

#[tokio::test]
async fn remote_write_refusals_name_the_problem() {
    let server = Server::start(small_limits()).await;
    let good = encode(vec![series("up", &[("job", "j")], &[(1.0, 1)])]);
    for (headers, expected) in [
        (vec![PROTOBUF, GZIP], "Content-Encoding"),
        (vec![PROTOBUF, ("content-encoding", "identity")], "snappy"),
        (vec![JSON, ("content-encoding", "snappy")], "application/json"),
        (vec![("content-type", "application/x-protobuf;proto=io.prometheus.write.v2.Request"), ("content-encoding", "snappy")], "1.0"),
    ] {
        let (status, _, body) = server.post("/api/v1/write", &headers, good.clone()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{headers:?}");
        assert!(String::from_utf8_lossy(&body).contains(expected), "{body:?}");
    }
    assert_eq!(server.rejected(Protocol::RemoteWrite, "unsupported_media_type"), 4);
    // A 1.0 sender that names the message, and one that sends no type at all, are fine.
    let named = [("content-type", "application/x-protobuf;proto=prometheus.WriteRequest"), ("content-encoding", "snappy")];
    assert_eq!(server.post("/api/v1/write", &named, good.clone()).await.0, StatusCode::NO_CONTENT);
    assert_eq!(server.post("/api/v1/write", &[], good.clone()).await.0, StatusCode::NO_CONTENT);

    let (status, _, body) = server.post("/api/v1/write", &[PROTOBUF], b"not snappy at all".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).starts_with("body is not snappy"), "{body:?}");

    let mixed = encode(vec![
        series("kept", &[("job", "j")], &[(1.0, 1)]),
        crate::data::ingest::remote_write::prompb::TimeSeries {
            labels: vec![crate::data::ingest::remote_write::prompb::Label { name: "job".into(), value: "nameless".into() }],
            samples: vec![crate::data::ingest::remote_write::prompb::Sample { value: 1.0, timestamp: 1 }],
            exemplars: vec![],
        },
    ]);
    let (status, _, body) = server.post("/api/v1/write", &[PROTOBUF], mixed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("timeseries[1] {job=\"nameless\"}: no __name__ label"), "{text}");
    assert_eq!(server.rejected(Protocol::RemoteWrite, "invalid_sample"), 1);
    let kept: Vec<String> = server.sink.batches().iter().flat_map(|b| b.samples.iter().map(|s| s.name.clone())).collect();
    assert_eq!(kept, vec!["up", "up", "kept"], "the valid series of the 400 request were taken");

    // 413 when the snappy header declares more than the decompressed limit.
    let big = encode(vec![series("x", &[("pad", &"p".repeat(20_000))], &[(1.0, 1)])]);
    assert!(big.len() < 4096);
    let (status, _, _) = server.post("/api/v1/write", &[PROTOBUF], big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn pushed_exposition_gets_job_and_instance() {
    let server = Server::start(BodyLimits::default()).await;
    let text = "# TYPE node_load1 gauge\nnode_load1 0.5\nnode_info{job=\"inner\"} 1 1700000000000\n";
    let (status, _, _) = server.post("/ingest/prometheus?job=vm-monitoring&instance=node-a:9100", &[("content-type", "text/plain; version=0.0.4")], text.into()).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let batches = server.sink.batches();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].protocol, Protocol::Push);
    let load = super::find(&batches[0].samples, "node_load1", &[]);
    assert_eq!((load.label("job_name"), load.label("service_instance_id"), load.label("node_identifier_host_name")), ("vm-monitoring", "node-a:9100", "node-a"));
    let info = super::find(&batches[0].samples, "node_info", &[]);
    assert_eq!((info.label("job_name"), info.label("exported_job"), info.timestamp_ms), ("vm-monitoring", "inner", 1_700_000_000_000));
    assert_eq!(server.received(Protocol::Push), 2);

    let (status, _, body) = server.post("/ingest/prometheus", &[], text.into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("job"), "{body:?}");
    let (status, _, body) = server.post("/ingest/prometheus?job=j", &[], b"ok 1\nbroken{ 2\n".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("line 2"), "{body:?}");
    let (status, _, _) = server.post("/ingest/prometheus?job=j", &[("content-type", "application/vnd.google.protobuf")], b"x".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(server.rejected(Protocol::Push, "bad_request"), 1);
    assert_eq!(server.rejected(Protocol::Push, "invalid_sample"), 1);
    assert_eq!(server.rejected(Protocol::Push, "unsupported_media_type"), 1);
}

#[tokio::test]
async fn a_node_serves_the_receivers_next_to_the_agent_config_server() {
    use crate::node::testing::NodeBuilder;
    use crate::node::{Listeners, NodeSettings};
    let sink = Arc::new(RecordingSink::new());
    let builder = NodeBuilder::new(NodeSettings::for_test()).data_sink(sink.clone());
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listeners = Listeners { admin, data: Some(data), grpc: None };
    let node = builder.start_with_listeners(Arc::new(crate::store::kv::MemKv::new()), listeners, None).await.expect("starts");
    let data_addr = node.data_addr.expect("data listener");
    let (status, _, _) = post(data_addr, "/v1/metrics", &[JSON], JSON_REQUEST.into()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sink.batches().len(), 1);
    // The agent routes are still there (an empty heartbeat is malformed, not unknown).
    let (status, _, _) = post(data_addr, "/Agent/Heartbeat", &[PROTOBUF], Vec::new()).await;
    assert_ne!(status, StatusCode::NOT_FOUND);
    node.shutdown().await;
}
