//! The aggregations (sum avg min max count group, topk bottomk quantile count_values, and stddev/stdvar as population
//! statistics by Welford's method like Prometheus 2.42) with `by`/`without`, as Prometheus 2.42's
//! `aggregation`: `by` keeps only the listed labels, `without` drops the listed ones and `__name__`.

use std::collections::BTreeMap;

use promql_parser::parser::LabelModifier;

use crate::error::Error;
use crate::eval::Labels;

/// The output labels of a sample's group.
pub(crate) fn group_labels(labels: &Labels, modifier: Option<&LabelModifier>) -> Labels {
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

/// topk/bottomk (keeping each chosen sample's own labels) and quantile (per group, with
/// Prometheus 2.42's linear interpolation) with their scalar parameter.
pub fn aggregate_with_param(
    op: &str,
    param: f64,
    modifier: Option<&LabelModifier>,
    samples: Vec<(Labels, i64, f64)>,
    t_ms: i64,
) -> Result<Vec<(Labels, i64, f64)>, Error> {
    // 2.42's convertibleToInt64 check on k (NaN fails it too).
    if op != "quantile" && !(-9.223_372_036_854_776e18..=9.223_372_036_854_776e18).contains(&param) {
        return Err(Error::Execution { message: format!("Scalar value {} overflows int64", go_float(param)) });
    }
    let mut groups: BTreeMap<Labels, Vec<(Labels, i64, f64)>> = BTreeMap::new();
    for sample in samples {
        groups.entry(group_labels(&sample.0, modifier)).or_default().push(sample);
    }
    let mut out = Vec::new();
    for (key, mut members) in groups {
        match op {
            "quantile" => {
                let values: Vec<f64> = members.iter().map(|s| s.2).collect();
                out.push((key, t_ms, quantile(param, values)));
            }
            _ => {
                // k as Prometheus' int64 conversion; below 1 yields nothing.
                if param < 1.0 {
                    continue;
                }
                let k = if param >= members.len() as f64 { members.len() } else { param as usize };
                let bottom = op == "bottomk";
                // NaN ranks last for both topk and bottomk.
                members.sort_by(|a, b| match (a.2.is_nan(), b.2.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ if bottom => a.2.total_cmp(&b.2),
                    _ => b.2.total_cmp(&a.2),
                });
                members.truncate(k);
                out.extend(members.into_iter().map(|(labels, _, v)| (labels, t_ms, v)));
            }
        }
    }
    Ok(out)
}

/// `count_values("label", v)`: each sample's value, formatted as Go's
/// `strconv.FormatFloat(v, 'f', -1, 64)`, becomes `label` (replacing any label of that name);
/// then samples are counted by `by` plus `label`, or `without` (which may drop `label` too).
pub fn count_values(label: &str, modifier: Option<&LabelModifier>, samples: Vec<(Labels, i64, f64)>, t_ms: i64) -> Result<Vec<(Labels, i64, f64)>, Error> {
    let valid = !label.is_empty() && label.chars().enumerate().all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    if !valid {
        return Err(Error::Execution { message: format!("invalid label name {label:?}") });
    }
    let mut counts: BTreeMap<Labels, f64> = BTreeMap::new();
    for (mut labels, _, v) in samples {
        labels.insert(label.to_string(), go_float(v));
        let key = match modifier {
            Some(LabelModifier::Include(by)) => {
                labels.into_iter().filter(|(name, _)| name == label || by.labels.contains(name)).collect()
            }
            Some(LabelModifier::Exclude(_)) => group_labels(&labels, modifier),
            None => labels.into_iter().filter(|(name, _)| name == label).collect(),
        };
        *counts.entry(key).or_default() += 1.0;
    }
    Ok(counts.into_iter().map(|(labels, count)| (labels, t_ms, count)).collect())
}

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)`: the shortest decimal that reads back as `v`, never
/// in exponent form (as Rust's `Display` of f64), with Go's spelling of infinities.
pub(crate) fn go_float(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        v.to_string()
    }
}

/// Prometheus' `quantile`: linear interpolation between the closest ranks.
pub fn quantile(q: f64, mut values: Vec<f64>) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    // NaN sorts first, as 2.42's vectorByValueHeap.
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.total_cmp(b),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}
