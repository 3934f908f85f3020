//! The metric store over the in-memory series twin.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use hotrule_mal_engine::{DataType, Downsampling, Entity, ScopeType};

use super::*;
use crate::data::metrics::Value;
use crate::store::series::MemSeriesKv;
use crate::base::self_metrics::labels;

const DAY_MS: i64 = 86_400_000;

/// 2026-11-25T<hh>:<mm>Z as epoch milliseconds.
fn at(hh: i64, mm: i64) -> i64 {
    keys::bucket_start_ms(Granularity::Minute, 202611250000 + hh * 100 + mm)
}

fn minute(hh: i64, mm: i64) -> i64 {
    202611250000 + hh * 100 + mm
}

struct Fixture {
    kv: Arc<MemSeriesKv>,
    now: Arc<AtomicI64>,
    telemetry: Arc<SelfMetrics>,
    store: MetricStore,
}

fn fixture() -> Fixture {
    fixture_with(Arc::new(MemSeriesKv::new()), Retention::default())
}

fn fixture_with(kv: Arc<MemSeriesKv>, retention: Retention) -> Fixture {
    let now = Arc::new(AtomicI64::new(at(14, 0)));
    let telemetry = Arc::new(SelfMetrics::new());
    let store = open(&kv, retention, &telemetry, &now);
    Fixture { kv, now, telemetry, store }
}

fn open(kv: &Arc<MemSeriesKv>, retention: Retention, telemetry: &Arc<SelfMetrics>, now: &Arc<AtomicI64>) -> MetricStore {
    let clock = now.clone();
    MetricStore::open(kv.clone(), retention, telemetry.clone())
        .expect("open")
        .with_clock(Arc::new(move || clock.load(Ordering::SeqCst)))
}

fn service(name: &str) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = name.to_string();
    entity.layer = "GENERAL".to_string();
    entity
}

/// A sample time in `bucket`, later than the previous call's within the same minute: values
/// written one after another are sampled in that order, so `latest` keeps the last written.
fn next_sample_time(bucket: i64) -> i64 {
    static TICK: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let tick = TICK.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 60_000;
    Granularity::Minute.bucket_start_ms(bucket).unwrap_or(0) + tick
}

fn value(metric: &str, entity: &Entity, bucket: i64, value: Value, function: Downsampling) -> MetricValue {
    let data_type = match &value {
        Value::Single(_) => DataType::Single,
        Value::Labeled(_) => DataType::Labeled,
        Value::Histogram { percentiles, .. } if percentiles.is_empty() => DataType::Histogram,
        Value::Histogram { .. } => DataType::HistogramPercentile,
    };
    MetricValue {
        metric: metric.to_string(),
        rule: "test".to_string(),
        entity: entity.clone(),
        time_bucket: bucket,
        timestamp_ms: next_sample_time(bucket),
        value,
        data_type,
        downsampling: function,
    }
}

fn filter(metric: &str) -> SeriesFilter {
    SeriesFilter { metric: metric.to_string(), ..SeriesFilter::default() }
}

/// `(bucket, value)` of the single series of `metric` at `granularity` over the whole day.
fn points(store: &MetricStore, metric: &str, granularity: Granularity) -> Vec<(i64, Value)> {
    let series = store.read(&filter(metric), granularity, at(0, 0), at(23, 59)).expect("read");
    assert!(series.len() <= 1, "one series expected: {series:?}");
    series.into_iter().flat_map(|s| s.points).map(|p| (p.bucket, p.value)).collect()
}

fn singles(store: &MetricStore, metric: &str, granularity: Granularity) -> Vec<(i64, i64)> {
    points(store, metric, granularity)
        .into_iter()
        .map(|(bucket, v)| match v {
            Value::Single(v) => (bucket, v),
            other => panic!("not a single value: {other:?}"),
        })
        .collect()
}

fn counter(family: &crate::base::self_metrics::CounterFamily, name: &str, value: &str) -> u64 {
    SelfMetrics::counter_value(family, &labels([(name, value)]))
}

#[test]
fn each_function_over_several_writes_at_minute_hour_and_day() {
    // Writes (in this order): 12:00 a, 12:00 b, 12:01 c, 13:05 d. The hour and day cells combine
    // the same deltas (an avg hour is the mean of all emissions, not of the minute means).
    // (function, [a, b, c, d], minutes [12:00, 12:01, 13:05], hours [12, 13], day)
    type Row = (Downsampling, [i64; 4], [i64; 3], [i64; 2], i64);
    let table: &[Row] = &[
        (Downsampling::Avg, [10, 20, 40, 30], [15, 40, 30], [23, 30], 25),
        (Downsampling::Sum, [10, 20, 40, 30], [30, 40, 30], [70, 30], 100),
        (Downsampling::SumPerMin, [600, 1200, 2400, 1800], [1800, 2400, 1800], [70, 30], 4),
        (Downsampling::Latest, [10, 20, 40, 30], [20, 40, 30], [40, 30], 30),
        (Downsampling::Max, [10, 20, 40, 30], [20, 40, 30], [40, 30], 40),
        (Downsampling::Min, [10, 20, 40, 30], [10, 40, 30], [10, 30], 10),
    ];
    let f = fixture();
    let svc = service("svc");
    for (function, [a, b, c, d], minutes, hours, day) in table {
        let metric = format!("m_{}", function.camel());
        // Two separate calls, then one call with two values.
        f.store.write(&[value(&metric, &svc, minute(12, 0), Value::Single(*a), *function)]).expect("write a");
        f.store.write(&[value(&metric, &svc, minute(12, 0), Value::Single(*b), *function)]).expect("write b");
        f.store
            .write(&[
                value(&metric, &svc, minute(12, 1), Value::Single(*c), *function),
                value(&metric, &svc, minute(13, 5), Value::Single(*d), *function),
            ])
            .expect("write c, d");
        assert_eq!(
            singles(&f.store, &metric, Granularity::Minute),
            vec![(minute(12, 0), minutes[0]), (minute(12, 1), minutes[1]), (minute(13, 5), minutes[2])],
            "{function:?} minutes"
        );
        assert_eq!(singles(&f.store, &metric, Granularity::Hour), vec![(2026112512, hours[0]), (2026112513, hours[1])], "{function:?} hours");
        assert_eq!(singles(&f.store, &metric, Granularity::Day), vec![(20261125, *day)], "{function:?} day");
    }
    assert_eq!(counter(&f.telemetry.values_stored, "metric", "m_avg"), 4);
}

