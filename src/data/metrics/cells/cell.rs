//! One stored cell and SkyWalking's meter functions over it: pure, no IO.
//!
//! A cell keeps what the function needs to combine further deltas, not the finalized value:
//! `avg` keeps summation and count, `sumPerMin` its total. [`Cell::combine`] is the function's
//! `combine`; [`Cell::finalize`] its `calculate`, run at read time.
//!
//! | function | combine | finalized |
//! |---|---|---|
//! | `avg` | adds summation and count | `summation / count` (integer division; 0 → 1 when summation > 0) |
//! | `sum` | adds | the sum |
//! | `sumPerMin` | adds | `total / minutes` (1, 60, 1440 by granularity) |
//! | `latest` | keeps the value of the newest sample time (a tie: the larger value) | the value |
//! | `max` / `min` | keeps the larger / smaller | the value (upstream's combine is a no-op here: fixed) |
//!
//! Labeled values apply the function per key; histograms per bucket (a bucket set that differs
//! from the stored one is merged as a union, where SkyWalking's `sumHistogram` discards the
//! incoming data); percentile histograms accumulate buckets and keep the latest rank list, and
//! ranks are computed from the finalized buckets by the reader (`metrics::prom::percentile`).

use std::collections::BTreeMap;

use hotrule_mal_engine::{Downsampling, Value};

use crate::data::metrics::Granularity;

/// One accumulator: the function's running value and the number of emissions it holds, and
/// for `latest` the sample time of the value it holds (0 for the other functions, which do not
/// store it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acc {
    pub value: i64,
    pub count: i64,
    pub at: i64,
}

impl Acc {
    /// One emission of `value` (of no sample time: every function but `latest`).
    pub fn of(value: i64) -> Acc {
        Acc { value, count: 1, at: 0 }
    }

    /// One emission of `value` sampled at `at` (epoch ms), under `function`: only `latest`
    /// keeps the time.
    pub fn emitted(value: i64, at: i64, function: Downsampling) -> Acc {
        Acc { value, count: 1, at: if function == Downsampling::Latest { at } else { 0 } }
    }

    /// `self` combined with `incoming`. Commutative and associative for every function, so
    /// partial states merge to the same cell in any order and on any node: `latest` keeps the
    /// value of the newest sample time, and of two values sampled at the same instant the
    /// larger (SkyWalking keeps whatever arrived last, which differs between nodes).
    pub fn combine(self, incoming: Acc, function: Downsampling) -> Acc {
        let count = self.count.saturating_add(incoming.count);
        let (value, at) = match function {
            Downsampling::Avg | Downsampling::Sum | Downsampling::SumPerMin => (self.value.saturating_add(incoming.value), 0),
            Downsampling::Latest => {
                let (at, value) = (self.at, self.value).max((incoming.at, incoming.value));
                (value, at)
            }
            Downsampling::Max => (self.value.max(incoming.value), 0),
            Downsampling::Min => (self.value.min(incoming.value), 0),
        };
        Acc { value, count, at }
    }

    /// The function's `calculate` at `granularity`.
    pub fn finalize(self, function: Downsampling, granularity: Granularity) -> i64 {
        match function {
            Downsampling::Avg => {
                if self.count <= 0 {
                    return 0;
                }
                let mean = self.value / self.count;
                if mean == 0 && self.value > 0 { 1 } else { mean }
            }
            Downsampling::SumPerMin => self.value / (granularity.millis() / 60_000),
            Downsampling::Sum | Downsampling::Latest | Downsampling::Max | Downsampling::Min => self.value,
        }
    }
}

/// What a cell accumulates, by value type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Single(Acc),
    Labeled(BTreeMap<String, Acc>),
    /// Per-bucket accumulators by upper bound; `percentiles` empty for a plain histogram.
    Histogram { buckets: BTreeMap<i64, Acc>, percentiles: Vec<u32> },
}

/// A stored cell: the function it was written with and its accumulated data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub function: Downsampling,
    pub data: Data,
}

/// Why two cells do not combine: the value types differ (a metric changed shape without a
/// reshape).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {incoming} value does not combine with a stored {stored} cell")]
pub struct Mismatch {
    pub stored: &'static str,
    pub incoming: &'static str,
}

impl Data {
    fn kind(&self) -> &'static str {
        match self {
            Data::Single(_) => "single",
            Data::Labeled(_) => "labeled",
            Data::Histogram { .. } => "histogram",
        }
    }
}

