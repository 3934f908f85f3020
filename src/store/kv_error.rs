//! What the key-value engines report when they fail, shared by the rule key space (`kv`) and
//! the series key spaces (`series`), engine-neutral.

/// What kind of failure the engine reported: RocksDB's own classification, kept so callers
/// can tell a busy or timed-out engine from a corrupt one without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvErrorKind {
    NotFound,
    Corruption,
    NotSupported,
    InvalidArgument,
    Io,
    MergeInProgress,
    Incomplete,
    ShutdownInProgress,
    TimedOut,
    Aborted,
    Busy,
    Expired,
    TryAgain,
    CompactionTooLarge,
    ColumnFamilyDropped,
    Unknown,
    /// A failure injected by a test (the in-memory twin, a failpoint).
    Injected,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum KvError {
    #[error("storage read failed: {detail}")]
    Read { kind: KvErrorKind, detail: String },
    #[error("storage write failed: {detail}")]
    Write { kind: KvErrorKind, detail: String },
    #[error("storage open failed: {detail}")]
    Open { kind: KvErrorKind, detail: String },
}

impl KvError {
    /// The engine's classification of the failure.
    pub fn kind(&self) -> KvErrorKind {
        match self {
            KvError::Read { kind, .. } | KvError::Write { kind, .. } | KvError::Open { kind, .. } => *kind,
        }
    }

    /// A read failure injected by a test.
    pub fn injected_read(detail: &str) -> KvError {
        KvError::Read { kind: KvErrorKind::Injected, detail: detail.to_string() }
    }
}

/// Key-value pairs in key order, as a prefix scan returns them.
pub type KvPairs = Vec<(Vec<u8>, Vec<u8>)>;

/// RocksDB's error kind as the engine-neutral [`KvErrorKind`].
#[cfg(feature = "rocksdb")]
pub(super) fn rocks_kind(error: &hotrule_kv_rocksdb::RocksKvError) -> KvErrorKind {
    use hotrule_kv_rocksdb::ErrorKind;
    match error.kind() {
        ErrorKind::NotFound => KvErrorKind::NotFound,
        ErrorKind::Corruption => KvErrorKind::Corruption,
        ErrorKind::NotSupported => KvErrorKind::NotSupported,
        ErrorKind::InvalidArgument => KvErrorKind::InvalidArgument,
        ErrorKind::IOError => KvErrorKind::Io,
        ErrorKind::MergeInProgress => KvErrorKind::MergeInProgress,
        ErrorKind::Incomplete => KvErrorKind::Incomplete,
        ErrorKind::ShutdownInProgress => KvErrorKind::ShutdownInProgress,
        ErrorKind::TimedOut => KvErrorKind::TimedOut,
        ErrorKind::Aborted => KvErrorKind::Aborted,
        ErrorKind::Busy => KvErrorKind::Busy,
        ErrorKind::Expired => KvErrorKind::Expired,
        ErrorKind::TryAgain => KvErrorKind::TryAgain,
        ErrorKind::CompactionTooLarge => KvErrorKind::CompactionTooLarge,
        ErrorKind::ColumnFamilyDropped => KvErrorKind::ColumnFamilyDropped,
        ErrorKind::Unknown => KvErrorKind::Unknown,
    }
}
