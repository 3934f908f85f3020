//! Flushing: pending groups become blocks.
//!
//! A flush takes the pending groups of the slices [`super::buffer::due`] names, sorts their
//! rows by service and cursor, cuts each service's rows of a slice into blocks of at most
//! `block_bytes` raw bytes (4 MiB), compresses each (zstd) and indexes it ([`super::index`]), and
//! writes the blocks, their metas and the deletion of the groups' keys in one batch. The batch
//! is not synced: if it is lost in a crash, so is the deletion, and the groups are flushed again
//! after the restart. One flush runs at a time.
//!
//! Flushes run on the `log-flush` worker every [`FLUSH_INTERVAL`] (closed or old slices), and
//! at once when a write takes the pending bytes past the bound (the writer wakes the worker).
//! Past twice the bound the writer flushes on its own thread, after its write is acknowledged:
//! the memory a store holds is bounded whether or not the worker keeps up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::buffer::Chunk;
use super::index::{IndexBuilder, Term};
use super::{LogStore, block, codec, corrupt, keys, lock};
use crate::base::self_metrics::{LabelSet, labels};
use crate::base::worker::{Worker, WorkerState};
use crate::data::logs::{LogCursor, LogStoreError};
use crate::data::series_store::ValueError;
use crate::store::series::SeriesOp;

/// How often the worker looks for due slices.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// What a flush reuses from block to block: the compressor and the index builder.
pub struct Flusher {
    compressor: zstd::bulk::Compressor<'static>,
    index: IndexBuilder,
}

impl Flusher {
    pub fn new() -> Result<Flusher, std::io::Error> {
        Ok(Flusher { compressor: zstd::bulk::Compressor::new(block::ZSTD_LEVEL)?, index: IndexBuilder::default() })
    }

    /// The block and meta puts for one service's rows of one slice, in cursor order.
    pub fn blocks(&mut self, slice: i64, service: &str, rows: &[(LogCursor, &[u8])], block_bytes: usize, ops: &mut Vec<SeriesOp>) -> Result<usize, FlushError> {
        let mut written = 0;
        let mut start = 0;
        while start < rows.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < rows.len() && (end == start || bytes + block::ROW_HEADER + rows[end].1.len() <= block_bytes) {
                bytes += block::ROW_HEADER + rows[end].1.len();
                end += 1;
            }
            let part = &rows[start..end];
            let mut raw = Vec::with_capacity(bytes);
            for (cursor, value) in part {
                block::push_row(&mut raw, *cursor, value);
                self.index_log(value).map_err(|detail| FlushError::Row { cursor: *cursor, detail })?;
            }
            let (first, last) = (part[0].0, part[part.len() - 1].0);
            let meta = block::Meta {
                count: u32::try_from(part.len()).unwrap_or(u32::MAX),
                first,
                last,
                raw_bytes: u32::try_from(raw.len()).unwrap_or(u32::MAX),
                index: self.index.finish(),
            };
            let value = block::encode_block(&mut self.compressor, &raw).map_err(FlushError::Compress)?;
            ops.push(SeriesOp::Put { key: keys::block_key(keys::META_PREFIX, slice, service, first.sequence), value: meta.encode() });
            ops.push(SeriesOp::Put { key: keys::block_key(keys::BLOCK_PREFIX, slice, service, first.sequence), value });
            written += 1;
            start = end;
        }
        Ok(written)
    }

    fn index_log(&mut self, value: &[u8]) -> Result<(), ValueError> {
        let parts = codec::index_parts(value)?;
        self.index.add_content(parts.content);
        self.index.add_term(Term::Instance(parts.instance));
        self.index.add_term(Term::Endpoint(parts.endpoint));
        for (key, value) in codec::tag_pairs(parts.tags, parts.tag_count) {
            self.index.add_term(Term::Tag(key, value));
        }
        Ok(())
    }
}

/// Why a flush did not happen.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("pending log {cursor:?} is unreadable: {detail}")]
    Row { cursor: LogCursor, detail: ValueError },
    #[error("compressing a block: {0}")]
    Compress(std::io::Error),
}

