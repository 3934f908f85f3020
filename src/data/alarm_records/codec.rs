//! The value encodings of the `alarms` key space.
//!
//! Every value starts with a format-version byte ([`FORMAT_VERSION`]); a value of another
//! version, cut short, with trailing bytes or a corrupt count does not decode (the store reports
//! it as `AlarmRecordError::Corrupt`, naming the key). Integers are big-endian, strings
//! `u32`-length-prefixed UTF-8 (the helpers of `crate::data::series_store`).
//!
//! - record: `version | scope id (i32) | scope | name | id0 | id1 | rule name | message |
//!   tags: n × (key value) | expression | metrics snapshot: n × (metric json) | layers: n ×
//!   layer`. The start time and uuid are the key's.
//! - recovery: `version | recovery time (i64)`.
//! - held state: `version | the state record as JSON` (rule, fingerprint, entity, state).

use std::collections::BTreeMap;

use super::AlarmRecord;
use crate::control::alarms::hooks::message::Tag;
use crate::data::series_store::{Reader, ValueError, put_len, put_str};

pub const FORMAT_VERSION: u8 = 1;

/// The stored value of one record (without its start time and uuid, which the key holds).
pub fn encode_record(record: &AlarmRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + record.alarm_message.len() + record.expression.len());
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&record.scope_id.to_be_bytes());
    for text in [&record.scope, &record.name, &record.id0, &record.id1, &record.rule_name, &record.alarm_message] {
        put_str(&mut out, text);
    }
    put_len(&mut out, record.tags.len());
    for tag in &record.tags {
        put_str(&mut out, &tag.key);
        put_str(&mut out, &tag.value);
    }
    put_str(&mut out, &record.expression);
    put_len(&mut out, record.metrics_snapshot.len());
    for (metric, values) in &record.metrics_snapshot {
        put_str(&mut out, metric);
        put_str(&mut out, values);
    }
    put_len(&mut out, record.layers.len());
    for layer in &record.layers {
        put_str(&mut out, layer);
    }
    out
}

/// A stored record back, with the start time and uuid of its key; no recovery yet.
pub fn decode_record(value: &[u8], start_time: i64, uuid: &str) -> Result<AlarmRecord, ValueError> {
    let mut r = Reader::versioned(value, FORMAT_VERSION)?;
    let scope_id = r.i32()?;
    let (scope, name, id0, id1, rule_name, alarm_message) = (r.string()?, r.string()?, r.string()?, r.string()?, r.string()?, r.string()?);
    // Each item is at least two empty strings (8 bytes) or one (4 bytes).
    let tags = (0..r.count(8)?).map(|_| Ok(Tag { key: r.string()?, value: r.string()? })).collect::<Result<Vec<_>, ValueError>>()?;
    let expression = r.string()?;
    let mut metrics_snapshot = BTreeMap::new();
    for _ in 0..r.count(8)? {
        metrics_snapshot.insert(r.string()?, r.string()?);
    }
    let layers = (0..r.count(4)?).map(|_| r.string()).collect::<Result<Vec<_>, ValueError>>()?;
    r.finish()?;
    Ok(AlarmRecord {
        scope_id,
        scope,
        name,
        id0,
        id1,
        start_time,
        alarm_message,
        rule_name,
        tags,
        expression,
        metrics_snapshot,
        uuid: uuid.to_string(),
        layers,
        recovery_time: None,
    })
}

/// The stored value of a recovery.
pub fn encode_recovery(recovery_time: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&recovery_time.to_be_bytes());
    out
}

pub fn decode_recovery(value: &[u8]) -> Result<i64, ValueError> {
    let mut r = Reader::versioned(value, FORMAT_VERSION)?;
    let time = r.i64()?;
    r.finish()?;
    Ok(time)
}

/// The stored value of one held alarm state.
pub fn encode_state(record: &crate::control::alarms::engine::StateRecord) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    out.extend_from_slice(&serde_json::to_vec(record).unwrap_or_default());
    out
}

pub fn decode_state(value: &[u8]) -> Result<crate::control::alarms::engine::StateRecord, String> {
    match value.split_first() {
        Some((&FORMAT_VERSION, json)) => serde_json::from_slice(json).map_err(|e| e.to_string()),
        Some((version, _)) => Err(format!("format version {version}, this build reads {FORMAT_VERSION}")),
        None => Err("empty value".to_string()),
    }
}
