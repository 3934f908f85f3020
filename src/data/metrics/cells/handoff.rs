//! Handing partial state to the entity's owner (SkyWalking's L1 → L2), the store's side.
//!
//! Every node writes the cells of what it evaluated, durably (the store's write path,
//! unchanged). A node that does not own an entity then moves
//! that entity's cells out of its cell space into an **outbox record** addressed to the owner,
//! in one synced batch (the cells deleted, the record written): the partial state exists in
//! exactly one place on this node at any time. The record goes to the owner over the bus; the
//! owner combines its cells into its own and records the sender's sequence number (its
//! **applied mark**) in the same synced batch, so a record delivered twice (a lost answer, a
//! restart) is applied once. Then the sender deletes the record.
//!
//! Reads stay exact while a record is on its way: a cluster read takes every node's cells, its
//! outbox records (and, for [`DELIVERED_KEPT`], the records just delivered), and every node's
//! applied marks; a record counts unless its owner answered with a mark at or past its
//! sequence number (`partial::merge_cluster`).
//!
//! Key layout (beside the cells `c` and the index `i`):
//! - `o | owner | seq(u64)`: an outbox record: `version | n × (metric, info) | n × (key, cell)`;
//! - `h | sender`: the highest sequence number applied from `sender` (u64);
//! - `q`: this node's last sequence number (u64).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cell::Cell;
use super::{MetricStore, codec, keys, lock, read_lock, scan_all, write_lock};
use crate::base::ids::NodeId;
use crate::base::self_metrics::labels;
use crate::data::metrics::partial::{InFlight, InFlightRecord};
use crate::data::metrics::{Entity, Granularity, MetricInfo, MetricStoreError, PartialSeries, SeriesFilter};
use crate::data::series_store::{Reader, ValueError, put_bytes, put_str};
use crate::store::series::SeriesOp;

pub const OUTBOX_PREFIX: u8 = b'o';
pub const APPLIED_PREFIX: u8 = b'h';
const SEQ_KEY: &[u8] = b"q";

/// The version byte of an outbox record's value.
pub const RECORD_FORMAT_VERSION: u8 = 1;

/// How long a delivered record is still reported to reads: longer than any read's fan-out, so
/// a read that met the owner before it applied the record and this node after it deleted the
/// record still counts it once.
pub const DELIVERED_KEPT: Duration = Duration::from_secs(60);

/// Optimistic reads of the cells and what is in flight before a read takes the writer lock.
const CONSISTENT_TRIES: usize = 3;

/// The most cells one record carries (more make several records).
pub const RECORD_CELLS: usize = 2_000;

/// The most cell keys waiting to be looked at; past it the worker sweeps the recent window
/// instead of keeping every key.
pub const DIRTY_BOUND: usize = 500_000;

/// One batch of cells on its way to their owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffRecord {
    pub owner: NodeId,
    /// This node's sequence number: increasing, never reused.
    pub seq: u64,
    /// The index record (`codec::encode_info`) of every metric the cells belong to, by name.
    pub infos: Vec<(String, Vec<u8>)>,
    /// `(cell key, encoded cell)`, in the store's own layout.
    pub cells: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Cell keys written since the worker last looked (only while tracking is on: in a cluster).
pub(super) struct HandoffState {
    tracking: std::sync::atomic::AtomicBool,
    /// Bumped after every change that moves partial state between the cells, the outbox and
    /// the applied marks: a read retries when it changed under it.
    generation: std::sync::atomic::AtomicU64,
    dirty: Mutex<Dirty>,
    delivered: Mutex<VecDeque<(Instant, HandoffRecord)>>,
}

#[derive(Default)]
struct Dirty {
    keys: HashSet<Vec<u8>>,
    overflowed: bool,
}

