//! The simple aggregations (sum avg min max count group, and stddev/stdvar as population
//! statistics by Welford's method like Prometheus 2.42) with `by`/`without`, as Prometheus 2.42's
//! `aggregation`: `by` keeps only the listed labels, `without` drops the listed ones and `__name__`.

use std::collections::BTreeMap;

use promql_parser::parser::LabelModifier;

use crate::error::Error;
use crate::eval::Labels;

/// The output labels of a sample's group.
fn group_labels(labels: &Labels, modifier: Option<&LabelModifier>) -> Labels {
    match modifier {
        None => Labels::new(),
        Some(LabelModifier::Include(by)) => {
            labels.iter().filter(|(name, _)| by.labels.contains(name)).map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        Some(LabelModifier::Exclude(without)) => labels
            .iter()
            .filter(|(name, _)| name.as_str() != "__name__" && !without.labels.contains(name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

struct Group {
    value: f64,
    mean: f64,
    count: f64,
}

/// Aggregates `samples` (evaluated at `t_ms`) with `op`.
pub fn aggregate(op: &str, modifier: Option<&LabelModifier>, samples: Vec<(Labels, i64, f64)>, t_ms: i64) -> Result<Vec<(Labels, i64, f64)>, Error> {
    if !matches!(op, "sum" | "avg" | "min" | "max" | "count" | "group" | "stddev" | "stdvar") {
        return Err(Error::Unsupported { construct: format!("aggregation {op}") });
    }
    let mut groups: BTreeMap<Labels, Group> = BTreeMap::new();
    for (labels, _, v) in samples {
        let key = group_labels(&labels, modifier);
        let Some(group) = groups.get_mut(&key) else {
            // stddev/stdvar accumulate the sum of squared deviations, which starts at zero.
            let value = if matches!(op, "stddev" | "stdvar") { 0.0 } else { v };
            groups.insert(key, Group { value, mean: v, count: 1.0 });
            continue;
        };
        group.count += 1.0;
        match op {
            "sum" => group.value += v,
            "avg" => {
                // Prometheus 2.42's incremental mean, including its handling of infinities.
                if group.mean.is_infinite() {
                    if v.is_infinite() && (group.mean > 0.0) == (v > 0.0) {
                        continue;
                    }
                    if !v.is_infinite() && !v.is_nan() {
                        continue;
                    }
                }
                group.mean += v / group.count - group.mean / group.count;
            }
            "min" => {
                if group.value > v || group.value.is_nan() {
                    group.value = v;
                }
            }
            "max" => {
                if group.value < v || group.value.is_nan() {
                    group.value = v;
                }
            }
            "stddev" | "stdvar" => {
                let delta = v - group.mean;
                group.mean += delta / group.count;
                group.value += delta * (v - group.mean);
            }
            _ => {}
        }
    }
    Ok(groups
        .into_iter()
        .map(|(labels, group)| {
            let value = match op {
                "avg" => group.mean,
                "count" => group.count,
                "group" => 1.0,
                "stdvar" => group.value / group.count,
                "stddev" => (group.value / group.count).sqrt(),
                _ => group.value,
            };
            (labels, t_ms, value)
        })
        .collect())
}
