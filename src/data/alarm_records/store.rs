//! The embedded alarm-record store: the one writer of the `alarms` key space.
//!
//! A check's firing messages and recoveries are written in one synced batch before `write`
//! returns. Records (and recoveries) already past retention are not written: the retention
//! worker would delete them anyway.
//!
//! A read scans the asked time range forward once, counting every match (`total`) and keeping
//! only the newest `skip + limit` of them, so its memory is bounded by the page, not the range;
//! the page's recoveries are then read in one batched point lookup. Retention deletes
//! `[first key, cutoff)` of both prefixes, each only when a one-key probe finds something there.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::keys::{RECORD_PREFIX, RECOVERY_PREFIX, STATE_PREFIX};
use super::{AlarmFilter, AlarmPage, AlarmRecord, AlarmRecordError, AlarmRecordReader, AlarmRecordWriter, AlarmStateKeeper, codec, keys};
use crate::control::alarms::engine::StateRecord;
use crate::base::clock::wall_clock_ms;
use crate::control::alarms::hooks::message::{AlarmMessage, AlarmRecoveryMessage};
use crate::data::series_store::{self, Expiring, NowMs, RetentionNames};
use crate::store::series::{SeriesKv, SeriesOp, Visit};

/// SkyWalking's record TTL (`recordDataTTL`, 3 days): how long alarm records are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3 * 24 * 3600);

/// How often a retention round runs.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

/// The embedded alarm-record store.
pub struct AlarmRecordStore {
    kv: Arc<dyn SeriesKv>,
    retention: Duration,
    now_ms: NowMs,
}

impl AlarmRecordStore {
    pub fn open(kv: Arc<dyn SeriesKv>, retention: Duration) -> AlarmRecordStore {
        AlarmRecordStore { kv, retention, now_ms: Arc::new(wall_clock_ms) }
    }

    /// The same store, reading time from `now_ms` (tests).
    pub fn with_clock(mut self, now_ms: NowMs) -> AlarmRecordStore {
        self.now_ms = now_ms;
        self
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// The oldest start time still kept as of `now_ms`.
    fn cutoff_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX))
    }

    /// Deletes every record and recovery whose start time is older than the retention as of
    /// `now_ms`; whether there was any.
    pub fn expire(&self, now_ms: i64) -> Result<bool, AlarmRecordError> {
        let cutoff = self.cutoff_ms(now_ms);
        let mut ops = Vec::new();
        for prefix in [RECORD_PREFIX, RECOVERY_PREFIX] {
            let (start, end) = (vec![prefix], keys::first_of(prefix, cutoff));
            if !self.kv.scan_range(&start, &end, 1)?.is_empty() {
                ops.push(SeriesOp::DeleteRange { start, end });
            }
        }
        if ops.is_empty() {
            return Ok(false);
        }
        // Not synced: a deletion lost in a crash is done again by the next round.
        self.kv.write(&ops, false)?;
        Ok(true)
    }

    fn read(&self, filter: &AlarmFilter) -> Result<AlarmPage, AlarmRecordError> {
        let (skip, limit) = filter.window();
        if filter.start_ms > filter.end_ms {
            return Ok(AlarmPage::default());
        }
        let keep = skip.saturating_add(limit);
        let mut newest: VecDeque<AlarmRecord> = VecDeque::new();
        let mut total = 0u64;
        let (start, end) = (keys::first_of(RECORD_PREFIX, filter.start_ms), keys::after_ms(RECORD_PREFIX, filter.end_ms));
        crate::data::series_store::try_visit_range::<AlarmRecordError>(self.kv.as_ref(), &start, &end, &mut |key, value| {
            let record = decode_pair(key, value)?;
            if record.matches(filter) {
                total += 1;
                if keep > 0 {
                    newest.push_back(record);
                    if newest.len() > keep {
                        newest.pop_front();
                    }
                }
            }
            Ok(Visit::Next)
        })?;
        let mut records: Vec<AlarmRecord> = newest.into_iter().rev().skip(skip).take(limit).collect();
        let recovery_keys: Vec<Vec<u8>> = records.iter().map(|r| keys::recovery_key(r.start_time, &r.uuid)).collect();
        for ((record, key), value) in records.iter_mut().zip(&recovery_keys).zip(self.kv.get_many(&recovery_keys)?) {
            if let Some(value) = value {
                record.recovery_time = Some(codec::decode_recovery(&value).map_err(|detail| corrupt(key, detail))?);
            }
        }
        Ok(AlarmPage { records, total })
    }
}

