//! `hotrule bench meter-grpc`: meters per second into a node over SkyWalking's native
//! `MeterReportService/collect`, side by side with the same samples over Prometheus
//! remote-write, in one run.
//!
//! - The samples: `--names` meter names (`bench_meter_K`), each with one label `pool` of
//!   `--meters / --names` values, make one report of `--meters` meters (500 by default: a Java
//!   agent reports at most 500 meters per period). Report `s` belongs to instance
//!   `inst-(s mod --instances)` of the service `bench-svc` and is stamped with minute `s div
//!   --instances` of a window that ends before the run starts, so that every (instance, minute)
//!   gets exactly one report and every stored minute value is one report's.
//! - gRPC: one channel (h2c on the node's data listener); each report is one `collect` stream,
//!   the first message naming the service, instance and time (as the Java agent sends), sent
//!   after the last one was answered. The rule, `meter-analyzer-config/bench.yaml`:
//!   `bench_meter_K.sum(['service', 'instance'])` under
//!   `instance(['service'], ['instance'], Layer.GENERAL)`.
//! - Remote-write: one connection; each report is one `POST /api/v1/write` (snappy protobuf)
//!   whose series carry `__name__`, `service`, `instance` and `pool`, sent after the last one was
//!   answered. The rule, `otel-rules/bench.yaml`, is the same expression over the same samples; a
//!   receiver turns Prometheus' `instance` into `service_instance_id` (as the OpenTelemetry
//!   collector does), so the rule groups by that name instead.
//! - Each path gets a node of its own (in-process, the same settings: RocksDB with `--dir`, else
//!   the in-memory twin), loading only its rule file from a temporary rules directory. The clock
//!   runs from the first report until the node's dispatch is idle after the last answer: every
//!   sample evaluated and every value written to the metric store.
//! - Checked, an error of the run when not: the node counted every sample received, and the
//!   stored minute values of every `meter_bench_mK` for every instance equal the expected sums,
//!   no more, no fewer.
//! - With `--large-meters`, the same is measured again with reports of that many meters.
//!
//! CPU is the whole process's (`/proc/self/stat`, as `bench lal-node`): the client building and
//! encoding the reports (and compressing the remote-write bodies), and the node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use tonic::transport::Channel;

use super::ingest_stream::prompb;
use super::lal_node::process_cpu_seconds;
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::data::evaluation::DispatchSettings;
use crate::data::ingest::skywalking::wire::{Label, MeterData, MeterSingleValue, meter_data, meter_report_service_client::MeterReportServiceClient};
use crate::data::metrics::{Granularity, MetricReader, SeriesFilter, Value};
use crate::node::testing::NodeBuilder;
use crate::node::{Listeners, NodeSettings, RunningNode};
use crate::store::kv::{KvEngine, MemKv};

/// The service every report names.
pub const SERVICE: &str = "bench-svc";
/// The rules' `metricPrefix`: meter `bench_meter_K` becomes `meter_bench_mK`.
const METRIC_PREFIX: &str = "meter_bench";
const MINUTE_MS: i64 = 60_000;
/// How long the node may take to drain what was answered.
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, clap::Args)]
pub struct MeterGrpcArgs {
    /// RocksDB in this directory (needs the `rocksdb` feature); default: the in-memory twin.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Samples sent per path and report size.
    #[arg(long, default_value_t = 1_000_000)]
    samples: usize,
    /// Meters per report (one `collect` stream, one remote-write request).
    #[arg(long, default_value_t = 500)]
    meters: usize,
    /// Then the same with reports of this many meters (0: skipped).
    #[arg(long, default_value_t = 50_000)]
    large_meters: usize,
    /// Meter names per report (each with --meters / --names values of its label `pool`).
    #[arg(long, default_value_t = 10)]
    names: usize,
    /// Service instances the reports take turns at.
    #[arg(long, default_value_t = 100)]
    instances: usize,
    /// Evaluation threads (`dispatch.workers`; 0: one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
}

