//! The embedded log store: the one writer of kept logs, over the `logs` key space of the node's
//! database (RocksDB column family `logs`, never mixed with rule entries or metric cells).
//!
//! Logs are stored in **blocks** (format 2, [`keys`]): the logs of one service whose own
//! timestamps fall in one minute (a *slice*), compressed with zstd, each with a small **meta**
//! holding its count, its cursor range and an index of its contents ([`index`]: the trigrams
//! of its logs' contents and the hashes of their instances, endpoints and tags). A read scans
//! the metas of its range and decompresses only the blocks that may hold a match ([`read`]), so
//! a rare keyword or tag costs the metas of the range plus the few blocks that hold it.
//!
//! Writes go through a group commit ([`write`]): callers queue their encoded logs, one of them
//! at a time becomes the writer, assigns sequences to everything queued and writes one synced
//! batch of **pending groups** (the rows of the group, per slice; a large group's parts of many
//! logs of one service go straight to blocks); every caller returns once its logs are durable. Pending groups are also kept in memory ([`buffer`]) and read from
//! there, and a **flush** turns the groups of a slice into blocks once the slice is over, or
//! when the pending bytes pass a bound ([`flush`]). A log's **cursor** `(timestamp, sequence)`
//! never changes; the sequence is this node's arrival counter, kept in a record written in the
//! same synced batch as the logs, so it never repeats after a restart.
//!
//! At open, a store written by an older build (format 1, one key per log: [`v1`]) is converted
//! into blocks ([`migrate`]), and the pending groups are read back into memory. Retention is a
//! worker ([`retention`]).

pub mod block;
pub mod buffer;
pub mod codec;
pub mod flush;
pub mod index;
pub mod keys;
pub mod migrate;
pub(crate) mod read;
pub mod retention;
pub mod v1;
pub(crate) mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::data::logs::MAX_LIMIT;
use crate::data::logs::{KeptLog, LogFilter, LogReader, LogStoreError, LogWriter, StoredLog};
use crate::store::series::{SeriesKv, Visit};
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
    queue: Mutex<Vec<write::Pending<write::Encoded>>>,
    /// The next sequence to assign; held by the one caller writing a group.
    writer: Mutex<u64>,
    /// Pending groups in memory.
    buffer: Mutex<buffer::Buffer>,
    /// Held by the one flush (or migration) running.
    flusher: Mutex<flush::Flusher>,
    /// The writer's own, for the parts of a group written as blocks at once.
    block_writer: Mutex<flush::Flusher>,
    limits: buffer::FlushLimits,
    /// Wakes the flush worker: the pending bytes passed the bound.
    flush_wanted: Arc<tokio::sync::Notify>,
    flush_stats: Mutex<flush::FlushStats>,
}

impl LogStore {
    /// Opens the store on `kv`: converts logs of the first format, reads the pending groups
    /// back into memory and where the sequence goes on.
    pub fn open(kv: Arc<dyn SeriesKv>, retention: Duration, telemetry: Arc<SelfMetrics>) -> Result<LogStore, LogStoreError> {
        LogStore::open_migrating(kv, retention, telemetry, migrate::MIGRATION_CHUNK)
    }

    /// [`LogStore::open`], converting the first format `chunk` logs per synced batch.
    pub fn open_migrating(kv: Arc<dyn SeriesKv>, retention: Duration, telemetry: Arc<SelfMetrics>, chunk: usize) -> Result<LogStore, LogStoreError> {
        let next_sequence = read_sequence(kv.as_ref())?;
        let new_flusher = || flush::Flusher::new().map_err(|e| corrupt(b"", format!("no zstd compressor: {e}")));
        let (flusher, block_writer) = (new_flusher()?, new_flusher()?);
        let store = LogStore {
            kv,
            retention,
            telemetry,
            now_ms: Arc::new(wall_clock_ms),
            queue: Mutex::new(Vec::new()),
            writer: Mutex::new(next_sequence),
            buffer: Mutex::new(buffer::Buffer::default()),
            flusher: Mutex::new(flusher),
            block_writer: Mutex::new(block_writer),
            limits: buffer::FlushLimits::default(),
            flush_wanted: Arc::new(tokio::sync::Notify::new()),
            flush_stats: Mutex::new(flush::FlushStats::default()),
        };
        store.migrate_v1(chunk.max(1))?;
        store.replay()?;
        let pending = store.pending_bytes();
        store.telemetry.log_pending_bytes.get_or_create(&crate::base::self_metrics::LabelSet::new()).set(pending as i64);
        Ok(store)
    }

    /// The same store, reading time from `now_ms` (tests).
    pub fn with_clock(mut self, now_ms: NowMs) -> LogStore {
        self.now_ms = now_ms;
        self
    }

    /// The same store, flushing by `limits` (tests, benchmarks).
    pub fn with_limits(mut self, limits: buffer::FlushLimits) -> LogStore {
        self.limits = limits;
        self
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Bytes of logs pending in memory (not yet in blocks).
    pub fn pending_bytes(&self) -> usize {
        lock(&self.buffer).bytes()
    }

    /// The oldest timestamp still kept as of `now_ms`: logs before it are expired.
    pub(crate) fn cutoff_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX))
    }

    /// Reads every pending group back into memory (at open).
    fn replay(&self) -> Result<(), LogStoreError> {
        let (start, end) = keys::all_of(keys::PENDING_PREFIX);
        let now = (self.now_ms)();
        let mut buffer = lock(&self.buffer);
        let mut failure = None;
        self.kv.visit_range(&start, &end, &mut |key, value| {
            let chunk = keys::decode_pending_key(key)
                .ok_or_else(|| corrupt(key, "not a pending key"))
                .and_then(|(slice, _)| buffer::Chunk::new(key.to_vec(), slice, value.to_vec()).map_err(|detail| corrupt(key, detail)));
            match chunk {
                Ok(Some(chunk)) => {
                    buffer.add(chunk, now);
                    Visit::Next
                }
                Ok(None) => Visit::Next,
                Err(e) => {
                    failure = Some(e);
                    Visit::Stop
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
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

/// Where this node's sequence goes on: the sequence record (both formats keep it), or 0.
pub(crate) fn read_sequence(kv: &dyn SeriesKv) -> Result<u64, LogStoreError> {
    match kv.get_many(&[keys::SEQUENCE_KEY.to_vec()])?.pop().flatten() {
        Some(value) => codec::decode_sequence(&value).map_err(|detail| corrupt(keys::SEQUENCE_KEY, detail)),
        None => Ok(0),
    }
}

pub(crate) fn corrupt(key: &[u8], detail: impl std::fmt::Display) -> LogStoreError {
    LogStoreError::Corrupt { key: key.escape_ascii().to_string(), detail: detail.to_string() }
}

#[cfg(test)]
mod tests;