impl Cell {
    /// One emitted value, sampled at `at` (epoch ms), as a delta cell, and its histogram label
    /// group (empty otherwise).
    pub fn from_value(value: &Value, function: Downsampling, at: i64) -> (Cell, String) {
        let acc = |v: i64| Acc::emitted(v, at, function);
        let (data, group) = match value {
            Value::Single(v) => (Data::Single(acc(*v)), String::new()),
            Value::Labeled(entries) => {
                let mut map = BTreeMap::new();
                for (key, v) in entries {
                    // A repeated key keeps the last value (as the engine's DataTable does).
                    map.insert(key.clone(), acc(*v));
                }
                (Data::Labeled(map), String::new())
            }
            Value::Histogram { labels, buckets, percentiles } => {
                let mut map: BTreeMap<i64, Acc> = BTreeMap::new();
                for (bound, count) in buckets {
                    map.insert(*bound, acc(*count));
                }
                (Data::Histogram { buckets: map, percentiles: percentiles.clone() }, labels.clone())
            }
        };
        (Cell { function, data }, group)
    }

    /// Whether `incoming` combines with `self` (the same value type).
    pub fn check_combine(&self, incoming: &Cell) -> Result<(), Mismatch> {
        if std::mem::discriminant(&self.data) == std::mem::discriminant(&incoming.data) {
            Ok(())
        } else {
            Err(Mismatch { stored: self.data.kind(), incoming: incoming.data.kind() })
        }
    }

    /// `self` combined with the delta `incoming`; the function is `incoming`'s.
    pub fn combine(&mut self, incoming: &Cell) -> Result<(), Mismatch> {
        let function = incoming.function;
        match (&mut self.data, &incoming.data) {
            (Data::Single(stored), Data::Single(delta)) => *stored = stored.combine(*delta, function),
            (Data::Labeled(stored), Data::Labeled(delta)) => merge_map(stored, delta, function),
            (Data::Histogram { buckets, percentiles }, Data::Histogram { buckets: delta, percentiles: ranks }) => {
                merge_map(buckets, delta, function);
                percentiles.clone_from(ranks);
            }
            (stored, delta) => return Err(Mismatch { stored: stored.kind(), incoming: delta.kind() }),
        }
        self.function = function;
        Ok(())
    }

    /// The finalized value at `granularity`, as readers get it.
    pub fn finalize(&self, granularity: Granularity, group: &str) -> Value {
        let function = self.function;
        match &self.data {
            Data::Single(acc) => Value::Single(acc.finalize(function, granularity)),
            Data::Labeled(map) => {
                Value::Labeled(map.iter().map(|(key, acc)| (key.clone(), acc.finalize(function, granularity))).collect())
            }
            Data::Histogram { buckets, percentiles } => Value::Histogram {
                labels: group.to_string(),
                buckets: buckets.iter().map(|(bound, acc)| (*bound, acc.finalize(function, granularity))).collect(),
                percentiles: percentiles.clone(),
            },
        }
    }
}