/// The protocol a run sends its reports over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Grpc,
    RemoteWrite,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Grpc => "gRPC MeterReportService/collect",
            Transport::RemoteWrite => "remote-write POST /api/v1/write",
        }
    }

    fn catalog_dir(self) -> &'static str {
        match self {
            Transport::Grpc => "meter-analyzer-config",
            Transport::RemoteWrite => "otel-rules",
        }
    }

    /// The label the instance's name arrives in, as the rule reads it.
    fn instance_label(self) -> &'static str {
        match self {
            Transport::Grpc => "instance",
            Transport::RemoteWrite => "service_instance_id",
        }
    }

    fn protocol_label(self) -> &'static str {
        match self {
            Transport::Grpc => "skywalking_meter",
            Transport::RemoteWrite => "remote_write",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::RemoteWrite => "remote-write",
        }
    }

    /// The rule file: one metric per meter name, the pools summed per instance.
    pub fn rule(self, names: usize) -> String {
        let by = self.instance_label();
        let mut text = format!("expSuffix: instance(['service'], ['{by}'], Layer.GENERAL)\nmetricPrefix: {METRIC_PREFIX}\nmetricsRules:\n");
        for k in 0..names {
            text.push_str(&format!("  - name: m{k}\n    exp: bench_meter_{k}.sum(['service', '{by}'])\n"));
        }
        text
    }
}

/// The reports one measurement sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub reports: usize,
    /// Meters per report: `names × pools`.
    pub names: usize,
    pub pools: usize,
    pub instances: usize,
    /// The first minute's start.
    pub t0_ms: i64,
}

/// The stored value of one metric for one instance at one minute.
type Cell = (String, String, i64);

impl Shape {
    /// `samples` in reports of `meters`, the window ending a minute before `now_ms`.
    pub fn new(samples: usize, meters: usize, names: usize, instances: usize, now_ms: i64) -> Result<Shape, String> {
        if names == 0 || instances == 0 || meters < names || !meters.is_multiple_of(names) {
            return Err(format!("--meters ({meters}) must be a positive multiple of --names ({names}), and --instances at least 1"));
        }
        let reports = samples.div_ceil(meters).max(1);
        let minutes = reports.div_ceil(instances) as i64;
        let t0_ms = now_ms - now_ms.rem_euclid(MINUTE_MS) - (minutes + 1) * MINUTE_MS;
        Ok(Shape { reports, names, pools: meters / names, instances: instances.min(reports), t0_ms })
    }

    pub fn meters(&self) -> usize {
        self.names * self.pools
    }

    pub fn samples(&self) -> u64 {
        (self.reports * self.meters()) as u64
    }

    fn instance(&self, report: usize) -> String {
        format!("inst-{}", report % self.instances)
    }

    fn minute_ms(&self, report: usize) -> i64 {
        self.t0_ms + (report / self.instances) as i64 * MINUTE_MS
    }

    /// The window holding every report's minute.
    fn window(&self) -> (i64, i64) {
        (self.t0_ms, self.minute_ms(self.reports - 1))
    }

    /// Whole numbers, so that sums are exact.
    fn value(report: usize, name: usize, pool: usize) -> f64 {
        ((report * 7 + name * 13 + pool) % 1000) as f64
    }

    /// Every value the node should store: per metric, instance and minute, the sum of the pools.
    pub fn expected(&self) -> BTreeMap<Cell, i64> {
        let mut cells = BTreeMap::new();
        for report in 0..self.reports {
            for name in 0..self.names {
                let sum: f64 = (0..self.pools).map(|pool| Shape::value(report, name, pool)).sum();
                cells.insert((format!("{METRIC_PREFIX}_m{name}"), self.instance(report), self.minute_ms(report)), sum as i64);
            }
        }
        cells
    }

