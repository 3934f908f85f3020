//! The read path: only the asked time range is scanned, and only as far as the page needs.
//!
//! Oldest first is one forward scan from the lower bound, stopped at the limit. Newest first
//! walks back from the upper bound in windows of [`FIRST_WINDOW_MS`], doubling each time (the
//! key space has no reverse iterator): each window is scanned forward keeping its newest
//! matches, until the page is full or the lower bound is reached. A page of the newest logs of
//! a busy store reads about a second of logs; a rare match over a long range costs at most about
//! twice a full scan of the range, in a few dozen seeks.
//!
//! With a `service` filter the same walk runs over that service's index keys (keys only), and
//! the logs they name are read by batched point lookups of [`RESOLVE_CHUNK`]: a quiet service
//! among busy ones costs its own logs, not the range's.
//!
//! `after` is a position in the read's own order: oldest first, logs after it (tailing); newest
//! first, logs before it (the next page).

use std::collections::VecDeque;

use super::{V1LogStore, corrupt, keys};
use crate::data::logs::{LogCursor, LogFilter, LogOrder, LogStoreError, StoredLog};
use crate::store::series::Visit;

/// The width of the newest window a newest-first read scans first.
pub const FIRST_WINDOW_MS: i64 = 1_000;

/// Logs read per batched point lookup of an index read.
pub const RESOLVE_CHUNK: usize = 256;

impl V1LogStore {
    pub(super) fn read(&self, filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError> {
        let Some((limit, lower, upper)) = super::super::read::page_bounds(filter) else { return Ok(Vec::new()) };
        match filter.order {
            LogOrder::OldestFirst => match &filter.service {
                None => Ok(self.scan(lower, upper, filter, limit, Keep::Oldest)?.into()),
                Some(service) => self.oldest_of_service(service, lower, upper, filter, limit),
            },
            LogOrder::NewestFirst => {
                let mut out = Vec::with_capacity(limit.min(1024));
                let mut window_end = upper;
                let mut width = FIRST_WINDOW_MS;
                loop {
                    let window_start = lower.max(keys::first_of(window_end.timestamp_ms.saturating_sub(width)));
                    out.extend(self.newest_in(window_start, window_end, filter, limit - out.len())?);
                    if out.len() >= limit || window_start <= lower {
                        return Ok(out);
                    }
                    window_end = window_start;
                    width = width.saturating_mul(2);
                }
            }
        }
    }

    /// The newest `limit` matching logs in `[lower, upper)`, newest first.
    fn newest_in(&self, lower: LogCursor, upper: LogCursor, filter: &LogFilter, limit: usize) -> Result<Vec<StoredLog>, LogStoreError> {
        let Some(service) = &filter.service else {
            return Ok(self.scan(lower, upper, filter, limit, Keep::Newest)?.into_iter().rev().collect());
        };
        let cursors = self.index_cursors(service, lower, upper, usize::MAX)?;
        let mut out = Vec::new();
        for chunk in cursors.rchunks(RESOLVE_CHUNK) {
            for log in self.resolve(chunk, filter)?.into_iter().rev() {
                out.push(log);
                if out.len() >= limit {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// The oldest `limit` matching logs of `service` in `[lower, upper)`, through the index.
    fn oldest_of_service(&self, service: &str, lower: LogCursor, upper: LogCursor, filter: &LogFilter, limit: usize) -> Result<Vec<StoredLog>, LogStoreError> {
        let mut out = Vec::new();
        let mut from = lower;
        loop {
            let chunk = self.index_cursors(service, from, upper, RESOLVE_CHUNK)?;
            for log in self.resolve(&chunk, filter)? {
                out.push(log);
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            match chunk.last() {
                Some(last) if chunk.len() == RESOLVE_CHUNK && keys::successor(*last) > *last => from = keys::successor(*last),
                _ => return Ok(out),
            }
        }
    }

    /// The positions of `service`'s logs in `[lower, upper)`, in order, at most `max`.
    fn index_cursors(&self, service: &str, lower: LogCursor, upper: LogCursor, max: usize) -> Result<Vec<LogCursor>, LogStoreError> {
        let mut out = Vec::new();
        let mut failure = None;
        self.kv.visit_range(&keys::service_key(service, lower), &keys::service_key(service, upper), &mut |key, _| {
            match keys::decode_service_key(key) {
                Some((cursor, _)) => {
                    out.push(cursor);
                    if out.len() >= max { Visit::Stop } else { Visit::Next }
                }
                None => {
                    failure = Some(corrupt(key, "not a service index key"));
                    Visit::Stop
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The logs at `cursors` that pass the filter, in the same order, read in one batch. A
    /// position without a log is skipped: the log and its index key are written and expired
    /// together, so none is expected.
    fn resolve(&self, cursors: &[LogCursor], filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError> {
        let keys: Vec<Vec<u8>> = cursors.iter().map(|cursor| keys::log_key(*cursor)).collect();
        let values = self.kv.get_many(&keys)?;
        let mut out = Vec::with_capacity(keys.len());
        for (key, value) in keys.iter().zip(values) {
            if let Some(value) = value
                && let Some(log) = read_one(key, &value, filter)?
            {
                out.push(log);
            }
        }
        Ok(out)
    }

    /// The matching logs in `[lower, upper)`, in key order: the first `limit` of them, or the
    /// last `limit`.
    fn scan(&self, lower: LogCursor, upper: LogCursor, filter: &LogFilter, limit: usize, keep: Keep) -> Result<VecDeque<StoredLog>, LogStoreError> {
        let mut found = VecDeque::new();
        crate::data::series_store::try_visit_range::<LogStoreError>(self.kv.as_ref(), &keys::log_key(lower), &keys::log_key(upper), &mut |key, value| {
            let Some(log) = read_one(key, value, filter)? else { return Ok(Visit::Next) };
            found.push_back(log);
            Ok(match keep {
                Keep::Oldest if found.len() >= limit => Visit::Stop,
                Keep::Oldest => Visit::Next,
                Keep::Newest => {
                    if found.len() > limit {
                        found.pop_front();
                    }
                    Visit::Next
                }
            })
        })?;
        Ok(found)
    }
}

#[derive(Debug, Clone, Copy)]
enum Keep {
    Oldest,
    Newest,
}

/// One stored pair as a log when it passes the filter: names are checked on the value's first
/// bytes, tags and keyword on the value read in place, and only a match is copied out.
fn read_one(key: &[u8], value: &[u8], filter: &LogFilter) -> Result<Option<StoredLog>, LogStoreError> {
    let cursor = keys::decode_log_key(key).ok_or_else(|| corrupt(key, "not a log key"))?;
    super::super::read::match_row(super::super::block::Row { cursor, value }, key, filter)
}
