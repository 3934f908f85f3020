//! `MemMetrics`: an in-memory [`MetricReader`] twin for tests and benchmarks, holding finalized
//! values per metric, entity, granularity and bucket. It reads as the store reads: series in
//! entity order, points in bucket order, a point in `[start_ms, end_ms]` by its bucket start.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::data::metrics::{Entity, Granularity, MetricInfo, MetricReader, MetricStoreError, Point, Series, SeriesFilter, Value};

use super::time::bucket_start_ms;

type Cells = BTreeMap<(Granularity, Entity), BTreeMap<i64, Value>>;

#[derive(Default)]
pub struct MemMetrics {
    metrics: RwLock<BTreeMap<String, (MetricInfo, Cells)>>,
}

impl MemMetrics {
    pub fn new() -> MemMetrics {
        MemMetrics::default()
    }

    /// Stores `value` for `entity` in `bucket` (at `granularity`), replacing what was there.
    pub fn put(&self, info: &MetricInfo, entity: &Entity, granularity: Granularity, bucket: i64, value: Value) {
        let mut metrics = self.metrics.write().unwrap_or_else(|p| p.into_inner());
        let (stored_info, cells) = metrics.entry(info.name.clone()).or_insert_with(|| (info.clone(), Cells::new()));
        *stored_info = info.clone();
        cells.entry((granularity, entity.clone())).or_default().insert(bucket, value);
    }
}

fn passes(filter: &SeriesFilter, entity: &Entity) -> bool {
    let same = |wanted: &Option<String>, have: &str| wanted.as_deref().is_none_or(|w| w == have);
    same(&filter.service, &entity.service_name)
        && same(&filter.instance, &entity.instance_name)
        && same(&filter.endpoint, &entity.endpoint_name)
}

impl MetricReader for MemMetrics {
    fn metrics(&self) -> Result<Vec<MetricInfo>, MetricStoreError> {
        let metrics = self.metrics.read().unwrap_or_else(|p| p.into_inner());
        Ok(metrics.values().map(|(info, _)| info.clone()).collect())
    }

    fn read(&self, filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64) -> Result<Vec<Series>, MetricStoreError> {
        let metrics = self.metrics.read().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (name, (_, cells)) in metrics.iter() {
            if !filter.metric.is_empty() && *name != filter.metric {
                continue;
            }
            for ((cell_granularity, entity), buckets) in cells {
                if *cell_granularity != granularity || !passes(filter, entity) {
                    continue;
                }
                let points: Vec<Point> = buckets
                    .iter()
                    .filter_map(|(bucket, value)| {
                        let start = bucket_start_ms(granularity, *bucket)?;
                        (start_ms..=end_ms).contains(&start).then(|| Point { bucket: *bucket, start_ms: start, value: value.clone() })
                    })
                    .collect();
                if !points.is_empty() {
                    out.push(Series { metric: name.clone(), entity: entity.clone(), points });
                }
            }
        }
        Ok(out)
    }
}
