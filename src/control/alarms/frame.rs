//! One check's minute values, laid out once for every rule of the check.
//!
//! A check reads each metric once ([`super::engine::AlarmValues`]); the frame takes those reads
//! apart into one row of minute cells per (metric, entity), indexed by position (no map per
//! minute, no metric name per value), and every rule's window is a slice of those rows:
//! `window_size` minutes of each of the rule's metrics, ending at the check's minute. Rules that
//! read the same metric share its rows; a window is copied into a small reused buffer
//! ([`WindowCells`]) only to be evaluated.
//!
//! The windows are exactly those [`Window`] would hold if fed the same reads in the same order
//! (the latest value of a minute wins; a minute before the window is dropped; a value after the
//! check's minute, which a read should not return, moves that window's end to it). A [`Window`]
//! is built only when asked for ([`Frame::window`], for the status API), and a MemSource only
//! for an expression the compiled evaluation does not cover ([`Frame::mem_source`]).
//!
//! Labeled values keep their label keys once per frame (interned), each with the label set it
//! parses to, so the evaluation compares numbers instead of strings.

use std::collections::BTreeMap;

use hotrule_mqe_engine::{KeyValue, MemSource};

use super::entity::AlarmEntity;
use super::window::{EpochMinute, MetricValue, Window};
use crate::base::fast::FastMap;

/// Label keys a reused frame keeps; past this many (keys that keep changing) it starts afresh.
const MAX_KEPT_LABEL_KEYS: usize = 10_000;

/// One metric's value for one minute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    Missing,
    Single(f64),
    /// `len` (label key, value) pairs from `start` in the frame's pairs.
    Labeled { start: u32, len: u32 },
}

/// One metric's read: a row of `len` minutes per entity, the last one the check's minute.
#[derive(Debug)]
pub struct Table {
    from: i64,
    len: usize,
    /// Entity `at`'s row is `cells[at * len..(at + 1) * len]`; an entity past the end has none.
    cells: Vec<Cell>,
    /// Values after the check's minute, in read order: (entity, minute, value).
    later: Vec<(u32, i64, Cell)>,
    /// The last of those minutes per entity.
    later_end: FastMap<u32, i64>,
}

impl Table {
    fn cell(&self, at: u32, minute: i64, now: i64) -> Cell {
        if minute > now {
            return self.later.iter().rev().find(|(p, m, _)| *p == at && *m == minute).map_or(Cell::Missing, |(_, _, cell)| *cell);
        }
        if minute < self.from {
            return Cell::Missing;
        }
        let index = at as usize * self.len + (minute - self.from) as usize;
        self.cells.get(index).copied().unwrap_or(Cell::Missing)
    }
}

/// The label keys of a frame's labeled values.
#[derive(Debug, Default)]
struct Labels {
    keys: Vec<String>,
    ids: FastMap<String, u32>,
    /// The label set each key parses to (`p=50,q=1` → {p: 50, q: 1}), by index into `sets`.
    key_sets: Vec<u32>,
    sets: Vec<Vec<KeyValue>>,
    set_ids: FastMap<Vec<KeyValue>, u32>,
    /// The keys of the previous labeled value, by pair position: the next value usually has the
    /// same keys in the same order, found without hashing.
    recent: Vec<u32>,
}

impl Labels {
    fn id(&mut self, key: String, slot: usize) -> u32 {
        if let Some(&id) = self.recent.get(slot)
            && self.keys[id as usize] == key
        {
            return id;
        }
        let id = match self.ids.get(key.as_str()) {
            Some(&id) => id,
            None => {
                let mut set: Vec<KeyValue> = label_pairs(&key).into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
                set.sort();
                let next_set = self.sets.len() as u32;
                let set_id = *self.set_ids.entry(set.clone()).or_insert(next_set);
                if set_id == next_set {
                    self.sets.push(set);
                }
                let id = self.keys.len() as u32;
                self.keys.push(key.clone());
                self.key_sets.push(set_id);
                self.ids.insert(key, id);
                id
            }
        };
        if slot < self.recent.len() {
            self.recent[slot] = id;
        } else {
            self.recent.push(id);
        }
        id
    }
}

