//! The migration from the first format (one key per log, [`super::v1`]) to blocks, at open.
//!
//! The first format's logs are read in key order (time order), [`MIGRATION_CHUNK`] at a time.
//! Each chunk becomes blocks exactly as a flush makes them (same cursors: a cursor a client
//! holds stays valid), written in one synced batch that also deletes the chunk's first-format
//! keys (the logs and their service index keys). A crash in the middle loses nothing: every
//! chunk is converted and deleted together, and the next start goes on with what is left. A
//! log that does not decode stops the migration with `Corrupt` naming its key: the node does not
//! start rather than drop it. Progress is logged after every chunk.

use std::collections::BTreeMap;

use super::flush::{block_ops, group_rows};
use super::v1::keys as v1;
use super::{LogStore, block, corrupt, lock};
use crate::base::self_metrics::labels;
use crate::data::logs::{LogCursor, LogStoreError};
use crate::store::series::{SeriesOp, Visit};

/// First-format logs converted per synced batch.
pub const MIGRATION_CHUNK: usize = 100_000;

/// What a migration did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Migration {
    pub logs: u64,
    pub blocks: u64,
}

impl LogStore {
    /// Converts every first-format log into blocks, `chunk` per synced batch (nothing to do:
    /// a zero migration).
    pub(super) fn migrate_v1(&self, chunk: usize) -> Result<Migration, LogStoreError> {
        let (start, end) = (v1::logs_start(), v1::logs_end());
        let mut done = Migration::default();
        let mut from = start;
        let mut first_ms = None;
        let mut flusher = lock(&self.flusher);
        loop {
            let mut rows = Vec::new();
            let mut count = 0;
            let mut range: Option<(LogCursor, LogCursor)> = None;
            let mut failure = None;
            self.kv.visit_range(&from, &end, &mut |key, value| {
                let Some(cursor) = v1::decode_log_key(key) else {
                    failure = Some(corrupt(key, "not a log key"));
                    return Visit::Stop;
                };
                block::push_row(&mut rows, cursor, value);
                range = Some(range.map_or((cursor, cursor), |(first, _)| (first, cursor)));
                count += 1;
                if count >= chunk { Visit::Stop } else { Visit::Next }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            let Some((first, last)) = range else { break };
            if done.logs == 0 {
                tracing::info!("log store: converting logs of the first format into blocks");
            }
            let first_ms = *first_ms.get_or_insert(first.timestamp_ms);
            let groups = group_rows([rows.as_slice()]).map_err(|(cursor, detail)| corrupt(&v1::log_key(cursor), detail))?;
            let mut ops = Vec::new();
            let blocks = block_ops(&mut flusher, &groups, self.limits.block_bytes, &mut ops)?;
            // Each service's index keys of the chunk: from its first log to just after its last.
            let mut services: BTreeMap<&str, (LogCursor, LogCursor)> = BTreeMap::new();
            for ((_, service), logs) in &groups {
                let (lo, hi) = (logs[0].0, logs[logs.len() - 1].0);
                let entry = services.entry(service).or_insert((lo, hi));
                *entry = (entry.0.min(lo), entry.1.max(hi));
            }
            let next = v1::log_key(v1::successor(last));
            ops.push(SeriesOp::DeleteRange { start: v1::log_key(first), end: next.clone() });
            for (service, (lo, hi)) in services {
                ops.push(SeriesOp::DeleteRange { start: v1::service_key(service, lo), end: v1::service_key(service, v1::successor(hi)) });
            }
            self.kv.write(&ops, true)?;
            done.logs += count as u64;
            done.blocks += blocks as u64;
            self.telemetry.log_blocks_written.get_or_create(&labels([("source", "migration")])).inc_by(blocks as u64);
            let now = (self.now_ms)();
            let percent = if now > first_ms { (last.timestamp_ms - first_ms) as f64 * 100.0 / (now - first_ms) as f64 } else { 100.0 };
            tracing::info!(
                logs = done.logs,
                blocks = done.blocks,
                up_to_ms = last.timestamp_ms,
                "log store: converted {} logs into {} blocks, up to {} ({:.0}% of the time to now)",
                done.logs,
                done.blocks,
                crate::base::clock::iso8601(last.timestamp_ms.max(0) as u64),
                percent.clamp(0.0, 100.0)
            );
            if last == v1::successor(last) {
                break;
            }
            from = next;
        }
        // Index keys whose log was gone already (none expected) go too.
        let (index_start, index_end) = v1::index_range();
        if !self.kv.scan_range(&index_start, &index_end, 1)?.is_empty() {
            self.kv.write(&[SeriesOp::DeleteRange { start: index_start, end: index_end }], true)?;
        }
        if done.logs > 0 {
            tracing::info!(logs = done.logs, blocks = done.blocks, "log store: the first format is converted");
        }
        Ok(done)
    }
}
