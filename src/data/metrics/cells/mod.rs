//! The embedded metric store: the one writer of metric cells, over the series key space of the
//! node's database (RocksDB column family `metrics`, never mixed with rule entries).
//!
//! A value written for minute `m` updates three cells: its minute, its hour and its day, each
//! combined with the metric's downsampling function from the same incoming delta (SkyWalking's
//! trans worker: hour and day cells combine minute deltas, they are never recomputed from stored
//! minutes). Cells keep the function's accumulators (summation and count for `avg`); reads
//! finalize them ([`cell`]). The key layout is in [`keys`], the encodings in [`codec`].
//!
//! Writes go through a group commit ([`write`]): concurrent callers queue their prepared values,
//! one of them at a time becomes the writer, merges everything queued (the same cell updated by
//! several callers is read once and combined in arrival order), and writes one synced batch.
//! Cells are read-modify-written by that single writer, so concurrent updates of one cell are
//! never lost, and every caller returns only once its values are durable.
//!
//! A small index (metric name → [`MetricInfo`], from the first value of the metric) is kept in
//! memory and persisted in the same key space, so `metrics()` survives restarts. A value whose
//! shape (scope, data type, function) differs from the indexed one is not written (counted
//! `values_rejected{reason="shape_mismatch"}`) until [`MetricStore::reshape`] starts the new
//! series. Retention is enforced per granularity ([`retention`]).

pub mod cell;
pub mod codec;
pub mod config;
pub mod handoff;
pub mod keys;
pub mod retention;
mod write;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::data::metrics::{
    Granularity, MetricInfo, MetricReader, MetricStoreError, MetricValue, MetricWriter, PartialSeries, Series, SeriesFilter,
};
use crate::store::kv::{KvError, KvPairs};
use crate::store::series::{SeriesKv, SeriesOp, Visit};
use crate::base::self_metrics::SelfMetrics;
pub use config::Retention;

pub use crate::data::series_store::NowMs;
use crate::base::clock::wall_clock_ms;
use crate::data::series_store::lock;

/// Cells read per range-scan page.
const SCAN_PAGE: usize = 4096;

/// The embedded metric store.
pub struct MetricStore {
    kv: Arc<dyn SeriesKv>,
    retention: Retention,
    telemetry: Arc<SelfMetrics>,
    now_ms: NowMs,
    index: RwLock<BTreeMap<String, MetricInfo>>,
    /// Prepared writes waiting for the writer.
    queue: Mutex<Vec<write::Pending>>,
    /// Held by the one caller currently writing a group (and by reshape, drop and the handoff's
    /// moves).
    writer: Mutex<()>,
    /// What the handoff to owners keeps in memory ([`handoff`]).
    handoff: handoff::HandoffState,
}

impl MetricStore {
    /// Opens the store on `kv` and loads the metric index.
    pub fn open(kv: Arc<dyn SeriesKv>, retention: Retention, telemetry: Arc<SelfMetrics>) -> Result<MetricStore, MetricStoreError> {
        let (start, end) = keys::index_range();
        let mut index = BTreeMap::new();
        for (key, value) in scan_all(kv.as_ref(), &start, &end)? {
            let name = String::from_utf8(key[1..].to_vec()).map_err(|_| corrupt(&key, "metric name is not UTF-8"))?;
            let info = codec::decode_info(&name, &value).map_err(|detail| corrupt(&key, detail))?;
            index.insert(name, info);
        }
        Ok(MetricStore {
            kv,
            retention,
            telemetry,
            now_ms: Arc::new(wall_clock_ms),
            index: RwLock::new(index),
            queue: Mutex::new(Vec::new()),
            writer: Mutex::new(()),
            handoff: handoff::HandoffState::new(),
        })
    }

    /// The same store, reading time from `now_ms` (tests).
    pub fn with_clock(mut self, now_ms: NowMs) -> MetricStore {
        self.now_ms = now_ms;
        self
    }

    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The indexed shape of `metric`.
    pub fn info(&self, metric: &str) -> Option<MetricInfo> {
        read_lock(&self.index).get(metric).cloned()
    }

