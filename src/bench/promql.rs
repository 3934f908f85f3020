//! PromQL against a real Prometheus as the oracle (issue 25): the data both hold, how a query is
//! asked of each and how two answers compare; `hotrule bench promql` times a Grafana dashboard on
//! both, and `cluster-tests/promql_oracle.rs` runs a corpus of queries on both.
//!
//! - **Data.** `minutes` minutes from 2025-01-01T00:00Z of metrics shaped like the Linux (vm)
//!   rules' output, for `hosts` hosts: gauges, labeled values (cpu mode, mountpoint), counters
//!   (one with a reset), a SkyWalking histogram (per-bucket counts, shown cumulative with `+Inf`)
//!   and a labeled cumulative `le` histogram with `+Inf`, negative values, and gaps (one host misses twelve minutes every four
//!   hours, another one minute every 97). They are written as dispatch writes what it evaluated:
//!   `MetricValue`s through the node's metric writer.
//! - **Both hold the same series.** The node's own remote-write exporter sends what the node
//!   stored to a real Prometheus (`--web.enable-remote-write-receiver`). The data goes in half an
//!   hour at a time, each half hour exported before the next is written, as it would flow live:
//!   the exporter's clock is set to the end of the half hour (it refuses minutes over an hour
//!   older than its clock, and so does Prometheus for samples over an hour older than its newest).
//! - **Comparing.** Each answer is reduced to its type and its series (labels → samples); two
//!   answers agree when both fail with the same `errorType`, or both succeed with the same type,
//!   the same label sets and each value within 1e-9 relative (or 1e-12 absolute, for results
//!   that should be 0 but carry rounding). NaN equals NaN. Order matters only for `sort`,
//!   `sort_desc` and a range query's points.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use hotrule_mal_engine::{Downsampling, Entity, MetricValue, Value};
use serde_json::Value as Json;

use super::prometheus::Prometheus;
use crate::api::client::{AdminClient, with_query};
use crate::base::ids::NodeId;
use crate::base::owner::Alone;
use crate::data::export::{RemoteWriteSettings, StoreThenExport, build_with_clock};
use crate::data::metrics::MetricWriter;
use crate::data::series_store::NowMs;
use crate::data::metrics::prom::expand;
use crate::node::testing::NodeBuilder;
use crate::node::{NodeSettings, RunningNode};
use crate::store::kv::{KvEngine, MemKv};

/// The first minute of the data: 2025-01-01T00:00:00Z (Unix ms).
pub const START_MS: i64 = super::graphql::DAY_START_MS;
const MINUTE_MS: i64 = 60_000;
const MIB: i64 = 1024 * 1024;
/// Minutes written (and exported) per step; Prometheus refuses samples over an hour older than
/// the newest it holds.
const CHUNK_MINUTES: i64 = 30;
/// How long one chunk may take to reach Prometheus.
const EXPORT_WAIT: Duration = Duration::from_secs(20);
const MOUNTPOINTS: [&str; 3] = ["/", "/boot", "/data"];
const MODES: [&str; 4] = ["idle", "iowait", "system", "user"];
/// The upper bounds of the cumulative `le` histogram (seconds).
const LE_BOUNDS: [&str; 5] = ["0.05", "0.1", "0.5", "1", "+Inf"];

fn host(h: usize) -> Entity {
    super::graphql::linux_service(format!("vm-{h}"))
}

/// Whether host `h` has no value at minute `m`.
fn missing(h: usize, m: i64) -> bool {
    (h == 3 && (100..112).contains(&(m % 240))) || (h == 2 && m % 97 == 50)
}

/// A counter that grows by at least 1000 × `rate` a minute, with a wobble; host 1's restarts
/// at minute 300 when `resets`.
fn counter(h: usize, m: i64, rate: i64, resets: bool) -> i64 {
    let m = if resets && h == 1 && m >= 300 { m - 300 } else { m };
    1000 * rate * (h as i64 + 1) * m + (m * m * 7 + h as i64) % 997
}

