//! Instant evaluation over loaded series, with Prometheus 2.42 semantics (the version Debian
//! ships): an instant selector takes the newest sample in `[t - lookback, t]`, a range selector
//! the samples in `[t - range, t]` (both ends closed in 2.x). This first subset evaluates literals,
//! selectors (offset, `@`), unary minus, the cheap `*_over_time` functions and binary operators
//! (vector/vector with `on`/`ignoring`/`group_left`/`group_right`, and `and`/`or`/`unless`); anything else is
//! [`Error::Unsupported`] naming the construct.

use std::collections::BTreeMap;

use promql_parser::parser::{AtModifier, Expr, Offset, VectorMatchCardinality, VectorSelector};

use crate::error::Error;
use crate::plan::Limits;

pub type Labels = BTreeMap<String, String>;

/// One loaded series: its labels (with `__name__`) and samples ordered by time (ms, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<(i64, f64)>,
}

/// What the caller loaded: for each selector text (its `Display`), its series.
pub type Loaded = BTreeMap<String, Vec<Series>>;

/// A Prometheus value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(i64, f64),
    String(i64, String),
    Vector(Vec<(Labels, i64, f64)>),
    Matrix(Vec<Series>),
}

/// Evaluates `expr` at `t_ms`. `start_ms`/`end_ms` of an instant query are both `t_ms`.
pub fn eval_instant(expr: &Expr, t_ms: i64, lookback_ms: i64, loaded: &Loaded, limits: &Limits) -> Result<Value, Error> {
    let mut evaluator = Evaluator { query_start_ms: t_ms, query_end_ms: t_ms, lookback_ms, loaded, limits, samples: 0 };
    evaluator.eval(expr, t_ms)
}

/// Evaluates `expr` at `start_ms`, `start_ms + step_ms`, ... up to `end_ms` inclusive, as a
/// Prometheus range query: each output series holds its points in time order; a series absent at
/// a step has no point there. Only a scalar or an instant vector can be a range query's result
/// (Prometheus' "invalid expression type … for range query").
pub fn eval_range(expr: &Expr, start_ms: i64, end_ms: i64, step_ms: i64, lookback_ms: i64, loaded: &Loaded, limits: &Limits) -> Result<Value, Error> {
    if step_ms <= 0 {
        return Err(Error::Unsupported { construct: "a range query step of zero or less".to_string() });
    }
    let mut evaluator = Evaluator { query_start_ms: start_ms, query_end_ms: end_ms, lookback_ms, loaded, limits, samples: 0 };
    let mut by_labels: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
    let mut t = start_ms;
    while t <= end_ms {
        match evaluator.eval(expr, t)? {
            Value::Scalar(_, value) => by_labels.entry(Labels::new()).or_default().push((t, value)),
            Value::Vector(samples) => {
                for (labels, _, value) in samples {
                    by_labels.entry(labels).or_default().push((t, value));
                }
            }
            Value::String(..) => return Err(Error::Unsupported { construct: "a string as a range query's result".to_string() }),
            Value::Matrix(_) => return Err(Error::Unsupported { construct: "a range vector as a range query's result".to_string() }),
        }
        t = match t.checked_add(step_ms) {
            Some(next) => next,
            None => break,
        };
    }
    Ok(Value::Matrix(by_labels.into_iter().map(|(labels, samples)| Series { labels, samples }).collect()))
}

struct Evaluator<'a> {
    query_start_ms: i64,
    query_end_ms: i64,
    lookback_ms: i64,
    loaded: &'a Loaded,
    limits: &'a Limits,
    samples: usize,
}

/// The key under which a selector's series are loaded: the selector without offset and `@`.
pub fn load_key(selector: &VectorSelector) -> String {
    let mut bare = selector.clone();
    bare.offset = None;
    bare.at = None;
    bare.to_string()
}

impl<'a> Evaluator<'a> {
    fn count(&mut self, points: usize) -> Result<(), Error> {
        if std::time::Instant::now() >= self.limits.deadline {
            return Err(Error::Timeout);
        }
        self.samples = self.samples.saturating_add(points);
        if self.samples > self.limits.max_samples {
            return Err(Error::TooManySamples { limit: self.limits.max_samples });
        }
        Ok(())
    }

