//! Partial state: a series' cells as stored, before they are finalized, and their exact merge.
//! Pure: no IO.
//!
//! Each node stores the cells of the values it evaluated, so in a cluster one bucket of one
//! series may have a cell on several nodes. Merging those cells with the function's `combine`
//! ([`Cell::combine`]: commutative and associative) and finalizing once gives the value one node
//! would have computed from all the samples: `avg` divides the summed summations by the summed
//! counts (not a mean of the nodes' means), `latest` keeps the value of the newest sample time.

use std::collections::BTreeMap;

use super::cells::cell::Cell;
use crate::base::ids::NodeId;
use super::cells::keys::bucket_start_ms;
use super::{Entity, Granularity, Point, Series};

/// One series' cells at one granularity, by bucket, unfinalized. A histogram metric has one
/// per entity and label group (`group`, empty otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialSeries {
    pub metric: String,
    pub entity: Entity,
    pub group: String,
    /// `(bucket, cell)` in bucket order.
    pub cells: Vec<(i64, Cell)>,
}

impl PartialSeries {
    /// The series readers see: every cell finalized at `granularity`.
    pub fn finalize(&self, granularity: Granularity) -> Series {
        let points = self
            .cells
            .iter()
            .map(|(bucket, cell)| Point {
                bucket: *bucket,
                start_ms: bucket_start_ms(granularity, *bucket),
                value: cell.finalize(granularity, &self.group),
            })
            .collect();
        Series { metric: self.metric.clone(), entity: self.entity.clone(), points }
    }
}

/// What merging several nodes' partial series gave.
#[derive(Debug, Default)]
pub struct Merged {
    /// One series per (metric, entity, group), in that order; cells in bucket order.
    pub series: Vec<PartialSeries>,
    /// Cells left out because their value type differs from the first node's for the same
    /// bucket (a metric reshaped on one node and not yet on another).
    pub mismatched: usize,
}

/// Partial state on its way from one node to entities' owners (`cells::handoff`): the
/// records not yet applied as far as the node knows, and the applied marks it holds as an owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InFlight {
    pub records: Vec<InFlightRecord>,
    /// Sender → the highest sequence number this node applied from it.
    pub applied: BTreeMap<NodeId, u64>,
    /// The node's handoff generation when it read (0: not reported).
    pub generation: u64,
}

/// One record's cells, as a read filtered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlightRecord {
    pub owner: NodeId,
    pub seq: u64,
    /// The owner said it applied the record (the sender keeps reporting it for a while, for a
    /// read that met the owner before it applied it).
    pub delivered: bool,
    pub series: Vec<PartialSeries>,
}

/// One node's answer to a cluster read.
#[derive(Debug, Clone)]
pub struct NodeAnswer {
    pub node: NodeId,
    pub series: Vec<PartialSeries>,
    pub in_flight: InFlight,
}

/// Merges the answers of several nodes: their cells, and the records on their way to owners.
/// A record counts when its owner answered with an applied mark below it (the owner's cells do
/// not hold it yet). When the owner did not answer, a record still in the outbox counts (it is
/// nowhere else) and a delivered one does not (it is in the owner's cells, which are missing
/// from the read like the rest of the owner's data).
pub fn merge_cluster(answers: Vec<NodeAnswer>) -> Merged {
    let marks: BTreeMap<NodeId, BTreeMap<NodeId, u64>> =
        answers.iter().map(|answer| (answer.node.clone(), answer.in_flight.applied.clone())).collect();
    let mut per_node = Vec::with_capacity(answers.len() * 2);
    for answer in answers {
        let sender = answer.node;
        per_node.push(answer.series);
        for record in answer.in_flight.records {
            let counts = match marks.get(&record.owner) {
                Some(owner_marks) => owner_marks.get(&sender).is_none_or(|mark| *mark < record.seq),
                None => !record.delivered,
            };
            if counts {
                per_node.push(record.series);
            }
        }
    }
    merge_partials(per_node)
}

/// Whether no answering node moved partial state since it answered: `now` holds the nodes'
/// handoff generations asked for after every answer was in. One order of answers is not exact
/// by itself: a sender answering before it moves a record and the owner answering after it
/// applied the record count the record twice. The sender's generation then changed after its
/// answer (the move came after it, and before the owner's answer), so a read that finds every
/// generation unchanged has none of it. A node that did not answer the second look is taken as
/// unchanged (it may have left; what it answered is what there is).
pub fn unchanged(answers: &[NodeAnswer], now: &BTreeMap<NodeId, u64>) -> bool {
    answers.iter().all(|answer| {
        answer.in_flight.generation == 0 || now.get(&answer.node).is_none_or(|generation| *generation == answer.in_flight.generation)
    })
}

