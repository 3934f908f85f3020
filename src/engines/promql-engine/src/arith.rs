//! Arithmetic and comparison between scalars, and between a vector and a scalar, as Prometheus'
//! `scalarBinop`/`VectorscalarBinop`: arithmetic drops `__name__`; a comparison without `bool`
//! filters (keeping the name), with `bool` yields 0/1 and drops the name.

use std::collections::{BTreeMap, BTreeSet};

use promql_parser::parser::LabelModifier;

use crate::error::Error;
use crate::eval::{Labels, Value};

type Sample = (Labels, i64, f64);

/// The match signature of a sample's labels, as Prometheus 2.42's `signatureFunc`: `on` keeps the
/// listed labels, `ignoring` (and no modifier) drops the listed ones and always `__name__`.
fn signature(labels: &Labels, matching: Option<&LabelModifier>) -> Labels {
    // `on` / `ignoring` pick labels as an aggregation's `by` / `without` do.
    match matching {
        Some(modifier) => crate::aggregate::group_labels(labels, Some(modifier)),
        None => labels.iter().filter(|(name, _)| name.as_str() != "__name__").map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

fn show(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// The set operators `and`, `or`, `unless` between two vectors (Prometheus 2.42 `VectorAnd`/`Or`/`Unless`).
pub fn set_op(op: &str, matching: Option<&LabelModifier>, lhs: Vec<Sample>, rhs: Vec<Sample>) -> Result<Vec<Sample>, Error> {
    let rhs_sigs: BTreeSet<Labels> = rhs.iter().map(|s| signature(&s.0, matching)).collect();
    match op {
        "and" => Ok(lhs.into_iter().filter(|s| rhs_sigs.contains(&signature(&s.0, matching))).collect()),
        "unless" => Ok(lhs.into_iter().filter(|s| !rhs_sigs.contains(&signature(&s.0, matching))).collect()),
        "or" => {
            let lhs_sigs: BTreeSet<Labels> = lhs.iter().map(|s| signature(&s.0, matching)).collect();
            let mut out = lhs;
            out.extend(rhs.into_iter().filter(|s| !lhs_sigs.contains(&signature(&s.0, matching))));
            Ok(out)
        }
        other => Err(Error::Unsupported { construct: format!("set operator {other}") }),
    }
}

/// Arithmetic or comparison between two vectors with one-to-one matching (`on`/`ignoring`), as
/// Prometheus 2.42's `VectorBinop` (see [`group_binop`] for `group_left`/`group_right`).
#[cfg(test)]
pub fn vector_vector(op: &str, return_bool: bool, matching: Option<&LabelModifier>, lhs: Vec<Sample>, rhs: Vec<Sample>) -> Result<Vec<Sample>, Error> {
    group_binop(op, return_bool, matching, None, lhs, rhs)
}

/// `group_left(include)` (`Some((false, include))`) or `group_right(include)` (`Some((true, include))`)
/// as Prometheus 2.42's `VectorBinop`: the "many" side is iterated, the "one" side must be unique per
/// match group, and the include labels are copied from the "one" side (deleted when it lacks them).
pub fn group_binop(
    op: &str,
    return_bool: bool,
    matching: Option<&LabelModifier>,
    group: Option<(bool, &[String])>,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
) -> Result<Vec<Sample>, Error> {
    let swapped = matches!(group, Some((true, _)));
    let (lhs, rhs) = if swapped { (rhs, lhs) } else { (lhs, rhs) };
    let one_side = if swapped { "left" } else { "right" };
    let mut right: BTreeMap<Labels, (Labels, f64)> = BTreeMap::new();
    for (labels, _, v) in rhs {
        let sig = signature(&labels, matching);
        if let Some((first, _)) = right.get(&sig) {
            return Err(Error::Execution {
                message: format!(
                    "found duplicate series for the match group {} on the {one_side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                    show(&sig),
                    show(first),
                    show(&labels)
                ),
            });
        }
        right.insert(sig, (labels, v));
    }
    let mut matched: BTreeSet<Labels> = BTreeSet::new();
    let mut out = Vec::new();
    for (labels, t, l) in lhs {
        let sig = signature(&labels, matching);
        let Some((one_labels, r)) = right.get(&sig) else { continue };
        let (left_value, right_value) = if swapped { (*r, l) } else { (l, *r) };
        let (value, comparison) = apply(op, left_value, right_value)?;
        let l = left_value;
        let value = match comparison {
            None => value,
            Some(holds) if return_bool => {
                if holds {
                    1.0
                } else {
                    0.0
                }
            }
            Some(true) => l,
            Some(false) => continue,
        };
        if let Some((_, include)) = group {
            let mut result = labels;
            if drops_name(op) || return_bool {
                result.remove("__name__");
            }
            for name in include {
                match one_labels.get(name) {
                    Some(value) => result.insert(name.clone(), value.clone()),
                    None => result.remove(name),
                };
            }
            if !matched.insert(result.clone()) {
                return Err(Error::Execution { message: "multiple matches for labels: grouping labels must ensure unique matches".to_string() });
            }
            out.push((result, t, value));
            continue;
        }
        if !matched.insert(sig) {
            return Err(Error::Execution {
                message: "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".to_string(),
            });
        }
        let mut result: Labels = match matching {
            Some(LabelModifier::Include(on)) => {
                labels.iter().filter(|(name, _)| on.labels.contains(name)).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            Some(LabelModifier::Exclude(ignoring)) => {
                labels.iter().filter(|(name, _)| !ignoring.labels.contains(name)).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            None => labels,
        };
        if drops_name(op) || return_bool {
            result.remove("__name__");
        }
        out.push((result, t, value));
    }
    Ok(out)
}

/// Whether an arithmetic result loses `__name__` (2.42's shouldDropMetricName: not `atan2`).
fn drops_name(op: &str) -> bool {
    matches!(op, "+" | "-" | "*" | "/" | "^" | "%")
}

/// `op` applied to two numbers; `None` for a comparison that is false.
fn apply(op: &str, lhs: f64, rhs: f64) -> Result<(f64, Option<bool>), Error> {
    Ok(match op {
        "+" => (lhs + rhs, None),
        "-" => (lhs - rhs, None),
        "*" => (lhs * rhs, None),
        "/" => (lhs / rhs, None),
        "%" => (lhs % rhs, None),
        "^" => (lhs.powf(rhs), None),
        // Go's math.Atan2(y, x) with the left operand as y.
        "atan2" => (lhs.atan2(rhs), None),
        "==" => (lhs, Some(lhs == rhs)),
        "!=" => (lhs, Some(lhs != rhs)),
        ">" => (lhs, Some(lhs > rhs)),
        "<" => (lhs, Some(lhs < rhs)),
        ">=" => (lhs, Some(lhs >= rhs)),
        "<=" => (lhs, Some(lhs <= rhs)),
        other => return Err(Error::Unsupported { construct: format!("binary operator {other} between these operand types") }),
    })
}

/// Evaluates `lhs op rhs` when at least one side is a scalar.
pub fn scalar_binop(op: &str, return_bool: bool, lhs: Value, rhs: Value) -> Result<Value, Error> {
    match (lhs, rhs) {
        (Value::Scalar(t, l), Value::Scalar(_, r)) => {
            let (value, comparison) = apply(op, l, r)?;
            Ok(Value::Scalar(t, comparison.map_or(value, |holds| if holds { 1.0 } else { 0.0 })))
        }
        (Value::Vector(samples), Value::Scalar(_, r)) => vector_scalar(drops_name(op), return_bool, samples, |v| apply(op, v, r)),
        (Value::Scalar(_, l), Value::Vector(samples)) => vector_scalar(drops_name(op), return_bool, samples, |v| apply(op, l, v)),
        _ => Err(Error::Unsupported { construct: format!("binary operator {op} between these operand types") }),
    }
}

fn vector_scalar(
    drop_name: bool,
    return_bool: bool,
    samples: Vec<(Labels, i64, f64)>,
    apply_to: impl Fn(f64) -> Result<(f64, Option<bool>), Error>,
) -> Result<Value, Error> {
    let mut out = Vec::with_capacity(samples.len());
    for (mut labels, t, v) in samples {
        let (value, comparison) = apply_to(v)?;
        let value = match comparison {
            None => {
                if drop_name {
                    labels.remove("__name__");
                }
                value
            }
            Some(holds) if return_bool => {
                labels.remove("__name__");
                if holds { 1.0 } else { 0.0 }
            }
            // A filtering comparison keeps the vector's own value, whichever side it is on.
            Some(true) => v,
            Some(false) => continue,
        };
        out.push((labels, t, value));
    }
    Ok(Value::Vector(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector() -> Value {
        let labels: Labels = [("__name__".to_string(), "up".to_string())].into();
        Value::Vector(vec![(labels.clone(), 0, 1.0), (labels, 0, 5.0)])
    }

    #[test]
    fn arithmetic_drops_the_name_and_a_filter_keeps_it() {
        let Ok(Value::Vector(sum)) = scalar_binop("+", false, vector(), Value::Scalar(0, 2.0)) else { panic!() };
        assert_eq!(sum.iter().map(|s| s.2).collect::<Vec<_>>(), vec![3.0, 7.0]);
        assert!(sum[0].0.get("__name__").is_none());
        let Ok(Value::Vector(kept)) = scalar_binop(">", false, vector(), Value::Scalar(0, 2.0)) else { panic!() };
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].2, 5.0);
        assert!(kept[0].0.get("__name__").is_some());
        let Ok(Value::Vector(flags)) = scalar_binop("<", true, Value::Scalar(0, 2.0), vector()) else { panic!() };
        assert_eq!(flags.iter().map(|s| s.2).collect::<Vec<_>>(), vec![0.0, 1.0]);
    }

    #[test]
    fn scalar_comparisons_with_bool_are_zero_or_one() {
        assert_eq!(scalar_binop("==", true, Value::Scalar(7, 1.0), Value::Scalar(7, 1.0)), Ok(Value::Scalar(7, 1.0)));
        assert_eq!(scalar_binop("%", false, Value::Scalar(7, 7.0), Value::Scalar(7, 4.0)), Ok(Value::Scalar(7, 3.0)));
    }

    #[test]
    fn ambiguous_vector_matching_is_an_execution_error() {
        let sample = |job: &str, instance: &str, v: f64| -> Sample {
            ([("__name__".to_string(), "m".to_string()), ("job".to_string(), job.to_string()), ("instance".to_string(), instance.to_string())].into(), 0, v)
        };
        let on_instance = promql_parser::parser::LabelModifier::include(vec!["instance"]);
        let many = vector_vector("+", false, Some(&on_instance), vec![sample("a", "0", 1.0)], vec![sample("a", "0", 1.0), sample("b", "0", 2.0)]);
        assert!(matches!(many, Err(Error::Execution { message }) if message.contains("many-to-many matching not allowed")));
        let multiple = vector_vector("+", false, Some(&on_instance), vec![sample("a", "0", 1.0), sample("b", "0", 2.0)], vec![sample("c", "0", 1.0)]);
        assert!(matches!(multiple, Err(Error::Execution { message }) if message.starts_with("multiple matches for labels")));
        let Ok(sum) = vector_vector("+", false, None, vec![sample("a", "0", 1.0)], vec![sample("a", "0", 2.0)]) else { panic!() };
        assert_eq!(sum.len(), 1);
        assert_eq!(sum[0].2, 3.0);
        assert!(sum[0].0.get("__name__").is_none());
    }
}
