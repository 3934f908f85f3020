//! Retention: logs older than `storage.retention.logs` are deleted by a worker.
//!
//! Time leads the key, so every expired log is in one key range `[first log key, cutoff)`, and
//! every expired index key of a service in one range of that service's keys: one delete-range
//! each, issued only when a one-key probe finds something in it (idle rounds leave no range
//! tombstones behind), all in one batch so a log and its index key go together. The services
//! are found by seeking from one service's keys to the next. A round runs every [`RETENTION_INTERVAL`]; the write path refuses
//! logs already past the same cutoff, so expired logs are never written back.

use std::time::Duration;

use super::{LogStore, keys};
use crate::data::logs::LogStoreError;
use crate::data::series_store::{self, Expiring, RetentionNames};
use crate::store::series::{SeriesOp, Visit};

/// How often a retention round runs.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

impl LogStore {
    /// Deletes every log (and its index key) older than the retention as of `now_ms`; whether
    /// there was any.
    pub fn expire(&self, now_ms: i64) -> Result<bool, LogStoreError> {
        let cutoff = keys::first_of(self.cutoff_ms(now_ms));
        let mut ops = Vec::new();
        let start = keys::logs_start();
        let end = keys::log_key(cutoff);
        if !self.kv.scan_range(&start, &end, 1)?.is_empty() {
            ops.push(SeriesOp::DeleteRange { start, end });
        }
        for prefix in self.indexed_services()? {
            let end = {
                let mut end = prefix.clone();
                end.extend_from_slice(&keys::log_key(cutoff)[1..]);
                end
            };
            if !self.kv.scan_range(&prefix, &end, 1)?.is_empty() {
                ops.push(SeriesOp::DeleteRange { start: prefix, end });
            }
        }
        if ops.is_empty() {
            return Ok(false);
        }
        // Not synced: a deletion lost in a crash is simply done again by the next round.
        self.kv.write(&ops, false)?;
        Ok(true)
    }

    /// The index prefix of every service with index keys: one seek per service.
    fn indexed_services(&self) -> Result<Vec<Vec<u8>>, LogStoreError> {
        let (start, end) = keys::index_range();
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        let mut failure = None;
        self.kv.visit_range(&start, &end, &mut |key, _| match keys::decode_service_key(key) {
            Some((_, prefix_len)) => {
                let prefix = key[..prefix_len].to_vec();
                let next = keys::prefix_end(&prefix);
                prefixes.push(prefix);
                match next {
                    Some(next) => Visit::Seek(next),
                    None => Visit::Stop,
                }
            }
            None => {
                failure = Some(super::corrupt(key, "not a service index key"));
                Visit::Stop
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(prefixes),
        }
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
