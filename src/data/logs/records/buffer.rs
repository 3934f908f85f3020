//! The pending logs in memory: every pending group (`w` key) the store has written and not yet
//! turned into blocks, by slice, and the pure policy that says which slices to flush.
//!
//! A group is added once its synced write returned (so a reader never sees a log before it is
//! durable) and stays visible until the batch that writes its blocks and deletes its key has
//! been applied: a flush first moves the groups it takes to `flushing`, where reads still find
//! them, and drops them only after its write. A read takes its snapshot of the groups before it
//! reads blocks, so a log is always in one or the other (in both for a moment: reads drop the
//! repeat by cursor).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::block;
use super::keys::SLICE_MS;
use crate::data::logs::LogCursor;

/// One pending group in memory: its key, its stored value (version byte, then rows) and the
/// range of its cursors.
#[derive(Debug)]
pub struct Chunk {
    pub key: Vec<u8>,
    pub slice: i64,
    pub value: Vec<u8>,
    pub first: LogCursor,
    pub last: LogCursor,
    pub count: usize,
}

impl Chunk {
    /// The rows of the group.
    pub fn rows(&self) -> &[u8] {
        self.value.get(1..).unwrap_or_default()
    }

    /// A chunk of `value` (version, rows) stored under `key` of `slice`; none without rows.
    pub fn new(key: Vec<u8>, slice: i64, value: Vec<u8>) -> Result<Option<Chunk>, crate::data::series_store::ValueError> {
        let mut range: Option<(LogCursor, LogCursor)> = None;
        let mut count = 0;
        for row in block::rows(block::pending_rows(&value)?) {
            let cursor = row?.cursor;
            count += 1;
            range = Some(match range {
                None => (cursor, cursor),
                Some((first, last)) => (first.min(cursor), last.max(cursor)),
            });
        }
        Ok(range.map(|(first, last)| Chunk { key, slice, value, first, last, count }))
    }
}

/// When the store flushes pending logs into blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushLimits {
    /// Pending bytes past which the oldest slices are flushed (down to half of it).
    pub max_bytes: usize,
    /// A slice is closed this long after its end: on-time logs have arrived.
    pub grace_ms: i64,
    /// A closed slice is flushed once no log arrived for it this long...
    pub quiet_ms: i64,
    /// ...and any slice once its oldest pending log arrived this long ago.
    pub max_age_ms: i64,
    /// The most raw bytes of rows in one block (a row larger than that is a block of its own).
    pub block_bytes: usize,
    /// A write's logs of one slice and service, this many raw bytes or more, are written as
    /// blocks at once instead of pending ([`super::write`]).
    pub direct_bytes: usize,
}

/// The default `direct_bytes`, an eighth of a full block (512 KiB raw, about 2,000 nginx access
/// lines): a search reads every meta of its range, so blocks written at once may be smaller
/// than a flush's but not much; smaller parts stay pending and are flushed into full blocks.
pub const DIRECT_BYTES: usize = 512 << 10;

impl Default for FlushLimits {
    fn default() -> Self {
        FlushLimits { max_bytes: 64 << 20, grace_ms: 5_000, quiet_ms: 2_000, max_age_ms: 90_000, block_bytes: 4 << 20, direct_bytes: DIRECT_BYTES }
    }
}

/// One slice's pending logs as the policy sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceState {
    pub slice: i64,
    pub bytes: usize,
    /// When the slice's oldest and newest pending groups were added (node clock, epoch ms).
    pub first_added_ms: i64,
    pub last_added_ms: i64,
}

/// The slices to flush now, oldest first. `slices` are in slice order.
pub fn due(slices: &[SliceState], now_ms: i64, limits: &FlushLimits) -> Vec<i64> {
    let mut chosen: Vec<i64> = slices
        .iter()
        .filter(|s| {
            let closed = s.slice.saturating_add(SLICE_MS).saturating_add(limits.grace_ms) <= now_ms;
            let quiet = now_ms.saturating_sub(s.last_added_ms) >= limits.quiet_ms;
            let old = now_ms.saturating_sub(s.first_added_ms) >= limits.max_age_ms;
            (closed && quiet) || old
        })
        .map(|s| s.slice)
        .collect();
    let total: usize = slices.iter().map(|s| s.bytes).sum();
    if total > limits.max_bytes {
        let mut left = total - slices.iter().filter(|s| chosen.contains(&s.slice)).map(|s| s.bytes).sum::<usize>();
        for s in slices {
            if left <= limits.max_bytes / 2 {
                break;
            }
            if !chosen.contains(&s.slice) {
                chosen.push(s.slice);
                left -= s.bytes;
            }
        }
        chosen.sort_unstable();
    }
    chosen
}

