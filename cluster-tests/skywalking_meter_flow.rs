//! SkyWalking's runtime-rule meter flow (`test/e2e-v2/cases/runtime-rule/meter/` in
//! apache/skywalking, rule files under `fixtures/skywalking-meter-flow/`) on an in-process node:
//! native `MeterData` sent over gRPC to the data listener as the e2e mock sender sends it
//! (`collectBatch`, one `MeterDataCollection`, `batch_test` = 100 for
//! `test-service`/`test-instance`), evaluated against a bundled `meter-analyzer-config` file
//! and a runtime rule that is hot-added, edited and inactivated.
//!
//! Upstream compares the set of minute buckets carrying a value before and after each
//! transition, pushing with the wall clock for minutes. Here every phase sends with its own
//! explicit minute in the recent past (the sender's `/sendBatchMetrics/{timestamp}/{value}`), so
//! "a fresh bucket" is "a value at this phase's minute" and "stopped" is "no value at the minutes
//! sent after the inactivate", while the bundled rule shows the batches were taken.
//!
//! Also: `collect` (not batch) with the identity and timestamp on the first message only, as
//! the Java agent streams, and a histogram meter through `.histogram()` (upstream's
//! `MeterProcessorTest`; the form with `.histogram()` before the scope is ignored: hotrule
//! scales a meter's bounds by 1000 there, upstream does not).

mod harness;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness::{start_with_data_listener, wait_until};
use hotrule::api::client::{AdminClient, with_query};
use hotrule::data::ingest::skywalking::wire::meter_report_service_client::MeterReportServiceClient;
use hotrule::data::ingest::skywalking::wire::{
    Label, MeterBucketValue, MeterData, MeterDataCollection, MeterHistogram, MeterSingleValue, meter_data,
};
use hotrule::node::{NodeSettings, RunningNode};
use serde_json::{Value, json};
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(30);
/// The most batches one "send until it is stored" loop sends (upstream pushes on every poll).
const MAX_SENDS: usize = 100;

const CATALOG: &str = "meter-analyzer-config";
const SERVICE: &str = "test-service";
const INSTANCE: &str = "test-instance";

/// The bundled file, as upstream mounts it into `config/meter-analyzer-config/`.
const BUNDLED_NAME: &str = "batch-meter";
const BUNDLED_FILE: &str = include_str!("fixtures/skywalking-meter-flow/bundled/batch-meter.yaml");
/// metricPrefix `batch` + rule `test`.
const BUNDLED_METRIC: &str = "batch_test";

/// The runtime rule (no bundled twin) and its two versions.
const RUNTIME_NAME: &str = "e2e_rr_meter";
const METER_V1: &str = include_str!("fixtures/skywalking-meter-flow/seed-rules/meter-v1.yaml");
const METER_V2: &str = include_str!("fixtures/skywalking-meter-flow/seed-rules/meter-v2.yaml");
/// metricPrefix `e2e_rr_meter` + rule `batch`.
const RUNTIME_METRIC: &str = "e2e_rr_meter_batch";
/// The metric v2 adds (`batch_scaled: batch_test * 2`).
const RUNTIME_METRIC_V2: &str = "e2e_rr_meter_batch_scaled";

/// A node with the bundled file in its rules dir, an admin client and a meter client.
struct Flow {
    node: RunningNode,
    admin: AdminClient,
    meters: MeterReportServiceClient<Channel>,
    _rules_dir: tempfile::TempDir,
}