    /// Starts `metric`'s new series under `new_info` (a structural apply with
    /// `allowStorageChange`): every stored cell of the metric, at every granularity, is deleted
    /// and the index records the new shape, in one synced batch. Like BanyanDB, which deletes the
    /// measure's data: old cells could not be combined with the new shape anyway. Writes queued
    /// before the call are finished under the old shape first.
    pub fn reshape(&self, metric: &str, new_info: MetricInfo) -> Result<(), MetricStoreError> {
        let info = MetricInfo { name: metric.to_string(), ..new_info };
        self.replace_metric(metric, Some(info))
    }

    /// Deletes every cell of `metric` and forgets its shape (the rule that produced it was
    /// deleted; the name is free for any shape).
    pub fn drop_metric(&self, metric: &str) -> Result<(), MetricStoreError> {
        self.replace_metric(metric, None)
    }

    fn replace_metric(&self, metric: &str, info: Option<MetricInfo>) -> Result<(), MetricStoreError> {
        let _writer = lock(&self.writer);
        // Anything queued before this call was acknowledged to nobody yet: write it first, so
        // its caller does not get an old-shape value counted against the new shape.
        self.write_queued_group();
        let (start, end) = keys::metric_range(metric);
        let mut ops = vec![SeriesOp::DeleteRange { start, end }];
        match &info {
            Some(info) => ops.push(SeriesOp::Put { key: keys::index_key(metric), value: codec::encode_info(info) }),
            None => ops.push(SeriesOp::Delete { key: keys::index_key(metric) }),
        }
        self.kv.write(&ops, true)?;
        let mut index = write_lock(&self.index);
        match info {
            Some(info) => index.insert(metric.to_string(), info),
            None => index.remove(metric),
        };
        Ok(())
    }

    /// Reads one metric's cells at `granularity` in `[first_bucket, end_bucket)`: one range
    /// scan; cells of other entities are skipped on their key's names, without a copy.
    fn read_metric(
        &self,
        metric: &str,
        filter: &SeriesFilter,
        granularity: Granularity,
        first_bucket: i64,
        end_bucket: i64,
    ) -> Result<Vec<PartialSeries>, MetricStoreError> {
        let prefix_len = keys::series_prefix(metric, granularity).len();
        let start = keys::bucket_key(metric, granularity, first_bucket);
        let end = keys::bucket_key(metric, granularity, end_bucket);
        // With a service filter, each bucket's matching cells are one contiguous run: seek to
        // it instead of stepping over the other services' cells.
        let service_start = match (&filter.service, self.info(metric)) {
            (Some(service), Some(info)) => Some(keys::service_start(info.scope, service)),
            _ => None,
        };
        let mut found = SeriesByKey::new();
        crate::data::series_store::try_visit_range(self.kv.as_ref(), &start, &end, &mut |key, value| {
            if let Some(wanted) = &service_start
                && let Some(seek) = seek_to_service(metric, granularity, prefix_len, key, wanted)
            {
                return Ok(seek);
            }
            read_cell(key, value, prefix_len, filter, &mut found).map(|()| Visit::Next)
        })?;
        Ok(found
            .into_values()
            .map(|(entity, group, cells)| PartialSeries { metric: metric.to_string(), entity, group, cells })
            .collect())
    }
}

/// Where to go from `key` when only entities starting with `wanted` (scope and service) are
/// read: none when `key` is one of them; otherwise the wanted run of this bucket (before it) or
/// of the next one (past it).
fn seek_to_service(metric: &str, granularity: Granularity, prefix_len: usize, key: &[u8], wanted: &[u8]) -> Option<Visit> {
    let Some(entity) = key.get(prefix_len + 8..) else { return Some(Visit::Next) };
    if entity.starts_with(wanted) {
        return None;
    }
    let Ok(bucket) = keys::decode_bucket(key, prefix_len) else { return Some(Visit::Next) };
    let target_bucket = if entity < wanted {
        bucket
    } else {
        match bucket.checked_add(1) {
            Some(next) => next,
            None => return Some(Visit::Stop),
        }
    };
    let mut target = keys::bucket_key(metric, granularity, target_bucket);
    target.extend_from_slice(wanted);
    Some(Visit::Seek(target))
}

/// Series found by a read, by the entity-and-group part of their keys (each entity is decoded
/// once, on its first cell).
type SeriesByKey = BTreeMap<Vec<u8>, (hotrule_mal_engine::Entity, String, Vec<(i64, cell::Cell)>)>;

