//! The exporter against a loopback receiver (port 0) that decodes snappy + protobuf and records
//! every request, over an in-memory twin of metric storage and a clock the test sets (the flush
//! cadence stays tokio's real `flush_interval`).
//!
//! A test that needs to know a minute was *not* sent by some point writes a marker: a value of
//! another series for a minute that is already closed. Once the marker arrives, the flush that
//! took it has run, and whatever it did not send was not due.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hotrule_mal_engine::{DataType, Downsampling, ScopeType, minute_bucket};
use tokio_util::sync::CancellationToken;

use super::prompb::WriteRequest;
use super::*;
use crate::data::metrics::cells::cell::Cell;
use crate::data::metrics::{Entity, Granularity, MetricInfo, PartialSeries, SeriesFilter, Value};
use crate::base::self_metrics::{LabelSet, SelfMetrics, labels};
use crate::base::worker::WorkerRunner;

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// The storage twin.

/// Metric values in memory, keyed by metric, entity and minute bucket; a write replaces.
#[derive(Default)]
struct MemStore {
    values: Mutex<BTreeMap<(String, Entity, i64), Value>>,
    failing: AtomicBool,
    /// Reads starting at this epoch ms fail (0: none).
    failing_from: AtomicI64,
    reads: AtomicUsize,
}

impl MetricWriter for MemStore {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        let mut stored = self.values.lock().expect("store");
        for v in values {
            stored.insert((v.metric.clone(), v.entity.clone(), v.time_bucket), v.value.clone());
        }
        Ok(())
    }
}

impl MetricReader for MemStore {
    fn metrics(&self) -> Result<Vec<MetricInfo>, MetricStoreError> {
        Ok(Vec::new())
    }

    /// Each stored value as one `sum` emission: it finalizes to the value itself.
    fn read_partials(&self, filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64) -> Result<Vec<PartialSeries>, MetricStoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        assert_eq!(granularity, Granularity::Minute, "the exporter reads minute values");
        if self.failing.load(Ordering::SeqCst) || self.failing_from.load(Ordering::SeqCst) == start_ms {
            return Err(MetricStoreError::Corrupt { key: filter.metric.clone(), detail: "twin told to fail".into() });
        }
        let mut by_series: BTreeMap<(String, Entity, String), Vec<(i64, Cell)>> = BTreeMap::new();
        for ((metric, entity, bucket), value) in self.values.lock().expect("store").iter() {
            let start = batch::minute_bucket_start_ms(*bucket).expect("valid bucket");
            if (filter.metric.is_empty() || filter.metric == *metric) && filter.passes(entity) && (start_ms..=end_ms).contains(&start) {
                let (cell, group) = Cell::from_value(value, Downsampling::Sum, start);
                by_series.entry((metric.clone(), entity.clone(), group)).or_default().push((*bucket, cell));
            }
        }
        Ok(by_series.into_iter().map(|((metric, entity, group), cells)| PartialSeries { metric, entity, group, cells }).collect())
    }
}

fn alone() -> Arc<dyn crate::base::owner::LiveNodes> {
    Arc::new(crate::base::owner::Alone(crate::base::ids::NodeId("n1".into())))
}

fn service(name: &str) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = name.to_string();
    entity.layer = "GENERAL".to_string();
    entity
}

/// The minute most tests write (2026-01-01 00:10 UTC); minutes before and after it are valid.
const M0: i64 = 202601010010;
/// `close_after` in `RemoteWriteSettings::for_test`.
const CLOSE_AFTER_MS: i64 = 10_000;

/// The start of minute `bucket`, epoch ms.
fn start(bucket: i64) -> i64 {
    batch::minute_bucket_start_ms(bucket).expect("valid bucket")
}

/// The first instant minute `bucket` is due for export.
fn closes(bucket: i64) -> i64 {
    start(bucket) + 60_000 + CLOSE_AFTER_MS
}

/// A value for minute [`M0`].
fn value(metric: &str, entity: Entity, v: i64) -> MetricValue {
    value_at(metric, entity, v, M0)
}