impl Flow {
    async fn start() -> Flow {
        let rules_dir = tempfile::tempdir().expect("rules dir");
        std::fs::create_dir_all(rules_dir.path().join(CATALOG)).expect("catalog dir");
        std::fs::write(rules_dir.path().join(CATALOG).join(format!("{BUNDLED_NAME}.yaml")), BUNDLED_FILE).expect("bundled file");
        let settings = NodeSettings { rules_dir: Some(rules_dir.path().to_path_buf()), ..NodeSettings::for_test() };
        let node = start_with_data_listener(settings).await;
        let admin = AdminClient::new(&node.admin_addr.to_string(), None).expect("admin client");
        let data = node.data_addr.expect("data listener");
        let meters = MeterReportServiceClient::connect(format!("http://{data}")).await.expect("gRPC connects to the data listener");
        let flow = Flow { node, admin, meters, _rules_dir: rules_dir };
        flow.wait_running(BUNDLED_NAME, "the bundled meter file runs").await;
        flow
    }

    /// The `/runtime/rule/list` row of a `meter-analyzer-config` file.
    async fn row(&self, name: &str) -> Option<Value> {
        let list: Value = self.admin.get(&with_query("/runtime/rule/list", &[("catalog", CATALOG)])).await.ok()?.json()?;
        list["rules"].as_array()?.iter().find(|r| r["catalog"] == CATALOG && r["name"] == name).cloned()
    }

    async fn wait_running(&self, name: &str, what: &str) {
        wait_until(WAIT, what, || async { self.row(name).await.is_some_and(|row| row["localState"] == "RUNNING") }).await;
    }

    /// A write route with catalog and name; (HTTP status, answer).
    async fn write(&self, route: &str, name: &str, body: &str) -> (u16, Value) {
        let reply = self.admin.post(&with_query(route, &[("catalog", CATALOG), ("name", name)]), body.as_bytes().to_vec()).await.expect("admin write");
        (reply.status.as_u16(), reply.json().unwrap_or_default())
    }

    /// An addOrUpdate that must be a committed structural apply, which `/runtime/rule/status`
    /// reports APPLIED by its `applyId` (upstream's `await_apply_terminal`).
    async fn apply(&self, name: &str, content: &str) -> Value {
        let (status, answer) = self.write("/runtime/rule/addOrUpdate", name, content).await;
        assert_eq!((status, answer["applyStatus"].as_str()), (200, Some("structural_applied")), "{answer}");
        let apply_id = answer["applyId"].as_str().expect("a structural apply has an applyId");
        let reply = self.admin.get(&with_query("/runtime/rule/status", &[("applyId", apply_id)])).await.expect("status");
        let phase: Value = reply.json().unwrap_or_default();
        assert_eq!(phase["phase"], "APPLIED", "{phase}");
        answer
    }

    /// Sends one `MeterDataCollection` as the mock sender's `sendBatchMetrics` does.
    async fn send_batch(&self, timestamp_ms: i64, value: f64) {
        let collection = MeterDataCollection { meter_data: vec![single("batch_test", &[], value, SERVICE, INSTANCE, timestamp_ms)] };
        let mut meters = self.meters.clone();
        meters.collect_batch(futures_util::stream::iter(vec![collection])).await.expect("collectBatch is answered OK");
    }

    /// Sends `batch_test` = `value` at `timestamp_ms` until `metric` holds `want` at that minute
    /// (upstream's `push_meter` on every poll); how many batches it took.
    async fn send_until_stored(&self, timestamp_ms: i64, value: f64, metric: &str, want: Value) -> usize {
        let sends = AtomicUsize::new(0);
        let what = format!("{metric} = {want} at {}", minute_of(timestamp_ms));
        wait_until(WAIT, &what, || async {
            let sent = sends.fetch_add(1, Ordering::Relaxed) + 1;
            assert!(sent <= MAX_SENDS, "{sent} batches sent and still no {what}");
            self.send_batch(timestamp_ms, value).await;
            self.values(metric).await.get(&minute_of(timestamp_ms)) == Some(&want)
        })
        .await;
        sends.load(Ordering::Relaxed)
    }

