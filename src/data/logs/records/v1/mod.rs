//! The log store's first format (version 1): one key per log, `l | timestamp | sequence`, and a
//! service index key `x | service | timestamp | sequence` beside it ([`keys`]); values are
//! [`super::codec`]'s log encoding.
//!
//! A node no longer writes it. It is kept for two readers: the migration at start
//! ([`super::migrate`]), which converts a store written by an older build into blocks, and
//! `hotrule bench logs-query`, which measures the block store's queries side by side with this
//! format's scan (the scan every keyword or tag query made before blocks).

pub mod keys;
mod read;
mod write;

use std::sync::{Arc, Mutex};

use crate::data::logs::{KeptLog, LogFilter, LogReader, LogStoreError, LogWriter, StoredLog};
use crate::base::self_metrics::SelfMetrics;
use crate::store::series::SeriesKv;

use super::{codec, corrupt};

/// A store of the first format: writes and reads exactly as the node did before blocks.
pub struct V1LogStore {
    kv: Arc<dyn SeriesKv>,
    telemetry: Arc<SelfMetrics>,
    queue: Mutex<Vec<super::write::Pending<write::Encoded>>>,
    writer: Mutex<u64>,
}

impl V1LogStore {
    pub fn open(kv: Arc<dyn SeriesKv>, telemetry: Arc<SelfMetrics>) -> Result<V1LogStore, LogStoreError> {
        let next_sequence = super::read_sequence(kv.as_ref())?;
        Ok(V1LogStore { kv, telemetry, queue: Mutex::new(Vec::new()), writer: Mutex::new(next_sequence) })
    }
}

impl LogWriter for V1LogStore {
    fn write(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        self.write_logs(logs)
    }
}

impl LogReader for V1LogStore {
    fn query(&self, filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError> {
        self.read(filter)
    }
}