/// A value for a minute that closed by the real clock, for the exporters on the wall clock.
fn recent_value(metric: &str, entity: Entity, v: i64) -> MetricValue {
    value_at(metric, entity, v, minute_bucket(crate::base::clock::wall_clock_ms() - 120_000))
}

fn value_at(metric: &str, entity: Entity, v: i64, bucket: i64) -> MetricValue {
    MetricValue {
        metric: metric.to_string(),
        rule: "test".to_string(),
        entity,
        time_bucket: bucket,
        timestamp_ms: start(bucket),
        value: Value::Single(v),
        data_type: DataType::Single,
        downsampling: Downsampling::Avg,
    }
}

// ---------------------------------------------------------------------------------------------
// The loopback receiver.

/// One request as the receiver saw it.
#[derive(Clone)]
struct Received {
    at: Instant,
    headers: HeaderMap,
    request: WriteRequest,
    answered: u16,
}

/// One scripted answer: status, headers, body.
type Scripted = (u16, Vec<(&'static str, &'static str)>, &'static str);

/// Answers from a script (then 200), and records every request.
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

    /// Requests holding a sample of `metric` for service `svc`.
    fn holding(&self, metric: &str, svc: &str) -> Vec<Received> {
        self.received().into_iter().filter(|r| has_series(&r.request, metric, svc)).collect()
    }

    /// The (timestamp, value) samples of `metric` for service `svc` that were delivered (2xx),
    /// in the order they arrived.
    fn samples_of(&self, metric: &str, svc: &str) -> Vec<(i64, f64)> {
        self.received()
            .iter()
            .filter(|r| r.answered < 300)
            .flat_map(|r| r.request.timeseries.iter())
            .filter(|s| label(s, "__name__") == Some(metric) && label(s, "service") == Some(svc))
            .flat_map(|s| s.samples.iter().map(|p| (p.timestamp, p.value)))
            .collect()
    }
}

fn label<'a>(series: &'a super::prompb::TimeSeries, name: &str) -> Option<&'a str> {
    series.labels.iter().find(|l| l.name == name).map(|l| l.value.as_str())
}

fn has_series(request: &WriteRequest, metric: &str, svc: &str) -> bool {
    request.timeseries.iter().any(|s| label(s, "__name__") == Some(metric) && label(s, "service") == Some(svc))
}

async fn receive(State(receiver): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> Response {
    let decoded = snap::raw::Decoder::new()
        .decompress_vec(&body)
        .map_err(|e| e.to_string())
        .and_then(|raw| <WriteRequest as prost::Message>::decode(raw.as_slice()).map_err(|e| e.to_string()));
    let request = match decoded {
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
    let url = format!("http://{}/api/v1/write", listener.local_addr().expect("addr"));
    let app = Router::new().route("/api/v1/write", post(receive)).with_state(receiver.clone());
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await;
    });
    (receiver, url, stop)
}

// ---------------------------------------------------------------------------------------------
// The exporter under test.

struct Harness {
    writer: StoreThenExport,
    store: Arc<MemStore>,
    telemetry: Arc<SelfMetrics>,
    runner: WorkerRunner,
    /// The exporter's wall clock, epoch ms.
    clock: Arc<AtomicI64>,
    markers: AtomicUsize,
}

/// An exporter whose clock starts when [`M0`] has closed, so values written for it are sent at
/// the next flush.
fn start_exporter(settings: RemoteWriteSettings) -> Harness {
    assert_eq!(settings.close_after, Duration::from_millis(CLOSE_AFTER_MS as u64));
    let store = Arc::new(MemStore::default());
    let telemetry = Arc::new(SelfMetrics::new());
    let clock = Arc::new(AtomicI64::new(closes(M0)));
    let read_clock = clock.clone();
    let now_ms: crate::data::series_store::NowMs = Arc::new(move || read_clock.load(Ordering::SeqCst));
    let (exporter, worker) = build_with_clock(settings, store.clone(), alone(), telemetry.clone(), now_ms).expect("builds");
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(worker);
    Harness {
        writer: StoreThenExport { store: store.clone(), export: exporter },
        store,
        telemetry,
        runner,
        clock,
        markers: AtomicUsize::new(0),
    }
}

