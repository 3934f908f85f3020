//! The real components the data-plane tests (`data_plane.rs`) run, proven on their own: Debian's
//! Prometheus scraping Debian's node_exporter and remote-writing to a second Prometheus, read
//! back with `promtool` and the HTTP API; the OTLP fixture (Python's OpenTelemetry exporter)
//! sending one request; the fixture rules giving the expected values on hotrule's dry run; and
//! the control-plane sequence of the flowing-data test on an in-process node. None of these
//! needs a `hotrule serve` process, so they run in any build.
//!
//! A test whose tools are missing prints `SKIP: …` and passes; `.ci/run` installs them.

mod components;
mod harness;

use std::sync::Arc;
use std::time::Duration;

use components::hotrule_node::node_config;
use components::prom::exposition_value;
use components::scenario::{self, OTLP_SERVICE, VIA_PROMETHEUS, VIA_SCRAPE, VM_JOB};
use components::{
    NodeExporter, Prometheus, PrometheusSettings, ScrapeJob, api_query_range, promtool_instant, promtool_range, require,
    require_otlp_python, send_otlp_fixture, unix_now,
};
use harness::{TestNode, wait_until};
use hotrule::api::client::with_query;
use hotrule::compiler::{Compiled, DslKind, compile_bundled};
use hotrule::config::ConfigSources;
use hotrule::data::seam::{Batch, Protocol, Value as Stored};
use hotrule::data::ingest::RecordingSink;
use hotrule::node::NodeSettings;
use hotrule::node::testing::NodeBuilder;
use hotrule_mal_engine::{EngineState, PreparedFile};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_node_exporter_remote_writes_and_promtool_reads_back() {
    if !require("prometheus_scrapes_node_exporter", &["prometheus", "prometheus-node-exporter", "promtool"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exporter = NodeExporter::start(&dir.path().join("exporter")).await;
    let receiver = Prometheus::start(&dir.path().join("receiver"), &PrometheusSettings { receiver: true, ..Default::default() }).await;
    let scraper = Prometheus::start(
        &dir.path().join("scraper"),
        &PrometheusSettings {
            scrape: vec![ScrapeJob { job_name: VM_JOB.into(), targets: vec![exporter.target()], labels: scenario::vm_labels(VIA_PROMETHEUS) }],
            remote_write: vec![receiver.write_url()],
            receiver: false,
        },
    )
    .await;

    // The exporter's own figure; MemTotal does not move.
    let mem_total = exposition_value(&exporter.scrape().await, "node_memory_MemTotal_bytes", &[]).expect("node_memory_MemTotal_bytes");
    assert!(mem_total > 0.0);
    let selector = format!("node_memory_MemTotal_bytes{{node_identifier_host_name=\"{VIA_PROMETHEUS}\"}}");

    // Prometheus scrapes the exporter every second, with the labels vm.yaml reads.
    wait_until(WAIT, "Prometheus has scraped the exporter", || async {
        scraper.query(&selector).await.is_some_and(|v| !v.is_empty())
    })
    .await;

    // promtool, instant and range, against the scraping Prometheus.
    let instant = promtool_instant(&scraper.url(), &selector).await.expect("promtool query instant");
    assert_eq!(instant.len(), 1, "{instant:?}");
    assert_eq!(instant[0].value, mem_total);
    assert_eq!(instant[0].label("job"), Some(VM_JOB));
    wait_until(WAIT, "two scrapes in the TSDB", || async {
        let now = unix_now();
        promtool_range(&scraper.url(), &selector, now - 30, now, 1).await.is_ok_and(|m| m.len() == 1 && m[0].values.len() >= 2)
    })
    .await;
    let now = unix_now();
    let range = promtool_range(&scraper.url(), &selector, now - 30, now, 1).await.expect("promtool query range");
    assert!(range[0].values.iter().all(|(_, v)| *v == mem_total), "{range:?}");
    let bad = promtool_instant(&scraper.url(), "sum(").await;
    assert!(bad.is_err_and(|e| e.contains("bad_data")), "a parse error is reported by promtool");

    // The remote-write receiver got the same series, labels included.
    wait_until(WAIT, "the receiver holds the remote-written series", || async {
        receiver.query(&selector).await.is_some_and(|v| v.len() == 1 && v[0].value == mem_total)
    })
    .await;
    let written = receiver.query(&selector).await.expect("query the receiver");
    assert_eq!(written[0].label("job"), Some(VM_JOB));
    assert_eq!(written[0].label("instance"), Some(exporter.target().as_str()));
    let now = unix_now();
    let matrix = api_query_range(&receiver.proc.client(), &selector, now - 30, now, 1).await.expect("query_range on the receiver");
    assert!(!matrix.is_empty() && !matrix[0].values.is_empty(), "{matrix:?}");
}

/// What a test server received: one request's path, headers and body.
#[derive(Debug)]
struct Captured {
    path: String,
    content_type: String,
    content_encoding: String,
    body: Vec<u8>,
}

/// A loopback HTTP server that answers every POST with an empty 200 protobuf body (an OTLP
/// success) and hands over what it received.
async fn capture_server() -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<Captured>, tokio::task::JoinHandle<()>) {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Uri};
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let tx = tx.clone();
        async move {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let captured = Captured {
                path: uri.path().to_string(),
                content_type: header("content-type"),
                content_encoding: header("content-encoding"),
                body: body.to_vec(),
            };
            let _ = tx.send(captured).await;
            ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, rx, server)
}

