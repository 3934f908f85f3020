//! `hotrule bench query`: one day of one metric at minute steps, read back through the HTTP
//! APIs of an in-process node (loopback, sequential requests): the Prometheus `query_range`
//! (step 60s, 1441 steps) and `/query/metrics` (1440 MINUTE buckets). Issue target: p99 < 10 ms.
//!
//! The node reads the metric store it is given: the in-memory twin (`query::memory`) by
//! default. To measure another store, write [`day_of_values`] through its `MetricWriter` and call
//! [`measure`] with its reader.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hotrule_mal_engine::{DataType, Downsampling, ScopeType};

use crate::api::client::{AdminClient, with_query};
use crate::data::metrics::{Entity, Granularity, MetricInfo, MetricReader, MetricValue, Value};
use crate::node::testing::NodeBuilder;
use crate::node::NodeSettings;
use crate::api::query::memory::MemMetrics;
use crate::api::query::time::bucket_of;

/// The benchmark's metric.
pub const METRIC: &str = "meter_bench_cpu";

/// The first minute of the day measured: 2025-01-01T00:00:00Z.
pub const DAY_START_MS: i64 = 1_735_689_600_000;

fn entity(i: usize) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = format!("svc-{i}");
    entity.layer = "GENERAL".into();
    entity
}

/// One day of minute values of [`METRIC`] (avg) for `entities` services, as dispatch writes them.
pub fn day_of_values(entities: usize) -> Vec<MetricValue> {
    let mut values = Vec::with_capacity(entities * 1440);
    for minute in 0..1440i64 {
        let time_bucket = bucket_of(Granularity::Minute, DAY_START_MS + minute * 60_000);
        for i in 0..entities {
            values.push(MetricValue {
                metric: METRIC.into(),
                rule: "bench".into(),
                entity: entity(i),
                time_bucket,
                timestamp_ms: DAY_START_MS + minute * 60_000,
                value: Value::Single(minute % 100 + i as i64),
                data_type: DataType::Single,
                downsampling: Downsampling::Avg,
            });
        }
    }
    values
}

/// The in-memory twin holding [`day_of_values`] (minute buckets).
pub fn memory_store(entities: usize) -> Arc<MemMetrics> {
    let store = Arc::new(MemMetrics::new());
    let info = MetricInfo { name: METRIC.into(), scope: ScopeType::Service, data_type: DataType::Single, downsampling: Downsampling::Avg };
    for value in day_of_values(entities) {
        store.put(&info, &value.entity, Granularity::Minute, value.time_bucket, value.value);
    }
    store
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// Times `requests` sequential GETs of `path`, checking each answer; one report line.
async fn time_route(client: &AdminClient, what: &str, path: &str, requests: usize, points: impl Fn(&serde_json::Value) -> usize) -> Result<String, String> {
    let mut latencies = Vec::with_capacity(requests);
    let mut answered_points = 0;
    for _ in 0..requests.max(1) {
        let started = Instant::now();
        let reply = client.get(path).await.map_err(|e| e.to_string())?;
        latencies.push(started.elapsed());
        if !reply.status.is_success() {
            return Err(format!("{what} answered {}: {}", reply.status, reply.text()));
        }
        answered_points = points(&reply.json().unwrap_or_default());
    }
    latencies.sort();
    Ok(format!(
        "{what}: {answered_points} points per answer, {} sequential requests: p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default()
    ))
}

/// Starts a node on `reader` and measures both APIs; returns the report lines.
pub async fn measure(reader: Arc<dyn MetricReader>, requests: usize) -> Result<Vec<String>, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let kv = Arc::new(crate::store::kv::MemKv::new());
    let node = NodeBuilder::new(NodeSettings::for_test()).metric_reader(reader).start(kv, listener).await.map_err(|e| e.to_string())?;
    let client = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?;
    let (start, end) = (DAY_START_MS / 1000, (DAY_START_MS + 86_400_000) / 1000);
    let prometheus = with_query(
        "/api/v1/query_range",
        &[("query", &format!("{METRIC}{{service=\"svc-0\"}}")), ("start", &start.to_string()), ("end", &end.to_string()), ("step", "60")],
    );
    let json = with_query(
        "/query/metrics",
        &[
            ("name", METRIC),
            ("service", "svc-0"),
            ("step", "MINUTE"),
            ("start", &DAY_START_MS.to_string()),
            ("end", &(DAY_START_MS + 86_400_000 - 60_000).to_string()),
        ],
    );
    let result = async {
        let range = time_route(&client, "GET /api/v1/query_range (1 day, step 60s)", &prometheus, requests, |body| {
            body["data"]["result"][0]["values"].as_array().map_or(0, Vec::len)
        })
        .await?;
        let own = time_route(&client, "GET /query/metrics (1 day, MINUTE)", &json, requests, |body| {
            body["series"][0]["points"].as_array().map_or(0, Vec::len)
        })
        .await?;
        Ok::<_, String>(vec![range, own])
    }
    .await;
    node.shutdown().await;
    result
}

/// `hotrule bench query` on the in-memory twin.
pub async fn run(entities: usize, requests: usize) -> Result<(), String> {
    let store: Arc<dyn MetricReader> = memory_store(entities.max(1));
    println!("one day of {METRIC} for {} services in the in-memory metric store; one service read back", entities.max(1));
    for line in measure(store, requests).await? {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_benchmark_reads_a_full_day() {
        let lines = measure(memory_store(2), 3).await.expect("bench runs");
        assert!(lines[0].contains("1441 points per answer"), "{lines:?}");
        assert!(lines[1].contains("1440 points per answer"), "{lines:?}");
    }
}