impl Harness {
    fn write(&self, values: &[MetricValue]) {
        self.writer.write(values).expect("the exporter never fails a write");
    }

    fn set_clock(&self, now_ms: i64) {
        self.clock.store(now_ms, Ordering::SeqCst);
    }

    /// Writes a marker (a new series, for minute `closed`, which must have closed by the
    /// clock) and waits until a flush delivered it.
    async fn flush_marker(&self, receiver: &Receiver, closed: i64) {
        assert!(self.clock.load(Ordering::SeqCst) >= closes(closed), "the marker's minute has closed");
        let name = format!("marker-{}", self.markers.fetch_add(1, Ordering::SeqCst));
        self.write(&[value_at("marker", service(&name), 1, closed)]);
        wait_until("the marker is delivered", || !receiver.samples_of("marker", &name).is_empty()).await;
    }

    fn series_dropped(&self, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.export_series_dropped, &labels([("reason", reason)]))
    }

    fn dropped(&self, reason: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.export_batches_dropped, &labels([("reason", reason)]))
    }

    fn sent(&self) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.export_samples_sent, &LabelSet::new())
    }

    fn queue_depth(&self) -> i64 {
        self.telemetry.export_queue_depth.get_or_create(&LabelSet::new()).get()
    }

    async fn stop(self) {
        let report = self.runner.shutdown(Duration::from_secs(10)).await;
        assert!(report.aborted.is_empty(), "the exporter stops within its bound");
    }
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The cases.

#[tokio::test]
async fn values_arrive_with_their_labels_and_the_1_0_headers() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = RemoteWriteSettings::for_test(&url);
    settings.headers = config::ExtraHeaders(vec![(HeaderName::from_static("x-scope-orgid"), HeaderValue::from_static("tenant-1"))]);
    let harness = start_exporter(settings);
    let mut instance = Entity::new(ScopeType::ServiceInstance);
    instance.service_name = "vm-1".into();
    instance.instance_name = "10.0.0.1".into();
    instance.layer = "OS_LINUX".into();
    harness.write(&[value("meter_vm_cpu", service("vm-1"), 42), value("meter_vm_cpu", instance, 7)]);
    wait_until("both values arrive", || harness.sent() == 2).await;

    let received = receiver.received();
    let request = &received[0];
    for (name, expected) in [
        ("content-encoding", "snappy"),
        ("content-type", "application/x-protobuf"),
        ("x-prometheus-remote-write-version", "0.1.0"),
        ("user-agent", concat!("hotrule/", env!("CARGO_PKG_VERSION"))),
        ("x-scope-orgid", "tenant-1"),
    ] {
        assert_eq!(request.headers.get(name).and_then(|v| v.to_str().ok()), Some(expected), "{name}");
    }
    let all: Vec<_> = received.iter().flat_map(|r| r.request.timeseries.clone()).collect();
    assert_eq!(all.len(), 2);
    let svc = all.iter().find(|s| label(s, "scope") == Some("SERVICE")).expect("the service series");
    let names: Vec<&str> = svc.labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["__name__", "layer", "scope", "service"], "sorted, with __name__");
    assert_eq!(label(svc, "__name__"), Some("meter_vm_cpu"));
    assert_eq!(svc.samples.len(), 1);
    assert_eq!(svc.samples[0].value, 42.0);
    assert_eq!(svc.samples[0].timestamp, start(M0), "stamped with the minute's start");
    let inst = all.iter().find(|s| label(s, "scope") == Some("SERVICE_INSTANCE")).expect("the instance series");
    assert_eq!(label(inst, "service_instance"), Some("10.0.0.1"));
    assert_eq!(inst.samples[0].value, 7.0);
    // The same labels as the query API's mapping.
    let expected: Vec<(String, String)> = crate::data::metrics::prom::series_labels("meter_vm_cpu", &service("vm-1")).into_iter().collect();
    let got: Vec<(String, String)> = svc.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
    assert_eq!(got, expected);
    let text = harness.telemetry.render();
    assert!(text.contains("hotrule_export_samples_sent_total 2"), "{text}");
    assert!(text.contains("hotrule_export_batches_dropped_total{reason=\"queue_full\"} 0"), "every reason from the start: {text}");
    assert!(text.contains("hotrule_export_series_dropped_total{reason=\"late\"} 0"), "every reason from the start: {text}");
    harness.stop().await;
}

