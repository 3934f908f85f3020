//! The write path: encode on the caller's thread, then a group commit by one writer at a time.
//!
//! A caller encodes its logs (no lock held), queues them and takes the writer lock. If a writer
//! before it already wrote its logs, it returns that outcome; otherwise it writes everything
//! queued as one group: sequences assigned in arrival order, one synced batch carrying the logs,
//! their service index keys and the new sequence record. The queue lets one fsync acknowledge every caller that arrived
//! while the previous group was syncing.


use super::{V1LogStore, codec, keys};
use crate::data::logs::records::write::{Pending, group_commit};
use crate::data::logs::{KeptLog, LogCursor, LogStoreError};
use crate::store::kv::KvError;
use crate::store::series::SeriesOp;
use crate::base::self_metrics::labels;

/// What a first-format caller queues: timestamp, service and encoded value of each log.
pub(super) type Encoded = Vec<(i64, String, Vec<u8>)>;

impl V1LogStore {
    pub(super) fn write_logs(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        let encoded: Encoded =
            logs.iter().map(|log| (log.record.timestamp_ms, log.record.service.clone(), codec::encode_log(log))).collect();
        if encoded.is_empty() {
            return Ok(());
        }
        group_commit(&self.queue, &self.writer, encoded, |next, group| self.write_group(next, group))
    }

    /// Writes `group` in one synced batch, sequences from `next_sequence` on.
    fn write_group(&self, next_sequence: &mut u64, group: &[Pending<Encoded>]) -> Result<(), KvError> {
        let count: usize = group.iter().map(|p| p.logs.len()).sum();
        let mut ops = Vec::with_capacity(2 * count + 1);
        let mut sequence = *next_sequence;
        for pending in group {
            for (timestamp_ms, service, value) in &pending.logs {
                let cursor = LogCursor { timestamp_ms: *timestamp_ms, sequence };
                ops.push(SeriesOp::Put { key: keys::log_key(cursor), value: value.clone() });
                ops.push(SeriesOp::Put { key: keys::service_key(service, cursor), value: Vec::new() });
                sequence += 1;
            }
        }
        ops.push(SeriesOp::Put { key: keys::SEQUENCE_KEY.to_vec(), value: codec::encode_sequence(sequence) });
        // Used or not, these sequences are never handed out again: a failed batch that did land
        // after all cannot collide with the next one.
        *next_sequence = sequence;
        let result = self.kv.write(&ops, true);
        let label = if result.is_ok() { "stored" } else { "failed" };
        self.telemetry.logs_stored.get_or_create(&labels([("result", label)])).inc_by(count as u64);
        result
    }
}
