//! `hotrule bench store`: the embedded metric store on RocksDB, without HTTP or evaluation.
//!
//! 1. Writes: one day of minutes for `metrics × entities` series, each `write` call one
//!    evaluation's output (every metric of every entity for one minute, synced), by one writer
//!    and then by several concurrent writers (distinct minutes, shared hour and day cells).
//! 2. Reads: "one day of one metric at minute steps" for one entity (service filter), and for
//!    the whole metric (every entity), each repeated and reported as p50/p99.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hotrule_mal_engine::{DataType, Downsampling, Entity, MetricValue, ScopeType, Value};

use crate::data::metrics::cells::keys::bucket_start_ms;
use crate::data::metrics::cells::{MetricStore, Retention};
use crate::data::metrics::{Granularity, MetricReader, MetricWriter, SeriesFilter};
use crate::store::kv::KvEngine;
use crate::base::self_metrics::SelfMetrics;

/// What `bench store` runs.
#[derive(Debug, Clone)]
pub struct StoreBench {
    pub metrics: usize,
    pub entities: usize,
    pub minutes: usize,
    pub writers: usize,
    pub queries: usize,
}

#[cfg(feature = "rocksdb")]
pub(super) fn engine(path: &Path) -> Result<Arc<dyn KvEngine>, String> {
    Ok(Arc::new(crate::store::kv::RocksEngine::open(path).map_err(|e| e.to_string())?))
}

#[cfg(not(feature = "rocksdb"))]
pub(super) fn engine(_path: &Path) -> Result<Arc<dyn KvEngine>, String> {
    Err("benchmarks need the rocksdb feature".into())
}

/// The first minute written: 2026-01-01T00:00Z.
const FIRST_MINUTE: i64 = 202601010000;

fn entity(index: usize) -> Entity {
    let mut entity = Entity::new(ScopeType::ServiceInstance);
    entity.service_name = format!("service-{index:04}");
    entity.instance_name = format!("instance-{index:04}.example.internal:9100");
    entity.layer = "OS_LINUX".to_string();
    entity
}

fn minute_bucket(offset: usize) -> i64 {
    hotrule_mal_engine::minute_bucket(bucket_start_ms(Granularity::Minute, FIRST_MINUTE) + offset as i64 * 60_000)
}

/// One evaluation's output for `minute`: every metric of every entity.
fn batch(bench: &StoreBench, entities: &[Entity], minute: usize, prefix: &str) -> Vec<MetricValue> {
    let bucket = minute_bucket(minute);
    let mut values = Vec::with_capacity(bench.metrics * entities.len());
    for m in 0..bench.metrics {
        for (e, entity) in entities.iter().enumerate() {
            values.push(MetricValue {
                metric: format!("{prefix}_metric_{m:02}"),
                rule: "bench".to_string(),
                entity: entity.clone(),
                time_bucket: bucket,
                timestamp_ms: minute as i64 * 60_000,
                value: Value::Single(((minute * 31 + e * 7 + m) % 1000) as i64),
                data_type: DataType::Single,
                downsampling: Downsampling::Avg,
            });
        }
    }
    values
}