impl HandoffState {
    /// The generation starts at the boot time in nanoseconds, so a node that restarted between
    /// two looks of a read never shows the same generation twice.
    pub(super) fn new() -> HandoffState {
        let boot = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        HandoffState {
            tracking: Default::default(),
            generation: std::sync::atomic::AtomicU64::new(boot.max(1)),
            dirty: Default::default(),
            delivered: Default::default(),
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Notes cells the write path just wrote.
    pub(super) fn mark<'a>(&self, written: impl Iterator<Item = &'a [u8]>) {
        if !self.tracking.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut dirty = lock(&self.dirty);
        for key in written {
            if dirty.keys.len() >= DIRTY_BOUND {
                dirty.overflowed = true;
                return;
            }
            if !dirty.keys.contains(key) {
                dirty.keys.insert(key.to_vec());
            }
        }
    }
}

/// What one move did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moved {
    pub records: usize,
    pub cells: usize,
}

/// What applying a peer's records did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The sender's applied mark after the call.
    pub through: u64,
    /// Minute series whose cells changed: (metric, entity, bucket), for export.
    pub minutes: Vec<(String, Entity, i64)>,
    /// Cells merged into this node's (0 for a record already applied).
    pub cells: usize,
    /// Cells left out: unreadable, or of another shape than this node's.
    pub refused: usize,
}

impl MetricStore {
    /// Turns tracking of written cells on (in a cluster) or off (alone: nothing is handed off).
    pub fn set_handoff_tracking(&self, on: bool) {
        self.handoff.tracking.store(on, std::sync::atomic::Ordering::Relaxed);
        if !on {
            *lock(&self.handoff.dirty) = Dirty::default();
        }
    }

    /// The cell keys written since the last call, and whether some were not kept (the bound was
    /// reached: sweep the recent window).
    pub fn take_dirty(&self) -> (Vec<Vec<u8>>, bool) {
        let dirty = std::mem::take(&mut *lock(&self.handoff.dirty));
        (dirty.keys.into_iter().collect(), dirty.overflowed)
    }

    /// Marks every stored cell of the last `minutes` minutes (their minute cells, and the hour
    /// and day cells holding them) to be looked at: after a start or a membership change, when
    /// what this node holds may belong elsewhere.
    pub fn mark_recent(&self, now_ms: i64, minutes: i64) -> Result<usize, MetricStoreError> {
        let metrics: Vec<String> = read_lock(&self.index).keys().cloned().collect();
        let from_ms = now_ms.saturating_sub(minutes.saturating_mul(60_000));
        let mut found: Vec<Vec<u8>> = Vec::new();
        for metric in &metrics {
            for granularity in Granularity::ALL {
                let start = keys::bucket_key(metric, granularity, keys::bucket_of(granularity, from_ms));
                let end = keys::bucket_key(metric, granularity, keys::next_bucket(granularity, keys::bucket_of(granularity, now_ms)));
                // Keys only: the cells are read when they move.
                self.kv.visit_range(&start, &end, &mut |key, _| {
                    found.push(key.to_vec());
                    crate::store::series::Visit::Next
                })?;
            }
        }
        let count = found.len();
        let mut dirty = lock(&self.handoff.dirty);
        for key in found {
            if dirty.keys.len() >= DIRTY_BOUND {
                dirty.overflowed = true;
                break;
            }
            dirty.keys.insert(key);
        }
        Ok(count)
    }

