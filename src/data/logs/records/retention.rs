//! Retention: logs older than `storage.retention.logs` are deleted by a worker.
//!
//! Slices lead the keys of blocks, metas and pending groups, so every slice that ended before
//! the cutoff is one key range of each: one delete-range each, issued only when a one-key probe
//! finds something in it (idle rounds leave no range tombstones behind), all in one batch. The
//! pending groups of those slices leave memory with them. A slice goes whole, once its last
//! millisecond is past the cutoff: a log outlives the retention by at most a slice (a minute)
//! plus the interval between rounds. A round runs every [`RETENTION_INTERVAL`]; the write path
//! refuses logs already past the same cutoff, so expired logs are never written back.

use std::time::Duration;

use super::{LogStore, keys, lock};
use crate::data::logs::LogStoreError;
use crate::data::series_store::{self, Expiring, RetentionNames};
use crate::store::series::SeriesOp;

/// How often a retention round runs.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

impl LogStore {
    /// Deletes every slice (blocks, metas, pending groups) that ended before the retention's
    /// cutoff as of `now_ms`; whether there was any.
    pub fn expire(&self, now_ms: i64) -> Result<bool, LogStoreError> {
        // Slices before this one ended at or before the cutoff.
        let first_kept = keys::slice_of(self.cutoff_ms(now_ms));
        let mut ops = Vec::new();
        for prefix in [keys::META_PREFIX, keys::BLOCK_PREFIX, keys::PENDING_PREFIX] {
            let start = vec![prefix];
            let end = keys::slice_start(prefix, first_kept);
            if !self.kv.scan_range(&start, &end, 1)?.is_empty() {
                ops.push(SeriesOp::DeleteRange { start, end });
            }
        }
        if ops.is_empty() {
            return Ok(false);
        }
        // Not synced: a deletion lost in a crash is simply done again by the next round.
        self.kv.write(&ops, false)?;
        lock(&self.buffer).drop_before(first_kept);
        Ok(true)
    }
}

/// Runs a retention round every `interval` (a round is one unit).
pub type LogRetentionWorker = series_store::RetentionWorker<LogStore>;

impl Expiring for LogStore {
    type Cursor = ();
    type Error = LogStoreError;
    const NAMES: RetentionNames = RetentionNames { worker: "log-retention", what: "log", deleted: "expired logs deleted" };

    fn expire_unit(&self, _round: Option<()>) -> Result<(usize, Option<()>), LogStoreError> {
        Ok((usize::from(self.expire((self.now_ms)())?), None))
    }
}