/// The minute values of one check, per metric and entity.
#[derive(Debug)]
pub struct Frame {
    now: i64,
    entities: Vec<AlarmEntity>,
    positions: FastMap<AlarmEntity, u32>,
    /// Positions in entity order.
    sorted: Vec<u32>,
    tables: BTreeMap<String, Result<Table, String>>,
    pairs: Vec<(u32, f64)>,
    labels: Labels,
    /// Tables of an earlier frame, emptied, for this one's reads to fill without asking the
    /// allocator (and the kernel) for tens of megabytes again.
    spare: Vec<Table>,
}

/// One (rule, entity) window: `size` minutes ending at `end` of each of the rule's metrics, in
/// the rule's metric order (`cells[j * size..(j + 1) * size]` is metric j, oldest first).
#[derive(Debug, Default)]
pub struct WindowCells {
    pub end: i64,
    pub size: usize,
    pub cells: Vec<Cell>,
}

impl WindowCells {
    /// Metric j's minutes, oldest first.
    pub fn row(&self, j: usize) -> &[Cell] {
        &self.cells[j * self.size..(j + 1) * self.size]
    }

    /// The first minute of the window.
    pub fn start(&self) -> i64 {
        self.end - self.size as i64 + 1
    }
}

/// A rule's tables in a frame, in the rule's metric order (none for a metric the check did not
/// read).
pub type RuleTables<'f> = Vec<Option<&'f Table>>;

impl Frame {
    /// An empty frame for the reads made at minute `now`.
    pub fn new(now: EpochMinute) -> Frame {
        Frame {
            now: now.0,
            entities: Vec::new(),
            positions: FastMap::default(),
            sorted: Vec::new(),
            tables: BTreeMap::new(),
            pairs: Vec::new(),
            labels: Labels::default(),
            spare: Vec::new(),
        }
    }

    /// This frame emptied for the reads made at minute `now`, keeping its buffers (and its
    /// label keys, which are the same from check to check).
    pub fn reuse(mut self, now: EpochMinute) -> Frame {
        self.now = now.0;
        self.entities.clear();
        self.positions.clear();
        self.sorted.clear();
        self.pairs.clear();
        let tables = std::mem::take(&mut self.tables);
        self.spare.extend(tables.into_values().filter_map(Result::ok).map(|mut table| {
            table.cells.clear();
            table.later.clear();
            table.later_end.clear();
            table
        }));
        if self.labels.keys.len() > MAX_KEPT_LABEL_KEYS {
            self.labels = Labels::default();
        }
        self
    }

    /// Takes in one metric's read: `len` minutes up to the check's minute (the longest window
    /// that reads it). The read is dropped here, before the next one is made.
    pub fn add(&mut self, metric: String, len: usize, read: Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String>) {
        let table = read.map(|points| self.table(len.max(1), points));
        self.tables.insert(metric, table);
    }

    /// Done reading: the entities put in order.
    pub fn finish(mut self) -> Frame {
        let entities = &self.entities;
        self.sorted = (0..entities.len() as u32).collect();
        self.sorted.sort_unstable_by(|a, b| entities[*a as usize].cmp(&entities[*b as usize]));
        self
    }

    fn table(&mut self, len: usize, points: Vec<(AlarmEntity, EpochMinute, MetricValue)>) -> Table {
        let from = self.now - len as i64 + 1;
        let mut table = self.spare.pop().unwrap_or_else(|| Table { from, len, cells: Vec::new(), later: Vec::new(), later_end: FastMap::default() });
        (table.from, table.len) = (from, len);
        // Sized for the entities seen so far (the metrics of a check mostly share them).
        table.cells.reserve(self.entities.len() * len);
        let mut last: Option<u32> = None;
        for (entity, minute, value) in points {
            // A read lists an entity's minutes together: most points are the last one's entity.
            let at = match last {
                Some(at) if same_entity(&self.entities[at as usize], &entity) => at,
                _ => self.position(entity),
            };
            last = Some(at);
            let minute = minute.0;
            if minute < from {
                continue;
            }
            let cell = self.cell(value);
            if minute > self.now {
                table.later.push((at, minute, cell));
                let end = table.later_end.entry(at).or_insert(minute);
                *end = (*end).max(minute);
                continue;
            }
            let index = at as usize * len + (minute - from) as usize;
            if table.cells.len() <= index {
                table.cells.resize((at as usize + 1) * len, Cell::Missing);
            }
            table.cells[index] = cell;
        }
        table
    }