    /// Moves the cells of `keys` that belong to another node (`owner_of` gives the owner of an
    /// entity's [`keys::owner_key`], none for this node) into outbox records, one synced batch.
    /// Nothing moves once `max_records` records wait: the cells stay here (reads stay exact)
    /// until the outbox drains.
    pub fn move_to_outbox(
        &self,
        keys: Vec<Vec<u8>>,
        owner_of: &dyn Fn(&[u8]) -> Option<NodeId>,
        max_records: usize,
    ) -> Result<Moved, MetricStoreError> {
        // A key given twice (a round's dirty keys and the recent window both name it) moves
        // once: a record holding a cell twice would count it twice in every read of it.
        let mut keys = keys;
        keys.sort_unstable();
        keys.dedup();
        let _writer = lock(&self.writer);
        let waiting = self.outbox_len()?;
        if waiting >= max_records {
            return Ok(Moved::default());
        }
        // Owner of each key, looked up once per entity.
        let mut owners: BTreeMap<Vec<u8>, Option<NodeId>> = BTreeMap::new();
        let mut by_owner: BTreeMap<NodeId, Vec<(Vec<u8>, String)>> = BTreeMap::new();
        for key in keys {
            let Ok(name) = keys::decode_full_cell_key(&key) else { continue };
            let owner_key = keys::owner_key(&name.name.entity);
            let owner = owners.entry(owner_key).or_insert_with_key(|k| owner_of(k)).clone();
            if let Some(owner) = owner {
                by_owner.entry(owner).or_default().push((key, name.metric));
            }
        }
        if by_owner.is_empty() {
            return Ok(Moved::default());
        }
        let index = read_lock(&self.index).clone();
        // Never below the wall clock in microseconds: a node whose store was wiped starts past
        // every number it used before, so its owners' applied marks do not swallow its records.
        let floor = u64::try_from((self.now_ms)()).unwrap_or(0).saturating_mul(1000);
        let mut seq = self.last_seq()?.max(floor);
        let mut ops = Vec::new();
        let mut moved = Moved::default();
        for (owner, keyed) in by_owner {
            let wanted: Vec<Vec<u8>> = keyed.iter().map(|(k, _)| k.clone()).collect();
            let stored = self.kv.get_many(&wanted)?;
            let present: Vec<((Vec<u8>, String), Vec<u8>)> =
                keyed.into_iter().zip(stored).filter_map(|(keyed, value)| value.map(|v| (keyed, v))).collect();
            for chunk in present.chunks(RECORD_CELLS) {
                seq += 1;
                let metrics: BTreeSet<&str> = chunk.iter().map(|((_, metric), _)| metric.as_str()).collect();
                let infos = metrics.iter().filter_map(|m| index.get(*m).map(|info| (m.to_string(), codec::encode_info(info)))).collect();
                let cells: Vec<(Vec<u8>, Vec<u8>)> = chunk.iter().map(|((key, _), value)| (key.clone(), value.clone())).collect();
                for (key, _) in &cells {
                    ops.push(SeriesOp::Delete { key: key.clone() });
                }
                moved.cells += cells.len();
                moved.records += 1;
                let record = HandoffRecord { owner: owner.clone(), seq, infos, cells };
                ops.push(SeriesOp::Put { key: outbox_key(&owner, seq), value: encode_record(&record) });
            }
        }
        ops.push(SeriesOp::Put { key: SEQ_KEY.to_vec(), value: seq.to_be_bytes().to_vec() });
        self.kv.write(&ops, true)?;
        self.handoff.bump();
        Ok(moved)
    }

    /// The outbox, oldest first per owner (owners in id order), at most `limit` records.
    pub fn outbox(&self, limit: usize) -> Result<Vec<HandoffRecord>, MetricStoreError> {
        let mut out = Vec::new();
        let (start, end) = (vec![OUTBOX_PREFIX], vec![OUTBOX_PREFIX + 1]);
        for (key, value) in self.kv.scan_range(&start, &end, limit)? {
            out.push(decode_outbox(&key, &value).map_err(|detail| super::corrupt(&key, detail))?);
        }
        Ok(out)
    }

    fn outbox_len(&self) -> Result<usize, MetricStoreError> {
        let mut count = 0;
        self.kv.visit_range(&[OUTBOX_PREFIX], &[OUTBOX_PREFIX + 1], &mut |_, _| {
            count += 1;
            crate::store::series::Visit::Next
        })?;
        Ok(count)
    }

    fn last_seq(&self) -> Result<u64, MetricStoreError> {
        let stored = self.kv.get_many(&[SEQ_KEY.to_vec()])?;
        Ok(match stored.into_iter().next().flatten() {
            Some(bytes) => Reader::new(&bytes).u64().map_err(|e| super::corrupt(SEQ_KEY, e))?,
            None => 0,
        })
    }

    /// The owner applied `record`: it leaves the outbox (synced: a delivered record that came
    /// back after a crash could be taken back into the cells while its owner seems gone, and
    /// then count twice), and reads still see it for [`DELIVERED_KEPT`]. It joins the delivered
    /// list before it leaves the outbox, so a read in between sees it twice (counted once),
    /// never not at all.
    pub fn delivered(&self, record: HandoffRecord) -> Result<(), MetricStoreError> {
        let key = outbox_key(&record.owner, record.seq);
        {
            let mut delivered = lock(&self.handoff.delivered);
            let now = Instant::now();
            while delivered.front().is_some_and(|(at, _)| now.duration_since(*at) > DELIVERED_KEPT) {
                delivered.pop_front();
            }
            delivered.push_back((now, record));
        }
        self.kv.write(&[SeriesOp::Delete { key }], true)?;
        Ok(())
    }

