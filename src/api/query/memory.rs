//! `MemMetrics`: an in-memory [`MetricReader`] twin for tests and benchmarks, holding one cell
//! (partial state, as the store keeps it) per metric, entity, granularity and bucket. It reads as
//! the store reads: series in entity order, points in bucket order, a point in
//! `[start_ms, end_ms]` by its bucket start.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::data::metrics::cells::cell::Cell;
use crate::data::metrics::{Entity, Granularity, MetricInfo, MetricReader, MetricStoreError, PartialSeries, Series, SeriesFilter, Value};

use super::time::bucket_start_ms;

/// Cells by (granularity, entity, histogram group), then bucket.
type Cells = BTreeMap<(Granularity, Entity, String), BTreeMap<i64, Cell>>;

#[derive(Default)]
pub struct MemMetrics {
    metrics: RwLock<BTreeMap<String, (MetricInfo, Cells)>>,
}

impl MemMetrics {
    pub fn new() -> MemMetrics {
        MemMetrics::default()
    }

    /// Stores `value` for `entity` in `bucket` (at `granularity`) as one emission of the
    /// metric's function sampled at the bucket's start, replacing what was there.
    pub fn put(&self, info: &MetricInfo, entity: &Entity, granularity: Granularity, bucket: i64, value: Value) {
        let at = bucket_start_ms(granularity, bucket).unwrap_or(0);
        let (cell, group) = Cell::from_value(&value, info.downsampling, at);
        let mut metrics = self.metrics.write().unwrap_or_else(|p| p.into_inner());
        let (stored_info, cells) = metrics.entry(info.name.clone()).or_insert_with(|| (info.clone(), Cells::new()));
        *stored_info = info.clone();
        cells.entry((granularity, entity.clone(), group)).or_default().insert(bucket, cell);
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
        let partials = self.read_partials(filter, granularity, start_ms, end_ms)?;
        Ok(partials.iter().map(|series| series.finalize(granularity)).collect())
    }

    fn read_partials(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<PartialSeries>, MetricStoreError> {
        let metrics = self.metrics.read().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (name, (_, cells)) in metrics.iter() {
            if !filter.metric.is_empty() && *name != filter.metric {
                continue;
            }
            for ((cell_granularity, entity, group), buckets) in cells {
                if *cell_granularity != granularity || !passes(filter, entity) {
                    continue;
                }
                let in_range = |bucket: i64| bucket_start_ms(granularity, bucket).is_some_and(|start| (start_ms..=end_ms).contains(&start));
                let cells: Vec<(i64, Cell)> =
                    buckets.iter().filter(|(bucket, _)| in_range(**bucket)).map(|(bucket, cell)| (*bucket, cell.clone())).collect();
                if !cells.is_empty() {
                    out.push(PartialSeries { metric: name.clone(), entity: entity.clone(), group: group.clone(), cells });
                }
            }
        }
        Ok(out)
    }
}