/// Merges the partial series of several nodes (this node first) cell by cell.
pub fn merge_partials(per_node: Vec<Vec<PartialSeries>>) -> Merged {
    let mut by_series: BTreeMap<(String, Entity, String), BTreeMap<i64, Cell>> = BTreeMap::new();
    let mut mismatched = 0;
    for series in per_node.into_iter().flatten() {
        let cells = by_series.entry((series.metric, series.entity, series.group)).or_default();
        for (bucket, cell) in series.cells {
            match cells.get_mut(&bucket) {
                Some(stored) => {
                    if stored.combine(&cell).is_err() {
                        mismatched += 1;
                    }
                }
                None => {
                    cells.insert(bucket, cell);
                }
            }
        }
    }
    let series = by_series
        .into_iter()
        .map(|((metric, entity, group), cells)| PartialSeries { metric, entity, group, cells: cells.into_iter().collect() })
        .collect();
    Merged { series, mismatched }
}

#[cfg(test)]
mod tests {
    use hotrule_mal_engine::{Downsampling, ScopeType, Value};

    use super::*;

    fn service(name: &str) -> Entity {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = name.to_string();
        entity
    }

    /// One node's partial series for `values` (each `(value, sample time)`) in one bucket.
    fn node(function: Downsampling, values: &[(Value, i64)]) -> Vec<PartialSeries> {
        let mut cell: Option<Cell> = None;
        let mut group = String::new();
        for (value, at) in values {
            let (delta, g) = Cell::from_value(value, function, *at);
            group = g;
            match &mut cell {
                Some(stored) => stored.combine(&delta).expect("same kind"),
                None => cell = Some(delta),
            }
        }
        // A node that got none of the emissions stores nothing.
        cell.map(|c| PartialSeries { metric: "m".into(), entity: service("s"), group, cells: vec![(202_501_011_200, c)] }).into_iter().collect()
    }

    fn merged_value(per_node: Vec<Vec<PartialSeries>>) -> Value {
        let merged = merge_partials(per_node);
        assert_eq!(merged.mismatched, 0);
        assert_eq!(merged.series.len(), 1);
        merged.series[0].finalize(Granularity::Minute).points[0].value.clone()
    }

    /// The case: node A got 10, 10 and 10, node B got 50. One node would say 20 (the
    /// mean of four emissions); a mean of the nodes' means would say 30.
    #[test]
    fn avg_across_nodes_is_the_one_node_value() {
        let single = |v: i64| (Value::Single(v), 0);
        let a = node(Downsampling::Avg, &[single(10), single(10), single(10)]);
        let b = node(Downsampling::Avg, &[single(50)]);
        assert_eq!(merged_value(vec![a.clone(), b.clone()]), Value::Single(20));
        assert_eq!(merged_value(vec![b, a]), Value::Single(20));
    }

    #[test]
    fn every_function_and_shape_merges_to_the_one_node_value() {
        let labeled = |k: &str, v: i64, at: i64| (Value::Labeled(vec![(k.to_string(), v)]), at);
        let hist = |b: Vec<(i64, i64)>, at: i64| (Value::Histogram { labels: "g=1".into(), buckets: b, percentiles: vec![50] }, at);
        let cases: Vec<(Downsampling, Vec<(Value, i64)>)> = vec![
            (Downsampling::Avg, vec![(Value::Single(10), 1), (Value::Single(10), 2), (Value::Single(10), 3), (Value::Single(50), 4)]),
            (Downsampling::Sum, vec![(Value::Single(1), 1), (Value::Single(2), 2), (Value::Single(3), 3)]),
            (Downsampling::SumPerMin, vec![(Value::Single(60), 1), (Value::Single(120), 2)]),
            (Downsampling::Latest, vec![(Value::Single(7), 300), (Value::Single(9), 100), (Value::Single(8), 200)]),
            (Downsampling::Max, vec![(Value::Single(7), 1), (Value::Single(90), 2), (Value::Single(8), 3)]),
            (Downsampling::Min, vec![(Value::Single(7), 1), (Value::Single(-90), 2), (Value::Single(8), 3)]),
            (Downsampling::Avg, vec![labeled("a", 10, 1), labeled("a", 20, 2), labeled("b", 5, 3)]),
            (Downsampling::Latest, vec![labeled("a", 1, 30), labeled("a", 2, 10), labeled("b", 5, 20)]),
            (Downsampling::Sum, vec![hist(vec![(100, 1), (200, 2)], 1), hist(vec![(100, 3)], 2), hist(vec![(200, 4), (400, 1)], 3)]),
        ];
        for (function, values) in cases {
            let one_node = merged_value(vec![node(function, &values)]);
            // Every split of the emissions over three nodes, in every node order.
            for split in 0..values.len() {
                for second in split..values.len() {
                    let parts = [&values[..split], &values[split..second], &values[second..]];
                    let nodes: Vec<Vec<PartialSeries>> = parts.iter().map(|p| node(function, p)).collect();
                    let mut reversed = nodes.clone();
                    reversed.reverse();
                    assert_eq!(merged_value(nodes), one_node, "{function:?} split at {split},{second}");
                    assert_eq!(merged_value(reversed), one_node, "{function:?} split at {split},{second}, reversed");
                }
            }
        }
    }

