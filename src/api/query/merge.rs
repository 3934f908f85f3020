//! Merging what several nodes stored for the same metric, entity and bucket: each node stores
//! what it evaluated, so one bucket of one series may exist on several nodes.
//!
//! The merge follows the metric's downsampling function, on the finalized values the store
//! serves: `sum` and `sumPerMin` add, `max`/`min` keep the largest/smallest, `avg` takes the
//! mean of the nodes' values (an approximation: exact when every node saw as many emissions,
//! since per-node summation and count are not read back), `latest` keeps the first node's value
//! (this node first, then peers in id order: arrival order across nodes is unknown). Labeled
//! values merge per key, histograms per bucket (percentiles are computed afterwards from the
//! merged buckets). Values of different kinds (a reshape between nodes) keep the first.

use std::collections::BTreeMap;

use hotrule_mal_engine::Downsampling;

use crate::data::metrics::{Entity, Point, Series, Value};

/// Merges series lists (one per node, this node first). `downsampling` gives each metric's
/// function; an unknown metric merges as `avg`, the MAL default.
pub fn merge_series(per_node: Vec<Vec<Series>>, downsampling: impl Fn(&str) -> Option<Downsampling>) -> Vec<Series> {
    if per_node.len() == 1 {
        return per_node.into_iter().next().unwrap_or_default();
    }
    // (metric, entity) → bucket → (start_ms, values in node order).
    let mut cells: BTreeMap<(String, Entity), BTreeMap<i64, (i64, Vec<Value>)>> = BTreeMap::new();
    for series in per_node.into_iter().flatten() {
        let buckets = cells.entry((series.metric, series.entity)).or_default();
        for point in series.points {
            buckets.entry(point.bucket).or_insert_with(|| (point.start_ms, Vec::new())).1.push(point.value);
        }
    }
    cells
        .into_iter()
        .map(|((metric, entity), buckets)| {
            let function = downsampling(&metric).unwrap_or(Downsampling::Avg);
            let points = buckets
                .into_iter()
                .map(|(bucket, (start_ms, values))| Point { bucket, start_ms, value: merge_values(function, values) })
                .collect();
            Series { metric, entity, points }
        })
        .collect()
}

/// One bucket's values from several nodes, merged by `function`.
pub fn merge_values(function: Downsampling, values: Vec<Value>) -> Value {
    let mut values = values.into_iter();
    let Some(first) = values.next() else { return Value::Single(0) };
    let rest: Vec<Value> = values.collect();
    if rest.is_empty() {
        return first;
    }
    match first {
        Value::Single(v) => {
            let mut all = vec![v];
            all.extend(rest.iter().filter_map(|r| if let Value::Single(x) = r { Some(*x) } else { None }));
            Value::Single(combine(function, &all))
        }
        Value::Labeled(entries) => {
            let mut keys: Vec<(String, Vec<i64>)> = entries.into_iter().map(|(k, v)| (k, vec![v])).collect();
            for other in &rest {
                if let Value::Labeled(more) = other {
                    for (key, v) in more {
                        match keys.iter_mut().find(|(k, _)| k == key) {
                            Some((_, list)) => list.push(*v),
                            None => keys.push((key.clone(), vec![*v])),
                        }
                    }
                }
            }
            Value::Labeled(keys.into_iter().map(|(k, list)| (k, combine(function, &list))).collect())
        }
        Value::Histogram { labels, buckets, percentiles } => {
            let mut bounds: Vec<(i64, Vec<i64>)> = buckets.into_iter().map(|(b, c)| (b, vec![c])).collect();
            for other in &rest {
                if let Value::Histogram { labels: other_labels, buckets: more, .. } = other
                    && *other_labels == labels
                {
                    for (bound, count) in more {
                        match bounds.iter_mut().find(|(b, _)| b == bound) {
                            Some((_, list)) => list.push(*count),
                            None => bounds.push((*bound, vec![*count])),
                        }
                    }
                }
            }
            bounds.sort_by_key(|(bound, _)| *bound);
            let buckets = bounds.into_iter().map(|(b, list)| (b, combine(function, &list))).collect();
            Value::Histogram { labels, buckets, percentiles }
        }
    }
}