/// The values dispatch would write for `minutes` (offsets from [`START_MS`]) of `hosts` hosts.
pub fn values(hosts: usize, minutes: impl Iterator<Item = i64>) -> Vec<MetricValue> {
    let mut out = Vec::new();
    for m in minutes {
        let timestamp_ms = START_MS + m * MINUTE_MS;
        for h in 1..=hosts {
            if missing(h, m) {
                continue;
            }
            let entity = host(h);
            let mut value = |metric: &str, value: Value, downsampling: Downsampling| {
                out.push(super::graphql::vm_value(metric, &entity, timestamp_ms, value, downsampling));
            };
            let k = h as i64;
            let gauge = |value: i64| Value::Single(value);
            let avg = Downsampling::Avg;
            value("meter_vm_cpu_total_percentage", gauge((m * 7 + k * 13) % 100), avg);
            let modes = MODES.iter().enumerate().map(|(i, mode)| (format!("mode={mode}"), (m * (i as i64 + 3) + k * 5) % 60)).collect();
            value("meter_vm_cpu_average_used", Value::Labeled(modes), avg);
            value("meter_vm_cpu_load1", gauge(100 + (m * (3 + k)) % 250), avg);
            value("meter_vm_cpu_load5", gauge(120 + (m * 2 + k) % 180), avg);
            value("meter_vm_cpu_load15", gauge(150 + (m / 3 + k) % 90), avg);
            let total = k * 8 * 1024 * MIB;
            let used = (2048 + (m * 37 + k) % 4096) * MIB;
            value("meter_vm_memory_total", gauge(total), avg);
            value("meter_vm_memory_used", gauge(used), avg);
            value("meter_vm_memory_available", gauge(total - used), avg);
            value("meter_vm_memory_buff_cache", gauge((512 + (m * 11 + k) % 1024) * MIB), avg);
            value("meter_vm_memory_swap_percentage", gauge((m / 30 + k) % 20), avg);
            let fs = MOUNTPOINTS.iter().enumerate().map(|(i, p)| (format!("mountpoint={p}"), (m / 10 + 20 * i as i64 + k) % 100)).collect();
            value("meter_vm_filesystem_percentage", Value::Labeled(fs), avg);
            let latest = Downsampling::Latest;
            value("meter_vm_disk_read", gauge(counter(h, m, 7, false)), latest);
            value("meter_vm_disk_written", gauge(counter(h, m, 3, true)), latest);
            value("meter_vm_network_receive", gauge(counter(h, m, 50, true)), latest);
            value("meter_vm_network_transmit", gauge(counter(h, m, 20, false)), latest);
            value("meter_vm_tcp_curr_estab", gauge(100 + (m + k) % 50), avg);
            value("meter_vm_tcp_tw", gauge((m * 5 + k) % 30), avg);
            value("meter_vm_tcp_alloc", gauge(120 + (m * 3 + k) % 40), avg);
            value("meter_vm_sockets_used", gauge(300 + (m * 2 + k) % 70), avg);
            value("meter_vm_udp_inuse", gauge((m + 2 * k) % 5), avg);
            value("meter_vm_filefd_allocated", gauge(1000 + (m * 13 + k) % 300), avg);
            value("meter_vm_clock_skew", gauge((m * 29 + k * 7) % 201 - 100), avg);
            // A SkyWalking histogram: a count per bucket keyed by its upper bound in ms, the
            // `Infinity` bucket as Long.MAX_VALUE (the query API shows it cumulative, `+Inf`).
            let buckets = [10, 50, 100, 500, i64::MAX].iter().enumerate().map(|(i, bound)| (*bound, (m * (i as i64 + 1) + k) % 20)).collect();
            value("meter_vm_disk_latency", Value::Histogram { labels: String::new(), buckets, percentiles: Vec::new() }, Downsampling::Sum);
            // A Prometheus-style histogram kept by its `le` label: cumulative over the bounds
            // and counting up over time.
            let mut running = 0;
            let cumulative = LE_BOUNDS
                .iter()
                .enumerate()
                .map(|(i, le)| {
                    running += counter(h, m, i as i64 + 1, false) / 1000;
                    (format!("le={le}"), running)
                })
                .collect();
            value("meter_vm_request_duration", Value::Labeled(cumulative), latest);
        }
    }
    out
}

/// The Prometheus samples `values` make (what the exporter sends for them).
fn samples_of(values: &[MetricValue]) -> usize {
    values.iter().map(|v| expand(&v.metric, &v.entity, &v.value).len()).sum()
}

