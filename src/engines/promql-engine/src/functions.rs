//! The per-value arithmetic of Prometheus 2.42's functions (`promql/functions.go`): math and
//! trigonometry, the date functions, the `*_over_time` reductions (Kahan-compensated as 2.42),
//! the label functions and the labels of `absent`. Pure; the argument evaluation is in `call.rs`.

use std::collections::BTreeSet;

use promql_parser::label::MatchOp;
use promql_parser::parser::VectorSelector;

use crate::error::Error;
use crate::eval::{Labels, Value};

type Sample = (Labels, i64, f64);

/// The functions applied to each sample's value; `None` when `name` is not one.
pub(crate) fn math(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sqrt" => f64::sqrt,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "rad" => |v| v * std::f64::consts::PI / 180.0,
        "deg" => |v| v * 180.0 / std::f64::consts::PI,
        "sgn" => |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        },
        _ => return None,
    })
}

/// Go's `math.Max`: +Inf wins over NaN, NaN over any other value, +0 over -0.
pub(crate) fn go_max(a: f64, b: f64) -> f64 {
    if a == f64::INFINITY || b == f64::INFINITY {
        f64::INFINITY
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Go's `math.Min`: -Inf wins over NaN, NaN over any other value, -0 over +0.
pub(crate) fn go_min(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY || b == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

/// The date functions over Unix seconds, in UTC; `None` when `name` is not one.
pub(crate) fn date(name: &str) -> Option<fn(i64) -> f64> {
    Some(match name {
        "year" => |s| civil(s).0 as f64,
        "month" => |s| civil(s).1 as f64,
        "day_of_month" => |s| civil(s).2 as f64,
        "day_of_year" => |s| {
            let (year, month, day) = civil(s);
            (days_from_civil(year, month, day) - days_from_civil(year, 1, 1) + 1) as f64
        },
        "day_of_week" => |s| (s.div_euclid(86_400) + 4).rem_euclid(7) as f64,
        "days_in_month" => |s| {
            let (year, month, _) = civil(s);
            let (next_year, next_month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
            (days_from_civil(next_year, next_month, 1) - days_from_civil(year, month, 1)) as f64
        },
        "hour" => |s| (s.rem_euclid(86_400) / 3600) as f64,
        "minute" => |s| (s.rem_euclid(3600) / 60) as f64,
        _ => return None,
    })
}

/// (year, month, day) of Unix seconds `s` (Howard Hinnant's civil_from_days).
fn civil(s: i64) -> (i64, i64, i64) {
    let z = s.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since the Unix epoch of a civil date (Howard Hinnant's days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Go's `kahanSumInc` (Neumaier's variant).
pub(crate) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if sum.abs() >= inc.abs() { c + ((sum - t) + inc) } else { c + ((inc - t) + sum) };
    (t, c)
}

/// The `*_over_time` reductions over a non-empty window; `None` when `name` is not one.
pub(crate) fn over_time(name: &str) -> Option<fn(&crate::rate::Points) -> f64> {
    Some(match name {
        "sum_over_time" => |s| {
            let (mut sum, mut c) = (0.0, 0.0);
            for (_, v) in s {
                (sum, c) = kahan_inc(*v, sum, c);
            }
            if sum.is_infinite() { sum } else { sum + c }
        },
        "count_over_time" => |s| s.len() as f64,
        "avg_over_time" => |s| {
            let (mut mean, mut count, mut c) = (0.0f64, 0.0, 0.0);
            for (_, v) in s {
                count += 1.0;
                if mean.is_infinite() {
                    if v.is_infinite() && (mean > 0.0) == (*v > 0.0) {
                        continue;
                    }
                    if !v.is_infinite() && !v.is_nan() {
                        continue;
                    }
                }
                (mean, c) = kahan_inc(v / count - mean / count, mean, c);
            }
            if mean.is_infinite() { mean } else { mean + c }
        },
        "min_over_time" => |s| s.iter().map(|(_, v)| *v).fold(f64::NAN, |a, b| if a.is_nan() || b < a { b } else { a }),
        "max_over_time" => |s| s.iter().map(|(_, v)| *v).fold(f64::NAN, |a, b| if a.is_nan() || b > a { b } else { a }),
        "last_over_time" => |s| s.last().map_or(f64::NAN, |(_, v)| *v),
        "present_over_time" => |_| 1.0,
        _ => return None,
    })
}

/// The labels `absent` gives a selector: its equality matchers but `__name__`; a label matched
/// twice or by another operator is left out (2.42's createLabelsForAbsentFunction).
pub(crate) fn absent_labels(selector: &VectorSelector) -> Labels {
    let mut labels = Labels::new();
    let mut has = BTreeSet::new();
    for matcher in &selector.matchers.matchers {
        if matcher.name == "__name__" {
            continue;
        }
        if matches!(matcher.op, MatchOp::Equal) && !has.contains(&matcher.name) {
            labels.insert(matcher.name.clone(), matcher.value.clone());
            has.insert(matcher.name.clone());
        } else {
            labels.remove(&matcher.name);
        }
    }
    labels
}

fn valid_label_name(name: &str) -> bool {
    !name.is_empty() && name.chars().enumerate().all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
}

/// `label_replace(v, dst, replacement, src, regex)` as 2.42's funcLabelReplace.
pub(crate) fn label_replace(samples: Vec<Sample>, dst: &str, replacement: &str, src: &str, pattern: &str) -> Result<Value, Error> {
    let regex = regex::Regex::new(&format!("^(?s:{pattern})$"))
        .map_err(|error| Error::Execution { message: format!("invalid regular expression in label_replace(): {pattern}: {error}") })?;
    if !valid_label_name(dst) {
        return Err(Error::Execution { message: format!("invalid destination label name in label_replace(): {dst}") });
    }
    let mut out = Vec::with_capacity(samples.len());
    for (mut labels, at, v) in samples {
        let source = labels.get(src).cloned().unwrap_or_default();
        if let Some(captures) = regex.captures(&source) {
            let mut result = String::new();
            captures.expand(replacement, &mut result);
            if result.is_empty() {
                labels.remove(dst);
            } else {
                labels.insert(dst.to_string(), result);
            }
        }
        out.push((labels, at, v));
    }
    Ok(Value::Vector(out))
}

/// `label_join(v, dst, separator, src...)` as 2.42's funcLabelJoin.
pub(crate) fn label_join(samples: Vec<Sample>, dst: &str, separator: &str, sources: &[String]) -> Result<Value, Error> {
    if !valid_label_name(dst) {
        return Err(Error::Execution { message: format!("invalid destination label name in label_join(): {dst}") });
    }
    for src in sources {
        if !valid_label_name(src) {
            return Err(Error::Execution { message: format!("invalid source label name in label_join(): {src}") });
        }
    }
    let mut out = Vec::with_capacity(samples.len());
    for (mut labels, at, v) in samples {
        let joined: Vec<String> = sources.iter().map(|src| labels.get(src).cloned().unwrap_or_default()).collect();
        let joined = joined.join(separator);
        if joined.is_empty() {
            labels.remove(dst);
        } else {
            labels.insert(dst.to_string(), joined);
        }
        out.push((labels, at, v));
    }
    Ok(Value::Vector(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_fields() {
        // 2006-01-02 22:04:05 UTC, a Monday.
        let s = 1_136_239_445;
        let field = |name: &str| date(name).map(|f| f(s));
        assert_eq!(field("year"), Some(2006.0));
        assert_eq!(field("month"), Some(1.0));
        assert_eq!(field("day_of_month"), Some(2.0));
        assert_eq!(field("day_of_year"), Some(2.0));
        assert_eq!(field("day_of_week"), Some(1.0));
        assert_eq!(field("hour"), Some(22.0));
        assert_eq!(field("minute"), Some(4.0));
        assert_eq!(field("days_in_month"), Some(31.0));
        // Before the epoch: 1969-12-31 23:59:59, a Wednesday.
        assert_eq!(date("day_of_week").map(|f| f(-1)), Some(3.0));
        assert_eq!(date("year").map(|f| f(-1)), Some(1969.0));
        // Extreme values give a number, never a panic.
        assert!(date("year").is_some_and(|f| f(i64::MIN).is_finite() && f(i64::MAX).is_finite()));
    }

    #[test]
    fn go_min_and_max_propagate_nan_but_not_past_infinity() {
        assert!(go_max(1.0, f64::NAN).is_nan());
        assert_eq!(go_max(f64::NAN, f64::INFINITY), f64::INFINITY);
        assert_eq!(go_min(f64::NAN, f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert!(go_min(0.0, -0.0).is_sign_negative());
    }
}