#[tokio::test]
async fn the_otlp_fixture_sends_a_gauge_a_counter_and_a_histogram_in_one_request() {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
    use prost::Message;

    let Some(python) = require_otlp_python("the_otlp_fixture_sends") else { return };
    let (addr, mut received, server) = capture_server().await;
    let out = send_otlp_fixture(&python, &format!("http://{addr}/v1/metrics"), OTLP_SERVICE).await.expect("the fixture's export succeeds");
    assert!(out.contains("SUCCESS"), "{out}");
    let request = tokio::time::timeout(Duration::from_secs(5), received.recv()).await.expect("a request").expect("captured");
    assert!(received.try_recv().is_err(), "exactly one request");
    server.abort();

    assert_eq!(request.path, "/v1/metrics");
    assert_eq!(request.content_type, "application/x-protobuf");
    assert_eq!(request.content_encoding, "", "the exporter sends uncompressed bodies by default");
    let export = ExportMetricsServiceRequest::decode(request.body.as_slice()).expect("an OTLP protobuf body");
    assert_eq!(export.resource_metrics.len(), 1);
    let resource = &export.resource_metrics[0];
    let attribute = |key: &str| {
        resource.resource.as_ref()?.attributes.iter().find(|a| a.key == key).and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.clone()),
            _ => None,
        })
    };
    assert_eq!(attribute("service.name").as_deref(), Some(OTLP_SERVICE));
    assert_eq!(attribute("host.name").as_deref(), Some("e2e-otlp-host"));
    let metrics: Vec<_> = resource.scope_metrics.iter().flat_map(|s| s.metrics.iter()).collect();
    let find = |name: &str| metrics.iter().find(|m| m.name == name).and_then(|m| m.data.clone()).unwrap_or_else(|| panic!("{name} sent"));
    let number = |point: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint| match point.value {
        Some(Number::AsInt(i)) => i as f64,
        Some(Number::AsDouble(d)) => d,
        None => f64::NAN,
    };
    match find("e2e.temperature") {
        Data::Gauge(g) => assert_eq!(g.data_points.iter().map(number).collect::<Vec<_>>(), vec![scenario::OTLP_TEMPERATURE]),
        other => panic!("e2e.temperature is a gauge: {other:?}"),
    }
    match find("e2e.requests") {
        Data::Sum(s) => {
            assert!(s.is_monotonic);
            assert_eq!(s.aggregation_temporality, 2, "cumulative");
            assert_eq!(s.data_points.iter().map(number).collect::<Vec<_>>(), vec![scenario::OTLP_REQUESTS]);
        }
        other => panic!("e2e.requests is a sum: {other:?}"),
    }
    match find("e2e.latency") {
        Data::Histogram(h) => {
            assert_eq!(h.data_points.len(), 1);
            let point = &h.data_points[0];
            assert_eq!(point.explicit_bounds, vec![0.005, 0.05, 0.5]);
            assert_eq!(point.bucket_counts, vec![5, 3, 2, 0]);
            assert_eq!(point.count, 10);
        }
        other => panic!("e2e.latency is a histogram: {other:?}"),
    }
}

