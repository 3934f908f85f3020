//! The write path: prepare on the caller's thread, then a group commit by one writer at a time.
//!
//! A caller turns its values into deltas and cell keys (no lock held), queues them, and takes
//! the writer lock. If a writer before it already wrote its values, it returns that outcome;
//! otherwise it writes everything queued as one group: shape check against the index, one
//! batched read of the touched cells, combine (stored first, then the deltas in arrival order),
//! one synced batch. The writer lock makes each cell's read-modify-write exclusive; the queue
//! lets one fsync acknowledge every caller that arrived while the previous group was syncing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::cell::Cell;
use crate::data::series_store::ValueError;
use super::{MetricStore, codec, corrupt, keys, lock, read_lock, write_lock};
use crate::data::metrics::{Granularity, MetricInfo, MetricStoreError, MetricValue};
use crate::store::kv::KvError;
use crate::store::series::SeriesOp;
use crate::base::fast::{FastMap, FastSet};
use crate::base::self_metrics::labels;

/// One value, ready to merge.
struct Prepared {
    info: MetricInfo,
    /// The keys of the cells it updates (those within retention), minute first.
    cells: Vec<Vec<u8>>,
    /// Whether the minute cell is among them (what `values_stored` counts).
    minute: bool,
    delta: Cell,
    /// How many values of the caller `delta` holds (values of one metric, entity and minute
    /// are combined before the group: see [`MetricStore::prepare`]).
    values: u64,
}

/// One caller's queued write and where its outcome goes.
pub(super) struct Pending {
    values: Vec<Prepared>,
    outcome: Arc<Mutex<Option<Result<(), MetricStoreError>>>>,
}

impl MetricStore {
    pub(super) fn write_values(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        let prepared = self.prepare(values, (self.now_ms)());
        if prepared.is_empty() {
            return Ok(());
        }
        let outcome = Arc::new(Mutex::new(None));
        lock(&self.queue).push(Pending { values: prepared, outcome: outcome.clone() });
        let _writer = lock(&self.writer);
        // Our values were queued before we held the writer lock, so either a writer before us
        // took them (and left the outcome), or the group written now holds them.
        loop {
            if let Some(result) = lock(&outcome).take() {
                return result;
            }
            self.write_queued_group();
        }
    }

    /// Deltas and cell keys of `values`; values whose every cell is past retention are dropped
    /// here (a minute cell past retention counts `values_rejected{reason="expired"}`).
    ///
    /// Values of one metric (same shape), entity and minute update the same cells, so their
    /// deltas are combined here into one, in arrival order, before the group sees them:
    /// combining is associative (the property partial states merged across the cluster rely
    /// on, [`Cell::combine`]), so the cells come out the same, and a group of thousands of
    /// log-MAL values of a few entities reads and combines a few deltas. A delta that does not
    /// combine (another value type) stays a value of its own.
    fn prepare(&self, values: &[MetricValue], now_ms: i64) -> Vec<Prepared> {
        let cutoffs = Granularity::ALL.map(|g| keys::bucket_of(g, now_ms.saturating_sub(self.retention.millis(g))));
        let mut out: Vec<Prepared> = Vec::with_capacity(values.len());
        // The value of `out` each minute cell key went to.
        let mut by_minute: FastMap<Vec<u8>, usize> = FastMap::default();
        let mut expired = 0;
        for value in values {
            let (delta, group) = Cell::from_value(&value.value, value.downsampling, value.timestamp_ms);
            let suffix = keys::cell_suffix(&value.entity, &group);
            let info = MetricInfo {
                name: value.metric.clone(),
                scope: value.entity.scope,
                data_type: value.data_type,
                downsampling: value.downsampling,
            };
            let mut cells = Vec::with_capacity(3);
            let mut minute = false;
            for (granularity, cutoff) in Granularity::ALL.into_iter().zip(cutoffs) {
                let bucket = granularity.from_minute_bucket(value.time_bucket);
                if bucket < cutoff {
                    if granularity == Granularity::Minute {
                        expired += 1;
                    }
                    continue;
                }
                let key = keys::cell_key_with(&value.metric, granularity, bucket, &suffix);
                if granularity == Granularity::Minute {
                    minute = true;
                    if let Some(earlier) = by_minute.get(&key).and_then(|&at| out.get_mut(at))
                        && earlier.info == info
                        && earlier.delta.combine(&delta).is_ok()
                    {
                        earlier.values += 1;
                        break;
                    }
                    by_minute.insert(key.clone(), out.len());
                }
                cells.push(key);
            }
            // Empty also when the value was combined into an earlier one (minute is first).
            if cells.is_empty() {
                continue;
            }
            out.push(Prepared { info, cells, minute, delta, values: 1 });
        }
        if expired > 0 {
            self.telemetry.values_rejected.get_or_create(&labels([("reason", "expired")])).inc_by(expired);
        }
        out
    }

