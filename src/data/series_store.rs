//! What both stores over the series key space share: the metric store
//! (`crate::data::metrics::cells`) and the log store (`crate::data::logs::records`). Each keeps its own key layout, value
//! encodings and format-version constant; this holds the generic parts:
//!
//! - the value format: a format-version byte, then big-endian integers and `u32`-length-prefixed
//!   UTF-8 strings, read back by a [`Reader`] that checks every length, so a value cut short,
//!   with trailing bytes, of another version or with a corrupt count is a [`ValueError`], never
//!   a panic or a huge allocation;
//! - the retention worker ([`RetentionWorker`]): one bounded unit of expiry off the async
//!   threads, then a wait for the interval;
//! - the clock type the stores read (`NowMs`, `base::clock::wall_clock_ms` in production) and
//!   poison-tolerant locking.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::base::worker::{Worker, WorkerState};

/// Why a stored value does not decode (the stores report it as `Corrupt`, naming the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("cut short: {wanted} bytes wanted, {left} left")]
    CutShort { wanted: usize, left: usize },
    #[error("a string is not UTF-8")]
    NotUtf8,
    #[error("format version {found}, this build reads {reads}")]
    Version { found: u8, reads: u8 },
    #[error("count {count} exceeds the {left} bytes left")]
    Count { count: usize, left: usize },
    #[error("{0} trailing bytes")]
    Trailing(usize),
    /// A code byte (a kind, a flag, an enum) that this build does not know.
    #[error("unknown {what} {code}")]
    UnknownCode { what: &'static str, code: u8 },
    /// A field stored as JSON text that does not parse.
    #[error("{what} are not a JSON object: {detail}")]
    NotJson { what: &'static str, detail: String },
}

/// A cursor over stored bytes; every read checks the length.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    /// A reader after the format-version byte of `bytes`, which must be `version`.
    pub fn versioned(bytes: &'a [u8], version: u8) -> Result<Reader<'a>, ValueError> {
        let mut reader = Reader::new(bytes);
        match reader.u8()? {
            found if found == version => Ok(reader),
            found => Err(ValueError::Version { found, reads: version }),
        }
    }

    /// A reader after the format-version byte of `bytes`, which must be in `oldest..=newest`,
    /// and the version found (a store migrates older values as it decodes them).
    pub fn versions(bytes: &'a [u8], oldest: u8, newest: u8) -> Result<(Reader<'a>, u8), ValueError> {
        let mut reader = Reader::new(bytes);
        match reader.u8()? {
            found if (oldest..=newest).contains(&found) => Ok((reader, found)),
            found => Err(ValueError::Version { found, reads: newest }),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ValueError> {
        if self.bytes.len() < n {
            return Err(ValueError::CutShort { wanted: n, left: self.bytes.len() });
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, ValueError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, ValueError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, ValueError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, ValueError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, ValueError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A length-prefixed string, borrowed from the value.
    pub fn str(&mut self) -> Result<&'a str, ValueError> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.take(len)?).map_err(|_| ValueError::NotUtf8)
    }

    /// Length-prefixed bytes, borrowed from the value.
    pub fn bytes(&mut self) -> Result<&'a [u8], ValueError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    /// A length-prefixed string.
    pub fn string(&mut self) -> Result<String, ValueError> {
        self.str().map(str::to_owned)
    }

    /// A count of items of at least `item_size` bytes each: refused when the bytes left cannot
    /// hold them, so a corrupt count never makes a huge allocation.
    pub fn count(&mut self, item_size: usize) -> Result<usize, ValueError> {
        let count = self.u32()? as usize;
        if count.saturating_mul(item_size) > self.bytes.len() {
            return Err(ValueError::Count { count, left: self.bytes.len() });
        }
        Ok(count)
    }

    /// The end of the value: nothing may be left.
    pub fn finish(&self) -> Result<(), ValueError> {
        if self.bytes.is_empty() { Ok(()) } else { Err(ValueError::Trailing(self.bytes.len())) }
    }
}

/// A length or count as `u32` (a larger one, which receivers' body limits keep from arriving,
/// is written as `u32::MAX`).
pub fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
}

/// A length-prefixed string (one longer than `u32::MAX` bytes is cut, the same in every value).
pub fn put_str(out: &mut Vec<u8>, text: &str) {
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&text.as_bytes()[..len as usize]);
}

/// Length-prefixed bytes (cut at `u32::MAX`, as [`put_str`]).
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&bytes[..len as usize]);
}