async fn dry_run(node: &TestNode, name: &str, content: &str, batches: &[(i64, String, Value)]) -> Value {
    let batches: Vec<Value> =
        batches.iter().map(|(ts, exposition, labels)| json!({"timestampMs": ts, "exposition": exposition, "labels": labels})).collect();
    let body = serde_json::to_vec(&json!({"content": content, "batches": batches})).expect("json");
    let reply = node.client.post(&with_query("/runtime/rule/test", &[("catalog", "otel-rules"), ("name", name)]), body).await.expect("post");
    let report = reply.json().unwrap_or_default();
    assert_eq!(reply.status.as_u16(), 200, "{report}");
    report
}

fn values_of<'a>(report: &'a Value, rule: &str) -> &'a Vec<Value> {
    let row = report["rules"].as_array().and_then(|rules| rules.iter().find(|r| r["rule"] == rule)).expect("rule in the report");
    assert!(row["errors"].is_null(), "{row}");
    row["values"].as_array().expect("values")
}

/// 2023-11-14T22:14:00Z, a whole minute.
const T0: i64 = 1_700_000_040_000;

#[tokio::test]
async fn the_fixture_rules_compute_the_expected_values_on_a_dry_run() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;

    // The OTLP rule on what SkyWalking's receiver makes of the fixture's export.
    let report = dry_run(&node, "e2e-otlp", &scenario::otlp_rule(), &[(T0, scenario::otlp_as_exposition(), json!({}))]).await;
    let single = |rule: &str| {
        let values = values_of(&report, rule);
        assert_eq!(values.len(), 1, "{rule}: {values:?}");
        assert_eq!(values[0]["entity"]["service"], OTLP_SERVICE);
        values[0]["value"].as_f64().expect("a single value")
    };
    assert_eq!(single("temperature"), scenario::OTLP_TEMPERATURE);
    assert_eq!(single("requests"), scenario::OTLP_REQUESTS);
    let latency = &values_of(&report, "latency")[0]["value"];
    let buckets: Vec<(i64, i64)> = latency["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| (b[0].as_i64().expect("bound"), b[1].as_i64().expect("count")))
        .collect();
    assert_eq!(buckets, scenario::OTLP_LATENCY_BUCKETS.to_vec());
    let percentile = &values_of(&report, "latency_percentile")[0]["value"];
    assert_eq!(percentile["percentiles"], json!([50, 90]));
    for (rank, expected) in scenario::OTLP_PERCENTILES {
        assert_eq!(hotrule::data::metrics::prom::percentile(&buckets, rank) as f64, expected, "p{rank}");
    }

    // The structural change of vm.yaml on a recorded node_exporter scrape.
    let scrape = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/engines/mal-engine/tests/data/node-exporter/scrape1.prom"))
        .expect("recorded scrape");
    let mem_total = exposition_value(&scrape, "node_memory_MemTotal_bytes", &[]).expect("MemTotal");
    let labels = json!({"job_name": VM_JOB, "node_identifier_host_name": "h1"});
    let tripled = scenario::vm_yaml_tripled(&components::bundled_vm_yaml());
    let report = dry_run(&node, "vm", &tripled, &[(T0, scrape.clone(), labels.clone())]).await;
    assert_eq!(values_of(&report, "memory_total")[0]["value"].as_f64(), Some(3.0 * mem_total));
    assert_eq!(values_of(&report, "memory_total_e2e_marker")[0]["value"].as_f64(), Some(mem_total));
    let report = dry_run(&node, "vm-reshaped", scenario::VM_RESHAPED, &[(T0, scrape, labels)]).await;
    let reshaped = &values_of(&report, "memory_total")[0];
    assert_eq!(reshaped["entity"]["scope"], "SERVICE_INSTANCE");
    assert_eq!(reshaped["value"].as_f64(), Some(mem_total));
}