/// A call's values of one cell are combined before the group (`MetricStore::prepare`): one
/// call of many values stores the same bytes, and counts the same values, as one call each.
#[test]
fn values_of_one_cell_in_one_call_store_what_one_call_each_stores() {
    let (a, b) = (service("a"), service("b"));
    let labeled = |entries: &[(&str, i64)]| Value::Labeled(entries.iter().map(|(k, v)| (k.to_string(), *v)).collect());
    let histogram = |buckets: &[(i64, i64)], ranks: &[u32]| Value::Histogram { labels: "route=/a".into(), buckets: buckets.to_vec(), percentiles: ranks.to_vec() };
    let mut values = Vec::new();
    for function in [Downsampling::Avg, Downsampling::Sum, Downsampling::SumPerMin, Downsampling::Latest, Downsampling::Max, Downsampling::Min] {
        let metric = format!("m_{}", function.camel());
        for (i, (entity, minute)) in [(&a, minute(12, 0)), (&b, minute(12, 0)), (&a, minute(12, 0)), (&a, minute(12, 1)), (&b, minute(12, 0)), (&a, minute(13, 5)), (&a, minute(12, 0))].into_iter().enumerate() {
            values.push(value(&metric, entity, minute, Value::Single([7, -3, 40, 12, 5, 0, 21][i]), function));
        }
    }
    for (i, entries) in [&[("mode=idle", 10), ("mode=user", 2)][..], &[("mode=idle", 30)], &[("mode=sys", 1), ("mode=user", 4)]].into_iter().enumerate() {
        values.push(value("cpu", &a, minute(12, i as i64 % 2), labeled(entries), Downsampling::Avg));
    }
    for (buckets, ranks) in [(&[(100, 5), (250, 3)][..], &[50u32, 90][..]), (&[(100, 1), (500, 2)], &[99]), (&[(250, 4)], &[50, 90])] {
        values.push(value("lat", &a, minute(12, 0), histogram(buckets, ranks), Downsampling::Sum));
    }
    let (each, once) = (fixture(), fixture());
    for v in &values {
        each.store.write(std::slice::from_ref(v)).expect("write one");
    }
    once.store.write(&values).expect("write all");
    assert_eq!(once.kv.dump(), each.kv.dump());
    for metric in ["m_avg", "m_sum", "m_latest", "cpu", "lat"] {
        let stored = counter(&once.telemetry.values_stored, "metric", metric);
        assert_eq!(stored, counter(&each.telemetry.values_stored, "metric", metric), "{metric}");
        assert!(stored >= 3, "{metric}: {stored}");
    }
    let day = once.store.read(&filter("m_sum"), Granularity::Day, at(0, 0), at(23, 59)).expect("read");
    let sums: Vec<(String, Vec<Value>)> = day.into_iter().map(|s| (s.entity.service_name, s.points.into_iter().map(|p| p.value).collect())).collect();
    assert_eq!(sums, vec![("a".into(), vec![Value::Single(80)]), ("b".into(), vec![Value::Single(2)])]);
}

#[test]
fn labeled_histogram_and_percentile_values_merge() {
    let f = fixture();
    let svc = service("svc");
    let labeled = |entries: &[(&str, i64)]| Value::Labeled(entries.iter().map(|(k, v)| (k.to_string(), *v)).collect());
    f.store.write(&[value("cpu", &svc, minute(12, 0), labeled(&[("mode=idle", 10), ("mode=user", 2)]), Downsampling::Avg)]).expect("w");
    f.store.write(&[value("cpu", &svc, minute(12, 1), labeled(&[("mode=idle", 30)]), Downsampling::Avg)]).expect("w");
    assert_eq!(points(&f.store, "cpu", Granularity::Hour), vec![(2026112512, labeled(&[("mode=idle", 20), ("mode=user", 2)]))]);

    let histogram = |buckets: &[(i64, i64)], ranks: &[u32]| Value::Histogram {
        labels: "route=/a".to_string(),
        buckets: buckets.to_vec(),
        percentiles: ranks.to_vec(),
    };
    f.store.write(&[value("lat", &svc, minute(12, 0), histogram(&[(100, 5), (250, 3)], &[]), Downsampling::Sum)]).expect("w");
    f.store.write(&[value("lat", &svc, minute(12, 2), histogram(&[(100, 1), (250, 1)], &[]), Downsampling::Sum)]).expect("w");
    assert_eq!(points(&f.store, "lat", Granularity::Day), vec![(20261125, histogram(&[(100, 6), (250, 4)], &[]))]);

    f.store.write(&[value("p", &svc, minute(12, 0), histogram(&[(100, 5), (250, 3), (500, 2)], &[50, 90]), Downsampling::Sum)]).expect("w");
    f.store.write(&[value("p", &svc, minute(12, 0), histogram(&[(100, 0), (250, 0), (500, 8)], &[50, 90]), Downsampling::Sum)]).expect("w");
    let got = points(&f.store, "p", Granularity::Minute);
    assert_eq!(got, vec![(minute(12, 0), histogram(&[(100, 5), (250, 3), (500, 10)], &[50, 90]))]);
    // Ranks come from the accumulated buckets: 18 samples, p50 → roof 9 → 500.
    let samples = crate::data::metrics::prom::expand("p", &svc, &got[0].1);
    assert_eq!(samples.iter().map(|(l, v)| (l["p"].clone(), *v)).collect::<Vec<_>>(), vec![("50".into(), 500.0), ("90".into(), 500.0)]);

    // Two label groups of one histogram are two series of the same entity.
    let other_group = Value::Histogram { labels: "route=/b".to_string(), buckets: vec![(100, 1)], percentiles: vec![] };
    f.store.write(&[value("lat", &svc, minute(12, 0), other_group, Downsampling::Sum)]).expect("w");
    let series = f.store.read(&filter("lat"), Granularity::Minute, at(12, 0), at(12, 0)).expect("read");
    assert_eq!(series.len(), 2);
}

