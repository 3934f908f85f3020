//! The embedded log store: the one writer of kept logs, over the `logs` key space of the node's
//! database (RocksDB column family `logs`, never mixed with rule entries or metric cells).
//!
//! Logs are keyed by `(timestamp, sequence)` ([`keys`]): time first, so a time-range read is one
//! key range and retention one delete-range; the sequence is this node's arrival counter, kept in
//! a record written in the same synced batch as the logs, so it never repeats after a restart.
//! Values carry a format version ([`codec`]).
//!
//! Writes go through a group commit ([`write`]): callers queue their encoded logs, one of them
//! at a time becomes the writer, assigns sequences to everything queued and writes one synced
//! batch; every caller returns once its logs are durable.
//!
//! Reads ([`read`]) scan only the asked time range: oldest first is one forward scan stopped at
//! the limit; newest first walks back from the end in windows that double in width (the key
//! space has no reverse iterator), so a narrow page of a busy store reads about the page, not
//! the range. A read filtered on a service walks that service's index keys instead, so a quiet
//! service among busy ones costs its own logs (`docs/logs.md` has the measurement). Names are
//! checked on the value's first bytes before the rest is decoded. Retention is a worker
//! ([`retention`]).

pub mod codec;
pub mod keys;
mod read;
pub mod retention;
mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::data::logs::MAX_LIMIT;
use crate::data::logs::{KeptLog, LogFilter, LogReader, LogStoreError, LogWriter, StoredLog};
use crate::store::series::SeriesKv;
use crate::base::self_metrics::SelfMetrics;

pub use crate::data::series_store::NowMs;
use crate::base::clock::wall_clock_ms;
use crate::data::series_store::lock;

/// SkyWalking's record TTL (`recordDataTTL`, 3 days): how long logs are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3 * 24 * 3600);

/// The embedded log store.
pub struct LogStore {
    kv: Arc<dyn SeriesKv>,
    retention: Duration,
    telemetry: Arc<SelfMetrics>,
    now_ms: NowMs,
    /// Encoded logs waiting for the writer.
    queue: Mutex<Vec<write::Pending>>,
    /// The next sequence to assign; held by the one caller writing a group.
    writer: Mutex<u64>,
}

impl LogStore {
    /// Opens the store on `kv`, reading where the sequence goes on.
    pub fn open(kv: Arc<dyn SeriesKv>, retention: Duration, telemetry: Arc<SelfMetrics>) -> Result<LogStore, LogStoreError> {
        let next_sequence = match kv.get_many(&[keys::SEQUENCE_KEY.to_vec()])?.pop().flatten() {
            Some(value) => codec::decode_sequence(&value).map_err(|detail| corrupt(keys::SEQUENCE_KEY, detail))?,
            None => 0,
        };
        Ok(LogStore {
            kv,
            retention,
            telemetry,
            now_ms: Arc::new(wall_clock_ms),
            queue: Mutex::new(Vec::new()),
            writer: Mutex::new(next_sequence),
        })
    }

    /// The same store, reading time from `now_ms` (tests).
    pub fn with_clock(mut self, now_ms: NowMs) -> LogStore {
        self.now_ms = now_ms;
        self
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// The oldest timestamp still kept as of `now_ms`: logs before it are expired.
    pub(crate) fn cutoff_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX))
    }
}

impl LogWriter for LogStore {
    fn write(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        self.write_logs(logs)
    }
}

impl LogReader for LogStore {
    fn query(&self, filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError> {
        self.read(filter)
    }
}

pub(crate) fn corrupt(key: &[u8], detail: impl std::fmt::Display) -> LogStoreError {
    LogStoreError::Corrupt { key: key.escape_ascii().to_string(), detail: detail.to_string() }
}

#[cfg(test)]
mod tests;