/// A node and a real Prometheus holding the same series.
pub struct Pair {
    pub node: RunningNode,
    prometheus: Prometheus,
    pub hotrule: AdminClient,
    pub oracle: AdminClient,
    /// The samples each holds.
    pub samples: usize,
}

fn settings() -> NodeSettings {
    // The data is long past: retention keeps it.
    let long = Duration::from_secs(3650 * 86_400);
    let retention = crate::data::metrics::cells::Retention { minute: long, hour: long, day: long, logs: long, alarms: long };
    NodeSettings { retention, ..NodeSettings::for_test() }
}

/// The node's remote-write exporter to `url`, on a clock the caller sets, and the writer that
/// stores then marks for export (what dispatch writes to).
fn exporter(node: &mut RunningNode, url: &str, clock: &Arc<AtomicI64>) -> Result<StoreThenExport, String> {
    let mut settings = RemoteWriteSettings::for_test(url);
    settings.batch_size = 5_000;
    settings.queue_batches = 64;
    settings.timeout = Duration::from_secs(10);
    let now: NowMs = {
        let clock = clock.clone();
        Arc::new(move || clock.load(Ordering::SeqCst))
    };
    let live = Arc::new(Alone(NodeId("oracle".into())));
    let (export, worker) =
        build_with_clock(settings, node.metric_reader(), live, node.telemetry.clone(), now).map_err(|e| e.to_string())?;
    node.spawn_worker(worker);
    Ok(StoreThenExport { store: node.metric_writer(), export })
}

impl Pair {
    /// Starts Prometheus (its TSDB in `dir`) and a node exporting to it (on RocksDB in `dir` with
    /// the `rocksdb` feature unless `in_memory`), and writes `minutes` minutes of `hosts` hosts
    /// into the node, each half hour exported to Prometheus before the next is written.
    pub async fn start(dir: &Path, hosts: usize, minutes: i64, in_memory: bool) -> Result<Pair, String> {
        let prometheus = Prometheus::start_receiver(&dir.join("prometheus")).await?;
        let kv: Arc<dyn KvEngine> = if in_memory || !cfg!(feature = "rocksdb") {
            Arc::new(MemKv::new())
        } else {
            let path = dir.join("node");
            let _ = std::fs::remove_dir_all(&path);
            super::store::engine(&path)?
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let mut node = NodeBuilder::new(settings()).start(kv, listener).await.map_err(|e| e.to_string())?;
        let clock = Arc::new(AtomicI64::new(START_MS));
        let writer = match exporter(&mut node, &prometheus.write_url(), &clock) {
            Ok(writer) => writer,
            Err(e) => {
                node.shutdown().await;
                return Err(e);
            }
        };
        let hotrule = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(120));
        let oracle = AdminClient::new(&prometheus.addr, None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(120));
        let mut pair = Pair { node, prometheus, hotrule, oracle, samples: 0 };
        if let Err(e) = pair.fill(&writer, &clock, hosts, minutes).await {
            pair.node.shutdown().await;
            return Err(e);
        }
        Ok(pair)
    }

    async fn fill(&mut self, writer: &StoreThenExport, clock: &AtomicI64, hosts: usize, minutes: i64) -> Result<(), String> {
        let mut first = 0;
        while first < minutes {
            let end = (first + CHUNK_MINUTES).min(minutes);
            let chunk = values(hosts, first..end);
            self.samples += samples_of(&chunk);
            tokio::task::block_in_place(|| writer.write(&chunk)).map_err(|e| e.to_string())?;
            // The chunk's last minute closed (`close_after` of the test settings) a moment ago.
            clock.store(START_MS + end * MINUTE_MS + 10_000, Ordering::SeqCst);
            self.wait_exported(self.samples).await?;
            first += CHUNK_MINUTES;
        }
        Ok(())
    }

