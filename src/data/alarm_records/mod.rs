//! Alarm records at rest: every firing message the alarm worker sends is kept as a record
//! (SkyWalking's `alarm_record`), every recovery as `(uuid, recovery time)` joined to its record
//! on read (`alarm_recovery_record`, the `recoveryTime` of `getAlarm`). `/query/alarms` and
//! `hotrule alarms list` read them; retention deletes them after `storage.retention.alarms`.
//!
//! The store is [`store::AlarmRecordStore`], over the `alarms` key space of the node's database
//! (RocksDB column family `alarms`). Records are keyed by `(start time, uuid)` ([`keys`]), so a
//! time-range read is one key range and retention one delete-range; a recovery is keyed by the
//! same position under its own prefix, so it is joined by one point lookup and expires with its
//! record. Values carry a format version ([`codec`]).
//!
//! In a cluster an alarm fires on one node, the entity's owner, which also sends its recovery:
//! each node keeps the records it fired, and a cluster read merges every node's pages.

pub mod codec;
pub mod keys;
pub mod store;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod worker_tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::control::alarms::hooks::message::{AlarmMessage, AlarmRecoveryMessage, Tag};

/// The most records one page holds (`pageSize`).
pub const MAX_PAGE_SIZE: usize = 1000;

/// The deepest a page may start plus its size (`pageNum × pageSize`): a read keeps at most this
/// many records in memory, on each node.
pub const MAX_WINDOW: usize = 10_000;

/// One stored alarm: the firing message's fields SkyWalking's `alarm_record` keeps, and when it
/// recovered (none: still firing, or its recovery is not stored).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AlarmRecord {
    pub scope_id: i32,
    pub scope: String,
    pub name: String,
    pub id0: String,
    pub id1: String,
    /// When the fire was decided, epoch milliseconds.
    pub start_time: i64,
    pub alarm_message: String,
    pub rule_name: String,
    pub tags: Vec<Tag>,
    /// The rule's MQE expression (the snapshot's `expression`).
    pub expression: String,
    /// Metric text → the JSON string of its MQE values when the rule was checked.
    pub metrics_snapshot: BTreeMap<String, String>,
    pub uuid: String,
    pub layers: Vec<String>,
    /// Epoch milliseconds.
    pub recovery_time: Option<i64>,
}

impl AlarmRecord {
    /// The record of a firing message.
    pub fn firing(message: &AlarmMessage) -> AlarmRecord {
        AlarmRecord {
            scope_id: message.scope_id,
            scope: message.scope.clone(),
            name: message.name.clone(),
            id0: message.id0.clone(),
            id1: message.id1.clone(),
            start_time: message.start_time,
            alarm_message: message.alarm_message.clone(),
            rule_name: message.rule_name.clone(),
            tags: message.tags.clone(),
            expression: message.expression.clone(),
            metrics_snapshot: message.mqe_metrics_snapshot.clone(),
            uuid: message.uuid.clone(),
            layers: message.layers.clone(),
            recovery_time: None,
        }
    }

    /// Whether the record passes `filter` (its time range aside: the key range does that).
    pub fn matches(&self, filter: &AlarmFilter) -> bool {
        let same = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        filter.scope.as_deref().is_none_or(|scope| scope.eq_ignore_ascii_case(&self.scope))
            && same(&filter.entity_name, &self.name)
            && filter.entity_id.as_deref().is_none_or(|id| id == self.id0 || id == self.id1)
            && (filter.rules.is_empty() || filter.rules.contains(&self.rule_name))
            && filter.tags.iter().all(|(key, value)| self.tags.iter().any(|tag| tag.key == *key && tag.value == *value))
            && filter.keyword.as_deref().is_none_or(|keyword| self.alarm_message.contains(keyword))
    }

    /// The order of a newest-first read: start time, then uuid (unique per fire).
    pub fn order_key(&self) -> (i64, &str) {
        (self.start_time, self.uuid.as_str())
    }
}

/// Which records a read wants, newest first. Empty/`None` fields match everything; `rules`
/// any one; `tags` all (the record carrying the key with that value); `keyword` is a
/// case-sensitive substring of the message; `entity_id` matches `id0` or `id1`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmFilter {
    /// Inclusive bounds on the start time, epoch milliseconds.
    pub start_ms: i64,
    pub end_ms: i64,
    /// The scope name (`SERVICE`, `SERVICE_INSTANCE`, ...), any case.
    pub scope: Option<String>,
    pub entity_name: Option<String>,
    pub entity_id: Option<String>,
    pub rules: Vec<String>,
    pub tags: Vec<(String, String)>,
    pub keyword: Option<String>,
    /// Matches skipped before the page (`(pageNum - 1) × pageSize`).
    pub skip: u64,
    /// At most this many records (capped at [`MAX_PAGE_SIZE`]; `skip + limit` at [`MAX_WINDOW`]).
    pub limit: u64,
}

impl AlarmFilter {
    /// `(skip, limit)` as the store applies them: capped.
    pub fn window(&self) -> (usize, usize) {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX).min(MAX_PAGE_SIZE);
        let skip = usize::try_from(self.skip).unwrap_or(usize::MAX).min(MAX_WINDOW.saturating_sub(limit));
        (skip, limit)
    }
}

/// A page of records, newest first, and how many match in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlarmPage {
    pub records: Vec<AlarmRecord>,
    pub total: u64,
}

/// Why alarm-record storage failed.
#[derive(Debug, thiserror::Error)]
pub enum AlarmRecordError {
    #[error(transparent)]
    Kv(#[from] crate::store::kv::KvError),
    #[error("stored alarm record {key} is unreadable: {detail}")]
    Corrupt { key: String, detail: String },
}

/// Where the alarm worker hands each check's firing messages and recoveries. `write` returns
/// once they are durable.
pub trait AlarmRecordWriter: Send + Sync + 'static {
    fn write(&self, firing: &[AlarmMessage], recoveries: &[AlarmRecoveryMessage]) -> Result<(), AlarmRecordError>;
}

/// Where the alarm worker keeps the states it holds that are not NORMAL, so that a restarted
/// node resumes a firing alarm instead of firing it again (and still sends its recovery).
pub trait AlarmStateKeeper: Send + Sync + 'static {
    /// Replaces the kept states with `states`; returns once durable.
    fn keep_states(&self, states: &[crate::control::alarms::engine::StateRecord]) -> Result<(), AlarmRecordError>;
    /// The kept states (read at start).
    fn kept_states(&self) -> Result<Vec<crate::control::alarms::engine::StateRecord>, AlarmRecordError>;
}

/// What `/query/alarms` (and a peer's cluster read) reads.
pub trait AlarmRecordReader: Send + Sync + 'static {
    fn query(&self, filter: &AlarmFilter) -> Result<AlarmPage, AlarmRecordError>;
}