    /// A record on its way counts once: from the sender while its owner has not applied it,
    /// from the owner's cells once it has (whatever the order the two answered in).
    #[test]
    fn records_in_flight_count_once() {
        let cells = |v: i64| node(Downsampling::Sum, &[(Value::Single(v), 1)]);
        let id = |n: &str| NodeId(n.to_string());
        let record = |v: i64, seq: u64| InFlightRecord { owner: id("o"), seq, delivered: false, series: cells(v) };
        let sender = |records: Vec<InFlightRecord>| NodeAnswer {
            node: id("s"),
            series: cells(1),
            in_flight: InFlight { records, ..InFlight::default() },
        };
        let owner = |value: i64, mark: Option<u64>| NodeAnswer {
            node: id("o"),
            series: cells(value),
            in_flight: InFlight { applied: mark.into_iter().map(|m| (id("s"), m)).collect(), ..InFlight::default() },
        };
        let value = |answers: Vec<NodeAnswer>| merge_cluster(answers).series[0].finalize(Granularity::Minute).points[0].value.clone();
        // Not applied yet: 1 (sender) + 10 (owner) + 100 (record).
        assert_eq!(value(vec![sender(vec![record(100, 7)]), owner(10, Some(6))]), Value::Single(111));
        // Applied: the owner's cells hold it (110); the sender still reports it.
        assert_eq!(value(vec![owner(110, Some(7)), sender(vec![record(100, 7)])]), Value::Single(111));
        // The owner did not answer: a record in the outbox counts, a delivered one does not (it
        // is in the owner's cells, missing from this read).
        let delivered = InFlightRecord { delivered: true, ..record(10_000, 6) };
        assert_eq!(value(vec![sender(vec![delivered.clone(), record(100, 7), record(1000, 8)])]), Value::Single(1101));
        // Delivered, and the owner answered before applying it: it counts.
        assert_eq!(value(vec![sender(vec![delivered]), owner(10, Some(5))]), Value::Single(10_011));
        // Another sender's mark does not cover this one's record.
        let mut other = owner(10, None);
        other.in_flight.applied.insert(id("t"), 99);
        assert_eq!(value(vec![sender(vec![record(100, 7)]), other]), Value::Single(111));
    }

    #[test]
    fn a_read_is_repeated_when_a_node_moved_state_after_answering() {
        let id = |n: &str| NodeId(n.to_string());
        let answer = |node: &str, generation: u64| NodeAnswer {
            node: id(node),
            series: Vec::new(),
            in_flight: InFlight { generation, ..InFlight::default() },
        };
        let answers = vec![answer("s", 10), answer("o", 20), answer("twin", 0)];
        let now = |pairs: &[(&str, u64)]| pairs.iter().map(|(n, g)| (id(n), *g)).collect::<BTreeMap<_, _>>();
        assert!(unchanged(&answers, &now(&[("s", 10), ("o", 20)])));
        assert!(!unchanged(&answers, &now(&[("s", 11), ("o", 20)])), "the sender moved after answering");
        assert!(unchanged(&answers, &now(&[("o", 20)])), "a node that did not answer the second look");
        assert!(unchanged(&answers, &now(&[("s", 10), ("o", 20), ("twin", 5)])), "a reader that reports no generation");
    }

    #[test]
    fn cells_of_another_shape_are_counted_not_merged() {
        let a = node(Downsampling::Sum, &[(Value::Single(1), 1)]);
        let b = node(Downsampling::Sum, &[(Value::Labeled(vec![("k".into(), 2)]), 1)]);
        let merged = merge_partials(vec![a, b]);
        assert_eq!(merged.mismatched, 1);
        assert_eq!(merged.series[0].finalize(Granularity::Minute).points[0].value, Value::Single(1));
    }
}