#[derive(Debug, Default)]
struct SliceBuf {
    chunks: Vec<Arc<Chunk>>,
    bytes: usize,
    first_added_ms: i64,
    last_added_ms: i64,
}

/// Every pending group in memory.
#[derive(Debug, Default)]
pub struct Buffer {
    slices: BTreeMap<i64, SliceBuf>,
    /// Groups a flush has taken and not yet written.
    flushing: Vec<Arc<Chunk>>,
    bytes: usize,
}

impl Buffer {
    pub fn add(&mut self, chunk: Chunk, now_ms: i64) {
        self.bytes += chunk.value.len();
        self.pend(Arc::new(chunk), now_ms);
    }

    /// Files `chunk` under its slice as added at `now_ms` (its bytes already counted).
    fn pend(&mut self, chunk: Arc<Chunk>, now_ms: i64) {
        let slice = self.slices.entry(chunk.slice).or_insert_with(|| SliceBuf { first_added_ms: now_ms, ..SliceBuf::default() });
        slice.bytes += chunk.value.len();
        slice.last_added_ms = slice.last_added_ms.max(now_ms);
        slice.chunks.push(chunk);
    }

    /// Bytes pending, the ones being flushed included.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn states(&self) -> Vec<SliceState> {
        self.slices
            .iter()
            .map(|(slice, buf)| SliceState { slice: *slice, bytes: buf.bytes, first_added_ms: buf.first_added_ms, last_added_ms: buf.last_added_ms })
            .collect()
    }

    /// Takes the groups of `slices` for a flush; they stay visible to reads until
    /// [`Buffer::flushed`] or go back with [`Buffer::restore`].
    pub fn take(&mut self, slices: &[i64]) -> Vec<Arc<Chunk>> {
        let mut taken = Vec::new();
        for slice in slices {
            if let Some(buf) = self.slices.remove(slice) {
                taken.extend(buf.chunks);
            }
        }
        self.flushing.extend(taken.iter().cloned());
        taken
    }

    /// The flush of `taken` was written: they are gone from memory.
    pub fn flushed(&mut self, taken: &[Arc<Chunk>]) {
        self.flushing.retain(|c| !taken.iter().any(|t| Arc::ptr_eq(c, t)));
        self.bytes = self.bytes.saturating_sub(taken.iter().map(|c| c.value.len()).sum());
    }

    /// The flush of `taken` failed: they are pending again.
    pub fn restore(&mut self, taken: Vec<Arc<Chunk>>, now_ms: i64) {
        self.flushing.retain(|c| !taken.iter().any(|t| Arc::ptr_eq(c, t)));
        for chunk in taken {
            self.pend(chunk, now_ms);
        }
    }

    /// The groups (pending or being flushed) of slices `first..=last`.
    pub fn snapshot(&self, first: i64, last: i64) -> Vec<Arc<Chunk>> {
        let mut out: Vec<Arc<Chunk>> = self.slices.range(first..=last).flat_map(|(_, buf)| buf.chunks.iter().cloned()).collect();
        out.extend(self.flushing.iter().filter(|c| (first..=last).contains(&c.slice)).cloned());
        out
    }

    /// Drops the groups of slices before `slice` (expired; their keys are deleted by the caller).
    pub fn drop_before(&mut self, slice: i64) {
        let kept = self.slices.split_off(&slice);
        let dropped: usize = self.slices.values().map(|b| b.bytes).sum();
        self.slices = kept;
        self.bytes = self.bytes.saturating_sub(dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(slice: i64, bytes: usize, first: i64, last: i64) -> SliceState {
        SliceState { slice, bytes, first_added_ms: first, last_added_ms: last }
    }

    #[test]
    fn closed_quiet_slices_and_old_ones_are_due() {
        let limits = FlushLimits { max_bytes: 1000, ..FlushLimits::default() };
        let now = 10 * SLICE_MS;
        let slices = [
            // closed, quiet: due
            state(8 * SLICE_MS, 10, now - 30_000, now - 3_000),
            // not closed (within the grace) and still written to: not yet
            state(9 * SLICE_MS, 10, now - 30_000, now - 500),
            // the open slice
            state(10 * SLICE_MS, 10, now - 1_000, now),
            // a future slice whose oldest log waits too long: due
            state(20 * SLICE_MS, 10, now - 90_000, now),
        ];
        assert_eq!(due(&slices, now, &limits), vec![8 * SLICE_MS, 20 * SLICE_MS]);
        // Within the grace: not closed yet.
        let fresh = [state(9 * SLICE_MS, 10, now - 60_000, now - 10_000)];
        assert_eq!(due(&fresh, 10 * SLICE_MS + 4_999, &limits), Vec::<i64>::new());
        assert_eq!(due(&fresh, 10 * SLICE_MS + 5_000, &limits), vec![9 * SLICE_MS]);
    }

    #[test]
    fn over_the_memory_bound_the_oldest_slices_go_until_half_is_left() {
        let limits = FlushLimits { max_bytes: 1000, ..FlushLimits::default() };
        let now = 100 * SLICE_MS;
        let open = |slice: i64, bytes| state(slice * SLICE_MS, bytes, now, now);
        assert_eq!(due(&[open(100, 600), open(101, 400)], now, &limits), Vec::<i64>::new(), "at the bound: nothing");
        assert_eq!(due(&[open(100, 600), open(101, 401)], now, &limits), vec![100 * SLICE_MS]);
        assert_eq!(due(&[open(100, 300), open(101, 300), open(102, 401)], now, &limits), vec![100 * SLICE_MS, 101 * SLICE_MS]);
        assert_eq!(due(&[open(100, 2000)], now, &limits), vec![100 * SLICE_MS], "one big open slice goes whole");
    }

    fn chunk(slice: i64, seq: u64) -> Chunk {
        let mut value = vec![block::FORMAT_VERSION];
        block::push_row(&mut value, LogCursor { timestamp_ms: slice + 1, sequence: seq }, b"x");
        Chunk::new(vec![seq as u8], slice, value).expect("valid").expect("one row")
    }

    #[test]
    fn taken_groups_stay_visible_until_flushed_and_come_back_on_failure() {
        let mut buffer = Buffer::default();
        buffer.add(chunk(0, 1), 10);
        buffer.add(chunk(SLICE_MS, 2), 11);
        let bytes = buffer.bytes();
        let taken = buffer.take(&[0]);
        assert_eq!(taken.len(), 1);
        assert_eq!(buffer.snapshot(0, SLICE_MS).len(), 2, "a group being flushed is still read");
        assert_eq!(buffer.states().len(), 1, "but no longer due");
        buffer.restore(taken, 20);
        assert_eq!(buffer.states().len(), 2);
        assert_eq!(buffer.bytes(), bytes);
        let taken = buffer.take(&[0, SLICE_MS]);
        buffer.flushed(&taken);
        assert_eq!(buffer.snapshot(i64::MIN, i64::MAX).len(), 0);
        assert_eq!(buffer.bytes(), 0);
        buffer.add(chunk(0, 3), 30);
        buffer.add(chunk(2 * SLICE_MS, 4), 30);
        buffer.drop_before(SLICE_MS);
        assert_eq!(buffer.snapshot(i64::MIN, i64::MAX).iter().map(|c| c.slice).collect::<Vec<_>>(), vec![2 * SLICE_MS]);
        assert_eq!(buffer.bytes(), buffer.snapshot(i64::MIN, i64::MAX)[0].value.len());
        assert!(Chunk::new(vec![], 0, vec![block::FORMAT_VERSION]).expect("valid").is_none(), "no rows: no chunk");
        assert!(Chunk::new(vec![], 0, vec![block::FORMAT_VERSION, 0, 1]).is_err(), "a cut row is an error");
    }
}