    /// Report `report` as a `collect` stream: only the first message names the service,
    /// instance and time, as the Java agent sends.
    pub fn meter_stream(&self, report: usize) -> Vec<MeterData> {
        let mut messages = Vec::with_capacity(self.meters());
        for name in 0..self.names {
            let meter = format!("bench_meter_{name}");
            for pool in 0..self.pools {
                let first = messages.is_empty();
                messages.push(MeterData {
                    metric: Some(meter_data::Metric::SingleValue(MeterSingleValue {
                        name: meter.clone(),
                        labels: vec![Label { name: "pool".into(), value: format!("p{pool}") }],
                        value: Shape::value(report, name, pool),
                    })),
                    service: if first { SERVICE.into() } else { String::new() },
                    service_instance: if first { self.instance(report) } else { String::new() },
                    timestamp: if first { self.minute_ms(report) } else { 0 },
                });
            }
        }
        messages
    }

    /// Report `report` as a snappy-compressed remote-write request (labels sorted by name).
    pub fn remote_write_body(&self, report: usize) -> Vec<u8> {
        let label = |name: &str, value: String| prompb::Label { name: name.into(), value };
        let (instance, timestamp) = (self.instance(report), self.minute_ms(report));
        let mut timeseries = Vec::with_capacity(self.meters());
        for name in 0..self.names {
            for pool in 0..self.pools {
                timeseries.push(prompb::TimeSeries {
                    labels: vec![
                        label("__name__", format!("bench_meter_{name}")),
                        label("instance", instance.clone()),
                        label("pool", format!("p{pool}")),
                        label("service", SERVICE.into()),
                    ],
                    samples: vec![prompb::Sample { value: Shape::value(report, name, pool), timestamp }],
                    ..Default::default()
                });
            }
        }
        let body = prompb::WriteRequest { timeseries, ..Default::default() }.encode_to_vec();
        snap::raw::Encoder::new().compress_vec(&body).unwrap_or_default()
    }
}

/// What one measurement of one path measured; [`measure`] returns it only when it checked out.
#[derive(Debug, Clone, PartialEq)]
pub struct PathReport {
    pub transport: Transport,
    pub store: &'static str,
    pub meters_per_report: usize,
    pub reports: usize,
    pub samples: u64,
    /// From the first report until dispatch was idle after the last answer.
    pub wall: Duration,
    /// Process CPU seconds over the same span (none where `/proc/self/stat` is unreadable).
    pub cpu_seconds: Option<f64>,
    /// Per report: sent until answered.
    pub latencies: Vec<Duration>,
    /// `samples_received` of the path's protocol.
    pub samples_received: u64,
    /// Stored minute values read back, each equal to the expected one.
    pub values_checked: usize,
}

