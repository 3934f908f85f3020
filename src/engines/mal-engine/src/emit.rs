//! Emission: the entity → samples map a scope call captured becomes stored values, per the
//! rule's data type, as SkyWalking's `Analyzer.analyse` does (single = the first sample; labeled =
//! one table entry per sample; histogram = one bucket set per label group without `le`).

use hotrule_rule_compiler::MalRule;

use crate::error::EvalError;
use crate::ops;
use crate::output::{DataType, Entity, MetricValue, Value, minute_bucket, to_long};
use crate::sample::Sample;

/// Turns the captured entity map into stored values, per the rule's data type.
pub(crate) fn emit(
    rule: &MalRule,
    percentiles: &[u32],
    label_order: &[String],
    entities: Vec<(Entity, Vec<Sample>)>,
) -> Result<Vec<MetricValue>, EvalError> {
    let shape = rule.shape;
    let mut out = Vec::new();
    for (entity, samples) in entities {
        let Some(first) = samples.first() else {
            continue;
        };
        let value = |value: Value, ts: i64| MetricValue {
            metric: rule.metric_name.clone(),
            rule: rule.name.clone(),
            entity: entity.clone(),
            time_bucket: minute_bucket(ts),
            timestamp_ms: ts,
            value,
            data_type: shape.data_type,
            downsampling: shape.downsampling,
        };
        match shape.data_type {
            DataType::Single => out.push(value(
                Value::Single(to_long(first.value)),
                first.timestamp_ms,
            )),
            DataType::Labeled => {
                let mut table: Vec<(String, i64)> = Vec::new();
                for sample in &samples {
                    let key = label_key(sample.labels.iter(), label_order);
                    let v = to_long(sample.value);
                    match table.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = v,
                        None => table.push((key, v)),
                    }
                }
                out.push(value(Value::Labeled(table), first.timestamp_ms));
            }
            DataType::Histogram | DataType::HistogramPercentile => {
                let mut groups: Vec<(String, Vec<&Sample>)> = Vec::new();
                for sample in &samples {
                    let key = label_key(
                        sample.labels.iter().filter(|(k, _)| *k != "le"),
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
                        let Some(le) = sample.labels.get("le") else {
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
    Ok(out)
}

/// `k1=v1,k2=v2` in label-name order.
/// `k1=v1,k2=v2`, labels in the order of the rule's last aggregation list (upstream's label
/// order), any others after them by name.
fn label_key<'a>(
    labels: impl Iterator<Item = (&'a String, &'a String)>,
    order: &[String],
) -> String {
    let mut pairs: Vec<(&String, &String)> = labels.collect();
    pairs.sort_by_key(|(k, _)| (order.iter().position(|o| o == *k).unwrap_or(usize::MAX), *k));
    let mut key = String::new();
    for (k, v) in pairs {
        if !key.is_empty() {
            key.push(',');
        }
        key.push_str(k);
        key.push('=');
        key.push_str(v);
    }
    key
}