    fn eval(&mut self, expr: &Expr, t_ms: i64) -> Result<Value, Error> {
        match expr {
            Expr::NumberLiteral(number) => Ok(Value::Scalar(t_ms, number.val)),
            Expr::StringLiteral(string) => Ok(Value::String(t_ms, string.val.clone())),
            Expr::Paren(paren) => self.eval(&paren.expr, t_ms),
            Expr::Unary(unary) => match self.eval(&unary.expr, t_ms)? {
                Value::Scalar(at, value) => Ok(Value::Scalar(at, -value)),
                Value::Vector(samples) => Ok(Value::Vector(
                    samples.into_iter().map(|(labels, at, value)| (without_name(labels), at, -value)).collect(),
                )),
                _ => Err(Error::Unsupported { construct: "unary minus on a range vector or string".to_string() }),
            },
            Expr::VectorSelector(selector) => {
                let at = self.instant_of(selector, t_ms);
                let mut out = Vec::new();
                for series in self.series_of(selector) {
                    let newest = series.samples.iter().rev().find(|(ts, _)| *ts <= at && *ts >= at - self.lookback_ms);
                    if let Some((_, value)) = newest {
                        out.push((series.labels.clone(), t_ms, *value));
                    }
                }
                self.count(out.len())?;
                Ok(Value::Vector(out))
            }
            Expr::MatrixSelector(matrix) => {
                let at = self.instant_of(&matrix.vs, t_ms);
                let range_ms = i64::try_from(matrix.range.as_millis()).unwrap_or(i64::MAX);
                let mut out = Vec::new();
                for series in self.series_of(&matrix.vs) {
                    let samples: Vec<(i64, f64)> =
                        series.samples.iter().copied().filter(|(ts, _)| *ts <= at && *ts >= at.saturating_sub(range_ms)).collect();
                    self.count(samples.len())?;
                    if !samples.is_empty() {
                        out.push(Series { labels: series.labels.clone(), samples });
                    }
                }
                Ok(Value::Matrix(out))
            }
            Expr::Call(call) => self.call(call.func.name, &call.args.args, t_ms),
            Expr::Aggregate(aggregate) => {
                let op = aggregate.op.to_string();
                if let Some(param) = &aggregate.param {
                    if !matches!(op.as_str(), "topk" | "bottomk" | "quantile") {
                        return Err(Error::Unsupported { construct: format!("aggregation {op}") });
                    }
                    let Value::Scalar(_, param) = self.eval(param, t_ms)? else {
                        return Err(Error::Unsupported { construct: format!("aggregation {op} with a non-scalar parameter") });
                    };
                    let Value::Vector(samples) = self.eval(&aggregate.expr, t_ms)? else {
                        return Err(Error::Unsupported { construct: format!("aggregation {op} over a non-vector") });
                    };
                    let out = crate::aggregate::aggregate_with_param(&op, param, aggregate.modifier.as_ref(), samples, t_ms);
                    self.count(out.len())?;
                    return Ok(Value::Vector(out));
                }
                let Value::Vector(samples) = self.eval(&aggregate.expr, t_ms)? else {
                    return Err(Error::Unsupported { construct: format!("aggregation {op} over a non-vector") });
                };
                let out = crate::aggregate::aggregate(&op, aggregate.modifier.as_ref(), samples, t_ms)?;
                self.count(out.len())?;
                Ok(Value::Vector(out))
            }
            Expr::Binary(binary) => {
                let op = binary.op.to_string();
                let lhs = self.eval(&binary.lhs, t_ms)?;
                let rhs = self.eval(&binary.rhs, t_ms)?;
                let return_bool = binary.modifier.as_ref().is_some_and(|modifier| modifier.return_bool);
                if let (Value::Vector(l), Value::Vector(r)) = (&lhs, &rhs) {
                    let modifier = binary.modifier.as_ref();
                    let matching = modifier.and_then(|m| m.matching.as_ref());
                    let (l, r) = (l.clone(), r.clone());
                    let out = if matches!(op.as_str(), "and" | "or" | "unless") {
                        crate::arith::set_op(&op, matching, l, r)?
                    } else {
                        let group = match modifier.map(|m| &m.card) {
                            Some(VectorMatchCardinality::ManyToOne(include)) => Some((false, include.labels.as_slice())),
                            Some(VectorMatchCardinality::OneToMany(include)) => Some((true, include.labels.as_slice())),
                            _ => None,
                        };
                        crate::arith::group_binop(&op, return_bool, matching, group, l, r)?
                    };
                    self.count(out.len())?;
                    return Ok(Value::Vector(out));
                }
                let value = crate::arith::scalar_binop(&op, return_bool, lhs, rhs)?;
                if let Value::Vector(samples) = &value {
                    self.count(samples.len())?;
                }
                Ok(value)
            }
            Expr::Subquery(_) => Err(Error::Unsupported { construct: "subquery".to_string() }),
            Expr::Extension(_) => Err(Error::Unsupported { construct: "extension expression".to_string() }),
        }
    }

