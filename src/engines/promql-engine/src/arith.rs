//! Arithmetic and comparison between scalars, and between a vector and a scalar, as Prometheus'
//! `scalarBinop`/`VectorscalarBinop`: arithmetic drops `__name__`; a comparison without `bool`
//! filters (keeping the name), with `bool` yields 0/1 and drops the name.

use crate::error::Error;
use crate::eval::{Labels, Value};

/// `op` applied to two numbers; `None` for a comparison that is false.
fn apply(op: &str, lhs: f64, rhs: f64) -> Result<(f64, Option<bool>), Error> {
    Ok(match op {
        "+" => (lhs + rhs, None),
        "-" => (lhs - rhs, None),
        "*" => (lhs * rhs, None),
        "/" => (lhs / rhs, None),
        "%" => (lhs % rhs, None),
        "^" => (lhs.powf(rhs), None),
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
        (Value::Vector(samples), Value::Scalar(_, r)) => vector_scalar(return_bool, samples, |v| apply(op, v, r)),
        (Value::Scalar(_, l), Value::Vector(samples)) => vector_scalar(return_bool, samples, |v| apply(op, l, v)),
        _ => Err(Error::Unsupported { construct: format!("binary operator {op} between these operand types") }),
    }
}

fn vector_scalar(
    return_bool: bool,
    samples: Vec<(Labels, i64, f64)>,
    apply_to: impl Fn(f64) -> Result<(f64, Option<bool>), Error>,
) -> Result<Value, Error> {
    let mut out = Vec::with_capacity(samples.len());
    for (mut labels, t, v) in samples {
        let (value, comparison) = apply_to(v)?;
        let value = match comparison {
            None => {
                labels.remove("__name__");
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
}
