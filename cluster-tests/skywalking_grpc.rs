//! SkyWalking's native gRPC protocol (issue 27) against in-process nodes, with tonic clients
//! speaking it as the agents do (h2c, on the data listener and on a dedicated gRPC port):
//!
//! - `MeterReportService/collect`: the Python agent's nine PVM meters become the bundled
//!   `meter-analyzer-config/python-runtime.yaml`'s `meter_instance_pvm_*` values, also when
//!   only the stream's first message names the service (as the Java agent sends); the
//!   package-less compat path too;
//! - `LogReportService/collect`: logs reach `/query/logs`, the first named service carried over;
//! - `ManagementService`: the instance and its properties in GraphQL's `listInstances` before
//!   any meter or log;
//! - refusals: a status with a reason for an incomplete batch, a malformed message, a message,
//!   stream or duration over its limit, a missing or wrong `authentication` token, an unknown
//!   service; the node keeps serving; `/metrics` counts calls by service, method and code.

mod harness;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use hotrule::api::client::{AdminClient, with_query};
use hotrule::data::ingest::skywalking::wire::{
    self, InstancePingPkg, InstanceProperties, KeyStringValuePair, LogData, LogDataBody, LogTags, MeterData, MeterSingleValue, TextLog,
    log_data_body, log_report_service_client::LogReportServiceClient, management_service_client::ManagementServiceClient, meter_data,
    meter_report_service_client::MeterReportServiceClient,
};
use hotrule::node::{NodeSettings, RunningNode};
use hotrule::store::kv::MemKv;
use serde_json::{Value as Json, json};
use tonic::Code;
use tonic::transport::Channel;

use harness::{corpus_dir, wait_until};

const WAIT: Duration = Duration::from_secs(30);

/// The Python agent's PVM meters (`skywalking/meter/pvm/`) with a value each.
const PVM: [(&str, f64); 9] = [
    ("instance_pvm_total_cpu_utilization", 42.4),
    ("instance_pvm_process_cpu_utilization", 3.6),
    ("instance_pvm_total_mem_utilization", 61.0),
    ("instance_pvm_process_mem_utilization", 0.0018),
    ("instance_pvm_gc_g0", 120.0),
    ("instance_pvm_gc_g1", 12.0),
    ("instance_pvm_gc_g2", 1.0),
    ("instance_pvm_gc_time", 4.0),
    ("instance_pvm_thread_active_count", 7.0),
];

fn settings() -> NodeSettings {
    NodeSettings { rules_dir: Some(corpus_dir()), ..NodeSettings::for_test() }
}

async fn start(settings: NodeSettings) -> (RunningNode, AdminClient) {
    let node = harness::start_with_data_listener(settings).await;
    let client = AdminClient::new(&node.admin_addr.to_string(), None).expect("client");
    (node, client)
}

async fn channel(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}")).expect("uri").connect().await.expect("connect")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64
}

fn single(name: &str, value: f64, service: &str, instance: &str, timestamp: i64) -> MeterData {
    MeterData {
        metric: Some(meter_data::Metric::SingleValue(MeterSingleValue { name: name.into(), labels: vec![], value })),
        service: service.into(),
        service_instance: instance.into(),
        timestamp,
    }
}

/// The PVM meters of one report; with `first_only`, only the first names the service, instance
/// and time (as the Java agent sends), else every one does (as the Python agent sends).
fn pvm_report(service: &str, instance: &str, at: i64, first_only: bool) -> Vec<MeterData> {
    PVM.iter()
        .enumerate()
        .map(|(i, (name, value))| {
            if first_only && i > 0 { single(name, *value, "", "", 0) } else { single(name, *value, service, instance, at) }
        })
        .collect()
}

/// The value stored for `metric` of the instance at the minute of `at`, if any.
async fn stored(client: &AdminClient, metric: &str, service: &str, instance: &str, at: i64) -> Option<i64> {
    let at = at.to_string();
    let pairs = [("name", metric), ("service", service), ("instance", instance), ("start", at.as_str()), ("end", at.as_str())];
    let body: Json = client.get(&with_query("/query/metrics", &pairs)).await.ok()?.json()?;
    body["series"].as_array()?.iter().find_map(|s| s["points"].as_array()?.first()?["value"].as_i64())
}