    /// `/query/metrics` for the service and instance over the test's range.
    async fn read(&self, metric: &str) -> Value {
        let (start, end) = range();
        let pairs = [("name", metric), ("service", SERVICE), ("instance", INSTANCE), ("start", &start), ("end", &end)];
        let reply = self.admin.get(&with_query("/query/metrics", &pairs)).await.expect("query");
        let body = reply.json().unwrap_or_default();
        assert_eq!(reply.status.as_u16(), 200, "{body}");
        body
    }

    /// The stored values of `metric` for the service and instance, by minute start (ms).
    async fn values(&self, metric: &str) -> BTreeMap<i64, Value> {
        values_of(&self.read(metric).await)
    }
}

/// Every minute the tests send at lies in this range: 20 minutes back to now.
fn range() -> (String, String) {
    let now = hotrule::base::clock::wall_clock_ms();
    ((now - 20 * 60_000).to_string(), now.to_string())
}

/// The `k`-th minute of the test (a few minutes in the past), 15 s into it.
fn phase_ms(k: i64) -> i64 {
    let first = (hotrule::base::clock::wall_clock_ms() / 60_000 - 10) * 60_000;
    first + k * 60_000 + 15_000
}

fn minute_of(ms: i64) -> i64 {
    ms / 60_000 * 60_000
}

