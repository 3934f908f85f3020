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

/// What a format-2 caller queues: timestamp and encoded value of each log, in its order.
pub(super) type Encoded = Vec<(i64, Vec<u8>)>;

impl LogStore {
    pub(super) fn write_logs(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        let cutoff = self.cutoff_ms((self.now_ms)());
        let encoded: Vec<(i64, Vec<u8>)> =
            logs.iter().filter(|log| log.record.timestamp_ms >= cutoff).map(|log| (log.record.timestamp_ms, codec::encode_log(log))).collect();
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

    /// Writes `group` in one synced batch, sequences from `next_sequence` on; then its pending
    /// groups join the buffer.
    fn write_group(&self, next_sequence: &mut u64, group: &[Pending<Encoded>]) -> Result<(), KvError> {
        let count: usize = group.iter().map(|p| p.logs.len()).sum();
        // slice → its pending group: the value (version, then rows) and its cursors' range
        let mut slices: BTreeMap<i64, Chunk> = BTreeMap::new();
        let mut sequence = *next_sequence;
        for pending in group {
            for (timestamp_ms, value) in &pending.logs {
                let cursor = LogCursor { timestamp_ms: *timestamp_ms, sequence };
                let slice = keys::slice_of(*timestamp_ms);
                let chunk = slices.entry(slice).or_insert_with(|| {
                    let mut rows = Vec::with_capacity(count * (value.len() + block::ROW_HEADER) + 1);
                    rows.push(block::FORMAT_VERSION);
                    Chunk { key: keys::pending_key(slice, sequence), slice, value: rows, first: cursor, last: cursor, count: 0 }
                });
                block::push_row(&mut chunk.value, cursor, value);
                chunk.first = chunk.first.min(cursor);
                chunk.last = chunk.last.max(cursor);
                chunk.count += 1;
                sequence += 1;
            }
        }
        let mut chunks: Vec<Chunk> = slices.into_values().collect();
        let mut ops: Vec<SeriesOp> = chunks
            .iter_mut()
            .map(|chunk| SeriesOp::Put { key: chunk.key.clone(), value: std::mem::take(&mut chunk.value) })
            .collect();
        ops.push(SeriesOp::Put { key: keys::SEQUENCE_KEY.to_vec(), value: codec::encode_sequence(sequence) });
        // Used or not, these sequences are never handed out again: a failed batch that did land
        // after all cannot collide with the next one.
        *next_sequence = sequence;
        let result = self.kv.write(&ops, true);
        let label = if result.is_ok() { "stored" } else { "failed" };
        self.telemetry.logs_stored.get_or_create(&labels([("result", label)])).inc_by(count as u64);
        if result.is_ok() {
            let now = (self.now_ms)();
            let mut buffer = lock(&self.buffer);
            for (mut chunk, op) in chunks.into_iter().zip(ops) {
                if let SeriesOp::Put { value, .. } = op {
                    chunk.value = value;
                    buffer.add(chunk, now);
                }
            }
            self.telemetry.log_pending_bytes.get_or_create(&LabelSet::new()).set(buffer.bytes() as i64);
        }
        result
    }
}

/// The same failure for another caller of the group (`KvError` is not `Clone`).
fn copy_kv_error(error: &KvError) -> KvError {
    match error {
        KvError::Read { kind, detail } => KvError::Read { kind: *kind, detail: detail.clone() },
        KvError::Write { kind, detail } => KvError::Write { kind: *kind, detail: detail.clone() },
        KvError::Open { kind, detail } => KvError::Open { kind: *kind, detail: detail.clone() },
    }
}
