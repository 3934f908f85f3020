//! The read path: metas first, then only the blocks that may hold a match.
//!
//! A read walks its range a window of slices at a time: oldest first from the lower bound up,
//! newest first from the upper bound down, the first window one slice wide and each next one
//! twice as wide, until the page is full or the range is done. In a window it gathers the
//! sources that may hold a match:
//! - the metas of the window's slices (with a `service` filter, only that service's, one seek
//!   per slice), kept when their cursor range meets the read's and their index passes the
//!   filter's keyword trigrams and terms ([`super::index`]);
//! - the pending groups of those slices in memory (taken before the metas are read, so a log
//!   being flushed is found in one or the other; a log found twice is kept once).
//!
//! Sources are read in the read's order (by first cursor, or by last cursor newest first), and
//! the walk stops at the first source that cannot hold anything better than the page's worst
//! log once the page is full: a page of the newest logs of a busy store reads about one block.
//! A block is decompressed only when read; within it, rows outside the bounds or that cannot
//! enter the page are skipped on their cursor, names are checked on the value's first bytes,
//! tags and keyword on the value read in place, and only matches are decoded.
//!
//! `after` is a position in the read's own order: oldest first, logs after it (tailing); newest
//! first, logs before it (the next page).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::block::{self, Row};
use super::buffer::Chunk;
use super::index::{Probe, Term};
use super::{LogStore, MAX_LIMIT, codec, corrupt, keys, lock};
use crate::data::logs::{LogCursor, LogFilter, LogOrder, LogStoreError, StoredLog};
use crate::store::series::Visit;

/// Blocks fetched per batched point lookup.
const FETCH_CHUNK: usize = 8;

/// Where a window's candidate logs are.
enum Source {
    /// `key` is the block's (its meta's passed).
    Block { key: Vec<u8>, slice: i64, first: LogCursor, last: LogCursor },
    Pending(Arc<Chunk>),
}

impl Source {
    fn range(&self) -> (LogCursor, LogCursor) {
        match self {
            Source::Block { first, last, .. } => (*first, *last),
            Source::Pending(chunk) => (chunk.first, chunk.last),
        }
    }
}

/// The best `limit` matches so far, in cursor order.
struct Page {
    logs: BTreeMap<LogCursor, StoredLog>,
    limit: usize,
    order: LogOrder,
}

impl Page {
    fn full(&self) -> bool {
        self.logs.len() >= self.limit
    }

    /// The worst log the page holds (the last it would give up), when full.
    fn worst(&self) -> Option<LogCursor> {
        if !self.full() {
            return None;
        }
        match self.order {
            LogOrder::OldestFirst => self.logs.keys().next_back().copied(),
            LogOrder::NewestFirst => self.logs.keys().next().copied(),
        }
    }

    /// Whether a log at `cursor` could enter the page.
    fn wants(&self, cursor: LogCursor) -> bool {
        match (self.worst(), self.order) {
            (None, _) => true,
            (Some(worst), LogOrder::OldestFirst) => cursor < worst,
            (Some(worst), LogOrder::NewestFirst) => cursor > worst,
        }
    }

    fn add(&mut self, log: StoredLog) {
        self.logs.insert(log.cursor, log);
        if self.logs.len() > self.limit {
            match self.order {
                LogOrder::OldestFirst => self.logs.pop_last(),
                LogOrder::NewestFirst => self.logs.pop_first(),
            };
        }
    }
}

impl LogStore {
    pub(super) fn read(&self, filter: &LogFilter) -> Result<Vec<StoredLog>, LogStoreError> {
        let Some((limit, lower, upper)) = page_bounds(filter) else { return Ok(Vec::new()) };
        let last_ms = if upper.sequence == 0 { upper.timestamp_ms.saturating_sub(1) } else { upper.timestamp_ms };
        let (first_slice, last_slice) = (keys::slice_of(lower.timestamp_ms), keys::slice_of(last_ms));
        let mut terms = Vec::new();
        if let Some(instance) = &filter.instance {
            terms.push(Term::Instance(instance.as_bytes()));
        }
        if let Some(endpoint) = &filter.endpoint {
            terms.push(Term::Endpoint(endpoint.as_bytes()));
        }
        terms.extend(filter.tags.iter().map(|(k, v)| Term::Tag(k.as_bytes(), v.as_bytes())));
        let probe = Probe::new(filter.keyword.as_deref(), &terms);
        let read = Read { store: self, filter, probe, lower, upper };
        let mut out = Vec::with_capacity(limit.min(1024));
        let mut width = 1i64;
        match filter.order {
            LogOrder::OldestFirst => {
                let mut from = first_slice;
                loop {
                    let to = from.saturating_add((width - 1).saturating_mul(keys::SLICE_MS)).min(last_slice);
                    out.extend(read.window(from, to, limit - out.len())?);
                    if out.len() >= limit || to >= last_slice {
                        return Ok(out);
                    }
                    from = to.saturating_add(keys::SLICE_MS);
                    width = width.saturating_mul(2);
                }
            }
            LogOrder::NewestFirst => {
                let mut to = last_slice;
                loop {
                    let from = to.saturating_sub((width - 1).saturating_mul(keys::SLICE_MS)).max(first_slice);
                    out.extend(read.window(from, to, limit - out.len())?);
                    if out.len() >= limit || from <= first_slice {
                        return Ok(out);
                    }
                    to = from.saturating_sub(keys::SLICE_MS);
                    width = width.saturating_mul(2);
                }
            }
        }
    }
}