#[tokio::test]
async fn a_minute_is_sent_once_after_it_closes_with_its_final_value() {
    let (receiver, url, _stop) = start_receiver().await;
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.set_clock(start(M0) + 30_000);
    harness.write(&[value("m", service("a"), 1)]);
    harness.flush_marker(&receiver, M0 - 2).await;
    assert!(receiver.samples_of("m", "a").is_empty(), "the minute is still filling");
    assert_eq!(harness.writer.export.pending_series(), 1, "it waits");

    harness.write(&[value("m", service("a"), 5)]);
    harness.write(&[value("m", service("a"), 7)]);
    harness.set_clock(closes(M0) - 1);
    harness.flush_marker(&receiver, M0 - 1).await;
    assert!(receiver.samples_of("m", "a").is_empty(), "ended, but close_after has not passed");

    harness.set_clock(closes(M0));
    wait_until("the closed minute is delivered", || !receiver.samples_of("m", "a").is_empty()).await;
    harness.flush_marker(&receiver, M0).await;
    harness.set_clock(closes(M0 + 3));
    harness.flush_marker(&receiver, M0 + 3).await;
    assert_eq!(receiver.samples_of("m", "a"), vec![(start(M0), 7.0)], "once, the last value, at the minute's start");
    assert_eq!(harness.writer.export.pending_series(), 0);
    assert_eq!(harness.series_dropped("late"), 0);
    harness.stop().await;
}

#[tokio::test]
async fn a_write_to_an_exported_minute_is_counted_late_and_not_sent() {
    let (receiver, url, _stop) = start_receiver().await;
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.write(&[value("m", service("a"), 1)]);
    wait_until("the minute is delivered", || harness.sent() == 1).await;

    harness.write(&[value("m", service("a"), 2)]);
    assert_eq!(harness.series_dropped("late"), 1, "a late sample");
    harness.writer.export.mark_series(&[("m".to_string(), service("a"), M0)]);
    assert_eq!(harness.series_dropped("late"), 2, "a handoff merged after the export");
    assert_eq!(harness.writer.export.pending_series(), 0, "neither waits");
    harness.flush_marker(&receiver, M0).await;
    assert_eq!(receiver.samples_of("m", "a"), vec![(start(M0), 1.0)], "not sent again");
    assert_eq!(harness.series_dropped("pending_full"), 0);

    harness.set_clock(closes(M0 + 1));
    harness.write(&[value_at("m", service("a"), 3, M0 + 1)]);
    wait_until("the next minute is delivered", || receiver.samples_of("m", "a").len() == 2).await;
    assert_eq!(receiver.samples_of("m", "a")[1], (start(M0 + 1), 3.0), "a later minute is not late");
    harness.stop().await;
}

#[tokio::test]
async fn two_minutes_of_a_series_are_two_samples_in_time_order() {
    let (receiver, url, _stop) = start_receiver().await;
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.set_clock(closes(M0 + 1));
    harness.write(&[value_at("m", service("a"), 2, M0 + 1), value_at("m", service("a"), 1, M0)]);
    wait_until("both minutes are delivered", || harness.sent() == 2).await;
    assert_eq!(receiver.samples_of("m", "a"), vec![(start(M0), 1.0), (start(M0 + 1), 2.0)]);
    let series: Vec<_> = receiver.received().iter().flat_map(|r| r.request.timeseries.clone()).collect();
    assert_eq!(series.len(), 1, "one TimeSeries holds both samples");
    harness.stop().await;
}