    /// Takes `record` back (its owner left the cluster before applying it): its cells are
    /// combined into this node's own again, and will move to their new owner.
    pub fn take_back(&self, record: &HandoffRecord) -> Result<(), MetricStoreError> {
        let _writer = lock(&self.writer);
        let cells = distinct_cells(&record.cells);
        let wanted: Vec<Vec<u8>> = cells.iter().map(|(k, _)| k.to_vec()).collect();
        let stored = self.kv.get_many(&wanted)?;
        let mut ops = Vec::with_capacity(wanted.len() + 1);
        for ((key, bytes), local) in cells.into_iter().zip(stored) {
            let mut cell = codec::decode_cell(bytes).map_err(|e| super::corrupt(key, e))?;
            if let Some(local) = local {
                let local = codec::decode_cell(&local).map_err(|e| super::corrupt(key, e))?;
                let mut merged = local;
                if merged.combine(&cell).is_ok() {
                    cell = merged;
                }
            }
            ops.push(SeriesOp::Put { key: key.to_vec(), value: codec::encode_cell(&cell) });
        }
        ops.push(SeriesOp::Delete { key: outbox_key(&record.owner, record.seq) });
        self.kv.write(&ops, true)?;
        self.handoff.bump();
        self.handoff.mark(wanted.iter().map(Vec::as_slice));
        Ok(())
    }

    /// Applies `record` from `sender` unless its applied mark already covers it: its cells are
    /// combined into this node's, and the mark moves to the record's sequence number, in one
    /// synced batch. Cells that do not decode, or whose metric this node holds in another
    /// shape, are left out and counted.
    pub fn apply_handoff(&self, sender: &NodeId, record: &HandoffRecord) -> Result<Applied, MetricStoreError> {
        let _writer = lock(&self.writer);
        let mark_key = applied_key(sender);
        let through = self.applied_mark(&mark_key)?;
        if record.seq <= through {
            return Ok(Applied { through, ..Applied::default() });
        }
        let mut infos: BTreeMap<String, MetricInfo> = BTreeMap::new();
        for (name, bytes) in &record.infos {
            if let Ok(info) = codec::decode_info(name, bytes) {
                infos.insert(name.clone(), info);
            }
        }
        let mut new_metrics: BTreeMap<String, MetricInfo> = BTreeMap::new();
        let mut accepted: Vec<(Vec<u8>, Cell, keys::CellKey)> = Vec::new();
        let mut refused = 0;
        {
            let index = read_lock(&self.index);
            for (key, bytes) in distinct_cells(&record.cells) {
                let (Ok(name), Ok(cell)) = (keys::decode_full_cell_key(key), codec::decode_cell(bytes)) else {
                    refused += 1;
                    continue;
                };
                let Some(info) = infos.get(&name.metric) else {
                    refused += 1;
                    continue;
                };
                match index.get(&name.metric).or_else(|| new_metrics.get(&name.metric)) {
                    Some(known) if known == info => {}
                    Some(_) => {
                        refused += 1;
                        continue;
                    }
                    None => {
                        new_metrics.insert(name.metric.clone(), info.clone());
                    }
                }
                accepted.push((key.to_vec(), cell, name));
            }
        }
        let wanted: Vec<Vec<u8>> = accepted.iter().map(|(k, _, _)| k.clone()).collect();
        let stored = self.kv.get_many(&wanted)?;
        let mut ops = Vec::with_capacity(accepted.len() + new_metrics.len() + 1);
        let mut minutes = Vec::new();
        let mut written = Vec::with_capacity(accepted.len());
        for ((key, delta, name), local) in accepted.into_iter().zip(stored) {
            let cell = match local.map(|bytes| codec::decode_cell(&bytes)) {
                None => delta,
                Some(Ok(mut local)) => match local.combine(&delta) {
                    Ok(()) => local,
                    Err(_) => {
                        refused += 1;
                        continue;
                    }
                },
                Some(Err(_)) => {
                    // This node's own cell is unreadable: keep the peer's partial state out
                    // rather than overwrite what cannot be combined.
                    refused += 1;
                    continue;
                }
            };
            ops.push(SeriesOp::Put { key: key.clone(), value: codec::encode_cell(&cell) });
            if name.granularity == Granularity::Minute {
                minutes.push((name.metric, name.name.entity, name.name.bucket));
            }
            written.push(key);
        }
        for (name, info) in &new_metrics {
            ops.push(SeriesOp::Put { key: keys::index_key(name), value: codec::encode_info(info) });
        }
        ops.push(SeriesOp::Put { key: mark_key, value: record.seq.to_be_bytes().to_vec() });
        self.kv.write(&ops, true)?;
        self.handoff.bump();
        if !new_metrics.is_empty() {
            let mut index = write_lock(&self.index);
            for (name, info) in new_metrics {
                index.entry(name).or_insert(info);
            }
        }
        if refused > 0 {
            self.telemetry.values_rejected.get_or_create(&labels([("reason", "handoff_refused")])).inc_by(refused as u64);
        }
        // In a handover this node may not own these any more: look at them again.
        self.handoff.mark(written.iter().map(Vec::as_slice));
        Ok(Applied { through: record.seq, minutes, cells: written.len(), refused })
    }