    fn position(&mut self, entity: AlarmEntity) -> u32 {
        if let Some(&at) = self.positions.get(&entity) {
            return at;
        }
        let at = self.entities.len() as u32;
        self.entities.push(entity.clone());
        self.positions.insert(entity, at);
        at
    }

    fn cell(&mut self, value: MetricValue) -> Cell {
        match value {
            MetricValue::Single(v) => Cell::Single(v),
            MetricValue::Labeled(pairs) => {
                let start = self.pairs.len() as u32;
                for (slot, (key, v)) in pairs.into_iter().enumerate() {
                    let id = self.labels.id(key, slot);
                    self.pairs.push((id, v));
                }
                Cell::Labeled { start, len: self.pairs.len() as u32 - start }
            }
        }
    }

    /// The check's minute.
    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn len(&self) -> usize {
        self.entities.len()
    }

    pub fn entity(&self, at: u32) -> &AlarmEntity {
        &self.entities[at as usize]
    }

    pub fn position_of(&self, entity: &AlarmEntity) -> Option<u32> {
        self.positions.get(entity).copied()
    }

    /// Positions in entity order.
    pub fn sorted(&self) -> &[u32] {
        &self.sorted
    }

    /// A metric's read: none when not read, the reason when it failed.
    pub fn read(&self, metric: &str) -> Option<Result<&Table, &str>> {
        self.tables.get(metric).map(|t| t.as_ref().map_err(String::as_str))
    }

    /// The tables of `metrics` that were read without error.
    pub fn tables<'f>(&'f self, metrics: &[String]) -> RuleTables<'f> {
        metrics.iter().map(|m| self.tables.get(m).and_then(|t| t.as_ref().ok())).collect()
    }

    /// (label key id, value) pairs of a labeled cell.
    pub fn pairs(&self, start: u32, len: u32) -> &[(u32, f64)] {
        &self.pairs[start as usize..(start + len) as usize]
    }

    /// The label set a key parses to, as an id (equal sets, equal ids).
    pub fn key_set(&self, key: u32) -> u32 {
        self.labels.key_sets[key as usize]
    }

    /// A label set's labels, sorted.
    pub fn set_labels(&self, set: u32) -> &[KeyValue] {
        &self.labels.sets[set as usize]
    }

    fn key(&self, key: u32) -> &str {
        &self.labels.keys[key as usize]
    }

    /// Fills `out` with entity `at`'s window of `size` minutes over `tables`; false when the
    /// window holds no value (it expires).
    pub fn fill(&self, tables: &RuleTables<'_>, at: u32, size: usize, out: &mut WindowCells) -> bool {
        let mut end = self.now;
        for table in tables.iter().flatten() {
            if !table.later_end.is_empty()
                && let Some(&later) = table.later_end.get(&at)
            {
                end = end.max(later);
            }
        }
        out.end = end;
        out.size = size;
        out.cells.clear();
        let start = end - size as i64 + 1;
        for table in tables {
            match table {
                Some(table) if end == self.now => {
                    // The window is the end of the entity's row.
                    let row = at as usize * table.len;
                    let first = row + (start - table.from) as usize;
                    match table.cells.get(first..row + table.len) {
                        Some(cells) => out.cells.extend_from_slice(cells),
                        None => out.cells.extend(std::iter::repeat_n(Cell::Missing, size)),
                    }
                }
                Some(table) => out.cells.extend((start..=end).map(|minute| table.cell(at, minute, self.now))),
                None => out.cells.extend(std::iter::repeat_n(Cell::Missing, size)),
            }
        }
        out.cells.iter().any(|cell| *cell != Cell::Missing)
    }

    /// A cell as the value a [`Window`] holds.
    fn value(&self, cell: Cell) -> Option<MetricValue> {
        match cell {
            Cell::Missing => None,
            Cell::Single(v) => Some(MetricValue::Single(v)),
            Cell::Labeled { start, len } => {
                Some(MetricValue::Labeled(self.pairs(start, len).iter().map(|(key, v)| (self.key(*key).to_string(), *v)).collect()))
            }
        }
    }

    /// Entity `at`'s window over `metrics`, as [`Window`] holds it.
    pub fn window(&self, metrics: &[String], at: u32, size: usize) -> Window {
        let mut cells = WindowCells::default();
        self.fill(&self.tables(metrics), at, size, &mut cells);
        let mut window = Window::new(size);
        window.move_to(EpochMinute(cells.end));
        for (j, metric) in metrics.iter().enumerate() {
            for (i, cell) in cells.row(j).iter().enumerate() {
                if let Some(value) = self.value(*cell) {
                    window.add(metric, EpochMinute(cells.start() + i as i64), value);
                }
            }
        }
        window
    }

    /// The window's values as a MemSource: one series per metric, a point per minute with a
    /// value (what the generic MQE evaluation reads).
    pub fn mem_source(&self, metrics: &[String], window: &WindowCells) -> MemSource {
        let mut source = MemSource::new();
        let mut common = Vec::new();
        for (j, metric) in metrics.iter().enumerate() {
            let row = window.row(j);
            let ts = |i: usize| (window.start() + i as i64).saturating_mul(60_000);
            // Only common values (the usual case): set in one call, as one `set` per point would.
            if row.iter().all(|cell| !matches!(cell, Cell::Labeled { .. })) {
                common.clear();
                common.extend(row.iter().enumerate().filter_map(|(i, cell)| match cell {
                    Cell::Single(v) => Some((ts(i), *v)),
                    _ => None,
                }));
                source.set_points(metric, &common);
                continue;
            }
            for (i, cell) in row.iter().enumerate() {
                match *cell {
                    Cell::Single(v) => source.set(metric, ts(i), v),
                    Cell::Labeled { start, len } => {
                        for (key, v) in self.pairs(start, len) {
                            let labels = label_pairs(self.key(*key));
                            let refs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                            source.set_labeled(metric, &refs, ts(i), *v);
                        }
                    }
                    Cell::Missing => {}
                }
            }
        }
        source
    }

    /// The metrics' values over a window as the message's `mqeMetricsSnapshot` (metric → JSON
    /// of its minute values: `[{"id":"<epoch ms>","value":v}, ...]`, a labeled value with its
    /// `"labels"` between; the text serde_json gives for those objects, written directly).
    pub fn snapshot(&self, metrics: &[String], window: &WindowCells) -> BTreeMap<String, String> {
        let mut snapshot = BTreeMap::new();
        for (j, metric) in metrics.iter().enumerate() {
            let mut text = String::from("[");
            for (i, cell) in window.row(j).iter().enumerate() {
                let ts = (window.start() + i as i64).saturating_mul(60_000);
                match *cell {
                    Cell::Single(v) => json_point(&mut text, ts, None, v),
                    Cell::Labeled { start, len } => {
                        for (key, v) in self.pairs(start, len) {
                            json_point(&mut text, ts, Some(self.key(*key)), *v);
                        }
                    }
                    Cell::Missing => {}
                }
            }
            text.push(']');
            snapshot.insert(metric.clone(), text);
        }
        snapshot
    }
}