#[tokio::test]
async fn a_500_is_retried_and_the_batch_delivered_once() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(500, Vec::new(), "try later");
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.write(&[value("m", service("a"), 3)]);
    wait_until("the retried batch is delivered", || harness.sent() == 1).await;
    // A later value, delivered after it, shows nothing more of the first batch was sent.
    harness.write(&[value("m", service("b"), 4)]);
    wait_until("the later value is delivered", || harness.sent() == 2).await;
    let first: Vec<u16> = receiver.holding("m", "a").iter().map(|r| r.answered).collect();
    assert_eq!(first, vec![500, 200], "one failure, one delivery");
    assert_eq!(harness.dropped("retries_exhausted") + harness.dropped("rejected"), 0);
    harness.stop().await;
}

#[tokio::test]
async fn a_400_drops_the_batch_and_counts_it() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(400, Vec::new(), "out of order sample");
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.write(&[value("m", service("a"), 3)]);
    wait_until("the refused batch is counted", || harness.dropped("rejected") == 1).await;
    harness.write(&[value("m", service("b"), 4)]);
    wait_until("the later value is delivered", || harness.sent() == 1).await;
    assert_eq!(receiver.holding("m", "a").len(), 1, "a 4xx is never retried");
    harness.stop().await;
}

#[tokio::test]
async fn retries_stop_at_max_attempts_and_are_counted() {
    let (receiver, url, _stop) = start_receiver().await;
    for _ in 0..3 {
        receiver.then_answer(503, Vec::new(), "down");
    }
    let harness = start_exporter(RemoteWriteSettings::for_test(&url)); // max_attempts 3
    harness.write(&[value("m", service("a"), 3)]);
    wait_until("the batch is given up", || harness.dropped("retries_exhausted") == 1).await;
    assert_eq!(receiver.holding("m", "a").len(), 3);
    harness.stop().await;
}

#[tokio::test]
async fn a_429_waits_for_its_retry_after() {
    let (receiver, url, _stop) = start_receiver().await;
    receiver.then_answer(429, vec![("retry-after", "1")], "slow down");
    let harness = start_exporter(RemoteWriteSettings::for_test(&url)); // backoff 10 ms .. 100 ms
    harness.write(&[value("m", service("a"), 3)]);
    wait_until("the batch is delivered after the 429", || harness.sent() == 1).await;
    let attempts = receiver.holding("m", "a");
    assert_eq!(attempts.iter().map(|r| r.answered).collect::<Vec<_>>(), vec![429, 200]);
    let waited = attempts[1].at.duration_since(attempts[0].at);
    assert!(waited >= Duration::from_millis(950), "Retry-After: 1 honoured, waited {waited:?}");
    harness.stop().await;
}

#[tokio::test]
async fn batches_hold_at_most_batch_size_samples() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = RemoteWriteSettings::for_test(&url);
    settings.batch_size = 3;
    let harness = start_exporter(settings);
    let values: Vec<MetricValue> = (0..7).map(|i| value("m", service(&format!("s{i}")), i)).collect();
    harness.write(&values);
    wait_until("all seven arrive", || harness.sent() == 7).await;
    let mut sizes: Vec<usize> = receiver.received().iter().map(|r| r.request.timeseries.len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![1, 3, 3]);
    harness.stop().await;
}