/// The control-plane answers `data_plane.rs`'s flowing-data test expects, on an in-process node.
#[tokio::test]
async fn the_flowing_data_test_sequence_is_answered_as_expected() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let vm = components::bundled_vm_yaml();
    let (code, answer) = node.push("otel-rules", "vm", &vm, &[]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("structural_applied")), "{answer}");
    let (code, answer) = node.push("otel-rules", "vm", &scenario::vm_yaml_tripled(&vm), &[("allowStorageChange", "true")]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("structural_applied")), "a metric added is STRUCTURAL: {answer}");
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("meter_vm_memory_total_e2e_marker")), "{answer}");

    let (code, answer) = node.push("otel-rules", "vm-reshaped", scenario::VM_RESHAPED, &[]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (409, Some("ownership_conflict")), "{answer}");
    let (code, answer) = node.post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "vm")]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("inactivated")), "{answer}");
    let (code, answer) = node.push("otel-rules", "vm-reshaped", scenario::VM_RESHAPED, &[]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (409, Some("ownership_conflict")), "an inactive file still holds its names: {answer}");
    let (code, answer) = node.post("/runtime/rule/delete", &[("catalog", "otel-rules"), ("name", "vm")]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("deleted")), "{answer}");
    let (code, answer) = node.push("otel-rules", "vm-reshaped", scenario::VM_RESHAPED, &[]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (200, Some("structural_applied")), "delete freed the name: {answer}");
}

/// The batches of `protocol` the recording sink holds that carry `name` with the label
/// `node_identifier_host_name = host` (or any, for an empty `host`).
fn batches_with(sink: &RecordingSink, protocol: Protocol, name: &str, host: &str) -> Vec<Batch> {
    sink.batches()
        .into_iter()
        .filter(|b| b.protocol == protocol)
        .filter(|b| b.samples.iter().any(|s| s.name == name && (host.is_empty() || s.label("node_identifier_host_name") == host)))
        .collect()
}

fn prepared(content: &str) -> PreparedFile {
    match compile_bundled(DslKind::Mal, content.as_bytes()) {
        Ok(Compiled::Mal(file)) => PreparedFile::new(file),
        Ok(Compiled::Lal(_)) => panic!("not a MAL file"),
        Err(e) => panic!("does not compile: {e}"),
    }
}

/// The single value of `metric` a file computes from one batch.
fn single_value(file: &PreparedFile, batch: &Batch, metric: &str) -> (String, i64) {
    let evaluation = file.evaluate(&batch.samples, batch.received_ms, &mut EngineState::default());
    assert!(evaluation.errors.is_empty(), "{:?}", evaluation.errors);
    let value = evaluation.values.iter().find(|v| v.metric == metric).unwrap_or_else(|| panic!("{metric} computed"));
    match value.value {
        Stored::Single(v) => (value.entity.service_name.clone(), v),
        ref other => panic!("{metric} is a single value, got {other:?}"),
    }
}