/// Sorts rows by `(slice, service)` (the slice of each row's own timestamp), each group in
/// cursor order. Rows are borrowed from `row_sets`; a row that does not read is returned with
/// the cursor of the last row that did.
pub fn group_rows<'a>(row_sets: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<((i64, &'a str), Vec<(LogCursor, &'a [u8])>)>, (LogCursor, ValueError)> {
    let mut groups: HashMap<(i64, &'a [u8]), Vec<(LogCursor, &'a [u8])>> = HashMap::new();
    let mut last = LogCursor { timestamp_ms: 0, sequence: 0 };
    for rows in row_sets {
        for row in block::rows(rows) {
            let row = row.map_err(|e| (last, e))?;
            last = row.cursor;
            let service = codec::service_bytes(row.value).map_err(|e| (row.cursor, e))?;
            groups.entry((keys::slice_of(row.cursor.timestamp_ms), service)).or_default().push((row.cursor, row.value));
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for ((slice, service), rows) in groups {
        let name = std::str::from_utf8(service).map_err(|_| (rows[0].0, ValueError::NotUtf8))?;
        out.push(((slice, name), rows));
    }
    for (_, rows) in &mut out {
        rows.sort_unstable_by_key(|(cursor, _)| *cursor);
    }
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The block and meta puts of `groups` (from [`group_rows`]); how many blocks.
pub fn block_ops(flusher: &mut Flusher, groups: &[((i64, &str), Vec<(LogCursor, &[u8])>)], block_bytes: usize, ops: &mut Vec<SeriesOp>) -> Result<usize, LogStoreError> {
    let mut blocks = 0;
    for ((slice, service), rows) in groups {
        blocks += flusher.blocks(*slice, service, rows, block_bytes, ops).map_err(|e| corrupt(&keys::slice_start(keys::PENDING_PREFIX, *slice), e))?;
    }
    Ok(blocks)
}

impl LogStore {
    /// Flushes the slices that are due ([`super::buffer::due`]); how many blocks were written.
    pub fn flush_due(&self) -> Result<usize, LogStoreError> {
        let now = (self.now_ms)();
        let slices = super::buffer::due(&lock(&self.buffer).states(), now, &self.limits);
        self.flush_slices(&slices)
    }

    /// Flushes every pending log (tests, benchmarks); how many blocks were written.
    pub fn flush_all(&self) -> Result<usize, LogStoreError> {
        let slices: Vec<i64> = lock(&self.buffer).states().iter().map(|s| s.slice).collect();
        self.flush_slices(&slices)
    }

    /// After a write: past the bound, wakes the worker; past twice the bound (the worker is
    /// behind, or there is none), flushes here unless a flush runs.
    pub(super) fn flush_if_full(&self) {
        let bytes = lock(&self.buffer).bytes();
        if bytes <= self.limits.max_bytes {
            return;
        }
        self.flush_wanted.notify_one();
        if bytes <= self.limits.max_bytes.saturating_mul(2) {
            return;
        }
        let Ok(flusher) = self.flusher.try_lock() else { return };
        drop(flusher);
        if let Err(e) = self.flush_due() {
            tracing::warn!(error = %e, "flushing pending logs failed; they stay pending");
        }
    }

    /// Flushes so far: how many, the blocks they wrote, and the CPU seconds of the threads
    /// that ran them.
    pub fn flush_stats(&self) -> FlushStats {
        *lock(&self.flush_stats)
    }

    fn flush_slices(&self, slices: &[i64]) -> Result<usize, LogStoreError> {
        if slices.is_empty() {
            return Ok(0);
        }
        let mut flusher = lock(&self.flusher);
        let taken = lock(&self.buffer).take(slices);
        if taken.is_empty() {
            return Ok(0);
        }
        let cpu_before = crate::base::clock::thread_cpu_seconds();
        let written = self.write_blocks(&mut flusher, &taken);
        if let (Some(after), Some(before)) = (crate::base::clock::thread_cpu_seconds(), cpu_before) {
            let mut stats = lock(&self.flush_stats);
            stats.flushes += 1;
            stats.blocks += written.as_ref().map_or(0, |b| *b as u64);
            stats.cpu_seconds += after - before;
        }
        match written {
            Ok(blocks) => {
                let mut buffer = lock(&self.buffer);
                buffer.flushed(&taken);
                self.telemetry.log_pending_bytes.get_or_create(&LabelSet::new()).set(buffer.bytes() as i64);
                Ok(blocks)
            }
            Err(e) => {
                lock(&self.buffer).restore(taken, (self.now_ms)());
                Err(e)
            }
        }
    }

    fn write_blocks(&self, flusher: &mut Flusher, taken: &[Arc<Chunk>]) -> Result<usize, LogStoreError> {
        let groups = group_rows(taken.iter().map(|c| c.rows())).map_err(|(cursor, detail)| {
            corrupt(&keys::pending_key(keys::slice_of(cursor.timestamp_ms), cursor.sequence), detail)
        })?;
        let mut ops = Vec::new();
        let blocks = block_ops(flusher, &groups, self.limits.block_bytes, &mut ops)?;
        ops.extend(taken.iter().map(|c| SeriesOp::Delete { key: c.key.clone() }));
        self.kv.write(&ops, false)?;
        let logs: usize = taken.iter().map(|c| c.count).sum();
        self.telemetry.log_blocks_written.get_or_create(&labels([("source", "flush")])).inc_by(blocks as u64);
        tracing::debug!(logs, blocks, "pending logs flushed into blocks");
        Ok(blocks)
    }
}

/// What flushes did so far ([`LogStore::flush_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FlushStats {
    pub flushes: u64,
    pub blocks: u64,
    pub cpu_seconds: f64,
}

/// Flushes due slices every [`FLUSH_INTERVAL`], and at once when a writer passes the bound.
pub struct LogFlushWorker {
    store: Arc<LogStore>,
}

impl LogFlushWorker {
    pub fn new(store: Arc<LogStore>) -> LogFlushWorker {
        LogFlushWorker { store }
    }
}

#[async_trait::async_trait]
impl Worker for LogFlushWorker {
    fn name(&self) -> &'static str {
        "log-flush"
    }

    async fn work(&mut self) -> WorkerState {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.flush_due()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "flushing pending logs failed; they stay pending and are retried"),
            Err(e) => tracing::error!(error = %e, "log flush task failed"),
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let wanted = self.store.flush_wanted.clone();
        let _ = tokio::time::timeout(FLUSH_INTERVAL, wanted.notified()).await;
        WorkerState::Busy
    }
}
