//! The log-query messages' payloads: the read a node asks a peer's log store for
//! (`BusRequest::QueryLogs`), and the peer's page of stored logs (`BusResponse::Logs`), as plain
//! serde data. A log crosses the bus as its store value (`data::logs::records::codec`), the same
//! bytes the peer keeps, with its position; the asker decodes it as the store would.

use serde::{Deserialize, Serialize};

use crate::data::logs::records::codec;
use crate::data::logs::{LogCursor, LogFilter, LogOrder, StoredLog};

/// One read of a peer's local log store (`LogReader::query`): a [`LogFilter`] as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogQuery {
    pub service: Option<String>,
    pub instance: Option<String>,
    pub endpoint: Option<String>,
    pub start_ms: i64,
    pub end_ms: i64,
    pub tags: Vec<(String, String)>,
    pub keyword: Option<String>,
    pub limit: u64,
    /// `(timestamp ms, sequence)` of the peer's own log order.
    pub after: Option<(i64, u64)>,
    pub oldest_first: bool,
}

impl From<&LogFilter> for LogQuery {
    fn from(filter: &LogFilter) -> LogQuery {
        LogQuery {
            service: filter.service.clone(),
            instance: filter.instance.clone(),
            endpoint: filter.endpoint.clone(),
            start_ms: filter.start_ms,
            end_ms: filter.end_ms,
            tags: filter.tags.clone(),
            keyword: filter.keyword.clone(),
            limit: u64::try_from(filter.limit).unwrap_or(u64::MAX),
            after: filter.after.map(|cursor| (cursor.timestamp_ms, cursor.sequence)),
            oldest_first: filter.order == LogOrder::OldestFirst,
        }
    }
}

impl LogQuery {
    /// The filter to read; the limit is capped by the store (`MAX_LIMIT`) whatever it says.
    pub fn filter(&self) -> LogFilter {
        LogFilter {
            service: self.service.clone(),
            instance: self.instance.clone(),
            endpoint: self.endpoint.clone(),
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            tags: self.tags.clone(),
            keyword: self.keyword.clone(),
            limit: usize::try_from(self.limit).unwrap_or(usize::MAX),
            after: self.after.map(|(timestamp_ms, sequence)| LogCursor { timestamp_ms, sequence }),
            order: if self.oldest_first { LogOrder::OldestFirst } else { LogOrder::NewestFirst },
        }
    }
}

/// One stored log: its position in the peer's store and its encoded value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLogWire {
    pub timestamp_ms: i64,
    pub sequence: u64,
    pub value: Vec<u8>,
}

impl From<&StoredLog> for StoredLogWire {
    fn from(stored: &StoredLog) -> StoredLogWire {
        StoredLogWire { timestamp_ms: stored.cursor.timestamp_ms, sequence: stored.cursor.sequence, value: codec::encode_log(&stored.log) }
    }
}

/// Why a peer's log could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("log {timestamp_ms}-{sequence} from the peer does not decode: {detail}")]
pub struct LogWireError {
    pub timestamp_ms: i64,
    pub sequence: u64,
    pub detail: String,
}

impl TryFrom<StoredLogWire> for StoredLog {
    type Error = LogWireError;

    fn try_from(wire: StoredLogWire) -> Result<StoredLog, LogWireError> {
        let StoredLogWire { timestamp_ms, sequence, value } = wire;
        let log = codec::decode_log(&value, timestamp_ms).map_err(|e| LogWireError { timestamp_ms, sequence, detail: e.to_string() })?;
        Ok(StoredLog { cursor: LogCursor { timestamp_ms, sequence }, log })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hotrule_lal_engine::{ContentType, LogRecord};

    use super::*;
    use crate::data::logs::KeptLog;

    #[test]
    fn filters_and_logs_survive_the_wire_form() {
        let filter = LogFilter {
            service: Some("checkout".into()),
            instance: None,
            endpoint: Some("/pay".into()),
            start_ms: -5,
            end_ms: 1_000,
            tags: vec![("level".into(), "ERROR".into())],
            keyword: Some("time out".into()),
            limit: 7,
            after: Some(LogCursor { timestamp_ms: 9, sequence: u64::MAX }),
            order: LogOrder::OldestFirst,
        };
        assert_eq!(LogQuery::from(&filter).filter(), filter);
        let newest = LogFilter { order: LogOrder::NewestFirst, after: None, ..filter };
        assert_eq!(LogQuery::from(&newest).filter(), newest);

        let mut fields = BTreeMap::new();
        fields.insert("latency".to_string(), serde_json::json!(12));
        let record = LogRecord {
            service: "checkout".into(),
            content_type: ContentType::Json,
            content: "{\"a\":1}".into(),
            span_id: Some(3),
            segment_id: "seg".into(),
            tags: vec![("k".into(), "v".into())],
            output_type: Some("SlowSQL".into()),
            fields,
            timestamp_ms: 42,
            ..LogRecord::default()
        };
        let stored = StoredLog {
            cursor: LogCursor { timestamp_ms: 42, sequence: 3 },
            log: KeptLog { rule: "GENERAL:default".into(), file: "lal/default".into(), record, received_ms: 43 },
        };
        assert_eq!(StoredLog::try_from(StoredLogWire::from(&stored)).expect("decodes"), stored);
        let garbage = StoredLogWire { timestamp_ms: 1, sequence: 2, value: vec![9, 9] };
        let error = StoredLog::try_from(garbage).expect_err("not a log value");
        assert!(error.to_string().contains("1-2"), "{error}");
    }
}