/// The input half of `data_plane.rs`, runnable without RocksDB: node_exporter scraped by a scrape
/// job of the node configuration `data_plane.rs` writes, Prometheus remote-writing the same
/// exporter, and the OTLP fixture, all into hotrule's real receivers on an in-process node whose
/// dispatcher is the recording twin; then vm.yaml and the OTLP rule on the batches received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_components_reach_hotrules_receivers_and_the_rules_compute_the_expected_values() {
    if !require("real_components_reach_hotrules_receivers", &["prometheus", "prometheus-node-exporter"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exporter = NodeExporter::start(&dir.path().join("exporter")).await;
    let mem_total = exposition_value(&exporter.scrape().await, "node_memory_MemTotal_bytes", &[]).expect("MemTotal");

    // The scrape job exactly as data_plane.rs configures its nodes, through the real loader.
    let job = ScrapeJob { job_name: VM_JOB.into(), targets: vec![exporter.target()], labels: scenario::vm_labels(VIA_SCRAPE) };
    let config_file = dir.path().join("node.yaml");
    std::fs::write(&config_file, node_config(&[job], None)).expect("write config");
    let sources = ConfigSources { uris: vec![format!("file:{}", config_file.display())], ..ConfigSources::default() };
    let loaded = hotrule::config::load(&sources, Arc::new(hotrule_confmap::ProcessEnv)).expect("the e2e node configuration loads");
    assert_eq!(loaded.config.ingest.scrape_jobs.len(), 1);

    let sink = Arc::new(RecordingSink::new());
    let settings = NodeSettings { ingest: loaded.config.ingest.clone(), ..NodeSettings::for_test() };
    let node = harness::start_with_data_listener(NodeBuilder::new(settings).data_sink(sink.clone())).await;
    let data = node.data_addr.expect("data listener");
    let _prometheus = Prometheus::start(
        &dir.path().join("prometheus"),
        &PrometheusSettings {
            scrape: vec![ScrapeJob { job_name: VM_JOB.into(), targets: vec![exporter.target()], labels: scenario::vm_labels(VIA_PROMETHEUS) }],
            remote_write: vec![format!("http://{data}/api/v1/write")],
            receiver: false,
        },
    )
    .await;
    let python = require_otlp_python("real_components_reach_hotrules_receivers (OTLP part)");
    if let Some(python) = &python {
        let out = send_otlp_fixture(python, &format!("http://{data}/v1/metrics"), OTLP_SERVICE).await.expect("hotrule's receiver accepts it");
        assert!(out.contains("SUCCESS"), "{out}");
    }

    for (protocol, host) in [(Protocol::Scrape, VIA_SCRAPE), (Protocol::RemoteWrite, VIA_PROMETHEUS)] {
        wait_until(WAIT, &format!("a {protocol:?} batch with MemTotal of {host}"), || {
            let found = !batches_with(&sink, protocol, "node_memory_MemTotal_bytes", host).is_empty();
            async move { found }
        })
        .await;
        let batch = batches_with(&sink, protocol, "node_memory_MemTotal_bytes", host).remove(0);
        let sample = batch.samples.iter().find(|s| s.name == "node_memory_MemTotal_bytes").expect("MemTotal");
        assert_eq!(sample.label("job_name"), VM_JOB, "{sample:?}");
        assert_eq!(sample.value, mem_total);
        assert_eq!(batch.catalog, hotrule::data::seam::Catalog::Otel);
        // vm.yaml on what the receiver handed over: the value data_plane.rs reads back.
        let vm = prepared(&components::bundled_vm_yaml());
        assert_eq!(single_value(&vm, &batch, "meter_vm_memory_total"), (host.to_string(), mem_total as i64), "{protocol:?}");
    }

    if python.is_some() {
        let batch = batches_with(&sink, Protocol::Otlp, "e2e_temperature", "").remove(0);
        let rule = prepared(&scenario::otlp_rule());
        assert_eq!(single_value(&rule, &batch, "meter_e2e_otlp_temperature"), (OTLP_SERVICE.to_string(), 42));
        assert_eq!(single_value(&rule, &batch, "meter_e2e_otlp_requests"), (OTLP_SERVICE.to_string(), 12));
        let evaluation = rule.evaluate(&batch.samples, batch.received_ms, &mut EngineState::default());
        let latency = evaluation.values.iter().find(|v| v.metric == "meter_e2e_otlp_latency").expect("latency");
        match &latency.value {
            Stored::Histogram { buckets, .. } => assert_eq!(buckets, &scenario::OTLP_LATENCY_BUCKETS.to_vec()),
            other => panic!("a histogram, got {other:?}"),
        }
    }
    node.shutdown().await;
}
