//! Logs at rest: the model the LAL half of the data plane shares (dispatch writes kept logs,
//! storage keeps them, `/query/logs` and the OTLP log exporter read or forward them), and the
//! seams between those parts.
//!
//! A kept log is what a LAL rule's sink persisted ([`hotrule_lal_engine::LogRecord`]), with the
//! rule that kept it. Storage orders logs by their timestamp and an id it assigns, so a reader
//! can page and tail (`--follow`) without gaps or repeats. The store is [`records::LogStore`].

pub mod records;

use hotrule_lal_engine::LogRecord;

/// The most logs one read returns, whatever its limit.
pub const MAX_LIMIT: usize = 10_000;

/// One log a LAL sink kept, as dispatch hands it to the log writers.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptLog {
    /// The rule key `layer:name` and its file (`lal/<name>`), for the query output.
    pub rule: String,
    pub file: String,
    pub record: LogRecord,
    /// When the node received the log, epoch milliseconds.
    pub received_ms: i64,
}

/// A stored log as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLog {
    /// The store's position of the log: ordered by timestamp, then arrival; unique per node.
    pub cursor: LogCursor,
    pub log: KeptLog,
}

/// A position in the log order: `(timestamp_ms, sequence)`. A read with `after` returns only
/// logs strictly after it in the read's order: newer ones oldest first (tailing), older ones
/// newest first (the next page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogCursor {
    pub timestamp_ms: i64,
    pub sequence: u64,
}

/// Which logs a read wants. Empty/`None` fields match everything; `tags` must all match (a log
/// carrying the key with that value); `keyword` is a case-sensitive substring of the content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    pub service: Option<String>,
    pub instance: Option<String>,
    pub endpoint: Option<String>,
    /// Inclusive bounds on the log's timestamp, epoch milliseconds.
    pub start_ms: i64,
    pub end_ms: i64,
    pub tags: Vec<(String, String)>,
    pub keyword: Option<String>,
    /// At most this many logs (capped at [`MAX_LIMIT`]).
    pub limit: usize,
    /// Only logs past this position in `order` (newer oldest first, older newest first).
    pub after: Option<LogCursor>,
    /// Newest first (the default of `/query/logs`) or oldest first (tailing).
    pub order: LogOrder,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogOrder {
    #[default]
    NewestFirst,
    OldestFirst,
}

/// Why log storage failed.
#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error(transparent)]
    Kv(#[from] crate::store::kv::KvError),
    #[error("stored log {key} is unreadable: {detail}")]
    Corrupt { key: String, detail: String },
}

/// Where dispatch writes kept logs. `write` returns once the logs are durable (storage) or
/// queued (an exporter, which counts what it later drops).
pub trait LogWriter: Send + Sync + 'static {
    fn write(&self, logs: &[KeptLog]) -> Result<(), LogStoreError>;
}

/// What `/query/logs` reads.
pub trait LogReader: Send + Sync + 'static {
    fn query(&self, filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError>;
}