    fn call(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Value, Error> {
        if name == "time" {
            return Ok(Value::Scalar(t_ms, t_ms as f64 / 1000.0));
        }
        if let Some(value) = self.call_instant(name, args, t_ms)? {
            return Ok(value);
        }
        let math: Option<fn(f64) -> f64> = match name {
            "abs" => Some(f64::abs),
            "ceil" => Some(f64::ceil),
            "floor" => Some(f64::floor),
            "exp" => Some(f64::exp),
            "ln" => Some(f64::ln),
            "log2" => Some(f64::log2),
            "log10" => Some(f64::log10),
            "sqrt" => Some(f64::sqrt),
            _ => None,
        };
        if let Some(math) = math {
            let Some(arg) = args.first() else {
                return Err(Error::Unsupported { construct: format!("function {name} without an argument") });
            };
            let Value::Vector(samples) = self.eval(arg, t_ms)? else {
                return Err(Error::Unsupported { construct: format!("function {name} over a non-vector argument") });
            };
            return Ok(Value::Vector(samples.into_iter().map(|(labels, at, v)| (without_name(labels), at, math(v))).collect()));
        }
        if let Some((is_counter, is_rate)) = match name {
            "rate" => Some((true, true)),
            "increase" => Some((true, false)),
            "delta" => Some((false, false)),
            _ => None,
        } {
            let Some(Expr::MatrixSelector(matrix)) = args.first().map(|arg| arg.as_ref()) else {
                return Err(Error::Unsupported { construct: format!("function {name} over a non-selector argument") });
            };
            let range_end = self.instant_of(&matrix.vs, t_ms);
            let range_ms = i64::try_from(matrix.range.as_millis()).unwrap_or(i64::MAX);
            let Value::Matrix(series) = self.eval(&Expr::MatrixSelector(matrix.clone()), t_ms)? else {
                return Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") });
            };
            let window = (range_end.saturating_sub(range_ms), range_end, range_ms);
            let out = series
                .into_iter()
                .filter_map(|s| {
                    crate::rate::extrapolated_rate(&s.samples, window, is_counter, is_rate).map(|v| (without_name(s.labels), t_ms, v))
                })
                .collect();
            return Ok(Value::Vector(out));
        }
        if let Some(range_fn) = crate::rate::range_function(name) {
            let Some(arg) = args.first() else {
                return Err(Error::Unsupported { construct: format!("function {name} without an argument") });
            };
            let Value::Matrix(series) = self.eval(arg, t_ms)? else {
                return Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") });
            };
            return Ok(Value::Vector(
                series.into_iter().filter_map(|s| range_fn(&s.samples).map(|v| (without_name(s.labels), t_ms, v))).collect(),
            ));
        }
        let over_time: fn(&[(i64, f64)]) -> f64 = match name {
            "sum_over_time" => |s| s.iter().map(|(_, v)| v).sum(),
            "count_over_time" => |s| s.len() as f64,
            "avg_over_time" => |s| s.iter().map(|(_, v)| v).sum::<f64>() / s.len() as f64,
            "min_over_time" => |s| s.iter().map(|(_, v)| *v).fold(f64::NAN, |a, b| if a.is_nan() || b < a { b } else { a }),
            "max_over_time" => |s| s.iter().map(|(_, v)| *v).fold(f64::NAN, |a, b| if a.is_nan() || b > a { b } else { a }),
            "last_over_time" => |s| s.last().map_or(f64::NAN, |(_, v)| *v),
            "present_over_time" => |_| 1.0,
            _ => return Err(Error::Unsupported { construct: format!("function {name}") }),
        };
        let Some(arg) = args.first() else {
            return Err(Error::Unsupported { construct: format!("function {name} without an argument") });
        };
        let Value::Matrix(series) = self.eval(arg, t_ms)? else {
            return Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") });
        };
        let keep_name = name == "last_over_time";
        Ok(Value::Vector(
            series
                .into_iter()
                .map(|s| {
                    let labels = if keep_name { s.labels } else { without_name(s.labels) };
                    (labels, t_ms, over_time(&s.samples))
                })
                .collect(),
        ))
    }

    /// A scalar argument, evaluated at `t_ms`.
    fn scalar_arg(&mut self, name: &str, args: &[Box<Expr>], index: usize, t_ms: i64) -> Result<f64, Error> {
        match args.get(index).map(|arg| self.eval(arg, t_ms)).transpose()? {
            Some(Value::Scalar(_, v)) => Ok(v),
            _ => Err(Error::Unsupported { construct: format!("function {name} without scalar argument {}", index + 1) }),
        }
    }

    fn vector_arg(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Vec<(Labels, i64, f64)>, Error> {
        match args.first().map(|arg| self.eval(arg, t_ms)).transpose()? {
            Some(Value::Vector(samples)) => Ok(samples),
            _ => Err(Error::Unsupported { construct: format!("function {name} over a non-vector argument") }),
        }
    }

    /// The instant functions with extra arguments or whole-vector behaviour (Prometheus 2.42's
    /// funcClamp*, funcRound, funcSort*, funcVector, funcScalar); `None` when `name` is not one.
    fn call_instant(&mut self, name: &str, args: &[Box<Expr>], t_ms: i64) -> Result<Option<Value>, Error> {
        let per_sample = |samples: Vec<(Labels, i64, f64)>, f: &dyn Fn(f64) -> f64| -> Value {
            Value::Vector(samples.into_iter().map(|(labels, at, v)| (without_name(labels), at, f(v))).collect())
        };
        Ok(Some(match name {
            "clamp" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let (min, max) = (self.scalar_arg(name, args, 1, t_ms)?, self.scalar_arg(name, args, 2, t_ms)?);
                if max < min {
                    return Ok(Some(Value::Vector(Vec::new())));
                }
                per_sample(samples, &|v| min.max(max.min(v)))
            }
            "clamp_min" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let min = self.scalar_arg(name, args, 1, t_ms)?;
                per_sample(samples, &|v| min.max(v))
            }
            "clamp_max" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let max = self.scalar_arg(name, args, 1, t_ms)?;
                per_sample(samples, &|v| max.min(v))
            }
            "round" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let to_nearest = if args.len() > 1 { self.scalar_arg(name, args, 1, t_ms)? } else { 1.0 };
                let inverse = 1.0 / to_nearest;
                per_sample(samples, &|v| (v * inverse + 0.5).floor() / inverse)
            }
            "sort" | "sort_desc" => {
                let mut samples = self.vector_arg(name, args, t_ms)?;
                // NaN first in both orders, as Prometheus' vectorByValueHeap / vectorByReverseValueHeap.
                let descending = name == "sort_desc";
                samples.sort_by(|a, b| match (a.2.is_nan(), b.2.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Less,
                    (false, true) => std::cmp::Ordering::Greater,
                    _ if descending => b.2.total_cmp(&a.2),
                    _ => a.2.total_cmp(&b.2),
                });
                Value::Vector(samples)
            }
            "quantile_over_time" => {
                let q = self.scalar_arg(name, args, 0, t_ms)?;
                let Some(Value::Matrix(series)) = args.get(1).map(|arg| self.eval(arg, t_ms)).transpose()? else {
                    return Err(Error::Unsupported { construct: format!("function {name} over a non-range argument") });
                };
                Value::Vector(
                    series
                        .into_iter()
                        .filter(|s| !s.samples.is_empty())
                        .map(|s| {
                            let values = s.samples.iter().map(|(_, v)| *v).collect();
                            (without_name(s.labels), t_ms, crate::aggregate::quantile(q, values))
                        })
                        .collect(),
                )
            }
            "vector" => Value::Vector(vec![(Labels::new(), t_ms, self.scalar_arg(name, args, 0, t_ms)?)]),
            "label_replace" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let mut strings = Vec::new();
                for index in 1..5 {
                    match args.get(index).map(|arg| self.eval(arg, t_ms)).transpose()? {
                        Some(Value::String(_, text)) => strings.push(text),
                        _ => return Err(Error::Unsupported { construct: format!("function {name} without string argument {}", index + 1) }),
                    }
                }
                let (dst, replacement, src, pattern) = (&strings[0], &strings[1], &strings[2], &strings[3]);
                let regex = regex::Regex::new(&format!("^(?s:{pattern})$"))
                    .map_err(|error| Error::Execution { message: format!("invalid regular expression in label_replace(): {pattern}: {error}") })?;
                let valid_name = !dst.is_empty()
                    && dst.chars().enumerate().all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
                if !valid_name {
                    return Err(Error::Execution { message: format!("invalid destination label name in label_replace(): {dst}") });
                }
                let mut out = Vec::with_capacity(samples.len());
                let mut seen = std::collections::BTreeSet::new();
                for (mut labels, at, v) in samples {
                    let source = labels.get(src.as_str()).cloned().unwrap_or_default();
                    if let Some(captures) = regex.captures(&source) {
                        let mut result = String::new();
                        captures.expand(replacement, &mut result);
                        if result.is_empty() {
                            labels.remove(dst.as_str());
                        } else {
                            labels.insert(dst.clone(), result);
                        }
                    }
                    if !seen.insert(labels.clone()) {
                        return Err(Error::Execution { message: "vector cannot contain metrics with the same labelset".to_string() });
                    }
                    out.push((labels, at, v));
                }
                Value::Vector(out)
            }
            "label_join" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                let mut strings = Vec::new();
                for index in 1..args.len() {
                    match self.eval(&args[index], t_ms)? {
                        Value::String(_, text) => strings.push(text),
                        _ => return Err(Error::Unsupported { construct: format!("function {name} without string argument {}", index + 1) }),
                    }
                }
                let [dst, separator, sources @ ..] = strings.as_slice() else {
                    return Err(Error::Unsupported { construct: format!("function {name} with too few arguments") });
                };
                let mut out = Vec::with_capacity(samples.len());
                let mut seen = std::collections::BTreeSet::new();
                for (mut labels, at, v) in samples {
                    let joined: Vec<String> = sources.iter().map(|src| labels.get(src).cloned().unwrap_or_default()).collect();
                    let joined = joined.join(separator);
                    if joined.is_empty() {
                        labels.remove(dst);
                    } else {
                        labels.insert(dst.clone(), joined);
                    }
                    if !seen.insert(labels.clone()) {
                        return Err(Error::Execution { message: "vector cannot contain metrics with the same labelset".to_string() });
                    }
                    out.push((labels, at, v));
                }
                Value::Vector(out)
            }
            "absent" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                if !samples.is_empty() {
                    return Ok(Some(Value::Vector(Vec::new())));
                }
                // The labels of the selector's equality matchers (not __name__), as Prometheus' createLabelsForAbsentFunction.
                let mut labels = Labels::new();
                if let Some(Expr::VectorSelector(selector)) = args.first().map(|arg| arg.as_ref()) {
                    let mut repeated = std::collections::BTreeSet::new();
                    for matcher in &selector.matchers.matchers {
                        if matcher.name == "__name__" || !matches!(matcher.op, promql_parser::label::MatchOp::Equal) {
                            continue;
                        }
                        if labels.insert(matcher.name.clone(), matcher.value.clone()).is_some() {
                            repeated.insert(matcher.name.clone());
                        }
                    }
                    for name in repeated {
                        labels.remove(&name);
                    }
                }
                Value::Vector(vec![(labels, t_ms, 1.0)])
            }
            "scalar" => {
                let samples = self.vector_arg(name, args, t_ms)?;
                Value::Scalar(t_ms, if samples.len() == 1 { samples[0].2 } else { f64::NAN })
            }
            _ => return Ok(None),
        }))
    }

    /// The instant a selector reads at: `@` pins it, then `offset` moves it back.
    fn instant_of(&self, selector: &VectorSelector, t_ms: i64) -> i64 {
        let pinned = match &selector.at {
            None => t_ms,
            Some(AtModifier::Start) => self.query_start_ms,
            Some(AtModifier::End) => self.query_end_ms,
            Some(AtModifier::At(time)) => match time.duration_since(std::time::UNIX_EPOCH) {
                Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
                Err(before) => i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX).saturating_neg(),
            },
        };
        let offset_ms = match &selector.offset {
            None => 0,
            Some(Offset::Pos(d)) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Some(Offset::Neg(d)) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX).saturating_neg(),
        };
        pinned.saturating_sub(offset_ms)
    }

    fn series_of(&self, selector: &VectorSelector) -> &'a [Series] {
        let loaded: &'a Loaded = self.loaded;
        loaded.get(&load_key(selector)).map_or(&[], Vec::as_slice)
    }
}