#[test]
fn range_reads_are_exact_at_bucket_edges() {
    let f = fixture();
    let svc = service("svc");
    for (mm, v) in [(59, 1), (60, 2), (61, 3), (62, 4)] {
        let bucket = if mm == 59 { minute(11, 59) } else { minute(12, mm - 60) };
        f.store.write(&[value("m", &svc, bucket, Value::Single(v), Downsampling::Sum)]).expect("write");
    }
    let read = |start: i64, end: i64| -> Vec<i64> {
        let series = f.store.read(&filter("m"), Granularity::Minute, start, end).expect("read");
        series.iter().flat_map(|s| s.points.iter().map(|p| p.bucket)).collect()
    };
    assert_eq!(read(at(12, 0), at(12, 1) + 59_999), vec![minute(12, 0), minute(12, 1)]);
    assert_eq!(read(at(12, 0) + 30_000, at(12, 1)), vec![minute(12, 0), minute(12, 1)], "containing buckets");
    assert_eq!(read(at(12, 0) - 1, at(12, 0)), vec![minute(11, 59), minute(12, 0)]);
    assert_eq!(read(at(12, 2), at(12, 2)), vec![minute(12, 2)]);
    assert!(read(at(12, 3), at(13, 0)).is_empty());
    assert!(read(at(12, 2), at(12, 0)).is_empty(), "start after end");
    let hours = f.store.read(&filter("m"), Granularity::Hour, at(12, 0), at(12, 59)).expect("read");
    assert_eq!(hours[0].points.iter().map(|p| (p.bucket, p.start_ms)).collect::<Vec<_>>(), vec![(2026112512, at(12, 0))]);
}