/// Writes `minutes` with `writers` threads (minute `i` by writer `i % writers`); values/s.
fn write_phase(store: &Arc<MetricStore>, bench: &StoreBench, entities: &[Entity], minutes: usize, writers: usize, prefix: &str) -> Result<f64, String> {
    let start = Instant::now();
    let results: Vec<Result<usize, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let store = store.clone();
                scope.spawn(move || {
                    let mut written = 0;
                    for minute in (w..minutes).step_by(writers) {
                        let values = batch(bench, entities, minute, prefix);
                        store.write(&values).map_err(|e| e.to_string())?;
                        written += values.len();
                    }
                    Ok(written)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a writer panicked".to_string()))).collect()
    });
    let mut total = 0;
    for result in results {
        total += result?;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`): the machine is shared.
pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

pub(super) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// This thread's CPU time: on a shared machine, what a query costs apart from waiting for a core.
pub(super) fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// Latencies of one query phase: wall clock and this thread's CPU time, p50 and p99.
struct QueryTimes {
    wall: (Duration, Duration),
    cpu: (Duration, Duration),
    points: usize,
}

/// Runs `queries` reads of `filters` (in turn) over the first day at minute steps.
fn query_phase(store: &MetricStore, filters: &[SeriesFilter], queries: usize) -> Result<QueryTimes, String> {
    let start_ms = bucket_start_ms(Granularity::Minute, FIRST_MINUTE);
    let end_ms = start_ms + 86_400_000 - 1;
    let mut wall = Vec::with_capacity(queries);
    let mut cpu = Vec::with_capacity(queries);
    let mut points = 0;
    for i in 0..queries {
        let filter = &filters[i % filters.len()];
        let (begin, begin_cpu) = (Instant::now(), thread_cpu_time());
        let series = store.read(filter, Granularity::Minute, start_ms, end_ms).map_err(|e| e.to_string())?;
        cpu.push(thread_cpu_time().saturating_sub(begin_cpu));
        wall.push(begin.elapsed());
        points = series.iter().map(|s| s.points.len()).sum();
    }
    wall.sort();
    cpu.sort();
    Ok(QueryTimes {
        wall: (percentile(&wall, 0.5), percentile(&wall, 0.99)),
        cpu: (percentile(&cpu, 0.5), percentile(&cpu, 0.99)),
        points,
    })
}

fn print_query(what: &str, t: &QueryTimes) {
    println!(
        "query one day of one metric at minute steps, {what}: p50 {:.2?}, p99 {:.2?} wall; p50 {:.2?}, p99 {:.2?} CPU ({} points)",
        t.wall.0, t.wall.1, t.cpu.0, t.cpu.1, t.points
    );
}

pub fn run(dir: &Path, bench: &StoreBench) -> Result<(), String> {
    if bench.metrics == 0 || bench.entities == 0 || bench.minutes == 0 || bench.writers == 0 || bench.queries == 0 {
        return Err("--metrics, --entities, --minutes, --writers and --queries must be at least 1".into());
    }
    let path = dir.join("store-db");
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let engine = engine(&path)?;
    // The data is from 2026-01-01: retention long enough that nothing is refused.
    let long = Duration::from_secs(3650 * 86_400);
    let retention = Retention { minute: long, hour: long, day: long, logs: long, alarms: long };
    let store = Arc::new(MetricStore::open(engine.series(), retention, Arc::new(SelfMetrics::new())).map_err(|e| e.to_string())?);
    let entities: Vec<Entity> = (0..bench.entities).map(entity).collect();
    let per_call = bench.metrics * bench.entities;
    println!(
        "metric store on RocksDB: {} metrics x {} entities, {} minutes, {per_call} values per synced write call",
        bench.metrics, bench.entities, bench.minutes
    );

    println!("load average before: {}", load_average());
    let one = write_phase(&store, bench, &entities, bench.minutes, 1, "a")?;
    println!("write, 1 writer:  {one:.0} values/s ({:.1} calls/s)", one / per_call as f64);
    if bench.writers > 1 {
        let many = write_phase(&store, bench, &entities, bench.minutes, bench.writers, "b")?;
        println!("write, {} writers: {many:.0} values/s ({:.1} calls/s)", bench.writers, many / per_call as f64);
    }
    let small = write_phase(&store, &StoreBench { metrics: 1, ..bench.clone() }, &entities[..1], bench.minutes.min(500), 1, "c")?;
    println!("write, 1 writer, 1 value per call: {small:.0} values/s (one fsync each)");

    let one_entity: Vec<SeriesFilter> = (0..bench.entities.min(16))
        .map(|e| SeriesFilter { metric: "a_metric_00".into(), service: Some(entities[e].service_name.clone()), ..SeriesFilter::default() })
        .collect();
    print_query("one entity", &query_phase(&store, &one_entity, bench.queries)?);
    let whole = vec![SeriesFilter { metric: "a_metric_00".into(), ..SeriesFilter::default() }];
    print_query(&format!("all {} entities", bench.entities), &query_phase(&store, &whole, (bench.queries / 4).max(1))?);
    println!("load average after: {}", load_average());
    drop(store);
    drop(engine);
    let _ = std::fs::remove_dir_all(&path);
    Ok(())
}