fn without_name(mut labels: Labels) -> Labels {
    labels.remove("__name__");
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn limits(max_samples: usize) -> Limits {
        Limits { max_samples, deadline: std::time::Instant::now() + std::time::Duration::from_secs(3600), default_subquery_step_ms: 60_000 }
    }

    fn loaded() -> Loaded {
        let labels: Labels = [("__name__", "up"), ("job", "a")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let samples = (0..10).map(|i| (i * 60_000, i as f64)).collect();
        let key = match parse("up") {
            Ok(Expr::VectorSelector(selector)) => load_key(&selector),
            other => panic!("{other:?}"),
        };
        BTreeMap::from([(key, vec![Series { labels, samples }])])
    }

    fn eval(query: &str, t_ms: i64, max_samples: usize) -> Result<Value, Error> {
        let expr = parse(query).unwrap_or_else(|error| panic!("{query}: {error}"));
        eval_instant(&expr, t_ms, 300_000, &loaded(), &limits(max_samples))
    }

    fn single(value: Result<Value, Error>) -> f64 {
        match value {
            Ok(Value::Vector(samples)) if samples.len() == 1 => samples[0].2,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_instant_selector_takes_the_newest_sample_within_lookback() {
        assert_eq!(single(eval("up", 330_000, 100)), 5.0);
        assert_eq!(single(eval("up", 840_000, 100)), 9.0);
        assert_eq!(eval("up", 900_001, 100), Ok(Value::Vector(vec![])));
    }

    #[test]
    fn offset_and_at_move_the_instant() {
        assert_eq!(single(eval("up offset 2m", 330_000, 100)), 3.0);
        assert_eq!(single(eval("up @ 120", 0, 100)), 2.0);
    }

    #[test]
    fn over_time_functions_use_a_closed_window_and_drop_the_name_except_last() {
        assert_eq!(single(eval("count_over_time(up[2m])", 300_000, 100)), 3.0);
        assert_eq!(single(eval("sum_over_time(up[2m])", 300_000, 100)), 12.0);
        let Ok(Value::Vector(last)) = eval("last_over_time(up[2m])", 300_000, 100) else { panic!() };
        assert_eq!(last[0].0.get("__name__").map(String::as_str), Some("up"));
        let Ok(Value::Vector(sum)) = eval("sum_over_time(up[2m])", 300_000, 100) else { panic!() };
        assert_eq!(sum[0].0.get("__name__"), None);
    }

    #[test]
    fn math_functions_apply_per_sample_and_drop_the_name() {
        assert_eq!(single(eval("sqrt(up)", 240_000, 100)), 2.0);
        assert_eq!(single(eval("-abs(-up)", 240_000, 100)), -4.0);
        assert_eq!(eval("time()", 1500, 100), Ok(Value::Scalar(1500, 1.5)));
        let Ok(Value::Vector(floor)) = eval("floor(up)", 240_000, 100) else { panic!() };
        assert_eq!(floor[0].0.get("__name__"), None);
    }

    #[test]
    fn sum_by_keeps_the_listed_labels_and_without_drops_the_name() {
        let Ok(Value::Vector(by)) = eval("sum by (job) (up)", 240_000, 100) else { panic!() };
        assert_eq!(by.len(), 1);
        assert_eq!(by[0].0.get("job").map(String::as_str), Some("a"));
        assert_eq!(by[0].2, 4.0);
        let Ok(Value::Vector(without)) = eval("max without (job) (up)", 240_000, 100) else { panic!() };
        assert!(without[0].0.is_empty());
        assert_eq!(single(eval("count(up)", 240_000, 100)), 1.0);
    }

    #[test]
    fn rate_and_increase_extrapolate_like_prometheus() {
        // Samples 0..=4 at one a minute, window [0, 4m]: no extrapolation needed, increase is 4.
        assert_eq!(single(eval("increase(up[4m])", 240_000, 100)), 4.0);
        // Window [30s, 4m30s] holds 1..=4 (3 over 180s); each edge extrapolates 30s (< 1.1 * 60s):
        // 3 * 240 / 180 = 4, and rate divides by the 240s range.
        assert!((single(eval("increase(up[4m])", 270_000, 100)) - 4.0).abs() < 1e-12);
        assert!((single(eval("rate(up[4m])", 270_000, 100)) - 4.0 / 240.0).abs() < 1e-12);
        assert_eq!(eval("rate(up[30s])", 270_000, 100), Ok(Value::Vector(vec![])));
    }

    #[test]
    fn the_sample_limit_and_unsupported_constructs_are_errors() {
        assert_eq!(eval("count_over_time(up[10m])", 540_000, 5), Err(Error::TooManySamples { limit: 5 }));
        assert!(matches!(eval("count_values(\"v\", up)", 0, 100), Err(Error::Unsupported { construct }) if construct.contains("count_values")));
    }
}