fn combine(function: Downsampling, values: &[i64]) -> i64 {
    match function {
        Downsampling::Sum | Downsampling::SumPerMin => values.iter().fold(0i64, |acc, v| acc.saturating_add(*v)),
        Downsampling::Max => values.iter().copied().max().unwrap_or(0),
        Downsampling::Min => values.iter().copied().min().unwrap_or(0),
        Downsampling::Latest => values.first().copied().unwrap_or(0),
        Downsampling::Avg => {
            let total: i128 = values.iter().map(|v| i128::from(*v)).sum();
            let count = values.len().max(1) as i128;
            (total / count) as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotrule_mal_engine::ScopeType;

    fn entity(service: &str) -> Entity {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = service.to_string();
        entity
    }

    fn series(metric: &str, service: &str, points: &[(i64, Value)]) -> Series {
        Series {
            metric: metric.to_string(),
            entity: entity(service),
            points: points.iter().map(|(bucket, value)| Point { bucket: *bucket, start_ms: *bucket * 60_000, value: value.clone() }).collect(),
        }
    }

    #[test]
    fn each_function_merges_single_values() {
        let cases = [
            (Downsampling::Sum, 30),
            (Downsampling::SumPerMin, 30),
            (Downsampling::Avg, 15),
            (Downsampling::Max, 20),
            (Downsampling::Min, 10),
            (Downsampling::Latest, 10),
        ];
        for (function, want) in cases {
            assert_eq!(merge_values(function, vec![Value::Single(10), Value::Single(20)]), Value::Single(want), "{function:?}");
        }
    }

    #[test]
    fn series_merge_per_entity_and_bucket() {
        let a = vec![series("m", "s1", &[(1, Value::Single(1)), (2, Value::Single(2))]), series("m", "s2", &[(1, Value::Single(5))])];
        let b = vec![series("m", "s1", &[(2, Value::Single(3)), (3, Value::Single(4))])];
        let merged = merge_series(vec![a, b], |_| Some(Downsampling::Sum));
        assert_eq!(merged.len(), 2);
        let s1: Vec<(i64, Value)> = merged[0].points.iter().map(|p| (p.bucket, p.value.clone())).collect();
        assert_eq!(s1, vec![(1, Value::Single(1)), (2, Value::Single(5)), (3, Value::Single(4))]);
        assert_eq!(merged[1].entity.service_name, "s2");
    }

    #[test]
    fn labeled_and_histogram_values_merge_per_key_and_bucket() {
        let labeled = merge_values(
            Downsampling::Sum,
            vec![Value::Labeled(vec![("k=a".into(), 1), ("k=b".into(), 2)]), Value::Labeled(vec![("k=b".into(), 3), ("k=c".into(), 4)])],
        );
        assert_eq!(labeled, Value::Labeled(vec![("k=a".into(), 1), ("k=b".into(), 5), ("k=c".into(), 4)]));
        let histogram = merge_values(
            Downsampling::Sum,
            vec![
                Value::Histogram { labels: String::new(), buckets: vec![(100, 1), (200, 2)], percentiles: vec![50] },
                Value::Histogram { labels: String::new(), buckets: vec![(200, 3), (50, 1)], percentiles: vec![50] },
            ],
        );
        assert_eq!(histogram, Value::Histogram { labels: String::new(), buckets: vec![(50, 1), (100, 1), (200, 5)], percentiles: vec![50] });
    }

    #[test]
    fn one_node_is_returned_as_is() {
        let only = vec![series("m", "s", &[(1, Value::Single(1))])];
        assert_eq!(merge_series(vec![only.clone()], |_| None), only);
    }
}