impl PathReport {
    pub fn samples_per_second(&self) -> f64 {
        self.samples as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    pub fn cpu_seconds_per_million(&self) -> Option<f64> {
        self.cpu_seconds.map(|cpu| cpu * 1e6 / self.samples.max(1) as f64)
    }

    /// `fraction`: 0.5 for the median.
    fn latency(&self, fraction: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        super::store::percentile(&sorted, fraction)
    }

    pub fn line(&self) -> String {
        let cpu = match (self.cpu_seconds, self.cpu_seconds_per_million()) {
            (Some(cpu), Some(per_million)) => format!("{cpu:.2} s process CPU = {per_million:.2} CPU-s per million samples"),
            _ => "process CPU unavailable".into(),
        };
        format!(
            "{:<32} {:>6} meters/report: {:>9.0} samples/s ({} samples, {} reports, {:.3} s to idle); {cpu}; per report p50 {:.2} ms, p99 {:.2} ms; checked {} stored values on {}",
            self.transport.name(),
            self.meters_per_report,
            self.samples_per_second(),
            self.samples,
            self.reports,
            self.wall.as_secs_f64(),
            self.latency(0.50).as_secs_f64() * 1000.0,
            self.latency(0.99).as_secs_f64() * 1000.0,
            self.values_checked,
            self.store,
        )
    }
}

/// What differs between the stored cells and the expected ones, if anything.
pub fn mismatch(expected: &BTreeMap<Cell, i64>, stored: &BTreeMap<Cell, i64>) -> Option<String> {
    let missing: Vec<_> = expected.iter().filter(|(cell, _)| !stored.contains_key(*cell)).collect();
    let extra: Vec<_> = stored.iter().filter(|(cell, _)| !expected.contains_key(*cell)).collect();
    let wrong: Vec<_> =
        expected.iter().filter_map(|(cell, want)| stored.get(cell).filter(|got| *got != want).map(|got| (cell, *want, *got))).collect();
    if missing.is_empty() && extra.is_empty() && wrong.is_empty() {
        return None;
    }
    Some(format!(
        "{} expected values: {} missing (first {:?}), {} unexpected (first {:?}), {} different (first {:?} as (cell, expected, stored))",
        expected.len(),
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first(),
        wrong.len(),
        wrong.first(),
    ))
}

/// The stored minute values of every bench metric of [`SERVICE`] in the shape's window.
fn stored_cells(reader: &dyn MetricReader, shape: &Shape) -> Result<BTreeMap<Cell, i64>, String> {
    let (from, to) = shape.window();
    let mut cells = BTreeMap::new();
    for name in 0..shape.names {
        let metric = format!("{METRIC_PREFIX}_m{name}");
        let filter = SeriesFilter { metric: metric.clone(), service: Some(SERVICE.into()), ..SeriesFilter::default() };
        let series = reader.read(&filter, Granularity::Minute, from, to).map_err(|e| format!("reading {metric}: {e}"))?;
        for one in series {
            for point in one.points {
                let Value::Single(value) = point.value else {
                    return Err(format!("{metric} of {} holds {:?}, not one value", one.entity.instance_name, point.value));
                };
                cells.insert((metric.clone(), one.entity.instance_name.clone(), point.start_ms), value);
            }
        }
    }
    Ok(cells)
}

/// A temporary rules directory holding `transport`'s rule file only; removed when dropped.
struct RulesDir(PathBuf);

impl RulesDir {
    fn new(transport: Transport, names: usize) -> Result<RulesDir, String> {
        let root = std::env::temp_dir().join(format!("hotrule-bench-meter-{}-{}", std::process::id(), transport.slug()));
        let _ = std::fs::remove_dir_all(&root);
        let catalog = root.join(transport.catalog_dir());
        std::fs::create_dir_all(&catalog).map_err(|e| format!("{}: {e}", catalog.display()))?;
        let file = catalog.join("bench.yaml");
        std::fs::write(&file, transport.rule(names)).map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(RulesDir(root))
    }
}

impl Drop for RulesDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn engine(dir: Option<&std::path::Path>, name: &str) -> Result<(Arc<dyn KvEngine>, &'static str), String> {
    let Some(dir) = dir else { return Ok((Arc::new(MemKv::new()), "the in-memory twin")) };
    let path = dir.join(name);
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((super::store::engine(&path)?, "RocksDB"))
}

/// Sends `shape` over `transport` to a node of its own and checks what it stored; the node is shut
/// down after.
pub async fn measure(transport: Transport, shape: &Shape, dispatch: &DispatchSettings, dir: Option<&std::path::Path>) -> Result<PathReport, String> {
    let rules = RulesDir::new(transport, shape.names)?;
    let (kv, store) = engine(dir, &format!("meter-{}-{}-db", transport.slug(), shape.meters()))?;
    // The reports' minutes are in the past: retention keeps them.
    let long = Duration::from_secs(3650 * 86_400);
    let retention = crate::data::metrics::cells::Retention { minute: long, hour: long, day: long, logs: long, alarms: long };
    let settings = NodeSettings { rules_dir: Some(rules.0.clone()), dispatch: dispatch.clone(), retention, ..NodeSettings::for_test() };
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let (admin, data) = (bind().await.map_err(|e| e.to_string())?, bind().await.map_err(|e| e.to_string())?);
    let listeners = Listeners { admin, data: Some(data), grpc: None };
    let node = NodeBuilder::new(settings).start_with_listeners(kv, listeners, None).await.map_err(|e| e.to_string())?;
    let result = run_on(&node, transport, shape, store).await;
    node.shutdown().await;
    result
}

async fn run_on(node: &RunningNode, transport: Transport, shape: &Shape, store: &'static str) -> Result<PathReport, String> {
    let data_addr = node.data_addr.ok_or("the node has no data listener")?;
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let latencies = match transport {
        Transport::Grpc => send_grpc(data_addr, shape).await?,
        Transport::RemoteWrite => send_remote_write(data_addr, shape).await?,
    };
    let dispatcher = node.state.dispatcher.clone();
    let idle = tokio::task::spawn_blocking(move || dispatcher.wait_idle(IDLE_TIMEOUT)).await.map_err(|e| e.to_string())?;
    if !idle {
        return Err(format!("dispatch was not idle {IDLE_TIMEOUT:?} after the last report was answered"));
    }
    let wall = started.elapsed();
    let cpu_seconds = process_cpu_seconds().zip(cpu_before).map(|(after, before)| after - before);

    let samples_received = SelfMetrics::counter_value(&node.telemetry.samples_received, &labels([("protocol", transport.protocol_label())]));
    if samples_received != shape.samples() {
        return Err(format!("{}: the node counted {samples_received} samples received of {} sent", transport.name(), shape.samples()));
    }
    let reader = node.metric_reader();
    let read_shape = shape.clone();
    let stored = tokio::task::spawn_blocking(move || stored_cells(reader.as_ref(), &read_shape)).await.map_err(|e| e.to_string())??;
    let expected = shape.expected();
    if let Some(why) = mismatch(&expected, &stored) {
        return Err(format!("{}: the stored values are not the expected ones: {why}", transport.name()));
    }
    Ok(PathReport {
        transport,
        store,
        meters_per_report: shape.meters(),
        reports: shape.reports,
        samples: shape.samples(),
        wall,
        cpu_seconds,
        latencies,
        samples_received,
        values_checked: stored.len(),
    })
}

/// Every report as one `collect` stream on one channel, one after the other.
async fn send_grpc(addr: std::net::SocketAddr, shape: &Shape) -> Result<Vec<Duration>, String> {
    let channel = Channel::from_shared(format!("http://{addr}")).map_err(|e| e.to_string())?.connect().await.map_err(|e| format!("connecting to {addr}: {e}"))?;
    let mut client = MeterReportServiceClient::new(channel);
    let mut latencies = Vec::with_capacity(shape.reports);
    for report in 0..shape.reports {
        let sent = Instant::now();
        let messages = shape.meter_stream(report);
        client.collect(futures_util::stream::iter(messages)).await.map_err(|status| format!("report {report}: collect answered {status:?}"))?;
        latencies.push(sent.elapsed());
    }
    Ok(latencies)
}

/// Every report as one remote-write request on one connection, one after the other.
async fn send_remote_write(addr: std::net::SocketAddr, shape: &Shape) -> Result<Vec<Duration>, String> {
    let client = super::ingest::client();
    let url = format!("http://{addr}/api/v1/write");
    let mut latencies = Vec::with_capacity(shape.reports);
    for report in 0..shape.reports {
        let sent = Instant::now();
        let body = shape.remote_write_body(report);
        super::ingest::send(&client, &url, body).await.map_err(|(kind, answer)| format!("report {report}: {kind}: {answer}"))?;
        latencies.push(sent.elapsed());
    }
    Ok(latencies)
}

/// `hotrule bench meter-grpc`.
pub async fn run(args: &MeterGrpcArgs) -> Result<(), String> {
    if args.samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let dispatch = DispatchSettings { workers: if args.workers == 0 { cores } else { args.workers }, ..DispatchSettings::default() };
    let sizes: Vec<usize> = [args.meters, args.large_meters].into_iter().filter(|m| *m > 0).collect();
    println!(
        "{} samples per path and report size; {} meter names × --meters/--names pools; {} instances of {SERVICE}; one report at a time on one channel / connection; {} evaluation threads; {}",
        args.samples,
        args.names,
        args.instances,
        dispatch.workers,
        if args.dir.is_some() { "RocksDB" } else { "the in-memory twin" },
    );
    println!("load average before: {}", super::store::load_average());
    let mut reports = Vec::new();
    for meters in sizes {
        let now_ms = crate::base::clock::now_ms() as i64;
        let shape = Shape::new(args.samples, meters, args.names, args.instances, now_ms)?;
        for transport in [Transport::Grpc, Transport::RemoteWrite] {
            let report = measure(transport, &shape, &dispatch, args.dir.as_deref()).await?;
            println!("{}", report.line());
            reports.push(report);
        }
    }
    println!("side by side (samples/s; CPU-s per million samples):");
    for pair in reports.chunks(2) {
        if let [grpc, remote_write] = pair {
            let cpu = |r: &PathReport| r.cpu_seconds_per_million().map_or("n/a".to_string(), |c| format!("{c:.2}"));
            println!(
                "  {:>6} meters/report: gRPC {:.0} vs remote-write {:.0} ({:.2}×); CPU {} vs {}",
                grpc.meters_per_report,
                grpc.samples_per_second(),
                remote_write.samples_per_second(),
                grpc.samples_per_second() / remote_write.samples_per_second().max(f64::EPSILON),
                cpu(grpc),
                cpu(remote_write),
            );
        }
    }
    println!("load average after: {}", super::store::load_average());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_795_600_123_456;

    #[test]
    fn a_shape_gives_each_instance_one_report_per_minute_before_now() {
        let shape = Shape::new(2000, 20, 4, 3, NOW_MS).expect("shape");
        assert_eq!((shape.reports, shape.pools, shape.meters(), shape.samples()), (100, 5, 20, 2000));
        let (from, to) = shape.window();
        assert_eq!(from % MINUTE_MS, 0);
        assert!(to < NOW_MS - NOW_MS.rem_euclid(MINUTE_MS), "the window ends before the current minute");
        let expected = shape.expected();
        assert_eq!(expected.len(), 100 * 4, "one value per report and name");
        assert!(Shape::new(10, 6, 4, 1, NOW_MS).is_err(), "meters must be a multiple of names");

        let stream = shape.meter_stream(4);
        assert_eq!(stream.len(), 20);
        assert_eq!((stream[0].service.as_str(), stream[0].service_instance.as_str()), (SERVICE, "inst-1"));
        assert_eq!(stream[0].timestamp, shape.t0_ms + MINUTE_MS);
        assert!(stream[1..].iter().all(|m| m.service.is_empty() && m.timestamp == 0));

        let raw = snap::raw::Decoder::new().decompress_vec(&shape.remote_write_body(4)).expect("snappy");
        let request = prompb::WriteRequest::decode(raw.as_slice()).expect("a WriteRequest");
        assert_eq!(request.timeseries.len(), 20);
        let sent: f64 = request.timeseries.iter().take(5).map(|s| s.samples[0].value).sum();
        assert_eq!(expected[&(format!("{METRIC_PREFIX}_m0"), "inst-1".to_string(), shape.t0_ms + MINUTE_MS)], sent as i64);
    }

    #[test]
    fn a_mismatch_names_what_is_missing_or_different() {
        let shape = Shape::new(40, 20, 4, 2, NOW_MS).expect("shape");
        let expected = shape.expected();
        assert_eq!(mismatch(&expected, &expected), None);
        let mut stored = expected.clone();
        let first = stored.keys().next().cloned().expect("a cell");
        stored.insert(first.clone(), -1);
        assert!(mismatch(&expected, &stored).expect("differs").contains("1 different"));
        stored.remove(&first);
        assert!(mismatch(&expected, &stored).expect("differs").contains("1 missing"));
    }

    /// Both paths through real nodes at a tiny size: every value stored and checked.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_paths_store_the_expected_values() {
        let shape = Shape::new(600, 30, 3, 4, crate::base::clock::now_ms() as i64).expect("shape");
        for transport in [Transport::Grpc, Transport::RemoteWrite] {
            let report = measure(transport, &shape, &DispatchSettings::for_test(), None).await.expect("the run checks out");
            assert_eq!((report.samples, report.samples_received, report.reports), (600, 600, 20), "{report:?}");
            assert_eq!(report.values_checked, 20 * 3, "{report:?}");
            assert_eq!(report.latencies.len(), 20);
            assert!(report.samples_per_second() > 0.0);
            assert!(report.line().contains("samples/s"), "{}", report.line());
        }
    }
}
