//! The write path: encode on the caller's thread, then a group commit by one writer at a time.
//!
//! A caller encodes its logs (no lock held), queues them and takes the writer lock. If a writer
//! before it already wrote its logs, it returns that outcome; otherwise it writes everything
//! queued as one group: sequences assigned in arrival order, one synced batch carrying one
//! pending group per slice the logs fall in (usually one: `w | slice | first sequence`, the
//! rows) and the new sequence record. The queue lets one fsync acknowledge every caller that
//! arrived while the previous group was syncing. Once synced, the groups join the store's
//! pending logs in memory ([`super::buffer`]), where reads find them until a flush turns them
//! into blocks. Logs already past retention are not written (counted
//! `logs_stored{result="expired"}`): the retention worker would delete them anyway.
//!
//! A large group (a backlog the LAL threads take at once, a big request) has parts of one slice
//! and service with many logs. Each part of at least `FlushLimits::direct_bytes` raw bytes is
//! written in the same synced batch as blocks and metas, exactly as a flush would make them,
//! instead of as pending rows: its logs are written once, compressed, instead of raw and again
//! by the flush.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::buffer::Chunk;
use super::{LogStore, block, codec, keys, lock};
use crate::base::self_metrics::{LabelSet, labels};
use crate::data::logs::{KeptLog, LogCursor, LogStoreError};
use crate::store::kv::KvError;
use crate::store::series::SeriesOp;

/// One caller's queued write (`logs`, encoded) and where its outcome goes.
pub(crate) struct Pending<L> {
    pub(crate) logs: L,
    outcome: Arc<Mutex<Option<Result<(), KvError>>>>,
}

/// The group commit both formats' writers share: queues `logs`, and either finds them written
/// by the writer before (its outcome), or takes the writer lock and writes everything queued
/// with `write_group` (the next sequence, the group), answering every caller in it.
pub(crate) fn group_commit<L>(
    queue: &Mutex<Vec<Pending<L>>>,
    writer: &Mutex<u64>,
    logs: L,
    write_group: impl FnOnce(&mut u64, &[Pending<L>]) -> Result<(), KvError>,
) -> Result<(), LogStoreError> {
    let outcome = Arc::new(Mutex::new(None));
    lock(queue).push(Pending { logs, outcome: outcome.clone() });
    let mut next_sequence = lock(writer);
    if lock(&outcome).is_none() {
        let group = std::mem::take(&mut *lock(queue));
        let result = write_group(&mut next_sequence, &group);
        for pending in &group {
            *lock(&pending.outcome) = Some(result.as_ref().copied().map_err(copy_kv_error));
        }
    }
    drop(next_sequence);
    let taken = lock(&outcome).take();
    match taken {
        Some(result) => result.map_err(LogStoreError::Kv),
        // Every queued write is answered by the group that takes it; ours was taken.
        None => Err(LogStoreError::Kv(KvError::Write {
            kind: crate::store::kv::KvErrorKind::Io,
            detail: "the log write group ended without an outcome".into(),
        })),
    }
}

/// What a format-2 caller queues: the encoded values of its logs one after the other in one
/// buffer (one allocation for a group of thousands), and each log's timestamp and bytes there,
/// in its order.
pub(super) struct Encoded {
    logs: Vec<(i64, std::ops::Range<usize>)>,
    bytes: Vec<u8>,
}

impl Encoded {
    fn len(&self) -> usize {
        self.logs.len()
    }

    fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = (i64, &[u8])> {
        self.logs.iter().filter_map(|(timestamp_ms, range)| Some((*timestamp_ms, self.bytes.get(range.clone())?)))
    }
}

impl LogStore {
    pub(super) fn write_logs(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        let cutoff = self.cutoff_ms((self.now_ms)());
        let kept = || logs.iter().filter(|log| log.record.timestamp_ms >= cutoff);
        let mut encoded = Encoded { logs: Vec::with_capacity(logs.len()), bytes: Vec::with_capacity(kept().map(codec::encoded_bound).sum()) };
        for log in kept() {
            let start = encoded.bytes.len();
            codec::encode_log_into(&mut encoded.bytes, log);
            encoded.logs.push((log.record.timestamp_ms, start..encoded.bytes.len()));
        }
        let expired = logs.len() - encoded.len();
        if expired > 0 {
            self.telemetry.logs_stored.get_or_create(&labels([("result", "expired")])).inc_by(expired as u64);
        }
        if encoded.is_empty() {
            return Ok(());
        }
        let result = group_commit(&self.queue, &self.writer, encoded, |next, group| self.write_group(next, group));
        if result.is_ok() {
            self.flush_if_full();
        }
        result
    }

