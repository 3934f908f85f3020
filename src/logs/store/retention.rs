//! Retention: logs older than `storage.retention.logs` are deleted by a worker.
//!
//! Time leads the key, so every expired log is in one key range `[first log key, cutoff)`: one
//! delete-range, issued only when a one-key probe finds something in it (idle rounds leave no
//! range tombstones behind). A round runs every [`RETENTION_INTERVAL`]; the write path refuses
//! logs already past the same cutoff, so expired logs are never written back.

use std::sync::Arc;
use std::time::Duration;

use super::{LogStore, keys};
use crate::logs::LogStoreError;
use crate::store::series::SeriesOp;
use crate::worker::{Worker, WorkerState};

/// How often a retention round runs.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

impl LogStore {
    /// Deletes every log older than the retention as of `now_ms`; whether there was any.
    pub fn expire(&self, now_ms: i64) -> Result<bool, LogStoreError> {
        let start = keys::logs_start();
        let end = keys::log_key(keys::first_of(self.cutoff_ms(now_ms)));
        if self.kv.scan_range(&start, &end, 1)?.is_empty() {
            return Ok(false);
        }
        // Not synced: a deletion lost in a crash is simply done again by the next round.
        self.kv.write(&[SeriesOp::DeleteRange { start, end }], false)?;
        Ok(true)
    }
}

/// Runs a retention round every `interval`.
pub struct LogRetentionWorker {
    store: Arc<LogStore>,
    interval: Duration,
}

impl LogRetentionWorker {
    pub fn new(store: Arc<LogStore>, interval: Duration) -> LogRetentionWorker {
        LogRetentionWorker { store, interval }
    }
}

#[async_trait::async_trait]
impl Worker for LogRetentionWorker {
    fn name(&self) -> &'static str {
        "log-retention"
    }

    async fn work(&mut self) -> WorkerState {
        let store = self.store.clone();
        let now_ms = (store.now_ms)();
        match tokio::task::spawn_blocking(move || store.expire(now_ms)).await {
            Ok(Ok(true)) => tracing::debug!("expired logs deleted"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "log retention failed; retrying next round"),
            Err(e) => tracing::error!(error = %e, "log retention task failed"),
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::time::sleep(self.interval).await;
        WorkerState::Busy
    }
}