    /// Writes every queued write as one group and leaves each caller its outcome. The caller
    /// holds the writer lock.
    pub(super) fn write_queued_group(&self) {
        let group = std::mem::take(&mut *lock(&self.queue));
        if group.is_empty() {
            return;
        }
        let results = self.commit_group(&group);
        for (pending, result) in group.iter().zip(results) {
            *lock(&pending.outcome) = Some(result);
        }
    }

    fn commit_group(&self, group: &[Pending]) -> Vec<Result<(), MetricStoreError>> {
        // 1. Shapes: a value must match its metric's indexed shape (or the first value of a
        //    metric new in this group).
        let mut new_metrics: BTreeMap<String, MetricInfo> = BTreeMap::new();
        let mut accepted: Vec<Vec<&Prepared>> = Vec::with_capacity(group.len());
        let mut mismatched = 0;
        {
            let index = read_lock(&self.index);
            for pending in group {
                let mut keep = Vec::with_capacity(pending.values.len());
                for value in &pending.values {
                    let name = &value.info.name;
                    match index.get(name).or_else(|| new_metrics.get(name)) {
                        Some(known) if *known == value.info => keep.push(value),
                        Some(_) => mismatched += 1,
                        None => {
                            new_metrics.insert(name.clone(), value.info.clone());
                            keep.push(value);
                        }
                    }
                }
                accepted.push(keep);
            }
        }
        if mismatched > 0 {
            self.telemetry.values_rejected.get_or_create(&labels([("reason", "shape_mismatch")])).inc_by(mismatched);
        }

        // 2. One batched read of every touched cell (a group's values touch few distinct cells:
        //    deduplicated by hash, then sorted for the read).
        let mut touched: Vec<&[u8]> = {
            let mut seen: FastSet<&[u8]> = FastSet::default();
            accepted.iter().flatten().flat_map(|v| v.cells.iter().map(Vec::as_slice)).filter(|key| seen.insert(key)).collect()
        };
        touched.sort_unstable();
        let touched: Vec<Vec<u8>> = touched.into_iter().map(<[u8]>::to_vec).collect();
        let stored = match self.kv.get_many(&touched) {
            Ok(stored) => stored,
            Err(e) => return group.iter().map(|_| Err(MetricStoreError::Kv(copy_kv_error(&e)))).collect(),
        };
        let mut working: FastMap<&[u8], Working> = FastMap::default();
        let mut unreadable: FastMap<&[u8], ValueError> = FastMap::default();
        for (key, value) in touched.iter().zip(stored) {
            if let Some(bytes) = value {
                match codec::decode_cell(&bytes) {
                    Ok(cell) => {
                        working.insert(key.as_slice(), Working { cell, written: false });
                    }
                    Err(detail) => {
                        unreadable.insert(key.as_slice(), detail);
                    }
                }
            }
        }

        // 3. A caller whose values touch an unreadable cell, or a stored cell of another value
        //    type, gets `Corrupt` and none of its values is written.
        let mut results: Vec<Result<(), MetricStoreError>> = Vec::with_capacity(group.len());
        for values in &accepted {
            results.push(check_cells(values, &working, &unreadable));
        }

        // 4. Combine, in arrival order.
        let mut stored_per_metric: BTreeMap<&str, u64> = BTreeMap::new();
        let mut used_new: BTreeSet<&str> = BTreeSet::new();
        for (values, result) in accepted.iter().zip(&results) {
            if result.is_err() {
                continue;
            }
            for value in values {
                for key in &value.cells {
                    match working.get_mut(key.as_slice()) {
                        Some(touched) => {
                            // Checked above against stored cells; deltas of one metric share
                            // its indexed data type.
                            if let Err(e) = touched.cell.combine(&value.delta) {
                                tracing::warn!(metric = %value.info.name, error = %e, "value skipped for one cell");
                            }
                            touched.written = true;
                        }
                        None => {
                            working.insert(key.as_slice(), Working { cell: value.delta.clone(), written: true });
                        }
                    }
                }
                if value.minute {
                    *stored_per_metric.entry(value.info.name.as_str()).or_default() += value.values;
                }
                if new_metrics.contains_key(&value.info.name) {
                    used_new.insert(value.info.name.as_str());
                }
            }
        }

        // 5. One synced batch: changed cells (in key order) and new index records.
        let mut written: Vec<(&[u8], &Cell)> = working.iter().filter(|(_, w)| w.written).map(|(key, w)| (*key, &w.cell)).collect();
        written.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut ops: Vec<SeriesOp> = Vec::with_capacity(written.len() + used_new.len());
        for (key, cell) in &written {
            ops.push(SeriesOp::Put { key: key.to_vec(), value: codec::encode_cell(cell) });
        }
        for name in &used_new {
            if let Some(info) = new_metrics.get(*name) {
                ops.push(SeriesOp::Put { key: keys::index_key(name), value: codec::encode_info(info) });
            }
        }
        if ops.is_empty() {
            return results;
        }
        if let Err(e) = self.kv.write(&ops, true) {
            return group.iter().map(|_| Err(MetricStoreError::Kv(copy_kv_error(&e)))).collect();
        }
        let mut index = write_lock(&self.index);
        for name in used_new {
            if let Some(info) = new_metrics.remove(name) {
                index.insert(name.to_string(), info);
            }
        }
        drop(index);
        self.handoff.mark(written.iter().map(|(key, _)| *key));
        for (metric, count) in stored_per_metric {
            self.telemetry.values_stored.get_or_create(&labels([("metric", metric)])).inc_by(count);
        }
        results
    }
}

/// A touched cell during a group's combine: stored or new, and whether a value of the group
/// changed it (only those are written).
struct Working {
    cell: Cell,
    written: bool,
}

fn check_cells(values: &[&Prepared], working: &FastMap<&[u8], Working>, unreadable: &FastMap<&[u8], ValueError>) -> Result<(), MetricStoreError> {
    for value in values {
        for key in &value.cells {
            if let Some(detail) = unreadable.get(key.as_slice()) {
                return Err(corrupt(key, detail.clone()));
            }
            if let Some(stored) = working.get(key.as_slice()) {
                stored.cell.check_combine(&value.delta).map_err(|e| corrupt(key, e.to_string()))?;
            }
        }
    }
    Ok(())
}

/// The same failure for another caller of the group (`KvError` is not `Clone`).
fn copy_kv_error(error: &KvError) -> KvError {
    match error {
        KvError::Read { kind, detail } => KvError::Read { kind: *kind, detail: detail.clone() },
        KvError::Write { kind, detail } => KvError::Write { kind: *kind, detail: detail.clone() },
        KvError::Open { kind, detail } => KvError::Open { kind: *kind, detail: detail.clone() },
    }
}