async fn wait_for_value(client: &AdminClient, metric: &str, service: &str, instance: &str, at: i64, expected: i64) {
    wait_until(WAIT, &format!("{metric} of {service}/{instance} = {expected}"), || async {
        stored(client, metric, service, instance, at).await == Some(expected)
    })
    .await;
}

/// `hotrule_grpc_calls{service,method,code}` from `/metrics`.
async fn calls(client: &AdminClient, service: &str, method: &str, code: &str) -> f64 {
    let text = client.get("/metrics").await.map(|r| String::from_utf8_lossy(&r.body).into_owned()).unwrap_or_default();
    let wanted = [format!("service=\"{service}\""), format!("method=\"{method}\""), format!("code=\"{code}\"")];
    text.lines()
        .filter(|l| l.starts_with("hotrule_grpc_calls") && wanted.iter().all(|w| l.contains(w.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvm_meters_over_collect_become_python_runtime_values() {
    let (node, client) = start(settings()).await;
    let mut meters = MeterReportServiceClient::new(channel(node.data_addr.expect("data")).await);
    let at = now_ms() - 120_000;
    // The Python agent's way: every message names the service, instance and time.
    meters.collect(futures_util::stream::iter(pvm_report("py-svc", "py-inst", at, false))).await.expect("collect");
    // Python's `getValue`: 42.4 → 42; a fraction (0, 1) → 1.
    wait_for_value(&client, "meter_instance_pvm_total_cpu_utilization", "py-svc", "py-inst", at, 42).await;
    wait_for_value(&client, "meter_instance_pvm_process_mem_utilization", "py-svc", "py-inst", at, 1).await;
    wait_for_value(&client, "meter_instance_pvm_thread_active_count", "py-svc", "py-inst", at, 7).await;
    wait_for_value(&client, "meter_instance_pvm_gc_g0", "py-svc", "py-inst", at, 120).await;

    // The Java agent's way: only the first message names them; over the compat path too.
    let java_at = at + 60_000;
    meters.collect(futures_util::stream::iter(pvm_report("java-svc", "java-inst", java_at, true))).await.expect("collect");
    wait_for_value(&client, "meter_instance_pvm_total_mem_utilization", "java-svc", "java-inst", java_at, 61).await;
    let mut compat = hotrule::data::ingest::skywalking::compat::meter_report_service_client::MeterReportServiceClient::new(
        channel(node.data_addr.expect("data")).await,
    );
    compat.collect(futures_util::stream::iter(pvm_report("compat-svc", "compat-inst", at, true))).await.expect("compat collect");
    wait_for_value(&client, "meter_instance_pvm_gc_g1", "compat-svc", "compat-inst", at, 12).await;

    assert!(calls(&client, "MeterReportService", "collect", "ok").await >= 3.0);
    let metrics = String::from_utf8_lossy(&client.get("/metrics").await.expect("metrics").body).into_owned();
    assert!(metrics.contains("hotrule_samples_received_total{protocol=\"skywalking_meter\"} 27"), "27 PVM samples counted:\n{metrics}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_a_status_and_a_reason() {
    let mut settings = settings();
    settings.ingest.grpc.max_message_bytes = 4096;
    settings.ingest.grpc.max_stream_messages = 50;
    settings.ingest.grpc.max_stream_samples = 100;
    settings.ingest.grpc.max_stream_duration = Duration::from_millis(800);
    let (node, client) = start(settings).await;
    let data = channel(node.data_addr.expect("data")).await;
    let mut meters = MeterReportServiceClient::new(data.clone());

    // A batch that never names its service: nothing taken, and it says so.
    let nameless = vec![single("instance_pvm_gc_g0", 1.0, "", "inst", now_ms())];
    let status = meters.collect(futures_util::stream::iter(nameless)).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("no message of the batch named a service"), "{status:?}");

    // A meter with a label the node adds itself: that message refused, the rest taken.
    let at = now_ms() - 60_000;
    let mut clash = single("instance_pvm_gc_g2", 5.0, "svc", "inst", at);
    if let Some(meter_data::Metric::SingleValue(v)) = &mut clash.metric {
        v.labels.push(wire::Label { name: "service".into(), value: "x".into() });
    }
    let status = meters.collect(futures_util::stream::iter(vec![clash, single("instance_pvm_gc_g1", 9.0, "svc", "inst", at)])).await.expect_err("partly refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("1 messages refused") && status.message().contains("reserved"), "{status:?}");
    wait_for_value(&client, "meter_instance_pvm_gc_g1", "svc", "inst", at, 9).await;

    // A message over ingest.grpc.max_message_bytes.
    let big = single(&"m".repeat(8192), 1.0, "svc", "inst", at);
    let status = meters.collect(futures_util::stream::iter(vec![big])).await.expect_err("too large");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("max_message_bytes"), "{status:?}");

    // More messages than ingest.grpc.max_stream_messages.
    let many: Vec<MeterData> = (0..60).map(|i| single("instance_pvm_gc_g0", i as f64, "svc", "inst", at)).collect();
    let status = meters.collect(futures_util::stream::iter(many)).await.expect_err("too many");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("max_stream_messages") && status.message().contains("nothing of the stream was taken"), "{status:?}");

    // A histogram with more buckets than ingest.grpc.max_stream_samples.
    let buckets = (0..150).map(|i| wire::MeterBucketValue { bucket: i as f64, count: 1, is_negative_infinity: false }).collect();
    let wide = MeterData {
        metric: Some(meter_data::Metric::Histogram(wire::MeterHistogram { name: "wide".into(), labels: vec![], values: buckets })),
        service: "svc".into(),
        service_instance: "inst".into(),
        timestamp: at,
    };
    let status = meters.collect(futures_util::stream::iter(vec![wide])).await.expect_err("too many samples");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("max_stream_samples"), "{status:?}");

    // collectBatch: each collection stands alone; an incomplete one is refused, the others taken.
    let complete = wire::MeterDataCollection { meter_data: vec![single("instance_pvm_gc_g2", 3.0, "batch-svc", "inst", at)] };
    let nameless = wire::MeterDataCollection { meter_data: vec![single("instance_pvm_gc_g2", 4.0, "", "inst", at)] };
    let status = meters.collect_batch(futures_util::stream::iter(vec![complete, nameless])).await.expect_err("one refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("1 collections refused (the first: collection 2: no message of the batch named a service"), "{status:?}");
    wait_for_value(&client, "meter_instance_pvm_gc_g2", "batch-svc", "inst", at, 3).await;

    // A stream that never ends: cut at ingest.grpc.max_stream_duration.
    let endless = futures_util::stream::iter(vec![single("instance_pvm_gc_g0", 1.0, "svc", "inst", at)]).chain(futures_util::stream::pending());
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(WAIT, meters.collect(endless)).await.expect("bounded").expect_err("too long");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("max_stream_duration"), "{status:?}");
    assert!(started.elapsed() >= Duration::from_millis(800), "not cut before the limit");

    // A message that does not decode: MeterData bytes sent as LogData.
    let mut raw = tonic::client::Grpc::new(data.clone());
    raw.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/skywalking.v3.LogReportService/collect");
    let codec = tonic_prost::ProstCodec::<MeterData, wire::Commands>::default();
    let request = tonic::Request::new(futures_util::stream::iter(vec![single("x", 1.0, "svc", "inst", at)]));
    let status = raw.client_streaming(request, path, codec).await.expect_err("undecodable");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("message 1"), "{status:?}");

    // A service the node does not serve (an agent's trace segments).
    let mut raw = tonic::client::Grpc::new(data.clone());
    raw.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/skywalking.v3.TraceSegmentReportService/collect");
    let request = tonic::Request::new(futures_util::stream::iter(vec![single("x", 1.0, "svc", "inst", at)]));
    let status = raw.client_streaming(request, path, tonic_prost::ProstCodec::<MeterData, wire::Commands>::default()).await.expect_err("unimplemented");
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");

    // Still serving, and every outcome counted.
    meters.collect(futures_util::stream::iter(pvm_report("after", "i", at, false))).await.expect("still serving");
    assert!(calls(&client, "MeterReportService", "collect", "invalid_argument").await >= 2.0);
    assert!(calls(&client, "MeterReportService", "collect", "resource_exhausted").await >= 3.0);
    assert!(calls(&client, "LogReportService", "collect", "invalid_argument").await >= 1.0);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authentication_token_is_checked_on_every_service() {
    let mut settings = settings();
    settings.ingest.grpc.authentication = Some("s3cret".into());
    let (node, client) = start(settings).await;
    let data = channel(node.data_addr.expect("data")).await;
    let at = now_ms() - 60_000;
    let with_token = |token: Option<&str>| {
        let mut request = tonic::Request::new(futures_util::stream::iter(pvm_report("auth-svc", "auth-inst", at, false)));
        if let Some(token) = token {
            request.metadata_mut().insert("authentication", token.parse().expect("metadata"));
        }
        request
    };
    let mut meters = MeterReportServiceClient::new(data.clone());
    for token in [None, Some("wrong")] {
        let status = meters.collect(with_token(token)).await.expect_err("refused");
        assert_eq!(status.code(), Code::PermissionDenied, "{token:?}: {status:?}");
        assert!(status.message().contains("authentication"), "{status:?}");
    }
    let mut management = ManagementServiceClient::new(data.clone());
    let ping = InstancePingPkg { service: "auth-svc".into(), service_instance: "auth-inst".into(), layer: String::new() };
    assert_eq!(management.keep_alive(ping.clone()).await.expect_err("refused").code(), Code::PermissionDenied);
    let mut logs = LogReportServiceClient::new(data.clone());
    assert_eq!(logs.collect(futures_util::stream::iter(Vec::<LogData>::new())).await.expect_err("refused").code(), Code::PermissionDenied);
    assert_eq!(stored(&client, "meter_instance_pvm_gc_g0", "auth-svc", "auth-inst", at).await, None, "nothing refused was taken");

    meters.collect(with_token(Some("s3cret"))).await.expect("taken with the token");
    let mut request = tonic::Request::new(ping);
    request.metadata_mut().insert("authentication", "s3cret".parse().expect("metadata"));
    management.keep_alive(request).await.expect("taken with the token");
    wait_for_value(&client, "meter_instance_pvm_gc_g0", "auth-svc", "auth-inst", at, 120).await;
    assert!(calls(&client, "MeterReportService", "*", "permission_denied").await >= 2.0);
    node.shutdown().await;
}

/// Kept logs of `service` from `/query/logs`: (content, instance).
async fn kept_logs(client: &AdminClient, service: &str) -> Vec<(String, String)> {
    let Ok(reply) = client.get(&with_query("/query/logs", &[("service", service), ("order", "oldest")])).await else { return Vec::new() };
    let body: Json = reply.json().unwrap_or_default();
    body["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .map(|l| (l["content"].as_str().unwrap_or("").to_string(), l["instance"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn log(service: &str, instance: &str, text: &str) -> LogData {
    LogData {
        timestamp: now_ms(),
        service: service.into(),
        service_instance: instance.into(),
        body: Some(LogDataBody { r#type: "text".into(), content: Some(log_data_body::Content::Text(TextLog { text: text.into() })) }),
        tags: Some(LogTags { data: vec![KeyStringValuePair { key: "level".into(), value: "ERROR".into() }] }),
        ..LogData::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_the_log_query_with_the_stream_service_carried_over() {
    let (node, client) = start(settings()).await;
    let mut logs = LogReportServiceClient::new(channel(node.data_addr.expect("data")).await);
    // As the Java agent sends: the service on the first element only.
    let stream = vec![log("log-svc", "i1", "first"), log("", "i2", "second"), log("other", "i3", "third")];
    logs.collect(futures_util::stream::iter(stream)).await.expect("collect");
    wait_until(WAIT, "three logs of log-svc", || async { kept_logs(&client, "log-svc").await.len() == 3 }).await;
    let kept = kept_logs(&client, "log-svc").await;
    let contents: Vec<&str> = kept.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(contents, vec!["first", "second", "third"], "{kept:?}");
    let instances: Vec<&str> = kept.iter().map(|(_, i)| i.as_str()).collect();
    assert_eq!(instances, vec!["i1", "i2", "i3"], "the instance is not carried over");
    assert!(kept_logs(&client, "other").await.is_empty(), "a later service is overridden by the stream's first");

    // A long stream is handed over in chunks and all of it is kept.
    let many: Vec<LogData> = (0..2000).map(|i| log("bulk-svc", "i", &format!("line {i}"))).collect();
    logs.collect(futures_util::stream::iter(many)).await.expect("bulk");
    wait_until(WAIT, "2000 logs of bulk-svc", || async {
        let body: Json = client
            .get(&with_query("/query/logs", &[("service", "bulk-svc"), ("limit", "5000")]))
            .await
            .ok()
            .and_then(|r| r.json())
            .unwrap_or_default();
        body["logs"].as_array().is_some_and(|l| l.len() == 2000)
    })
    .await;
    let metrics = String::from_utf8_lossy(&client.get("/metrics").await.expect("metrics").body).into_owned();
    assert!(metrics.contains("hotrule_logs_received_total{protocol=\"skywalking_grpc\"} 2003"), "{metrics}");
    node.shutdown().await;
}

/// `listInstances` of `service` over GraphQL: (name, language, attributes).
async fn instances(client: &AdminClient, service: &str) -> Vec<Json> {
    let service_id = hotrule::base::entity_ids::service_id(service);
    let query = "query($id: ID!, $d: Duration!) { listInstances(duration: $d, serviceId: $id) { name language attributes { name value } } }";
    let now = now_ms();
    let minute = |ms: i64| {
        let days = ms.div_euclid(86_400_000);
        let (y, m, d) = hotrule_mal_engine::civil_from_days(days);
        let s = ms.rem_euclid(86_400_000) / 1000;
        format!("{y:04}-{m:02}-{d:02} {:02}{:02}", s / 3600, s / 60 % 60)
    };
    let variables = json!({"id": service_id, "d": {"start": minute(now - 3_600_000), "end": minute(now), "step": "MINUTE"}});
    let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
    let Ok(reply) = client.post("/graphql", body).await else { return Vec::new() };
    let body: Json = reply.json().unwrap_or_default();
    body["data"]["listInstances"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_calls_list_the_instance_before_any_data_also_on_the_grpc_port() {
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listeners = hotrule::node::Listeners { admin, data: Some(data), grpc: Some(grpc) };
    let node = hotrule::node::testing::NodeBuilder::new(settings())
        .start_with_listeners(Arc::new(MemKv::new()), listeners, None)
        .await
        .expect("node starts");
    let client = AdminClient::new(&node.admin_addr.to_string(), None).expect("client");
    let grpc_addr = node.grpc_addr.expect("a gRPC port");
    let mut management = ManagementServiceClient::new(channel(grpc_addr).await);
    let properties = InstanceProperties {
        service: "agent-svc".into(),
        service_instance: "agent-inst".into(),
        properties: ["language=python", "hostname=box", "ipv4=10.0.0.1; 10.0.0.2"]
            .iter()
            .map(|kv| {
                let (key, value) = kv.split_once('=').expect("pair");
                KeyStringValuePair { key: key.into(), value: value.into() }
            })
            .collect(),
        layer: String::new(),
    };
    management.report_instance_properties(properties).await.expect("properties");
    management
        .keep_alive(InstancePingPkg { service: "agent-svc".into(), service_instance: "agent-inst".into(), layer: String::new() })
        .await
        .expect("keepAlive");
    wait_until(WAIT, "agent-inst listed", || async { !instances(&client, "agent-svc").await.is_empty() }).await;
    let listed = instances(&client, "agent-svc").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((listed[0]["name"].as_str(), listed[0]["language"].as_str()), (Some("agent-inst"), Some("PYTHON")), "{listed:?}");
    let attributes = listed[0]["attributes"].as_array().expect("attributes");
    assert!(attributes.contains(&json!({"name": "ipv4s", "value": "10.0.0.1; 10.0.0.2"})), "{attributes:?}");
    assert!(attributes.contains(&json!({"name": "hostname", "value": "box"})), "{attributes:?}");

    // Refused without a name; the gRPC port answers only gRPC, UNIMPLEMENTED for the rest.
    let status = management.keep_alive(InstancePingPkg::default()).await.expect_err("refused");
    assert_eq!((status.code(), status.message()), (Code::InvalidArgument, "service is empty"));
    let mut meters = MeterReportServiceClient::new(channel(grpc_addr).await);
    meters.collect(futures_util::stream::iter(pvm_report("agent-svc", "agent-inst", now_ms() - 60_000, false))).await.expect("meters on the gRPC port");
    let mut raw = tonic::client::Grpc::new(channel(grpc_addr).await);
    raw.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/skywalking.v3.ProfileTask/getProfileTaskCommands");
    let status = raw.unary(tonic::Request::new(InstancePingPkg::default()), path, tonic_prost::ProstCodec::<InstancePingPkg, wire::Commands>::default()).await.expect_err("unimplemented");
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(calls(&client, "ManagementService", "keepAlive", "ok").await >= 1.0);
    assert!(calls(&client, "ManagementService", "reportInstanceProperties", "ok").await >= 1.0);
    node.shutdown().await;
}

/// gRPC over TLS on both ports when `agents.tls` is set: ALPN offers `h2`, and an agent with TLS
/// on (Python's `SW_AGENT_FORCE_TLS`) reports as over cleartext.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_agent_tls_grpc_is_served_over_tls_with_alpn_h2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params").self_signed(&key).expect("cert");
    let files = hotrule::base::tls::TlsFiles { cert_file: dir.path().join("node.crt"), key_file: dir.path().join("node.key") };
    std::fs::write(&files.cert_file, cert.pem()).expect("write cert");
    std::fs::write(&files.key_file, key.serialize_pem()).expect("write key");
    let settings = NodeSettings { agent_tls: Some(files), ..settings() };
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listeners = hotrule::node::Listeners { admin, data: Some(data), grpc: Some(grpc) };
    let node = hotrule::node::testing::NodeBuilder::new(settings).start_with_listeners(Arc::new(MemKv::new()), listeners, None).await.expect("node starts");
    let client = AdminClient::new(&node.admin_addr.to_string(), None).expect("client");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).expect("trust the node's certificate");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let at = now_ms() - 60_000;
    for (port, service) in [(node.data_addr.expect("data"), "tls-data"), (node.grpc_addr.expect("grpc"), "tls-grpc")] {
        let connector = connector.clone();
        let channel = tonic::transport::Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_: tonic::codegen::http::Uri| {
                let connector = connector.clone();
                async move {
                    let tcp = tokio::net::TcpStream::connect(port).await?;
                    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
                    let tls = connector.connect(name, tcp).await?;
                    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "the node chose HTTP/2 by ALPN");
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
                }
            }))
            .await
            .expect("TLS connect");
        MeterReportServiceClient::new(channel).collect(futures_util::stream::iter(pvm_report(service, "i", at, false))).await.expect("collect over TLS");
        wait_for_value(&client, "meter_instance_pvm_gc_g0", service, "i", at, 120).await;
    }
    // Cleartext HTTP/2 is not taken on a TLS port.
    let plain = Channel::from_shared(format!("http://{}", node.grpc_addr.expect("grpc"))).expect("uri").connect().await;
    if let Ok(plain) = plain {
        let refused = MeterReportServiceClient::new(plain).collect(futures_util::stream::iter(pvm_report("plain", "i", at, false))).await;
        assert!(refused.is_err(), "a cleartext call on the TLS port must fail");
    }
    node.shutdown().await;
}