#[tokio::test]
async fn a_dead_receiver_and_a_small_queue_stay_bounded_and_count_every_drop() {
    // A port that was bound and released: connections are refused.
    let url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/api/v1/write", listener.local_addr().expect("addr"))
    };
    let mut settings = RemoteWriteSettings::for_test(&url);
    settings.batch_size = 1;
    settings.queue_batches = 2;
    settings.retry.max_attempts = 1000; // the batch in flight never leaves: the queue must drop
    settings.retry.initial_backoff = Duration::from_millis(50);
    settings.retry.max_backoff = Duration::from_millis(50);
    let bound = settings.queue_batches as i64 + 1; // waiting + in flight
    let harness = start_exporter(settings);

    // Five new series at once: two fit in the pending set (batch_size × queue_batches).
    let values: Vec<MetricValue> = (0..5).map(|i| value("m", service(&format!("s{i}")), i)).collect();
    harness.write(&values);
    let refused = SelfMetrics::counter_value(&harness.telemetry.export_series_dropped, &labels([("reason", "pending_full")]));
    assert_eq!(refused, 3, "series over the pending bound are counted");

    let mut round = 0;
    while harness.dropped("queue_full") < 3 {
        round += 1;
        assert!(round <= 20, "the queue never dropped");
        wait_until("the flush takes the pending series", || harness.writer.export.pending_series() == 0).await;
        assert!(harness.queue_depth() <= bound, "queue depth {} over {bound}", harness.queue_depth());
        harness.write(&[value("m", service(&format!("r{round}a")), 1), value("m", service(&format!("r{round}b")), 1)]);
    }
    assert!(harness.queue_depth() <= bound);
    assert_eq!(harness.sent(), 0);
    harness.stop().await;
}

#[tokio::test]
async fn a_failed_read_is_retried_at_the_next_flush() {
    let (_receiver, url, _stop) = start_receiver().await;
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.store.failing.store(true, Ordering::SeqCst);
    harness.write(&[value("m", service("a"), 9)]);
    wait_until("a read failed", || harness.store.reads.load(Ordering::SeqCst) >= 1).await;
    wait_until("the series is pending again", || harness.writer.export.pending_series() == 1).await;
    harness.store.failing.store(false, Ordering::SeqCst);
    wait_until("the value is delivered", || harness.sent() == 1).await;
    harness.stop().await;
}

/// A later minute sent before an earlier one of the same series would be refused as out of
/// order: when one minute of a metric cannot be read, its other minutes wait with it.
#[tokio::test]
async fn a_failed_read_holds_back_the_later_minutes_of_its_metric() {
    let (receiver, url, _stop) = start_receiver().await;
    let harness = start_exporter(RemoteWriteSettings::for_test(&url));
    harness.set_clock(closes(M0 + 1));
    harness.store.failing_from.store(start(M0), Ordering::SeqCst);
    harness.write(&[value_at("m", service("a"), 1, M0), value_at("m", service("a"), 2, M0 + 1)]);
    wait_until("a read failed", || harness.store.reads.load(Ordering::SeqCst) >= 1).await;
    wait_until("both minutes are pending again", || harness.writer.export.pending_series() == 2).await;
    harness.flush_marker(&receiver, M0 + 1).await;
    assert!(receiver.samples_of("m", "a").is_empty(), "the readable minute waits for the earlier one");
    harness.store.failing_from.store(0, Ordering::SeqCst);
    wait_until("both minutes are delivered", || receiver.samples_of("m", "a").len() == 2).await;
    assert_eq!(receiver.samples_of("m", "a"), vec![(start(M0), 1.0), (start(M0 + 1), 2.0)]);
    harness.stop().await;
}

#[tokio::test]
async fn shutdown_sends_what_is_pending_open_minutes_included() {
    let (receiver, url, _stop) = start_receiver().await;
    let mut settings = RemoteWriteSettings::for_test(&url);
    settings.flush_interval = Duration::from_secs(3600);
    let harness = start_exporter(settings);
    harness.set_clock(closes(M0));
    harness.write(&[value("m", service("a"), 11), value_at("m", service("b"), 12, M0 + 1)]);
    assert!(receiver.received().is_empty(), "nothing before the (hour-long) interval");
    let telemetry = harness.telemetry.clone();
    harness.stop().await;
    assert_eq!(receiver.samples_of("m", "a"), vec![(start(M0), 11.0)], "closed");
    assert_eq!(receiver.samples_of("m", "b"), vec![(start(M0 + 1), 12.0)], "still open: sent with what the node has");
    assert_eq!(SelfMetrics::counter_value(&telemetry.export_samples_sent, &LabelSet::new()), 2);
}