/// One snapshot point, as serde_json writes `{"id": ts, "labels": key, "value": v}` (keys in
/// order, a NaN or infinite value as null).
fn json_point(text: &mut String, ts: i64, labels: Option<&str>, value: f64) {
    use std::fmt::Write as _;
    if text.len() > 1 {
        text.push(',');
    }
    let _ = write!(text, "{{\"id\":\"{ts}\"");
    if let Some(labels) = labels {
        text.push_str(",\"labels\":");
        text.push_str(&serde_json::Value::from(labels).to_string());
    }
    text.push_str(",\"value\":");
    match serde_json::Number::from_f64(value) {
        Some(number) => {
            let _ = write!(text, "{number}");
        }
        None => text.push_str("null"),
    }
    text.push('}');
}

/// `a == b`, the lengths compared before any text (most points are of the last point's
/// entity, and an empty text needs no comparison).
fn same_entity(a: &AlarmEntity, b: &AlarmEntity) -> bool {
    let same = |x: &str, y: &str| x.is_empty() || x.as_bytes() == y.as_bytes();
    a.scope == b.scope
        && a.name.len() == b.name.len()
        && a.id0.len() == b.id0.len()
        && a.id1.len() == b.id1.len()
        && same(&a.id0, &b.id0)
        && same(&a.name, &b.name)
        && same(&a.id1, &b.id1)
}

/// A stored label key `k1=v1,k2=v2` as pairs; a part without `=` is the value of label `label`.
pub fn label_pairs(key: &str) -> Vec<(String, String)> {
    if key.is_empty() {
        return Vec::new();
    }
    key.split(',')
        .map(|part| match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => ("label".to_string(), part.to_string()),
        })
        .collect()
}