/// A read's points for `SERVICE`/`INSTANCE`, by minute start; the entity is checked.
fn values_of(body: &Value) -> BTreeMap<i64, Value> {
    let mut out = BTreeMap::new();
    for series in body["series"].as_array().into_iter().flatten() {
        assert_eq!((series["entity"]["service"].as_str(), series["entity"]["service_instance"].as_str()), (Some(SERVICE), Some(INSTANCE)), "{series}");
        for point in series["points"].as_array().into_iter().flatten() {
            out.insert(point["time"].as_i64().expect("a point's time"), point["value"].clone());
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> Vec<Label> {
    pairs.iter().map(|(name, value)| Label { name: (*name).into(), value: (*value).into() }).collect()
}

/// A `MeterData` holding a single value.
fn single(name: &str, pairs: &[(&str, &str)], value: f64, service: &str, instance: &str, timestamp: i64) -> MeterData {
    MeterData {
        metric: Some(meter_data::Metric::SingleValue(MeterSingleValue { name: name.into(), labels: labels(pairs), value })),
        service: service.into(),
        service_instance: instance.into(),
        timestamp,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_rule_meter_flow() {
    let flow = Flow::start().await;
    let minutes: Vec<i64> = (0..5).map(phase_ms).collect();

    eprintln!("[meter-flow] phase 1: the bundled {CATALOG}/{BUNDLED_NAME} is listed and produces {BUNDLED_METRIC}");
    let reply = flow.admin.get(&with_query("/runtime/rule/bundled", &[("catalog", CATALOG)])).await.expect("bundled");
    let bundled: Value = reply.json().unwrap_or_default();
    assert!(bundled.as_array().is_some_and(|rows| rows.iter().any(|r| r["name"] == BUNDLED_NAME && r["content"] == BUNDLED_FILE)), "{bundled}");
    let sends = flow.send_until_stored(minutes[0], 100.0, BUNDLED_METRIC, json!(100)).await;
    eprintln!("[meter-flow]   {BUNDLED_METRIC} stored after {sends} batch(es)");
    let body = flow.read(BUNDLED_METRIC).await;
    assert_eq!(body["metric"]["scope"], "SERVICE_INSTANCE", "{body}");
    assert_eq!(values_of(&body), BTreeMap::from([(minute_of(minutes[0]), json!(100))]), "{body}");
    assert!(flow.values(RUNTIME_METRIC).await.is_empty(), "no runtime rule yet");

    eprintln!("[meter-flow] phase 2: hot-add {CATALOG}/{RUNTIME_NAME} (no bundled twin)");
    flow.apply(RUNTIME_NAME, METER_V1).await;
    let row = flow.row(RUNTIME_NAME).await.expect("the runtime rule's row");
    assert_eq!((row["status"].as_str(), row["bundled"].as_bool()), (Some("ACTIVE"), Some(false)), "{row}");
    flow.wait_running(RUNTIME_NAME, "the runtime rule runs").await;
    flow.send_until_stored(minutes[1], 100.0, RUNTIME_METRIC, json!(100)).await;
    // It starts with the rule: nothing for the minute sent before it existed.
    assert_eq!(flow.values(RUNTIME_METRIC).await, BTreeMap::from([(minute_of(minutes[1]), json!(100))]));
    assert_eq!(flow.values(BUNDLED_METRIC).await.get(&minute_of(minutes[1])), Some(&json!(100)), "the bundled rule keeps producing");

    eprintln!("[meter-flow] phase 3: edit {RUNTIME_NAME} in place (v1 -> v2 adds {RUNTIME_METRIC_V2})");
    let before = flow.read(RUNTIME_METRIC_V2).await;
    assert!(values_of(&before).is_empty(), "{RUNTIME_METRIC_V2} before the edit: {before}");
    let answer = flow.apply(RUNTIME_NAME, METER_V2).await;
    assert!(answer["message"].as_str().unwrap_or("").contains(RUNTIME_METRIC_V2), "the edit names the added metric: {answer}");
    flow.wait_running(RUNTIME_NAME, "the edited rule runs").await;
    flow.send_until_stored(minutes[2], 100.0, RUNTIME_METRIC_V2, json!(200)).await;
    assert_eq!(flow.values(RUNTIME_METRIC_V2).await, BTreeMap::from([(minute_of(minutes[2]), json!(200))]));
    // The metric v1 registered gets the new minute too: the replacement kept it.
    let kept = BTreeMap::from([(minute_of(minutes[1]), json!(100)), (minute_of(minutes[2]), json!(100))]);
    assert_eq!(flow.values(RUNTIME_METRIC).await, kept);

    eprintln!("[meter-flow] phase 4: a dry run of the bundled file (upstream's DSL debug session)");
    let reply = flow
        .admin
        .get(&with_query("/runtime/rule", &[("catalog", CATALOG), ("name", BUNDLED_NAME), ("source", "bundled")]))
        .await
        .expect("bundled content");
    assert_eq!(reply.text(), BUNDLED_FILE, "the bundled file verbatim");
    let exposition = format!("batch_test{{service=\"{SERVICE}\",instance=\"{INSTANCE}\"}} 100\n");
    let request = json!({"content": BUNDLED_FILE, "batches": [{"timestampMs": minutes[3], "exposition": exposition}]});
    let (status, report) = flow.write("/runtime/rule/test", BUNDLED_NAME, &request.to_string()).await;
    assert_eq!((status, report["compiled"].as_bool()), (200, Some(true)), "{report}");
    let rules = report["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "{report}");
    assert_eq!((rules[0]["rule"].as_str(), rules[0]["metric"].as_str()), (Some("test"), Some(BUNDLED_METRIC)), "{report}");
    let emitted = rules[0]["values"].as_array().expect("values");
    assert_eq!(emitted.len(), 1, "{report}");
    assert_eq!(emitted[0]["value"], 100, "{report}");
    assert_eq!(emitted[0]["entity"]["scope"], "SERVICE_INSTANCE", "{report}");
    assert_eq!((emitted[0]["entity"]["service"].as_str(), emitted[0]["entity"]["instance"].as_str()), (Some(SERVICE), Some(INSTANCE)), "{report}");
    // A dry run stores nothing: no value at its minute.
    assert_eq!(flow.values(BUNDLED_METRIC).await.get(&minute_of(minutes[3])), None, "the dry run stored a value");

    eprintln!("[meter-flow] phase 5: inactivate {RUNTIME_NAME}");
    let (status, answer) = flow.write("/runtime/rule/inactivate", RUNTIME_NAME, "").await;
    assert_eq!((status, answer["applyStatus"].as_str()), (200, Some("inactivated")), "{answer}");
    let row = flow.row(RUNTIME_NAME).await.expect("the inactive row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("INACTIVE"), Some("NOT_LOADED")), "{row}");
    // Two later minutes, each sent until the bundled rule stored it: those batches were taken
    // and evaluated, and the runtime rule's metrics got nothing from them.
    for minute in [minutes[3], minutes[4]] {
        flow.send_until_stored(minute, 100.0, BUNDLED_METRIC, json!(100)).await;
    }
    let every_minute: BTreeMap<i64, Value> = minutes.iter().map(|at| (minute_of(*at), json!(100))).collect();
    assert_eq!(flow.values(BUNDLED_METRIC).await, every_minute, "the bundled rule produced in every phase");
    let runtime = flow.read(RUNTIME_METRIC).await;
    assert_eq!(values_of(&runtime), kept, "{RUNTIME_METRIC} after the inactivate: {runtime}");
    let scaled = flow.read(RUNTIME_METRIC_V2).await;
    assert_eq!(values_of(&scaled), BTreeMap::from([(minute_of(minutes[2]), json!(200))]), "{RUNTIME_METRIC_V2} after the inactivate: {scaled}");
    flow.node.shutdown().await;
}

/// A runtime rule over two meters, one of them labeled.
const STREAM_RULE: &str = "\
expSuffix: instance(['service'], ['instance'], Layer.GENERAL)
metricPrefix: stream
metricsRules:
  - name: first
    exp: stream_first
  - name: second
    exp: stream_second.sum(['k', 'service', 'instance'])
";

/// `collect`: one stream is one batch, and only its first message names the service, the
/// instance and the time, as the Java agent streams its meters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_takes_the_identity_from_the_first_message() {
    let flow = Flow::start().await;
    flow.apply("stream", STREAM_RULE).await;
    flow.wait_running("stream", "the stream rule runs").await;
    let at = phase_ms(0);
    let messages = vec![
        single("stream_first", &[], 11.0, SERVICE, INSTANCE, at),
        single("stream_second", &[("k", "a")], 22.0, "", "", 0),
        single("stream_second", &[("k", "b")], 33.0, "", "", 0),
        single("batch_test", &[], 44.0, "", "", 0),
    ];
    let mut meters = flow.meters.clone();
    meters.collect(futures_util::stream::iter(messages)).await.expect("collect is answered OK");
    let minute = minute_of(at);
    wait_until(WAIT, "the stream's four meters are stored", || async {
        flow.values("stream_first").await.contains_key(&minute)
            && flow.values("stream_second").await.contains_key(&minute)
            && flow.values(BUNDLED_METRIC).await.contains_key(&minute)
    })
    .await;
    assert_eq!(flow.values("stream_first").await, BTreeMap::from([(minute, json!(11))]));
    assert_eq!(flow.values("stream_second").await, BTreeMap::from([(minute, json!({"k=a": 22, "k=b": 33}))]));
    assert_eq!(flow.values(BUNDLED_METRIC).await, BTreeMap::from([(minute, json!(44))]));

    // Without a timestamp in the stream nothing is taken, and the call says why.
    let messages = vec![single("stream_first", &[], 55.0, SERVICE, INSTANCE, 0)];
    let mut meters = flow.meters.clone();
    let refused = meters.collect(futures_util::stream::iter(messages)).await.expect_err("a stream without a timestamp is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    flow.node.shutdown().await;
}

/// Upstream's `MeterProcessorTest` rule (`agent-analyzer/src/test/resources/meter-analyzer-config/config.yaml`).
const HISTOGRAM_RULE: &str = "\
expSuffix:
metricPrefix: meter
metricsRules:
  - name: build_test2
    exp: test_histogram.instance([\"service\"], [\"instance\"], Layer.GENERAL).histogram()
";

/// The same meter with `.histogram()` before the scope, as the bundled `java-agent.yaml`
/// (`tracing_context_performance`) and `network-profiling.yaml` are written.
const AGENT_STYLE_HISTOGRAM_RULE: &str = "\
expSuffix: instance(['service'], ['instance'], Layer.GENERAL)
metricPrefix: meter
metricsRules:
  - name: agent_style
    exp: test_histogram.sum(['le', 'service', 'instance']).histogram()
";

/// Upstream's `MeterProcessorTest` histogram: a negative-infinity bucket and the lower bounds 0
/// and 10.
fn test_histogram(timestamp: i64) -> MeterData {
    let bucket = |bucket: f64, count: i64, is_negative_infinity: bool| MeterBucketValue { bucket, count, is_negative_infinity };
    MeterData {
        metric: Some(meter_data::Metric::Histogram(MeterHistogram {
            name: "test_histogram".into(),
            labels: Vec::new(),
            values: vec![bucket(0.0, 10, true), bucket(0.0, 20, false), bucket(10.0, 10, false)],
        })),
        service: SERVICE.into(),
        service_instance: INSTANCE.into(),
        timestamp,
    }
}

/// Starts a node running `rule` (file `name`), sends [`test_histogram`] with `collect`, and
/// answers the stored buckets of `metric` as `/query/metrics` shows them: bound → count.
async fn stored_histogram(name: &str, rule: &str, metric: &str) -> BTreeMap<i64, i64> {
    let flow = Flow::start().await;
    flow.apply(name, rule).await;
    flow.wait_running(name, "the histogram rule runs").await;
    let at = phase_ms(0);
    let mut meters = flow.meters.clone();
    meters.collect(futures_util::stream::iter(vec![test_histogram(at)])).await.expect("collect is answered OK");
    let minute = minute_of(at);
    wait_until(WAIT, "the histogram is stored", || async { flow.values(metric).await.contains_key(&minute) }).await;
    let body = flow.read(metric).await;
    assert_eq!((body["metric"]["dataType"].as_str(), body["metric"]["function"].as_str()), (Some("Histogram"), Some("avgHistogram")), "{body}");
    let points = values_of(&body);
    assert_eq!(points.len(), 1, "{body}");
    let buckets = points[&minute]["buckets"].as_array().cloned().unwrap_or_default();
    let stored = buckets.iter().map(|pair| (pair[0].as_i64().expect("a bound"), pair[1].as_i64().expect("a count"))).collect::<BTreeMap<_, _>>();
    assert_eq!(stored.len(), buckets.len(), "a bound repeats: {body}");
    flow.node.shutdown().await;
    stored
}

/// What upstream's `MeterProcessorTest` expects: {Long.MIN_VALUE: 10, "0": 20, "10": 10}.
fn upstream_buckets() -> BTreeMap<i64, i64> {
    BTreeMap::from([(i64::MIN, 10), (0, 20), (10, 10)])
}

/// A histogram meter: one sample per bucket, `le` the bucket's lower bound (the negative
/// infinity flag as `Long.MIN_VALUE`), with upstream's `MeterProcessorTest` rule (the scope
/// before `.histogram()`, so the buckets are the bounds the scope saw).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_histogram_meter_is_stored_by_its_lower_bounds() {
    assert_eq!(stored_histogram("histogram", HISTOGRAM_RULE, "meter_build_test2").await, upstream_buckets());
}

/// With `.histogram()` before the scope its unit counts: upstream's `MeterProcessor` builds the
/// families with `defaultHistogramBucketUnit(TimeUnit.MILLISECONDS)`, so a meter's bounds are
/// kept as sent (10 stays 10), where Prometheus and OpenTelemetry data is read in seconds (10
/// would be 10000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_histogram_before_the_scope_keeps_the_meter_bounds() {
    assert_eq!(stored_histogram("agent-style", AGENT_STYLE_HISTOGRAM_RULE, "meter_agent_style").await, upstream_buckets());
}