/// One read's fixed parts.
struct Read<'a> {
    store: &'a LogStore,
    filter: &'a LogFilter,
    probe: Probe,
    lower: LogCursor,
    upper: LogCursor,
}

impl Read<'_> {
    /// Whether a source's cursor range meets `[lower, upper)`.
    fn meets(&self, first: LogCursor, last: LogCursor) -> bool {
        last >= self.lower && first < self.upper
    }

    /// The best `limit` matches of slices `from..=to`, in the read's order.
    fn window(&self, from: i64, to: i64, limit: usize) -> Result<Vec<StoredLog>, LogStoreError> {
        // Memory first: a group flushed after this is in the metas read next.
        let pending = lock(&self.store.buffer).snapshot(from, to);
        let mut sources: Vec<Source> = pending.into_iter().filter(|c| self.meets(c.first, c.last)).map(Source::Pending).collect();
        self.blocks_of(from, to, &mut sources)?;
        match self.filter.order {
            LogOrder::OldestFirst => sources.sort_by_key(|s| s.range().0),
            LogOrder::NewestFirst => sources.sort_by_key(|s| std::cmp::Reverse(s.range().1)),
        }
        let mut page = Page { logs: BTreeMap::new(), limit, order: self.filter.order };
        let mut index = 0;
        while index < sources.len() {
            // Blocks are fetched a few at a time, only as far as the page still wants them.
            let batch_end = (index + FETCH_CHUNK).min(sources.len());
            let wanted: Vec<&Source> = sources[index..batch_end].iter().take_while(|s| self.could_improve(&page, s)).collect();
            if wanted.is_empty() {
                break;
            }
            let keys: Vec<Vec<u8>> = wanted.iter().filter_map(|s| if let Source::Block { key, .. } = s { Some(key.clone()) } else { None }).collect();
            let mut values = self.store.kv.get_many(&keys)?.into_iter();
            for source in &wanted {
                if !self.could_improve(&page, source) {
                    break;
                }
                match source {
                    Source::Pending(chunk) => self.read_rows(chunk.rows(), &chunk.key, &mut page)?,
                    Source::Block { key, slice, .. } => match values.next().flatten() {
                        Some(value) => {
                            let rows = block::decode_block(&value).map_err(|detail| corrupt(key, detail))?;
                            self.read_rows(&rows, key, &mut page)?;
                        }
                        // Retention deleted it between the meta and the block: expired logs.
                        None if *slice < keys::slice_of(self.store.cutoff_ms((self.store.now_ms)())) => {}
                        None => return Err(corrupt(key, "a meta without its block")),
                    },
                }
            }
            index += wanted.len();
        }
        let logs = page.logs.into_values();
        Ok(match self.filter.order {
            LogOrder::OldestFirst => logs.collect(),
            LogOrder::NewestFirst => logs.rev().collect(),
        })
    }

    /// Whether `source` may hold a log the page wants (sources come in the read's order, so
    /// the first that cannot ends the window).
    fn could_improve(&self, page: &Page, source: &Source) -> bool {
        let (first, last) = source.range();
        match self.filter.order {
            LogOrder::OldestFirst => page.wants(first),
            LogOrder::NewestFirst => page.wants(last),
        }
    }

    /// Adds the blocks of slices `from..=to` whose metas say they may hold a match.
    fn blocks_of(&self, from: i64, to: i64, sources: &mut Vec<Source>) -> Result<(), LogStoreError> {
        let start = match &self.filter.service {
            Some(service) => keys::service_start(keys::META_PREFIX, from, service),
            None => keys::slice_start(keys::META_PREFIX, from),
        };
        let end = keys::slice_start(keys::META_PREFIX, to.saturating_add(keys::SLICE_MS));
        let mut failure = None;
        self.store.kv.visit_range(&start, &end, &mut |key, value| {
            let Some(parts) = keys::decode_block_key(key) else {
                failure = Some(corrupt(key, "not a block meta key"));
                return Visit::Stop;
            };
            if let Some(service) = &self.filter.service
                && parts.service != service
            {
                // Another service: on to the wanted one's keys (this slice's, or the next one's).
                let wanted = keys::service_start(keys::META_PREFIX, parts.slice, service);
                return if key < wanted.as_slice() {
                    Visit::Seek(wanted)
                } else {
                    match parts.slice.checked_add(keys::SLICE_MS) {
                        Some(next) => Visit::Seek(keys::service_start(keys::META_PREFIX, next, service)),
                        None => Visit::Stop,
                    }
                };
            }
            match block::view_meta(value) {
                Ok(meta) => {
                    if self.meets(meta.first, meta.last) && meta.index.may_match(&self.probe) {
                        sources.push(Source::Block { key: keys::with_prefix(key, keys::BLOCK_PREFIX), slice: parts.slice, first: meta.first, last: meta.last });
                    }
                    Visit::Next
                }
                Err(detail) => {
                    failure = Some(corrupt(key, detail));
                    Visit::Stop
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Adds the matching rows of `rows` (stored under `key`) the page wants.
    fn read_rows(&self, rows: &[u8], key: &[u8], page: &mut Page) -> Result<(), LogStoreError> {
        let mut all: Vec<Row<'_>> = Vec::new();
        for row in block::rows(rows) {
            let row = row.map_err(|detail| corrupt(key, detail))?;
            if row.cursor >= self.lower && row.cursor < self.upper {
                all.push(row);
            }
        }
        // Best first, so once the page is full the rest are skipped on their cursor.
        match self.filter.order {
            LogOrder::OldestFirst => all.sort_unstable_by_key(|r| r.cursor),
            LogOrder::NewestFirst => all.sort_unstable_by_key(|r| std::cmp::Reverse(r.cursor)),
        }
        for row in all {
            if !page.wants(row.cursor) {
                break;
            }
            if let Some(log) = match_row(row, key, self.filter)? {
                page.add(log);
            }
        }
        Ok(())
    }
}

/// A read's limit and the positions it covers, `[lower, upper)`; none when it can return nothing.
pub(crate) fn page_bounds(filter: &LogFilter) -> Option<(usize, LogCursor, LogCursor)> {
    let limit = filter.limit.min(MAX_LIMIT);
    if limit == 0 || filter.start_ms > filter.end_ms {
        return None;
    }
    let (lower, upper) = bounds(filter);
    (lower < upper).then_some((limit, lower, upper))
}

/// The positions a read covers, `[lower, upper)`: its time range, narrowed by `after`.
fn bounds(filter: &LogFilter) -> (LogCursor, LogCursor) {
    let mut lower = keys::first_of(filter.start_ms);
    let mut upper = match filter.end_ms.checked_add(1) {
        Some(ms) => keys::first_of(ms),
        None => keys::last_of(i64::MAX),
    };
    match (filter.order, filter.after) {
        (LogOrder::OldestFirst, Some(after)) => lower = lower.max(keys::successor(after)),
        (LogOrder::NewestFirst, Some(after)) => upper = upper.min(after),
        (_, None) => {}
    }
    (lower, upper)
}

/// One row as a log when it passes the filter: names are checked on the value's first bytes,
/// tags and keyword on the value read in place, and only a match is copied out.
pub(crate) fn match_row(row: Row<'_>, key: &[u8], filter: &LogFilter) -> Result<Option<StoredLog>, LogStoreError> {
    let [service, instance, endpoint] = codec::names(row.value).map_err(|detail| corrupt(key, detail))?;
    let wanted = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    if !(wanted(&filter.service, service) && wanted(&filter.instance, instance) && wanted(&filter.endpoint, endpoint)) {
        return Ok(None);
    }
    let view = codec::view(row.value).map_err(|detail| corrupt(key, detail))?;
    let matches = filter.tags.iter().all(|(key, value)| view.tags.iter().any(|(k, v)| k == key && v == value))
        && filter.keyword.as_deref().is_none_or(|keyword| view.content.contains(keyword));
    if !matches {
        return Ok(None);
    }
    let log = view.to_kept(row.cursor.timestamp_ms).map_err(|detail| corrupt(key, detail))?;
    Ok(Some(StoredLog { cursor: row.cursor, log }))
}