#[test]
fn reads_filter_by_entity_and_list_metrics() {
    let f = fixture();
    let mut instance = Entity::new(ScopeType::ServiceInstance);
    instance.service_name = "svc".into();
    instance.instance_name = "i-1".into();
    let mut other = instance.clone();
    other.instance_name = "i-2".into();
    for entity in [&instance, &other] {
        f.store.write(&[value("inst", entity, minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
    }
    f.store.write(&[value("svc_m", &service("svc"), minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
    let wanted = SeriesFilter { metric: "inst".into(), instance: Some("i-2".into()), ..SeriesFilter::default() };
    let series = f.store.read(&wanted, Granularity::Minute, at(12, 0), at(12, 0)).expect("read");
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].entity, other);
    let all = SeriesFilter { service: Some("svc".into()), ..SeriesFilter::default() };
    assert_eq!(f.store.read(&all, Granularity::Minute, at(12, 0), at(12, 0)).expect("read").len(), 3);
    let names: Vec<(String, ScopeType)> = f.store.metrics().expect("metrics").into_iter().map(|m| (m.name, m.scope)).collect();
    assert_eq!(names, vec![("inst".into(), ScopeType::ServiceInstance), ("svc_m".into(), ScopeType::Service)]);
}

#[test]
fn retention_deletes_only_expired_buckets() {
    let retention = Retention {
        minute: std::time::Duration::from_secs(3600),
        hour: std::time::Duration::from_secs(2 * 86_400),
        day: std::time::Duration::from_secs(15 * 86_400),
        ..Retention::default()
    };
    let f = fixture_with(Arc::new(MemSeriesKv::new()), retention);
    let svc = service("svc");
    // now = 14:00: the minute cutoff is 13:00.
    for bucket in [minute(12, 59), minute(13, 0), minute(13, 30)] {
        f.store.write(&[value("m", &svc, bucket, Value::Single(1), Downsampling::Sum)]).expect("write");
    }
    // 12:59 was past minute retention already: only its hour and day cells were written.
    assert_eq!(counter(&f.telemetry.values_rejected, "reason", "expired"), 1);
    assert_eq!(counter(&f.telemetry.values_stored, "metric", "m"), 2);
    assert_eq!(singles(&f.store, "m", Granularity::Minute), vec![(minute(13, 0), 1), (minute(13, 30), 1)]);
    assert_eq!(singles(&f.store, "m", Granularity::Hour), vec![(2026112512, 1), (2026112513, 2)]);

    // 14:31: 13:00..13:30 minutes are expired, 13:31 on kept; hours within 2 days stay.
    f.now.store(at(14, 31), Ordering::SeqCst);
    f.store.write(&[value("m", &svc, minute(13, 31), Value::Single(5), Downsampling::Sum)]).expect("write");
    let page = f.store.expire_page(at(14, 31), None, 10).expect("expire");
    assert_eq!(page, retention::ExpirePage { ranges_deleted: 1, next: None });
    assert_eq!(singles(&f.store, "m", Granularity::Minute), vec![(minute(13, 31), 5)]);
    assert_eq!(singles(&f.store, "m", Granularity::Hour), vec![(2026112512, 1), (2026112513, 7)]);
    // Nothing more to delete: no range is issued.
    assert_eq!(f.store.expire_page(at(14, 31), None, 10).expect("expire").ranges_deleted, 0);

    // Three days later the hours go, the day stays.
    let later = at(14, 31) + 3 * DAY_MS;
    assert_eq!(f.store.expire_page(later, None, 10).expect("expire").ranges_deleted, 2);
    let hours = f.store.read(&filter("m"), Granularity::Hour, at(0, 0), later).expect("read");
    assert!(hours.is_empty(), "{hours:?}");
    let days = f.store.read(&filter("m"), Granularity::Day, at(0, 0), later).expect("read");
    assert_eq!(days[0].points.len(), 1);
}

#[test]
fn retention_pages_through_metrics() {
    let f = fixture();
    let svc = service("svc");
    for i in 0..5 {
        f.store.write(&[value(&format!("m{i}"), &svc, minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
    }
    let first = f.store.expire_page(at(12, 0) + 8 * DAY_MS, None, 2).expect("page");
    assert_eq!(first, retention::ExpirePage { ranges_deleted: 2, next: Some("m1".into()) });
    let second = f.store.expire_page(at(12, 0) + 8 * DAY_MS, first.next.as_deref(), 2).expect("page");
    assert_eq!(second.next.as_deref(), Some("m3"));
    let third = f.store.expire_page(at(12, 0) + 8 * DAY_MS, second.next.as_deref(), 2).expect("page");
    assert_eq!(third, retention::ExpirePage { ranges_deleted: 1, next: None });
    for i in 0..5 {
        assert!(singles(&f.store, &format!("m{i}"), Granularity::Minute).is_empty());
        assert_eq!(singles(&f.store, &format!("m{i}"), Granularity::Hour).len(), 1);
    }
}

#[tokio::test]
async fn retention_worker_runs_a_round_in_bounded_units() {
    use crate::base::worker::{Worker, WorkerState};
    let f = fixture();
    let svc = service("svc");
    let metrics = retention::METRICS_PER_UNIT + 1;
    let values: Vec<MetricValue> =
        (0..metrics).map(|i| value(&format!("m{i:03}"), &svc, minute(12, 0), Value::Single(1), Downsampling::Sum)).collect();
    f.store.write(&values).expect("write");
    f.now.store(at(12, 0) + 8 * DAY_MS, Ordering::SeqCst);
    let store = Arc::new(f.store);
    let mut worker = retention::RetentionWorker::new(store.clone(), retention::RETENTION_INTERVAL);
    assert_eq!(worker.work().await, WorkerState::Busy, "a second page remains");
    assert_eq!(worker.work().await, WorkerState::Idle, "the round is done");
    for i in 0..metrics {
        let metric = format!("m{i:03}");
        assert!(singles(&store, &metric, Granularity::Minute).is_empty(), "{metric} minutes expired");
        assert_eq!(singles(&store, &metric, Granularity::Day), vec![(20261125, 1)], "{metric} day kept");
    }
    // Hours (15 days) are kept too: 3 cells per metric before, 2 after.
    assert_eq!(f.kv.dump().iter().filter(|(k, _)| k[0] == keys::CELL_PREFIX).count(), metrics * 2);
}

#[test]
fn a_reopened_store_keeps_acknowledged_values_and_the_index() {
    let f = fixture();
    let svc = service("svc");
    f.store.write(&[value("m", &svc, minute(12, 0), Value::Single(7), Downsampling::Avg)]).expect("write");
    let before = f.store.read(&filter(""), Granularity::Minute, at(0, 0), at(23, 59)).expect("read");
    let metrics_before = f.store.metrics().expect("metrics");
    drop(f.store);
    let reopened = open(&f.kv, Retention::default(), &f.telemetry, &f.now);
    assert_eq!(reopened.metrics().expect("metrics"), metrics_before);
    assert_eq!(reopened.read(&filter(""), Granularity::Minute, at(0, 0), at(23, 59)).expect("read"), before);
    // The avg accumulators survived: a new value combines with the stored summation and count.
    reopened.write(&[value("m", &svc, minute(12, 0), Value::Single(2), Downsampling::Avg)]).expect("write");
    assert_eq!(singles(&reopened, "m", Granularity::Minute), vec![(minute(12, 0), 4)]);
}

#[test]
fn the_engine_hands_out_one_series_space_per_database() {
    use crate::store::kv::{KvEngine, MemKv};
    let kv = MemKv::new();
    let telemetry = Arc::new(SelfMetrics::new());
    let first = MetricStore::open(kv.series(), Retention::default(), telemetry.clone()).expect("open");
    let now = at(14, 0);
    let first = first.with_clock(Arc::new(move || now));
    first.write(&[value("m", &service("s"), minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
    let second = MetricStore::open(kv.series(), Retention::default(), telemetry).expect("reopen");
    assert_eq!(second.metrics().expect("metrics").len(), 1);
    assert!(kv.scan_prefix(b"").expect("scan").is_empty(), "series never land among rule entries");
}

#[test]
fn concurrent_writers_to_one_cell_lose_nothing() {
    let f = fixture();
    let svc = service("svc");
    let threads = 8;
    let writes = 100;
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for _ in 0..writes {
                    f.store.write(&[value("hits", &svc, minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
                }
            });
        }
    });
    let total = (threads * writes) as i64;
    assert_eq!(singles(&f.store, "hits", Granularity::Minute), vec![(minute(12, 0), total)]);
    assert_eq!(singles(&f.store, "hits", Granularity::Day), vec![(20261125, total)]);
    assert_eq!(counter(&f.telemetry.values_stored, "metric", "hits"), total as u64);
}

#[test]
fn a_corrupt_cell_is_an_error_not_a_panic() {
    let f = fixture();
    let svc = service("svc");
    f.store.write(&[value("m", &svc, minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
    let key = keys::cell_key("m", Granularity::Minute, minute(12, 0), &svc, "");
    f.kv.put_raw(key.clone(), vec![codec::FORMAT_VERSION, 1, 0, 0xde, 0xad]);
    let read = f.store.read(&filter("m"), Granularity::Minute, at(12, 0), at(12, 0));
    assert!(matches!(read, Err(MetricStoreError::Corrupt { .. })), "{read:?}");
    let write = f.store.write(&[value("m", &svc, minute(12, 0), Value::Single(1), Downsampling::Sum)]);
    assert!(matches!(write, Err(MetricStoreError::Corrupt { .. })), "{write:?}");
    // The hour cell was not touched by the refused write.
    assert_eq!(singles(&f.store, "m", Granularity::Hour), vec![(2026112512, 1)]);
    // Other cells are still written.
    f.store.write(&[value("m", &svc, minute(12, 1), Value::Single(1), Downsampling::Sum)]).expect("other cell");
    // A corrupt index record fails the open, not a later read.
    f.kv.put_raw(keys::index_key("bad"), vec![42]);
    assert!(matches!(MetricStore::open(f.kv.clone(), Retention::default(), f.telemetry.clone()), Err(MetricStoreError::Corrupt { .. })));
}

#[test]
fn a_new_shape_waits_for_reshape_which_starts_a_new_series() {
    let f = fixture();
    let svc = service("svc");
    f.store.write(&[value("m", &svc, minute(12, 0), Value::Single(5), Downsampling::Avg)]).expect("write");
    let labeled = Value::Labeled(vec![("k=v".into(), 3)]);
    f.store.write(&[value("m", &svc, minute(12, 1), labeled.clone(), Downsampling::Avg)]).expect("refused, not failed");
    assert_eq!(counter(&f.telemetry.values_rejected, "reason", "shape_mismatch"), 1);
    assert_eq!(singles(&f.store, "m", Granularity::Minute), vec![(minute(12, 0), 5)]);

    let new_info = MetricInfo { name: "m".into(), scope: ScopeType::Service, data_type: DataType::Labeled, downsampling: Downsampling::Avg };
    f.store.reshape("m", new_info.clone()).expect("reshape");
    assert_eq!(f.store.metrics().expect("metrics"), vec![new_info.clone()]);
    assert!(points(&f.store, "m", Granularity::Day).is_empty(), "old cells are deleted");
    f.store.write(&[value("m", &svc, minute(12, 1), labeled.clone(), Downsampling::Avg)]).expect("write");
    assert_eq!(points(&f.store, "m", Granularity::Minute), vec![(minute(12, 1), labeled)]);
    // The new shape survives a reopen.
    let reopened = open(&f.kv, Retention::default(), &f.telemetry, &f.now);
    assert_eq!(reopened.info("m"), Some(new_info));

    reopened.drop_metric("m").expect("drop");
    assert!(reopened.metrics().expect("metrics").is_empty());
    reopened.write(&[value("m", &svc, minute(12, 2), Value::Single(1), Downsampling::Max)]).expect("any shape again");
    assert_eq!(reopened.info("m").map(|i| i.downsampling), Some(Downsampling::Max));
}

#[test]
fn a_failed_write_is_reported_and_leaves_no_index_entry() {
    let f = fixture();
    f.kv.set_fail_writes(true);
    let result = f.store.write(&[value("m", &service("s"), minute(12, 0), Value::Single(1), Downsampling::Sum)]);
    assert!(matches!(result, Err(MetricStoreError::Kv(_))), "{result:?}");
    assert!(f.store.metrics().expect("metrics").is_empty());
    f.kv.set_fail_writes(false);
    f.kv.set_fail_reads(true);
    assert!(f.store.read(&filter("m"), Granularity::Minute, at(0, 0), at(1, 0)).is_err());
    assert!(f.store.write(&[value("m", &service("s"), minute(12, 0), Value::Single(1), Downsampling::Sum)]).is_err());
}

#[cfg(feature = "rocksdb")]
#[test]
fn on_rocksdb_a_reopened_database_keeps_values_index_and_rule_entries_apart() {
    use crate::store::kv::{KvEngine, KvOp, RocksEngine};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let telemetry = Arc::new(SelfMetrics::new());
    let now = at(14, 0);
    let svc = service("svc");
    {
        let engine = RocksEngine::open(&path).expect("open");
        engine.write(&[KvOp::Put { key: b"rule/otel-rules/vm".to_vec(), value: b"entry".to_vec() }], true).expect("entry");
        let store = MetricStore::open(engine.series(), Retention::default(), telemetry.clone()).expect("store");
        let store = store.with_clock(Arc::new(move || now));
        for mm in 0..3 {
            store.write(&[value("m", &svc, minute(12, mm), Value::Single(10 * (mm + 1)), Downsampling::Avg)]).expect("write");
            store.write(&[value("m", &service("other"), minute(12, mm), Value::Single(1), Downsampling::Avg)]).expect("write");
        }
        assert_eq!(store.expire_page(at(12, 1) + 7 * DAY_MS, None, 10).expect("expire").ranges_deleted, 1);
    }
    let engine = RocksEngine::open(&path).expect("reopen");
    assert_eq!(engine.scan_prefix(b"").expect("entries").len(), 1, "only the rule entry in the default column family");
    let store = MetricStore::open(engine.series(), Retention::default(), telemetry).expect("store");
    assert_eq!(store.metrics().expect("metrics").len(), 1);
    // A service read seeks past the other service's cells in each bucket.
    let read = |name: &str, granularity| -> Vec<(i64, Value)> {
        let wanted = SeriesFilter { metric: "m".into(), service: Some(name.into()), ..SeriesFilter::default() };
        let series = store.read(&wanted, granularity, at(0, 0), at(23, 59)).expect("read");
        assert_eq!(series.len(), 1, "{name}");
        series[0].points.iter().map(|p| (p.bucket, p.value.clone())).collect()
    };
    assert_eq!(read("svc", Granularity::Minute), vec![(minute(12, 1), Value::Single(20)), (minute(12, 2), Value::Single(30))]);
    assert_eq!(read("svc", Granularity::Hour), vec![(2026112512, Value::Single(20))]);
    assert_eq!(read("other", Granularity::Minute).len(), 2);
    let all = store.read(&filter("m"), Granularity::Minute, at(0, 0), at(23, 59)).expect("read");
    assert_eq!(all.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_its_metric_store_and_keeps_it_across_a_restart() {
    use crate::node::testing::NodeBuilder;
    use crate::node::NodeSettings;
    use crate::store::kv::MemKv;
    let kv = Arc::new(MemKv::new());
    // A value one minute old: within every default retention.
    let bucket = hotrule_mal_engine::minute_bucket(crate::base::clock::wall_clock_ms() - 60_000);
    let written = value("node_m", &service("svc"), bucket, Value::Single(3), Downsampling::Sum);
    let start = |kv: Arc<MemKv>| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        NodeBuilder::new(NodeSettings::for_test()).start(kv, listener).await.expect("node")
    };
    let node = start(kv.clone()).await;
    let writer = node.metric_writer();
    tokio::task::spawn_blocking(move || writer.write(&[written])).await.expect("join").expect("write");
    node.shutdown().await;

    let node = start(kv).await;
    let reader = node.metric_reader();
    let now = crate::base::clock::wall_clock_ms();
    let series = reader.read(&filter("node_m"), Granularity::Minute, now - 3_600_000, now).expect("read");
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].points.iter().map(|p| (p.bucket, p.value.clone())).collect::<Vec<_>>(), vec![(bucket, Value::Single(3))]);
    assert_eq!(reader.metrics().expect("metrics").len(), 1);
    node.shutdown().await;
}

#[test]
fn absurd_buckets_are_handled_without_panic() {
    let f = fixture();
    let svc = service("svc");
    for bucket in [i64::MAX, i64::MIN, 0, -1, 999_999_999_999] {
        f.store.write(&[value("odd", &svc, bucket, Value::Single(1), Downsampling::Avg)]).expect("write");
    }
    // The past ones are expired; the far-future ones are stored and readable.
    assert!(counter(&f.telemetry.values_rejected, "reason", "expired") >= 3);
    let series = f.store.read(&filter("odd"), Granularity::Day, i64::MIN, i64::MAX).expect("read");
    assert!(!series.is_empty());
}

#[test]
fn a_service_read_seeks_past_other_services_exactly() {
    let f = fixture();
    let names = ["a", "b", "bb", "b\u{0}", "c"];
    for mm in 0..4 {
        let values: Vec<MetricValue> =
            names.iter().enumerate().map(|(i, n)| value("m", &service(n), minute(12, mm), Value::Single(i as i64 * 10 + mm), Downsampling::Sum)).collect();
        f.store.write(&values).expect("write");
    }
    for (i, name) in names.iter().enumerate() {
        let wanted = SeriesFilter { metric: "m".into(), service: Some(name.to_string()), ..SeriesFilter::default() };
        let series = f.store.read(&wanted, Granularity::Minute, at(12, 1), at(12, 3)).expect("read");
        assert_eq!(series.len(), 1, "{name:?}");
        assert_eq!(series[0].entity.service_name, *name);
        let got: Vec<(i64, Value)> = series[0].points.iter().map(|p| (p.bucket, p.value.clone())).collect();
        let expected: Vec<(i64, Value)> = (1..4).map(|mm| (minute(12, mm), Value::Single(i as i64 * 10 + mm))).collect();
        assert_eq!(got, expected, "{name:?}");
    }
    for absent in ["", "0", "ba", "zzz"] {
        let wanted = SeriesFilter { metric: "m".into(), service: Some(absent.to_string()), ..SeriesFilter::default() };
        assert!(f.store.read(&wanted, Granularity::Minute, at(0, 0), at(23, 59)).expect("read").is_empty(), "{absent:?}");
    }
    let hours = SeriesFilter { metric: "m".into(), service: Some("bb".into()), ..SeriesFilter::default() };
    let series = f.store.read(&hours, Granularity::Hour, at(0, 0), at(23, 59)).expect("read");
    assert_eq!(series[0].points.iter().map(|p| p.value.clone()).collect::<Vec<_>>(), vec![Value::Single(20 * 4 + 6)]);
}

#[test]
fn ensure_shape_reshapes_only_a_metric_stored_under_another_shape() {
    let f = fixture();
    let svc = service("svc");
    let single = MetricInfo { name: "m".into(), scope: ScopeType::Service, data_type: DataType::Single, downsampling: Downsampling::Avg };
    assert!(!f.store.ensure_shape(&single).expect("unknown metric"), "a metric never stored is not reshaped");
    f.store.write(&[value("m", &svc, minute(12, 0), Value::Single(5), Downsampling::Avg)]).expect("write");
    assert!(!f.store.ensure_shape(&single).expect("same shape"), "the same shape keeps the series");
    assert_eq!(singles(&f.store, "m", Granularity::Minute), vec![(minute(12, 0), 5)]);

    let labeled = MetricInfo { data_type: DataType::Labeled, ..single.clone() };
    assert!(f.store.ensure_shape(&labeled).expect("reshape"), "another shape starts a new series");
    assert!(points(&f.store, "m", Granularity::Minute).is_empty(), "old cells are dropped");
    f.store.write(&[value("m", &svc, minute(12, 1), Value::Labeled(vec![("k=v".into(), 3)]), Downsampling::Avg)]).expect("write");
    assert_eq!(points(&f.store, "m", Granularity::Minute).len(), 1, "values of the new shape are stored");
    assert_eq!(counter(&f.telemetry.values_rejected, "reason", "shape_mismatch"), 0);
}

// ---- handoff to the entity's owner (`handoff`) ----

mod handoff {
    use super::*;
    use crate::base::ids::NodeId;
    use crate::data::metrics::cells::handoff::HandoffRecord;
    use crate::data::metrics::partial::{NodeAnswer, merge_cluster};

    fn id(name: &str) -> NodeId {
        NodeId(name.to_string())
    }

    /// Writes `n` services' avg values (10 and 30, so 20 each) at 12:00 with tracking on, and
    /// moves every cell to `b`.
    fn written_and_moved(f: &Fixture, n: usize) -> Vec<HandoffRecord> {
        f.store.set_handoff_tracking(true);
        for i in 0..n {
            let svc = service(&format!("s{i}"));
            f.store.write(&[value("load", &svc, minute(12, 0), Value::Single(10), Downsampling::Avg)]).expect("write");
            f.store.write(&[value("load", &svc, minute(12, 0), Value::Single(30), Downsampling::Avg)]).expect("write");
        }
        let (keys, overflowed) = f.store.take_dirty();
        assert!(!overflowed);
        assert_eq!(keys.len(), 3 * n, "minute, hour and day cells of each service");
        let moved = f.store.move_to_outbox(keys, &|_| Some(id("b")), 100).expect("move");
        assert_eq!((moved.cells, moved.records), (3 * n, 1));
        f.store.outbox(100).expect("outbox")
    }

    /// Each service's single value at `granularity`, in service order.
    fn values(store: &MetricStore, granularity: Granularity) -> Vec<i64> {
        let series = store.read(&filter("load"), granularity, at(0, 0), at(23, 59)).expect("read");
        series
            .iter()
            .flat_map(|s| &s.points)
            .map(|p| match p.value {
                Value::Single(v) => v,
                ref other => panic!("{other:?}"),
            })
            .collect()
    }

    fn answer(node: &str, store: &MetricStore) -> NodeAnswer {
        let (series, in_flight) = store.consistent_state(&filter("load"), Granularity::Minute, at(0, 0), at(23, 59)).expect("state");
        NodeAnswer { node: id(node), series, in_flight }
    }

    fn cluster_value(answers: Vec<NodeAnswer>) -> Vec<i64> {
        merge_cluster(answers)
            .series
            .iter()
            .map(|s| match s.finalize(Granularity::Minute).points[0].value {
                Value::Single(v) => v,
                ref other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn moved_cells_leave_the_sender_and_the_owner_applies_them_once() {
        let (a, b) = (fixture(), fixture());
        let records = written_and_moved(&a, 3);
        assert!(values(&a.store, Granularity::Minute).is_empty(), "the cells left the sender");
        let record = &records[0];
        assert_eq!(record.owner, id("b"));
        assert!(record.seq >= u64::try_from(at(14, 0)).expect("positive") * 1000, "sequence numbers start at the clock");

        // In flight: counted from the sender's outbox, once.
        assert_eq!(cluster_value(vec![answer("a", &a.store), answer("b", &b.store)]), [20, 20, 20]);

        let applied = b.store.apply_handoff(&id("a"), record).expect("apply");
        assert_eq!((applied.through, applied.refused, applied.minutes.len(), applied.cells), (record.seq, 0, 3, 9));
        assert_eq!(values(&b.store, Granularity::Hour), [20, 20, 20]);
        // Applied and still in the outbox: the owner's mark covers it, counted once.
        assert_eq!(cluster_value(vec![answer("a", &a.store), answer("b", &b.store)]), [20, 20, 20]);

        // Delivered twice (a lost answer): applied once.
        let again = b.store.apply_handoff(&id("a"), record).expect("apply again");
        assert_eq!((again.through, again.minutes.len(), again.cells), (record.seq, 0, 0));
        assert_eq!(values(&b.store, Granularity::Minute), [20, 20, 20]);

        a.store.delivered(record.clone()).expect("delivered");
        assert!(a.store.outbox(10).expect("outbox").is_empty());
        // Delivered: still reported for a while, still counted once.
        assert_eq!(answer("a", &a.store).in_flight.records.len(), 1);
        assert_eq!(cluster_value(vec![answer("b", &b.store), answer("a", &a.store)]), [20, 20, 20]);
    }

    /// Keys given twice move once, and a record that holds a cell twice (an older build's)
    /// counts it once in reads, in an apply and in a take-back.
    #[test]
    fn a_cell_is_counted_once_however_often_its_key_is_named() {
        let (a, b) = (fixture(), fixture());
        a.store.set_handoff_tracking(true);
        a.store.write(&[value("load", &service("s0"), minute(12, 0), Value::Single(10), Downsampling::Avg)]).expect("write");
        let (keys, _) = a.store.take_dirty();
        let twice: Vec<Vec<u8>> = keys.iter().chain(&keys).cloned().collect();
        let moved = a.store.move_to_outbox(twice, &|_| Some(id("b")), 100).expect("move");
        assert_eq!((moved.cells, moved.records), (3, 1), "minute, hour and day cells, once each");
        let mut record = a.store.outbox(10).expect("outbox").remove(0);
        assert_eq!(record.cells.len(), 3);

        // The same record with its cells twice, as an older build may have written it.
        record.cells.extend(record.cells.clone());
        a.store.take_back(&a.store.outbox(10).expect("outbox")[0]).expect("take back");
        a.store.write(&[value("load", &service("s0"), minute(12, 0), Value::Single(30), Downsampling::Avg)]).expect("write");
        assert_eq!(singles(&a.store, "load", Granularity::Minute), [(minute(12, 0), 20)], "(10 + 30) / 2");
        let c = fixture();
        c.store.take_back(&record).expect("take back a doubled record");
        assert_eq!(singles(&c.store, "load", Granularity::Minute), [(minute(12, 0), 10)], "its cells once");

        // The doubled record in an outbox: a read counts its cells once.
        let outboxed = fixture();
        let key = crate::data::metrics::cells::handoff::outbox_key(&record.owner, record.seq);
        let put = crate::store::series::SeriesOp::Put { key, value: crate::data::metrics::cells::handoff::encode_record(&record) };
        outboxed.store.kv.write(&[put], true).expect("put");
        assert_eq!(cluster_value(vec![answer("o", &outboxed.store), answer("b", &b.store)]), [10], "in flight, once");
        let in_flight = c.store.in_flight(&filter("load"), Granularity::Minute, at(0, 0), at(23, 59)).expect("in flight");
        assert!(in_flight.records.is_empty(), "taken back");
        let outboxed = fixture();
        outboxed.store.apply_handoff(&id("a"), &record).expect("apply a doubled record");
        assert_eq!(singles(&outboxed.store, "load", Granularity::Minute), [(minute(12, 0), 10)], "applied once");
        assert_eq!(cluster_value(vec![answer("b", &b.store), answer("o", &outboxed.store)]), [10]);
    }

    #[test]
    fn a_record_whose_owner_left_comes_back_and_merges_with_new_writes() {
        let a = fixture();
        let records = written_and_moved(&a, 1);
        a.store.write(&[value("load", &service("s0"), minute(12, 0), Value::Single(50), Downsampling::Avg)]).expect("write");
        let _ = a.store.take_dirty();
        a.store.take_back(&records[0]).expect("take back");
        assert!(a.store.outbox(10).expect("outbox").is_empty());
        assert_eq!(singles(&a.store, "load", Granularity::Minute), [(minute(12, 0), 30)], "(10 + 30 + 50) / 3");
        let (dirty, _) = a.store.take_dirty();
        assert_eq!(dirty.len(), 3, "the cells are looked at again");
    }

    #[test]
    fn nothing_moves_past_the_bound_and_records_survive_a_restart() {
        let f = fixture();
        written_and_moved(&f, 1);
        f.store.write(&[value("load", &service("x"), minute(12, 1), Value::Single(1), Downsampling::Avg)]).expect("write");
        let (keys, _) = f.store.take_dirty();
        assert_eq!(f.store.move_to_outbox(keys.clone(), &|_| Some(id("b")), 1).expect("move").cells, 0, "one record waits: bound 1");
        assert_eq!(singles(&f.store, "load", Granularity::Minute), [(minute(12, 1), 1)], "the cells stay here");

        let reopened = open(&f.kv, Retention::default(), &f.telemetry, &f.now);
        let before = reopened.outbox(10).expect("outbox");
        assert_eq!(before.len(), 1, "the outbox is durable");
        f.now.store(at(13, 0), Ordering::SeqCst);
        let moved = reopened.move_to_outbox(keys, &|_| Some(id("c")), 10).expect("move");
        assert_eq!(moved.records, 1);
        let after = reopened.outbox(10).expect("outbox");
        let newer = after.iter().find(|r| r.owner == id("c")).expect("a record for c");
        assert!(newer.seq > before[0].seq, "sequence numbers never repeat");
    }

    #[test]
    fn the_owner_refuses_garbage_and_other_shapes_and_applies_the_rest() {
        let (a, b) = (fixture(), fixture());
        let mut record = written_and_moved(&a, 2).remove(0);
        b.store.write(&[value("other", &service("z"), minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
        record.cells.push((b"not a key".to_vec(), vec![1, 2, 3]));
        // A third service's key with a cell that does not decode.
        let third = written_and_moved(&fixture(), 3).remove(0);
        let (key, _) = third.cells.iter().find(|(k, _)| !record.cells.iter().any(|(r, _)| r == k)).expect("a key of s2").clone();
        record.cells.push((key, vec![9, 9]));
        // A key given twice (an older build's record) counts once: the first.
        let (twice, _) = record.cells[0].clone();
        record.cells.push((twice, vec![7, 7]));
        let applied = b.store.apply_handoff(&id("a"), &record).expect("apply");
        assert_eq!(applied.refused, 2);
        assert_eq!(values(&b.store, Granularity::Minute), [20, 20], "the two services' good cells are applied, once");

        let c = fixture();
        c.store.write(&[value("load", &service("s0"), minute(12, 0), Value::Single(1), Downsampling::Sum)]).expect("write");
        let reshaped = c.store.apply_handoff(&id("a"), &written_and_moved(&fixture(), 1)[0]).expect("apply");
        assert_eq!(reshaped.refused, 3, "an avg metric's cells are not merged into a sum metric");
        assert_eq!(counter(&c.telemetry.values_rejected, "reason", "handoff_refused"), 3);
    }
}