#[tokio::test]
async fn shutdown_against_a_dead_receiver_is_bounded_and_counts_what_is_left() {
    let url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/api/v1/write", listener.local_addr().expect("addr"))
    };
    let mut settings = RemoteWriteSettings::for_test(&url);
    settings.flush_interval = Duration::from_secs(3600);
    settings.retry.max_attempts = 1000;
    settings.retry.initial_backoff = Duration::from_millis(200);
    settings.retry.max_backoff = Duration::from_secs(1);
    let harness = start_exporter(settings);
    harness.write(&[value("m", service("a"), 11)]);
    let telemetry = harness.telemetry.clone();
    let started = Instant::now();
    harness.stop().await;
    assert!(started.elapsed() < FINAL_FLUSH_BOUND + Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(SelfMetrics::counter_value(&telemetry.export_batches_dropped, &labels([("reason", "shutdown")])), 1);
}

#[tokio::test]
async fn wire_adds_export_only_when_configured() {
    let (receiver, url, _stop) = start_receiver().await;
    let telemetry = Arc::new(SelfMetrics::new());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let store = Arc::new(MemStore::default());
    let plain = wire(None, store.clone(), store.clone(), alone(), telemetry.clone(), &mut runner).expect("wires").0;
    plain.write(&[recent_value("m", service("plain"), 1)]).expect("writes");
    let exporting = wire(Some(RemoteWriteSettings::for_test(&url)), store.clone(), store.clone(), alone(), telemetry.clone(), &mut runner).expect("wires").0;
    exporting.write(&[recent_value("m", service("exported"), 2)]).expect("writes");
    assert_eq!(store.values.lock().expect("store").len(), 2, "both reach storage");
    let sent = || SelfMetrics::counter_value(&telemetry.export_samples_sent, &LabelSet::new());
    wait_until("the exported value arrives", || sent() == 1).await;
    runner.shutdown(Duration::from_secs(10)).await;
    assert_eq!(receiver.holding("m", "exported").len(), 1);
    assert!(receiver.holding("m", "plain").is_empty(), "the writer without export marks nothing");
}

/// In a cluster a node exports only the entities it owns: the others' owners export them, so a
/// backend never gets one series from two nodes.
#[tokio::test]
async fn a_clustered_node_exports_only_the_entities_it_owns() {
    use crate::base::ids::NodeId;
    use crate::base::owner::{Fixed, LiveSet};
    let (receiver, url, _stop) = start_receiver().await;
    let telemetry = Arc::new(SelfMetrics::new());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let store = Arc::new(MemStore::default());
    let live_set = LiveSet::new(NodeId("n1".into()), vec![NodeId("n2".into()), NodeId("n3".into())]);
    let live = Arc::new(Fixed::new(live_set.clone()));
    let (writer, _) = wire(Some(RemoteWriteSettings::for_test(&url)), store.clone(), store.clone(), live, telemetry.clone(), &mut runner).expect("wires");
    let names: Vec<String> = (0..30).map(|i| format!("svc-{i}")).collect();
    let values: Vec<MetricValue> = names.iter().map(|n| recent_value("m", service(n), 1)).collect();
    writer.write(&values).expect("writes");
    let owned: Vec<&String> =
        names.iter().filter(|n| live_set.owns(&crate::data::metrics::cells::keys::owner_key(&service(n)))).collect();
    assert!(!owned.is_empty() && owned.len() < names.len(), "{} of {} owned", owned.len(), names.len());
    let sent = || SelfMetrics::counter_value(&telemetry.export_samples_sent, &LabelSet::new());
    wait_until("the owned series arrive", || sent() == owned.len() as u64).await;
    runner.shutdown(Duration::from_secs(10)).await;
    for name in &names {
        let held = receiver.holding("m", name).len();
        assert_eq!(held, usize::from(owned.contains(&name)), "{name}");
    }
}