/// The wall clock in epoch milliseconds; tests pass a fixed one.
pub type NowMs = Arc<dyn Fn() -> i64 + Send + Sync>;


/// Locks `mutex`, taking over a poisoned one (its data stays consistent: writers never panic
/// half-way through an update).
/// Walks `kv` over `[start, end)` with a visit that can fail (the stores' reads decode as they
/// go): the first error stops the walk and is what the walk returns.
pub fn try_visit_range<E: From<crate::store::kv::KvError>>(
    kv: &dyn crate::store::series::SeriesKv,
    start: &[u8],
    end: &[u8],
    visit: &mut dyn FnMut(&[u8], &[u8]) -> Result<crate::store::series::Visit, E>,
) -> Result<(), E> {
    let mut failure = None;
    kv.visit_range(start, end, &mut |key, value| match visit(key, value) {
        Ok(step) => step,
        Err(e) => {
            failure = Some(e);
            crate::store::series::Visit::Stop
        }
    })?;
    failure.map_or(Ok(()), Err)
}

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A store's retention, in units a [`RetentionWorker`] runs one at a time off the async threads.
pub trait Expiring: Send + Sync + 'static {
    /// Where a round goes on after a unit (`()` for a store whose round is one unit).
    type Cursor: Send + 'static;
    type Error: std::fmt::Display + Send + 'static;
    const NAMES: RetentionNames;

    /// Deletes what expired as of the store's clock in one unit starting at `cursor` (none: a new
    /// round): how many deletions it issued, and where the round goes on (none: it is done).
    fn expire_unit(&self, cursor: Option<Self::Cursor>) -> Result<(usize, Option<Self::Cursor>), Self::Error>;
}

/// How a store's retention is named in the worker runner and the logs.
pub struct RetentionNames {
    pub worker: &'static str,
    /// What expires, in the warnings ("metric", "log").
    pub what: &'static str,
    /// The debug line of a unit that deleted something.
    pub deleted: &'static str,
}

/// Runs a store's retention: a unit at a time while a round has more, a round every `interval`.
pub struct RetentionWorker<S: Expiring> {
    store: Arc<S>,
    interval: Duration,
    /// Where the current round goes on; none: the next unit starts a round.
    cursor: Option<S::Cursor>,
}

impl<S: Expiring> RetentionWorker<S> {
    pub fn new(store: Arc<S>, interval: Duration) -> RetentionWorker<S> {
        RetentionWorker { store, interval, cursor: None }
    }
}

#[async_trait::async_trait]
impl<S: Expiring> Worker for RetentionWorker<S> {
    fn name(&self) -> &'static str {
        S::NAMES.worker
    }

    async fn work(&mut self) -> WorkerState {
        let store = self.store.clone();
        let cursor = self.cursor.take();
        match tokio::task::spawn_blocking(move || store.expire_unit(cursor)).await {
            Ok(Ok((deleted, next))) => {
                if deleted > 0 {
                    tracing::debug!(ranges = deleted, "{}", S::NAMES.deleted);
                }
                self.cursor = next;
                if self.cursor.is_some() { WorkerState::Busy } else { WorkerState::Idle }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "{} retention failed; retrying next round", S::NAMES.what);
                WorkerState::Idle
            }
            Err(e) => {
                tracing::error!(error = %e, "{} retention task failed", S::NAMES.what);
                WorkerState::Idle
            }
        }
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::time::sleep(self.interval).await;
        WorkerState::Busy
    }
}