fn merge_map<K: Ord + Clone>(stored: &mut BTreeMap<K, Acc>, delta: &BTreeMap<K, Acc>, function: Downsampling) {
    for (key, acc) in delta {
        stored
            .entry(key.clone())
            .and_modify(|existing| *existing = existing.combine(*acc, function))
            .or_insert(*acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Downsampling::*;
    use Granularity::*;

    /// Folds `values` into one cell, as writes to one bucket do, and finalizes it.
    fn fold(function: Downsampling, values: &[i64], granularity: Granularity) -> i64 {
        // Sampled one millisecond apart, in the order given.
        let mut cells = values.iter().zip(1..).map(|(v, at)| Cell::from_value(&Value::Single(*v), function, at).0);
        let mut cell = cells.next().expect("at least one value");
        for delta in cells {
            cell.combine(&delta).expect("same kind");
        }
        match cell.finalize(granularity, "") {
            Value::Single(v) => v,
            other => panic!("not single: {other:?}"),
        }
    }

    #[test]
    fn the_function_table() {
        // (function, values, minute, hour, day)
        let table: &[(Downsampling, &[i64], i64, i64, i64)] = &[
            (Avg, &[10, 20, 40], 23, 23, 23),
            (Avg, &[1, 0, 0], 1, 1, 1), // 1/3 = 0 → 1 because the summation is positive
            (Avg, &[0, 0], 0, 0, 0),
            (Sum, &[10, 20, 40], 70, 70, 70),
            (SumPerMin, &[6000, 6000, 2400], 14400, 240, 10),
            (Latest, &[10, 40, 20], 20, 20, 20),
            (Max, &[10, 40, 20], 40, 40, 40),
            (Min, &[30, 10, 20], 10, 10, 10),
        ];
        for (function, values, minute, hour, day) in table {
            assert_eq!(fold(*function, values, Minute), *minute, "{function:?} {values:?} minute");
            assert_eq!(fold(*function, values, Hour), *hour, "{function:?} {values:?} hour");
            assert_eq!(fold(*function, values, Day), *day, "{function:?} {values:?} day");
        }
    }

    #[test]
    fn labeled_values_combine_per_key() {
        let a = Value::Labeled(vec![("mode=idle".into(), 10), ("mode=user".into(), 4)]);
        let b = Value::Labeled(vec![("mode=idle".into(), 20), ("mode=sys".into(), 1)]);
        let (mut cell, _) = Cell::from_value(&a, Avg, 0);
        cell.combine(&Cell::from_value(&b, Avg, 0).0).expect("combine");
        assert_eq!(
            cell.finalize(Minute, ""),
            Value::Labeled(vec![("mode=idle".into(), 15), ("mode=sys".into(), 1), ("mode=user".into(), 4)])
        );
        let (mut max, _) = Cell::from_value(&a, Max, 0);
        max.combine(&Cell::from_value(&b, Max, 0).0).expect("combine");
        assert_eq!(
            max.finalize(Minute, ""),
            Value::Labeled(vec![("mode=idle".into(), 20), ("mode=sys".into(), 1), ("mode=user".into(), 4)])
        );
    }

    #[test]
    fn histograms_add_per_bucket_and_percentiles_keep_buckets() {
        let h = |buckets: Vec<(i64, i64)>, ranks: Vec<u32>| Value::Histogram { labels: "g=1".into(), buckets, percentiles: ranks };
        let (mut cell, group) = Cell::from_value(&h(vec![(100, 5), (250, 3)], vec![]), Sum, 0);
        assert_eq!(group, "g=1");
        cell.combine(&Cell::from_value(&h(vec![(100, 1), (500, 2)], vec![]), Sum, 0).0).expect("combine");
        assert_eq!(cell.finalize(Minute, "g=1"), h(vec![(100, 6), (250, 3), (500, 2)], vec![]));

        let (mut avg, _) = Cell::from_value(&h(vec![(100, 4), (250, 2)], vec![50, 99]), Avg, 0);
        avg.combine(&Cell::from_value(&h(vec![(100, 6), (250, 0)], vec![50, 99]), Avg, 0).0).expect("combine");
        let finalized = avg.finalize(Hour, "g=1");
        assert_eq!(finalized, h(vec![(100, 5), (250, 1)], vec![50, 99]));
        if let Value::Histogram { buckets, .. } = &finalized {
            assert_eq!(crate::data::metrics::prom::percentile(buckets, 50), 100);
            assert_eq!(crate::data::metrics::prom::percentile(buckets, 99), 250);
        }
    }

    /// Partial states from several nodes merge to the same cell in any order: `latest` by
    /// sample time, not by arrival.
    #[test]
    fn every_function_merges_in_any_order() {
        let emissions: [(i64, i64); 5] = [(30, 5_000), (10, 1_000), (50, 9_000), (20, 9_000), (40, 2_000)];
        for function in [Avg, Sum, SumPerMin, Latest, Max, Min] {
            let cells: Vec<Cell> = emissions.iter().map(|(v, at)| Cell::from_value(&Value::Single(*v), function, *at).0).collect();
            let fold = |order: &[usize]| {
                let mut cell = cells[order[0]].clone();
                for i in &order[1..] {
                    cell.combine(&cells[*i]).expect("same kind");
                }
                cell
            };
            let forward = fold(&[0, 1, 2, 3, 4]);
            // Two partials ((0,1) on one node, (2,3,4) on another) merged either way round.
            let mut a = fold(&[0, 1]);
            a.combine(&fold(&[4, 3, 2])).expect("same kind");
            let mut b = fold(&[3, 2, 4]);
            b.combine(&fold(&[1, 0])).expect("same kind");
            assert_eq!(a, forward, "{function:?}");
            assert_eq!(b, forward, "{function:?}");
        }
        // The newest sample time wins; a tie at 9 000 goes to the larger value.
        let mut latest = Cell::from_value(&Value::Single(emissions[4].0), Latest, emissions[4].1).0;
        for (v, at) in emissions.iter().rev() {
            latest.combine(&Cell::from_value(&Value::Single(*v), Latest, *at).0).expect("same kind");
        }
        assert_eq!(latest.finalize(Minute, ""), Value::Single(50));
    }

    #[test]
    fn different_value_types_do_not_combine() {
        let (mut cell, _) = Cell::from_value(&Value::Single(1), Sum, 0);
        let err = cell.combine(&Cell::from_value(&Value::Labeled(vec![]), Sum, 0).0).expect_err("mismatch");
        assert_eq!(err, Mismatch { stored: "single", incoming: "labeled" });
    }
}