    fn applied_mark(&self, key: &[u8]) -> Result<u64, MetricStoreError> {
        let stored = self.kv.get_many(&[key.to_vec()])?;
        Ok(match stored.into_iter().next().flatten() {
            Some(bytes) => Reader::new(&bytes).u64().map_err(|e| super::corrupt(key, e))?,
            None => 0,
        })
    }

    /// This node's cells for a read, with what is in flight ([`MetricStore::in_flight`]), as one
    /// state: read between two looks at the handoff generation, again when a move or an apply
    /// happened in between, and under the writer lock after [`CONSISTENT_TRIES`] tries.
    pub fn consistent_state(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<(Vec<PartialSeries>, InFlight), MetricStoreError> {
        use crate::data::metrics::MetricReader;
        for _ in 0..CONSISTENT_TRIES {
            let before = self.handoff.generation();
            let mut in_flight = self.in_flight(filter, granularity, start_ms, end_ms)?;
            let cells = self.read_partials(filter, granularity, start_ms, end_ms)?;
            if self.handoff.generation() == before {
                in_flight.generation = before;
                return Ok((cells, in_flight));
            }
        }
        let _writer = lock(&self.writer);
        let mut in_flight = self.in_flight(filter, granularity, start_ms, end_ms)?;
        in_flight.generation = self.handoff.generation();
        Ok((self.read_partials(filter, granularity, start_ms, end_ms)?, in_flight))
    }

    /// The handoff generation: it changes whenever partial state moves between this node's
    /// cells, its outbox and its applied marks (a move, an apply, a take-back).
    pub fn handoff_generation(&self) -> u64 {
        self.handoff.generation()
    }

    /// What is on its way from this node (outbox and recently delivered records, their cells
    /// filtered as a read of `filter` would filter), and the applied marks this node holds.
    pub fn in_flight(&self, filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64) -> Result<InFlight, MetricStoreError> {
        let mut records: Vec<(HandoffRecord, bool)> = self.outbox(usize::MAX)?.into_iter().map(|r| (r, false)).collect();
        {
            let delivered = lock(&self.handoff.delivered);
            let now = Instant::now();
            records.extend(delivered.iter().filter(|(at, _)| now.duration_since(*at) <= DELIVERED_KEPT).map(|(_, r)| (r.clone(), true)));
        }
        // A record both in the outbox and delivered (the read fell between the two steps of
        // `delivered`) is the delivered one.
        records.sort_by_key(|(r, delivered)| (r.owner.clone(), r.seq, !delivered));
        let first = keys::bucket_of(granularity, start_ms);
        let last = keys::bucket_of(granularity, end_ms);
        let mut out = InFlight::default();
        let mut seen = BTreeSet::new();
        for (record, delivered) in records {
            if !seen.insert((record.owner.clone(), record.seq)) {
                continue;
            }
            let mut series: BTreeMap<(String, Entity, String), Vec<(i64, Cell)>> = BTreeMap::new();
            for (key, bytes) in distinct_cells(&record.cells) {
                let Ok(name) = keys::decode_full_cell_key(key) else { continue };
                let wanted = name.granularity == granularity
                    && (filter.metric.is_empty() || filter.metric == name.metric)
                    && (first..=last).contains(&name.name.bucket)
                    && filter.passes(&name.name.entity);
                if !wanted {
                    continue;
                }
                let cell = codec::decode_cell(bytes).map_err(|e| super::corrupt(key, e))?;
                series.entry((name.metric, name.name.entity, name.name.group)).or_default().push((name.name.bucket, cell));
            }
            if series.is_empty() {
                continue;
            }
            let series = series
                .into_iter()
                .map(|((metric, entity, group), mut cells)| {
                    cells.sort_by_key(|(bucket, _)| *bucket);
                    PartialSeries { metric, entity, group, cells }
                })
                .collect();
            out.records.push(InFlightRecord { owner: record.owner, seq: record.seq, delivered, series });
        }
        for (key, value) in scan_all(self.kv.as_ref(), &[APPLIED_PREFIX], &[APPLIED_PREFIX + 1])? {
            let sender = std::str::from_utf8(&key[1..]).ok().and_then(|s| NodeId::parse(s).ok());
            let mark = Reader::new(&value).u64().ok();
            if let (Some(sender), Some(mark)) = (sender, mark) {
                out.applied.insert(sender, mark);
            }
        }
        Ok(out)
    }
}

/// A record's cells with each key once (the first): records this build writes hold a key once,
/// an older build's may hold one twice, and a cell counts once whichever way it is read.
fn distinct_cells(cells: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    let mut seen = HashSet::with_capacity(cells.len());
    cells.iter().filter(|(key, _)| seen.insert(key.as_slice())).map(|(key, value)| (key.as_slice(), value.as_slice())).collect()
}

pub(super) fn outbox_key(owner: &NodeId, seq: u64) -> Vec<u8> {
    let mut out = vec![OUTBOX_PREFIX];
    put_str(&mut out, &owner.0);
    out.extend_from_slice(&seq.to_be_bytes());
    out
}

fn applied_key(sender: &NodeId) -> Vec<u8> {
    let mut out = vec![APPLIED_PREFIX];
    out.extend_from_slice(sender.0.as_bytes());
    out
}

/// An outbox record's value (owner and sequence number are in its key).
pub fn encode_record(record: &HandoffRecord) -> Vec<u8> {
    let mut out = vec![RECORD_FORMAT_VERSION];
    crate::data::series_store::put_len(&mut out, record.infos.len());
    for (name, info) in &record.infos {
        put_str(&mut out, name);
        put_bytes(&mut out, info);
    }
    crate::data::series_store::put_len(&mut out, record.cells.len());
    for (key, cell) in &record.cells {
        put_bytes(&mut out, key);
        put_bytes(&mut out, cell);
    }
    out
}

fn decode_outbox(key: &[u8], value: &[u8]) -> Result<HandoffRecord, ValueError> {
    let mut reader = Reader::new(key.get(1..).unwrap_or_default());
    let owner = NodeId::parse(reader.str()?).map_err(|_| ValueError::NotUtf8)?;
    let seq = reader.u64()?;
    reader.finish()?;
    let mut reader = Reader::versioned(value, RECORD_FORMAT_VERSION)?;
    let n = reader.count(8)?;
    let mut infos = Vec::with_capacity(n);
    for _ in 0..n {
        let name = reader.string()?;
        infos.push((name, reader.bytes()?.to_vec()));
    }
    let n = reader.count(8)?;
    let mut cells = Vec::with_capacity(n);
    for _ in 0..n {
        let key = reader.bytes()?.to_vec();
        cells.push((key, reader.bytes()?.to_vec()));
    }
    reader.finish()?;
    Ok(HandoffRecord { owner, seq, infos, cells })
}