    /// Waits until the node has sent `samples` samples and dropped none.
    async fn wait_exported(&self, samples: usize) -> Result<(), String> {
        let deadline = Instant::now() + EXPORT_WAIT;
        loop {
            let text = self.hotrule.get("/metrics").await.map_err(|e| e.to_string())?.text();
            let dropped = family_sum(&text, "hotrule_export_batches_dropped_total");
            if dropped > 0.0 {
                return Err(format!("the exporter dropped {dropped} batches"));
            }
            let sent = family_sum(&text, "hotrule_export_samples_sent_total");
            if sent >= samples as f64 {
                return Ok(());
            }
            if Instant::now() > deadline {
                let export: Vec<&str> = text.lines().filter(|l| l.starts_with("hotrule_export")).collect();
                return Err(format!("{sent} of {samples} samples exported in {EXPORT_WAIT:?}:\n{}", export.join("\n")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Both answers of one evaluation.
    pub async fn ask(&self, query: &str, eval: &Eval) -> (Answer, Answer) {
        (ask(&self.hotrule, query, eval).await, ask(&self.oracle, query, eval).await)
    }

    /// The node's admin URL (its Prometheus API), for `promtool`.
    pub fn hotrule_url(&self) -> String {
        format!("http://{}", self.node.admin_addr)
    }

    /// Prometheus' URL.
    pub fn oracle_url(&self) -> String {
        format!("http://{}", self.prometheus.addr)
    }

    pub async fn shutdown(self) {
        self.node.shutdown().await;
        drop(self.prometheus);
    }
}

/// The sum of a family's samples in an exposition text.
fn family_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|line| line.strip_prefix(family).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{')))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One evaluation of a query: an instant query at `t`, or a range query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Eval {
    Instant { t_ms: i64 },
    Range { start_ms: i64, end_ms: i64, step_ms: i64 },
}

impl std::fmt::Display for Eval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |ms: i64| format!("+{}m{}s", (ms - START_MS) / MINUTE_MS, (ms - START_MS) % MINUTE_MS / 1000);
        match self {
            Eval::Instant { t_ms } => write!(f, "instant at {}", at(*t_ms)),
            Eval::Range { start_ms, end_ms, step_ms } => write!(f, "range {}..{} step {}s", at(*start_ms), at(*end_ms), step_ms / 1000),
        }
    }
}

/// The evaluations of the corpus over `minutes` minutes of data: instants inside the data, at
/// its last minute, within the lookback after it and past it; range queries at the data's
/// minute step, at a finer step and at a coarse step whose start is off the minute.
pub fn evaluations(minutes: i64) -> Vec<Eval> {
    let at = |m: i64, s: i64| START_MS + m * MINUTE_MS + s * 1000;
    vec![
        Eval::Instant { t_ms: at(60, 0) },
        Eval::Instant { t_ms: at(197, 30) },
        Eval::Instant { t_ms: at(minutes - 1, 0) },
        Eval::Instant { t_ms: at(minutes + 3, 0) },
        Eval::Instant { t_ms: at(minutes + 10, 0) },
        Eval::Range { start_ms: at(30, 0), end_ms: at(minutes - 30, 0), step_ms: MINUTE_MS },
        Eval::Range { start_ms: at(120, 0), end_ms: at(180, 0), step_ms: 15_000 },
        Eval::Range { start_ms: at(7, 13), end_ms: at(minutes + 8, 0), step_ms: 300_000 },
    ]
}

/// An answer, reduced to what is compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Error { error_type: String, message: String },
    Scalar(f64),
    String(String),
    /// Series in the answer's order, each with its samples (one for a vector).
    Series { kind: String, series: Vec<(BTreeMap<String, String>, Vec<(i64, f64)>)> },
    /// The answer could not be read (transport, not JSON, unknown shape).
    Broken(String),
}

fn seconds_ms(value: &Json) -> Option<i64> {
    Some((value.as_f64()? * 1000.0).round() as i64)
}

fn number(value: &Json) -> Option<f64> {
    match value.as_str()? {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        text => text.parse().ok(),
    }
}

fn point(pair: &Json) -> Option<(i64, f64)> {
    Some((seconds_ms(pair.get(0)?)?, number(pair.get(1)?)?))
}

/// Reduces a Prometheus API answer.
pub fn read_answer(json: &Json) -> Answer {
    if json["status"] == "error" {
        return Answer::Error {
            error_type: json["errorType"].as_str().unwrap_or("").to_string(),
            message: json["error"].as_str().unwrap_or("").to_string(),
        };
    }
    let data = &json["data"];
    let kind = data["resultType"].as_str().unwrap_or("");
    let result = &data["result"];
    let labels = |item: &Json| -> BTreeMap<String, String> {
        item["metric"].as_object().map_or_else(BTreeMap::new, |m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
    };
    match kind {
        "scalar" => result.get(1).and_then(number).map_or_else(|| Answer::Broken(format!("scalar {result}")), Answer::Scalar),
        "string" => Answer::String(result.get(1).and_then(Json::as_str).unwrap_or("").to_string()),
        "vector" | "matrix" => {
            let mut series = Vec::new();
            for item in result.as_array().map_or(&[][..], Vec::as_slice) {
                let points: Option<Vec<(i64, f64)>> = if kind == "vector" {
                    point(&item["value"]).map(|p| vec![p])
                } else {
                    item["values"].as_array().map_or(Some(Vec::new()), |values| values.iter().map(point).collect())
                };
                match points {
                    Some(points) => series.push((labels(item), points)),
                    None => return Answer::Broken(format!("unreadable series {item}")),
                }
            }
            Answer::Series { kind: kind.to_string(), series }
        }
        _ => Answer::Broken(format!("unknown answer {json}")),
    }
}

/// Asks `client` (hotrule or Prometheus) one evaluation of `query`.
pub async fn ask(client: &AdminClient, query: &str, eval: &Eval) -> Answer {
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let path = match eval {
        Eval::Instant { t_ms } => with_query("/api/v1/query", &[("query", query), ("time", &seconds(*t_ms))]),
        Eval::Range { start_ms, end_ms, step_ms } => with_query(
            "/api/v1/query_range",
            &[("query", query), ("start", &seconds(*start_ms)), ("end", &seconds(*end_ms)), ("step", &seconds(*step_ms))],
        ),
    };
    match client.get(&path).await {
        Err(e) => Answer::Broken(e.to_string()),
        Ok(reply) => match reply.json() {
            Some(json) => read_answer(&json),
            None => Answer::Broken(format!("{}: {}", reply.status, reply.text())),
        },
    }
}

/// Whether two values agree: within 1e-9 relative, or 1e-12 absolute; NaN equals NaN.
pub fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    if a.is_infinite() || b.is_infinite() {
        return false;
    }
    let difference = (a - b).abs();
    difference <= 1e-12 || difference <= 1e-9 * a.abs().max(b.abs())
}

/// Why `hotrule`'s answer differs from the oracle's, or `None` when they agree. `ordered`: the
/// order of a vector's series matters (`sort`, `sort_desc`).
pub fn difference(hotrule: &Answer, oracle: &Answer, ordered: bool) -> Option<String> {
    match (hotrule, oracle) {
        (Answer::Broken(why), _) => Some(format!("hotrule's answer is unreadable: {why}")),
        (_, Answer::Broken(why)) => Some(format!("Prometheus' answer is unreadable: {why}")),
        (Answer::Error { error_type: a, .. }, Answer::Error { error_type: b, .. }) if a == b => None,
        (Answer::Error { error_type, message }, _) => Some(format!("hotrule failed ({error_type}: {message}); Prometheus answered")),
        (_, Answer::Error { error_type, message }) => Some(format!("Prometheus failed ({error_type}: {message}); hotrule answered")),
        (Answer::Scalar(a), Answer::Scalar(b)) => (!close(*a, *b)).then(|| format!("scalar {a} vs {b}")),
        (Answer::String(a), Answer::String(b)) => (a != b).then(|| format!("string {a:?} vs {b:?}")),
        (Answer::Series { kind: ka, series: a }, Answer::Series { kind: kb, series: b }) => {
            if ka != kb {
                return Some(format!("{ka} vs {kb}"));
            }
            series_difference(a, b, ordered)
        }
        (a, b) => Some(format!("different result types: {a:?} vs {b:?}")),
    }
}

type Labeled = (BTreeMap<String, String>, Vec<(i64, f64)>);

fn series_difference(a: &[Labeled], b: &[Labeled], ordered: bool) -> Option<String> {
    if ordered {
        // `sort` orders by value; the order of equal values (and of NaNs) is the sort's own.
        let order = |s: &[Labeled]| s.iter().filter_map(|(_, points)| points.first().map(|(_, v)| *v)).collect::<Vec<_>>();
        let (va, vb) = (order(a), order(b));
        if va.len() != vb.len() || va.iter().zip(&vb).any(|(x, y)| !close(*x, *y)) {
            return Some(format!("order of values {va:?} vs {vb:?}"));
        }
    }
    let index = |s: &[Labeled]| s.iter().map(|(labels, points)| (labels.clone(), points.clone())).collect::<BTreeMap<_, _>>();
    let (a, b) = (index(a), index(b));
    let only = |x: &BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>, y: &BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>| {
        x.keys().filter(|k| !y.contains_key(*k)).cloned().collect::<Vec<_>>()
    };
    let (only_a, only_b) = (only(&a, &b), only(&b, &a));
    if !only_a.is_empty() || !only_b.is_empty() {
        return Some(format!("series only in hotrule: {only_a:?}; only in Prometheus: {only_b:?}"));
    }
    for (labels, pa) in &a {
        let pb = &b[labels];
        let times = |p: &[(i64, f64)]| p.iter().map(|(t, _)| *t).collect::<Vec<_>>();
        if times(pa) != times(pb) {
            let (ta, tb) = (times(pa), times(pb));
            let extra: Vec<i64> = ta.iter().filter(|t| !tb.contains(t)).map(|t| (t - START_MS) / 1000).collect();
            let lacking: Vec<i64> = tb.iter().filter(|t| !ta.contains(t)).map(|t| (t - START_MS) / 1000).collect();
            return Some(format!("{labels:?}: points at +s {extra:?} only in hotrule, {lacking:?} only in Prometheus"));
        }
        if let Some(((t, va), (_, vb))) = pa.iter().zip(pb).find(|((_, va), (_, vb))| !close(*va, *vb)) {
            return Some(format!("{labels:?} at +{}s: {va} vs {vb}", (t - START_MS) / 1000));
        }
    }
    None
}

/// What `bench promql` runs.
#[derive(Debug, Clone, clap::Args)]
pub struct PromqlArgs {
    /// Timed dashboard loads per server (after two warm-up loads each).
    #[arg(long, default_value_t = 20)]
    pub loads: usize,
    /// Hosts stored (`vm-1` is the dashboard's; the others are what its reads skip).
    #[arg(long, default_value_t = 10)]
    pub hosts: usize,
    /// Panel queries in flight at once, as a browser sends a dashboard's panels.
    #[arg(long, default_value_t = 6)]
    pub concurrency: usize,
    /// Where the node's RocksDB store and Prometheus' TSDB go (removed afterwards).
    #[arg(long, default_value = "./bench-data/promql")]
    pub dir: std::path::PathBuf,
    /// The metric store on the in-memory key space instead of RocksDB (any build).
    #[arg(long)]
    pub in_memory: bool,
}

/// A day: what each panel reads, at a minute step.
const DAY_MINUTES: i64 = 1440;

/// The 20 panels of Grafana's Node Exporter Full dashboard (id 1860) that the vm rules' metrics
/// cover, rewritten on `meter_vm_*` for host `vm-1`.
pub const PANELS: [&str; 20] = [
    r#"100 * (1 - avg(rate(meter_vm_cpu_average_used{mode="idle", service="vm-1"}[5m])))"#,
    r#"scalar(meter_vm_cpu_load1{service="vm-1"}) * 100 / count(count(meter_vm_cpu_average_used{service="vm-1"}) by (mode))"#,
    r#"(1 - (meter_vm_memory_available{service="vm-1"} / meter_vm_memory_total{service="vm-1"})) * 100"#,
    r#"meter_vm_memory_swap_percentage{service="vm-1"}"#,
    r#"100 - meter_vm_filesystem_percentage{service="vm-1", mountpoint="/"}"#,
    r#"sum by (mode) (irate(meter_vm_cpu_average_used{service="vm-1"}[5m])) * 100"#,
    r#"meter_vm_memory_total{service="vm-1"} - meter_vm_memory_available{service="vm-1"} - meter_vm_memory_buff_cache{service="vm-1"}"#,
    r#"meter_vm_memory_buff_cache{service="vm-1"}"#,
    r#"irate(meter_vm_network_receive{service="vm-1"}[5m]) * 8"#,
    r#"irate(meter_vm_network_transmit{service="vm-1"}[5m]) * 8"#,
    r#"meter_vm_filesystem_percentage{service="vm-1"}"#,
    r#"rate(meter_vm_disk_read{service="vm-1"}[5m])"#,
    r#"rate(meter_vm_disk_written{service="vm-1"}[5m])"#,
    r#"meter_vm_cpu_load1{service="vm-1"}"#,
    r#"meter_vm_cpu_load5{service="vm-1"}"#,
    r#"meter_vm_cpu_load15{service="vm-1"}"#,
    r#"meter_vm_tcp_curr_estab{service="vm-1"}"#,
    r#"meter_vm_tcp_tw{service="vm-1"}"#,
    r#"meter_vm_sockets_used{service="vm-1"}"#,
    r#"meter_vm_filefd_allocated{service="vm-1"}"#,
];

/// The panels' range: the whole day at a minute step.
fn day() -> Eval {
    Eval::Range { start_ms: START_MS, end_ms: START_MS + DAY_MINUTES * MINUTE_MS, step_ms: MINUTE_MS }
}

/// Latencies of one server: every panel query, and every whole dashboard load.
#[derive(Default)]
struct Timings {
    panels: Vec<Duration>,
    loads: Vec<Duration>,
}

impl Timings {
    fn line(&self, what: &str) -> String {
        let (mut panels, mut loads) = (self.panels.clone(), self.loads.clone());
        panels.sort();
        loads.sort();
        format!(
            "{what}: panel query p50 {:.2?} p99 {:.2?} ({} queries); dashboard load p50 {:.2?} p99 {:.2?} ({} loads)",
            super::store::percentile(&panels, 0.5),
            super::store::percentile(&panels, 0.99),
            panels.len(),
            super::store::percentile(&loads, 0.5),
            super::store::percentile(&loads, 0.99),
            loads.len()
        )
    }
}

/// One dashboard load: the 20 panels, `concurrency` at a time; each answer must be a full day.
async fn load_dashboard(client: &AdminClient, concurrency: usize, timings: &mut Timings) -> Result<(), String> {
    use futures_util::StreamExt;
    let started = Instant::now();
    let day = day();
    let asks = PANELS.iter().map(|panel| async move {
        let asked = Instant::now();
        let answer = ask(client, panel, &day).await;
        (panel, answer, asked.elapsed())
    });
    let answers: Vec<_> = futures_util::stream::iter(asks).buffer_unordered(concurrency.max(1)).collect().await;
    timings.loads.push(started.elapsed());
    for (panel, answer, took) in answers {
        match answer {
            Answer::Series { series, .. } if !series.is_empty() && series.iter().all(|(_, points)| points.len() > DAY_MINUTES as usize / 2) => {
                timings.panels.push(took);
            }
            other => return Err(format!("{panel}: not a day of points: {other:?}")),
        }
    }
    Ok(())
}

/// `hotrule bench promql`.
pub async fn run(args: &PromqlArgs) -> Result<(), String> {
    if args.hosts == 0 || args.loads == 0 {
        return Err("--hosts and --loads must be at least 1".into());
    }
    let store = if args.in_memory || !cfg!(feature = "rocksdb") { "the in-memory key space" } else { "RocksDB" };
    println!(
        "Grafana's Node Exporter Full: {} panels x 24 h at a 1-minute step for vm-1, {} at a time; {} hosts stored; metric store on {store}",
        PANELS.len(),
        args.concurrency,
        args.hosts
    );
    println!("load average before: {}", super::store::load_average());
    let _ = std::fs::remove_dir_all(&args.dir);
    let filled = Instant::now();
    let pair = Pair::start(&args.dir, args.hosts, DAY_MINUTES, args.in_memory).await?;
    println!("{} samples written to the node and exported to Prometheus in {:.1?}", pair.samples, filled.elapsed());
    let result = async {
        // Both answer every panel alike before anything is timed.
        for panel in PANELS {
            let (hotrule, oracle) = pair.ask(panel, &day()).await;
            if let Some(why) = difference(&hotrule, &oracle, false) {
                return Err(format!("{panel}: hotrule and Prometheus differ: {why}"));
            }
        }
        println!("all {} panels answer alike on both", PANELS.len());
        let (mut hotrule, mut prometheus) = (Timings::default(), Timings::default());
        for _ in 0..2 {
            load_dashboard(&pair.hotrule, args.concurrency, &mut Timings::default()).await?;
            load_dashboard(&pair.oracle, args.concurrency, &mut Timings::default()).await?;
        }
        // Alternating, so both see the same machine.
        for _ in 0..args.loads {
            load_dashboard(&pair.hotrule, args.concurrency, &mut hotrule).await?;
            load_dashboard(&pair.oracle, args.concurrency, &mut prometheus).await?;
        }
        println!("{}", hotrule.line("hotrule   "));
        println!("{}", prometheus.line("Prometheus"));
        Ok(())
    }
    .await;
    pair.shutdown().await;
    println!("load average after: {}", super::store::load_average());
    let _ = std::fs::remove_dir_all(&args.dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_agree_within_a_relative_billionth_and_nan_equals_nan() {
        assert!(close(1.0, 1.0 + 1e-10));
        assert!(!close(1.0, 1.0 + 1e-8));
        assert!(close(f64::NAN, f64::NAN));
        assert!(!close(f64::NAN, 0.0));
        assert!(close(f64::INFINITY, f64::INFINITY));
        assert!(!close(f64::INFINITY, f64::NEG_INFINITY));
        assert!(close(0.0, 1e-15));
    }

    #[test]
    fn answers_compare_by_label_set_and_only_sorted_ones_by_order() {
        let series = |name: &str, v: f64| (BTreeMap::from([("a".to_string(), name.to_string())]), vec![(0, v)]);
        let one = Answer::Series { kind: "vector".into(), series: vec![series("x", 1.0), series("y", 2.0)] };
        let swapped = Answer::Series { kind: "vector".into(), series: vec![series("y", 2.0), series("x", 1.0)] };
        assert_eq!(difference(&one, &swapped, false), None);
        assert!(difference(&one, &swapped, true).is_some());
        let tied = |first: &str, second: &str| Answer::Series { kind: "vector".into(), series: vec![series(first, f64::NAN), series(second, f64::NAN)] };
        assert_eq!(difference(&tied("x", "y"), &tied("y", "x"), true), None, "equal values may come in either order");
        let other = Answer::Series { kind: "vector".into(), series: vec![series("x", 1.0), series("y", 2.5)] };
        assert!(difference(&one, &other, false).is_some_and(|d| d.contains("2.5")));
        let error = |t: &str| Answer::Error { error_type: t.into(), message: String::new() };
        assert_eq!(difference(&error("bad_data"), &error("bad_data"), false), None);
        assert!(difference(&error("bad_data"), &one, false).is_some());
    }

    #[test]
    fn an_api_answer_is_read_into_series() {
        let json: Json = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1735689600,"1"],[1735689660.5,"NaN"]]}]}}"#,
        )
        .unwrap_or_default();
        let Answer::Series { kind, series } = read_answer(&json) else { panic!("{json}") };
        assert_eq!(kind, "matrix");
        assert_eq!(series[0].1[1].0, START_MS + 60_500);
        assert!(series[0].1[1].1.is_nan());
    }

    #[test]
    fn the_data_has_gaps_resets_and_every_shape() {
        let day = values(3, 0..240);
        let count = |metric: &str, h: usize| day.iter().filter(|v| v.metric == metric && v.entity.service_name == format!("vm-{h}")).count();
        assert_eq!(count("meter_vm_cpu_load1", 1), 240);
        assert_eq!(count("meter_vm_cpu_load1", 3), 228, "vm-3 misses twelve minutes");
        assert_eq!(count("meter_vm_cpu_load1", 2), 238, "vm-2 misses minutes 50 and 147");
        assert!(counter(1, 299, 3, true) > counter(1, 300, 3, true), "vm-1's counter resets at minute 300");
        assert!((0..500).all(|m| counter(2, m, 3, true) < counter(2, m + 1, 3, true)), "the others only grow");
    }
}