    /// Writes `group` in one synced batch, sequences from `next_sequence` on: each part of one
    /// slice and service with at least `direct_bytes` raw bytes as blocks (compressed and
    /// indexed as a flush makes them), the other rows as pending groups, which then join the
    /// buffer.
    fn write_group(&self, next_sequence: &mut u64, group: &[Pending<Encoded>]) -> Result<(), KvError> {
        let count: usize = group.iter().map(|p| p.logs.len()).sum();
        let mut sequence = *next_sequence;
        let mut rows: Vec<GroupRow<'_>> = Vec::with_capacity(count);
        for pending in group {
            for (timestamp_ms, value) in pending.logs.iter() {
                let cursor = LogCursor { timestamp_ms, sequence };
                // Values encoded just now always read; one that does not stays pending.
                let service = codec::service_bytes(value).ok().and_then(|s| std::str::from_utf8(s).ok());
                rows.push(GroupRow { slice: keys::slice_of(timestamp_ms), service, cursor, value });
                sequence += 1;
            }
        }
        let mut ops: Vec<SeriesOp> = Vec::new();
        let (direct, blocks) = self.direct_blocks(&rows, &mut ops);
        let mut chunks = pending_chunks(rows.iter().zip(&direct).filter(|(_, direct)| !**direct).map(|(row, _)| row));
        let block_puts = ops.len();
        ops.extend(chunks.iter_mut().map(|chunk| SeriesOp::Put { key: chunk.key.clone(), value: std::mem::take(&mut chunk.value) }));
        ops.push(SeriesOp::Put { key: keys::SEQUENCE_KEY.to_vec(), value: codec::encode_sequence(sequence) });
        // Used or not, these sequences are never handed out again: a failed batch that did land
        // after all cannot collide with the next one.
        *next_sequence = sequence;
        let result = self.kv.write(&ops, true);
        let label = if result.is_ok() { "stored" } else { "failed" };
        self.telemetry.logs_stored.get_or_create(&labels([("result", label)])).inc_by(count as u64);
        if result.is_ok() {
            if blocks > 0 {
                self.telemetry.log_blocks_written.get_or_create(&labels([("source", "write")])).inc_by(blocks as u64);
            }
            let now = (self.now_ms)();
            let mut buffer = lock(&self.buffer);
            for (mut chunk, op) in chunks.into_iter().zip(ops.into_iter().skip(block_puts)) {
                if let SeriesOp::Put { value, .. } = op {
                    chunk.value = value;
                    buffer.add(chunk, now);
                }
            }
            self.telemetry.log_pending_bytes.get_or_create(&LabelSet::new()).set(buffer.bytes() as i64);
        }
        result
    }

    /// The block and meta puts of the parts of `rows` (one slice and service) with at least
    /// `direct_bytes` raw bytes; which rows they hold, and how many blocks. A part that fails
    /// to make blocks stays pending.
    fn direct_blocks(&self, rows: &[GroupRow<'_>], ops: &mut Vec<SeriesOp>) -> (Vec<bool>, usize) {
        let mut direct = vec![false; rows.len()];
        // A group has a few parts (services × slices): a B-tree finds one in a few comparisons,
        // cheaper than hashing each row's service.
        let mut parts: BTreeMap<(i64, &str), Vec<usize>> = BTreeMap::new();
        for (at, row) in rows.iter().enumerate() {
            if let Some(service) = row.service {
                parts.entry((row.slice, service)).or_default().push(at);
            }
        }
        let bytes = |at: &[usize]| {
            at.iter().filter_map(|&i| rows.get(i)).map(|row| block::ROW_HEADER + row.value.len()).sum::<usize>()
        };
        parts.retain(|_, at| bytes(at) >= self.limits.direct_bytes);
        if parts.is_empty() {
            return (direct, 0);
        }
        let mut flusher = lock(&self.block_writer);
        let mut blocks = 0;
        for ((slice, service), at) in parts {
            let mut part: Vec<(LogCursor, &[u8])> = at.iter().filter_map(|&i| rows.get(i)).map(|row| (row.cursor, row.value)).collect();
            part.sort_unstable_by_key(|(cursor, _)| *cursor);
            let before = ops.len();
            match flusher.blocks(slice, service, &part, self.limits.block_bytes, ops) {
                Ok(written) => {
                    blocks += written;
                    for i in at {
                        if let Some(flag) = direct.get_mut(i) {
                            *flag = true;
                        }
                    }
                }
                Err(e) => {
                    ops.truncate(before);
                    tracing::warn!(slice, service, error = %e, "logs not written as blocks; they stay pending");
                }
            }
        }
        (direct, blocks)
    }
}

/// One log of a write group: its slice, service (None if its value does not read), cursor and
/// encoded value.
struct GroupRow<'a> {
    slice: i64,
    service: Option<&'a str>,
    cursor: LogCursor,
    value: &'a [u8],
}

/// One pending group per slice of `rows`: the value (version, then rows in arrival order) and
/// its cursors' range.
fn pending_chunks<'a>(rows: impl Iterator<Item = &'a GroupRow<'a>> + Clone) -> Vec<Chunk> {
    // Sized exactly: a chunk stays in memory until its slice is flushed.
    let mut sizes: BTreeMap<i64, usize> = BTreeMap::new();
    for row in rows.clone() {
        *sizes.entry(row.slice).or_insert(1) += block::ROW_HEADER + row.value.len();
    }
    let mut slices: BTreeMap<i64, Chunk> = BTreeMap::new();
    for row in rows {
        let chunk = slices.entry(row.slice).or_insert_with(|| {
            let mut value = Vec::with_capacity(sizes.get(&row.slice).copied().unwrap_or_default());
            value.push(block::FORMAT_VERSION);
            Chunk { key: keys::pending_key(row.slice, row.cursor.sequence), slice: row.slice, value, first: row.cursor, last: row.cursor, count: 0 }
        });
        block::push_row(&mut chunk.value, row.cursor, row.value);
        chunk.first = chunk.first.min(row.cursor);
        chunk.last = chunk.last.max(row.cursor);
        chunk.count += 1;
    }
    slices.into_values().collect()
}

/// The same failure for another caller of the group (`KvError` is not `Clone`).
fn copy_kv_error(error: &KvError) -> KvError {
    match error {
        KvError::Read { kind, detail } => KvError::Read { kind: *kind, detail: detail.clone() },
        KvError::Write { kind, detail } => KvError::Write { kind: *kind, detail: detail.clone() },
        KvError::Open { kind, detail } => KvError::Open { kind: *kind, detail: detail.clone() },
    }
}