fn read_cell(
    key: &[u8],
    value: &[u8],
    prefix_len: usize,
    filter: &SeriesFilter,
    found: &mut SeriesByKey,
) -> Result<(), MetricStoreError> {
    let names = keys::entity_names(key, prefix_len).ok_or_else(|| corrupt(key, "cell key cut short"))?;
    if !matches(filter, names) {
        return Ok(());
    }
    let bucket = keys::decode_bucket(key, prefix_len).map_err(|e| corrupt(key, e.0))?;
    let suffix = &key[prefix_len + 8..];
    let cell = codec::decode_cell(value).map_err(|detail| corrupt(key, detail))?;
    if !found.contains_key(suffix) {
        let name = keys::decode_cell_key(key, prefix_len).map_err(|e| corrupt(key, e.0))?;
        found.insert(suffix.to_vec(), (name.entity, name.group, Vec::new()));
    }
    if let Some((_, _, cells)) = found.get_mut(suffix) {
        cells.push((bucket, cell));
    }
    Ok(())
}

impl MetricWriter for MetricStore {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        self.write_values(values)
    }

    fn ensure_shape(&self, info: &MetricInfo) -> Result<bool, MetricStoreError> {
        match self.info(&info.name) {
            Some(known) if known != *info => {
                tracing::info!(metric = %info.name, from = ?known, to = ?info, "metric reshaped: its old series are dropped");
                self.reshape(&info.name, info.clone())?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl MetricReader for MetricStore {
    fn metrics(&self) -> Result<Vec<MetricInfo>, MetricStoreError> {
        Ok(read_lock(&self.index).values().cloned().collect())
    }

    /// One range scan per metric: the buckets holding `start_ms` through the one holding
    /// `end_ms`. A histogram metric has one series per entity and label group. Series come in
    /// the key order of their entities.
    fn read(&self, filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64) -> Result<Vec<Series>, MetricStoreError> {
        let partials = self.read_partials(filter, granularity, start_ms, end_ms)?;
        Ok(partials.iter().map(|series| series.finalize(granularity)).collect())
    }

    fn read_partial_state(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<(Vec<PartialSeries>, crate::data::metrics::partial::InFlight), MetricStoreError> {
        self.consistent_state(filter, granularity, start_ms, end_ms)
    }

    fn handoff_generation(&self) -> u64 {
        MetricStore::handoff_generation(self)
    }

    /// The cells themselves (see `read`).
    fn read_partials(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<PartialSeries>, MetricStoreError> {
        if start_ms > end_ms {
            return Ok(Vec::new());
        }
        let metrics: Vec<String> = if filter.metric.is_empty() {
            read_lock(&self.index).keys().cloned().collect()
        } else {
            vec![filter.metric.clone()]
        };
        let first_bucket = keys::bucket_of(granularity, start_ms);
        let end_bucket = keys::next_bucket(granularity, keys::bucket_of(granularity, end_ms));
        let mut out = Vec::new();
        for metric in metrics {
            out.extend(self.read_metric(&metric, filter, granularity, first_bucket, end_bucket)?);
        }
        Ok(out)
    }
}

/// Every pair in `[start, end)`, read page by page.
fn scan_all(kv: &dyn SeriesKv, start: &[u8], end: &[u8]) -> Result<KvPairs, KvError> {
    let mut out = Vec::new();
    let mut from = start.to_vec();
    loop {
        let page = kv.scan_range(&from, end, SCAN_PAGE)?;
        let full = page.len() == SCAN_PAGE;
        if let Some((last, _)) = page.last() {
            from = last.clone();
            from.push(0);
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

/// Whether a cell's `[service, instance, endpoint]` names pass the filter.
fn matches(filter: &SeriesFilter, [service, instance, endpoint]: [&[u8]; 3]) -> bool {
    let wanted = |want: &Option<String>, have: &[u8]| want.as_deref().is_none_or(|w| w.as_bytes() == have);
    wanted(&filter.service, service) && wanted(&filter.instance, instance) && wanted(&filter.endpoint, endpoint)
}

fn corrupt(key: &[u8], detail: impl std::fmt::Display) -> MetricStoreError {
    MetricStoreError::Corrupt { key: printable(key), detail: detail.to_string() }
}

/// A key for messages: printable bytes as they are, others escaped.
fn printable(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