fn decode_pair(key: &[u8], value: &[u8]) -> Result<AlarmRecord, AlarmRecordError> {
    let (start_time, uuid) = keys::decode(RECORD_PREFIX, key).ok_or_else(|| corrupt(key, "not an alarm record key"))?;
    codec::decode_record(value, start_time, uuid).map_err(|detail| corrupt(key, detail))
}

pub(crate) fn corrupt(key: &[u8], detail: impl std::fmt::Display) -> AlarmRecordError {
    AlarmRecordError::Corrupt { key: key.escape_ascii().to_string(), detail: detail.to_string() }
}

impl AlarmRecordWriter for AlarmRecordStore {
    fn write(&self, firing: &[AlarmMessage], recoveries: &[AlarmRecoveryMessage]) -> Result<(), AlarmRecordError> {
        let cutoff = self.cutoff_ms((self.now_ms)());
        let mut ops = Vec::with_capacity(firing.len() + recoveries.len());
        for message in firing.iter().filter(|m| m.start_time >= cutoff) {
            let record = AlarmRecord::firing(message);
            ops.push(SeriesOp::Put { key: keys::record_key(record.start_time, &record.uuid), value: codec::encode_record(&record) });
        }
        for recovery in recoveries.iter().filter(|r| r.alarm.start_time >= cutoff) {
            let key = keys::recovery_key(recovery.alarm.start_time, &recovery.alarm.uuid);
            ops.push(SeriesOp::Put { key, value: codec::encode_recovery(recovery.recovery_time) });
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.kv.write(&ops, true)?;
        Ok(())
    }
}

impl AlarmStateKeeper for AlarmRecordStore {
    fn keep_states(&self, states: &[StateRecord]) -> Result<(), AlarmRecordError> {
        let mut ops = vec![SeriesOp::DeleteRange { start: vec![STATE_PREFIX], end: vec![STATE_PREFIX + 1] }];
        ops.extend(states.iter().zip(0u64..).map(|(state, n)| SeriesOp::Put { key: keys::state_key(n), value: codec::encode_state(state) }));
        self.kv.write(&ops, true)?;
        Ok(())
    }

    fn kept_states(&self) -> Result<Vec<StateRecord>, AlarmRecordError> {
        let mut out = Vec::new();
        crate::data::series_store::try_visit_range::<AlarmRecordError>(self.kv.as_ref(), &[STATE_PREFIX], &[STATE_PREFIX + 1], &mut |key, value| {
            out.push(codec::decode_state(value).map_err(|detail| corrupt(key, detail))?);
            Ok(Visit::Next)
        })?;
        Ok(out)
    }
}

impl AlarmRecordReader for AlarmRecordStore {
    fn query(&self, filter: &AlarmFilter) -> Result<AlarmPage, AlarmRecordError> {
        self.read(filter)
    }
}

/// Stores a check's firing messages and recoveries (off the async threads: the write is
/// synced); a failure is logged, and the notifications go out anyway.
pub async fn record_check(records: Option<&Arc<dyn AlarmRecordWriter>>, firing: &[AlarmMessage], recoveries: &[AlarmRecoveryMessage]) {
    let Some(records) = records.cloned() else { return };
    if firing.is_empty() && recoveries.is_empty() {
        return;
    }
    let (firing, recoveries) = (firing.to_vec(), recoveries.to_vec());
    match tokio::task::spawn_blocking(move || records.write(&firing, &recoveries)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "alarm records not stored"),
        Err(e) => tracing::error!(error = %e, "alarm record task failed"),
    }
}

/// Runs a retention round every `interval` (a round is one unit).
pub type AlarmRetentionWorker = series_store::RetentionWorker<AlarmRecordStore>;

impl Expiring for AlarmRecordStore {
    type Cursor = ();
    type Error = AlarmRecordError;
    const NAMES: RetentionNames = RetentionNames { worker: "alarm-record-retention", what: "alarm record", deleted: "expired alarm records deleted" };

    fn expire_unit(&self, _round: Option<()>) -> Result<(usize, Option<()>), AlarmRecordError> {
        Ok((usize::from(self.expire((self.now_ms)())?), None))
    }
}
