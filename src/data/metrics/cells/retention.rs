//! Retention: cells older than their granularity's retention are deleted by a worker.
//!
//! A cell of bucket `b` expires once `b` ends before `now − retention(granularity)`, i.e. when
//! `b` is before the bucket holding that instant. Because time comes before the entity in the
//! key, one metric's expired cells at one granularity are one key range `[series start, cutoff
//! bucket)`: one delete-range, issued only when a one-key probe finds something in it (so idle
//! ticks leave no range tombstones behind). Each unit of work handles at most
//! [`METRICS_PER_UNIT`] metrics; a round over every metric runs every [`RETENTION_INTERVAL`].
//! The write path refuses cells past the same cutoff, so expired data is never written back.

use std::time::Duration;

use crate::data::series_store::{self, Expiring, RetentionNames};
use super::{MetricStore, keys, read_lock};
use crate::data::metrics::{Granularity, MetricStoreError};
use crate::store::series::SeriesOp;

/// How often a retention round starts.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

/// Metrics handled per unit of work (three probes and at most three delete-ranges each).
pub const METRICS_PER_UNIT: usize = 64;

/// What one unit of retention did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpirePage {
    /// Delete-ranges issued (one per metric and granularity with expired cells).
    pub ranges_deleted: usize,
    /// The last metric handled, when more remain: the next page starts after it.
    pub next: Option<String>,
}

impl MetricStore {
    /// Deletes the expired cells of up to `max_metrics` metrics, in name order, starting after
    /// `after`, as of `now_ms`.
    pub fn expire_page(&self, now_ms: i64, after: Option<&str>, max_metrics: usize) -> Result<ExpirePage, MetricStoreError> {
        let metrics: Vec<String> = {
            let index = read_lock(&self.index);
            let remaining: Box<dyn Iterator<Item = &String>> = match after {
                Some(after) => Box::new(index.keys().filter(move |name| name.as_str() > after)),
                None => Box::new(index.keys()),
            };
            remaining.take(max_metrics.saturating_add(1)).cloned().collect()
        };
        let more = metrics.len() > max_metrics;
        let page = &metrics[..metrics.len().min(max_metrics)];
        let mut ops = Vec::new();
        for metric in page {
            for granularity in Granularity::ALL {
                let cutoff = keys::bucket_of(granularity, now_ms.saturating_sub(self.retention.millis(granularity)));
                let start = keys::series_prefix(metric, granularity);
                let end = keys::bucket_key(metric, granularity, cutoff);
                if !self.kv.scan_range(&start, &end, 1)?.is_empty() {
                    ops.push(SeriesOp::DeleteRange { start, end });
                }
            }
        }
        if !ops.is_empty() {
            // Not synced: a deletion lost in a crash is simply done again by the next round.
            self.kv.write(&ops, false)?;
        }
        Ok(ExpirePage { ranges_deleted: ops.len(), next: if more { page.last().cloned() } else { None } })
    }
}

/// Runs retention rounds: one page of metrics ([`METRICS_PER_UNIT`]) per unit, a round every
/// `interval`.
pub type RetentionWorker = series_store::RetentionWorker<MetricStore>;

impl Expiring for MetricStore {
    /// The last metric handled.
    type Cursor = String;
    type Error = MetricStoreError;
    const NAMES: RetentionNames =
        RetentionNames { worker: "metric-retention", what: "metric", deleted: "expired metric cells deleted" };

    fn expire_unit(&self, after: Option<String>) -> Result<(usize, Option<String>), MetricStoreError> {
        let page = self.expire_page((self.now_ms)(), after.as_deref(), METRICS_PER_UNIT)?;
        Ok((page.ranges_deleted, page.next))
    }
}
