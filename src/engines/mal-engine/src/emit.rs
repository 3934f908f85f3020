//! Emission: the entity → samples map a scope call captured becomes stored values, per the
//! rule's data type, as SkyWalking's `Analyzer.analyse` does (single = the first sample; labeled =
//! one table entry per sample; histogram = one bucket set per label group without `le`).

use hotrule_rule_compiler::MalRule;

use crate::error::EvalError;
use crate::ops;
use crate::output::{DataType, Entity, MetricValue, Value, minute_bucket, to_long};
use crate::sample::{LabelMap, Sample};
use crate::scope::Groups;

/// Turns the captured entity map into stored values, per the rule's data type, appended to `out`
/// (on an error, some may have been: the caller drops the rule's values).
pub(crate) fn emit(
    rule: &MalRule,
    percentiles: &[u32],
    label_order: &[String],
    groups: Groups,
    out: &mut Vec<MetricValue>,
) -> Result<(), EvalError> {
    let shape = rule.shape;
    // The samples still have the scope's labels (see `Groups`): keys leave them out.
    let Groups { keys, entities } = groups;
    let scope_label = |label: &str| keys.iter().any(|key| key == label);
    for (entity, family) in entities {
        let samples = family.samples();
        let Some(first) = samples.first() else {
            continue;
        };
        let value = |entity: Entity, value: Value, ts: i64| MetricValue {
            metric: rule.metric_name.clone(),
            rule: rule.name.clone(),
            entity,
            time_bucket: minute_bucket(ts),
            timestamp_ms: ts,
            value,
            data_type: shape.data_type,
            downsampling: shape.downsampling,
        };
        match shape.data_type {
            DataType::Single => out.push(value(
                entity,
                Value::Single(to_long(first.value)),
                first.timestamp_ms,
            )),
            DataType::Labeled => {
                let mut table: Vec<(String, i64)> = Vec::new();
                for sample in samples {
                    let key = label_key(&sample.labels, scope_label, label_order);
                    let v = to_long(sample.value);
                    match table.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = v,
                        None => table.push((key, v)),
                    }
                }
                out.push(value(entity, Value::Labeled(table), first.timestamp_ms));
            }
            DataType::Histogram | DataType::HistogramPercentile => {
                let mut groups: Vec<(String, Vec<&Sample>)> = Vec::new();
                for sample in samples {
                    let key = label_key(
                        &sample.labels,
                        |label| label == "le" || scope_label(label),
                        label_order,
                    );
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some(group) => group.1.push(sample),
                        None => groups.push((key, vec![sample])),
                    }
                }
                for (labels, group) in groups {
                    let mut buckets = Vec::with_capacity(group.len());
                    for sample in &group {
                        // A scope that consumes `le` leaves the sample without it.
                        let le = if scope_label("le") {
                            None
                        } else {
                            sample.labels.get("le")
                        };
                        let Some(le) = le else {
                            return Err(EvalError::BadArgument {
                                function: "histogram".to_owned(),
                                detail: "a sample without an 'le' label reached storage (keep 'le' in the aggregation)".to_owned(),
                                line: rule.line,
                            });
                        };
                        let bound =
                            ops::parse_java_double(le).ok_or_else(|| EvalError::NotANumber {
                                label: "le".to_owned(),
                                value: le.clone(),
                                line: rule.line,
                            })?;
                        let bucket = if bound == f64::NEG_INFINITY {
                            i64::MIN
                        } else {
                            bound as i64
                        };
                        buckets.push((bucket, to_long(sample.value)));
                    }
                    let percentiles = if shape.data_type == DataType::HistogramPercentile {
                        percentiles.to_vec()
                    } else {
                        Vec::new()
                    };
                    out.push(value(
                        entity.clone(),
                        Value::Histogram {
                            labels,
                            buckets,
                            percentiles,
                        },
                        group[0].timestamp_ms,
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `k1=v1,k2=v2` of `labels` but those `skip` takes: labels in the order of the rule's last
/// aggregation list (upstream's label order), any others after them by name (the map's own
/// order).
fn label_key(labels: &LabelMap, skip: impl Fn(&str) -> bool, order: &[String]) -> String {
    // At most every label kept, each with its `=` and `,`: one allocation.
    let length = labels
        .iter()
        .filter(|(k, _)| !skip(k))
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum();
    let mut key = String::with_capacity(length);
    let mut push = |k: &str, v: &str| {
        if !key.is_empty() {
            key.push(',');
        }
        key.push_str(k);
        key.push('=');
        key.push_str(v);
    };
    for (i, name) in order.iter().enumerate() {
        // A name listed twice takes its first place.
        if skip(name) || order[..i].contains(name) {
            continue;
        }
        if let Some(v) = labels.get(name) {
            push(name, v);
        }
    }
    for (k, v) in labels {
        if !skip(k) && !order.contains(k) {
            push(k, v);
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::labels;

    /// `label_key` as it was: collect, sort by (place in the order, name), join.
    fn label_key_reference<'a>(
        labels: impl Iterator<Item = (&'a String, &'a String)>,
        order: &[String],
    ) -> String {
        let mut pairs: Vec<(&String, &String)> = labels.collect();
        pairs.sort_by_key(|(k, _)| (order.iter().position(|o| o == *k).unwrap_or(usize::MAX), *k));
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn label_key_matches_reference() {
        let maps = [
            labels::<&str, &str>([]),
            labels([("le", "100")]),
            labels([("b", "2"), ("a", "1"), ("le", "5"), ("z", "")]),
            labels([("level", "error"), ("service_instance_id", "i-1")]),
        ];
        let orders: Vec<Vec<String>> = [
            &[][..],
            &["z", "a"][..],
            &["le", "b", "missing"][..],
            &["b", "b", "a"][..],
            &["level", "service", "service_instance_id"][..],
        ]
        .iter()
        .map(|o| o.iter().map(|s| s.to_string()).collect())
        .collect();
        for map in &maps {
            for order in &orders {
                assert_eq!(
                    label_key(map, |_| false, order),
                    label_key_reference(map.iter(), order)
                );
                assert_eq!(
                    label_key(map, |k| k == "le", order),
                    label_key_reference(map.iter().filter(|(k, _)| *k != "le"), order)
                );
                let scope = |k: &str| k == "le" || k == "b" || k == "service_instance_id";
                assert_eq!(
                    label_key(map, scope, order),
                    label_key_reference(map.iter().filter(|(k, _)| !scope(k)), order)
                );
            }
        }
    }
}
