//! Instant evaluation over loaded series, with Prometheus 2.42 semantics (the version Debian
//! ships): an instant selector takes the newest sample in `[t - lookback, t]`, a range selector
//! the samples in `[t - range, t]` (both ends closed in 2.x), a subquery evaluates its expression
//! at the step multiples in its window. This module owns the expression walk, selection,
//! subqueries, aggregation and operator dispatch; function calls are in `call.rs`. What is not
//! evaluated is [`Error::Unsupported`] naming the construct.

use std::collections::{BTreeMap, HashMap};

use promql_parser::parser::{AggregateExpr, AtModifier, BinaryExpr, Expr, Offset, VectorMatchCardinality, VectorSelector};

use crate::error::Error;
use crate::plan::Limits;
use crate::subquery::SubqueryCache;

pub type Labels = BTreeMap<String, String>;

/// One loaded series: its labels (with `__name__`) and samples ordered by time (ms, value), as
/// the evaluator bisects them. A value with the bits of Prometheus' stale marker ends the series.
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
    let mut evaluator = Evaluator::new(t_ms, t_ms, lookback_ms, loaded, limits);
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
    let mut evaluator = Evaluator::new(start_ms, end_ms, lookback_ms, loaded, limits);
    let mut by_labels: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
    let mut output_points: usize = 0;
    let mut t = start_ms;
    while t <= end_ms {
        evaluator.samples = output_points;
        match evaluator.eval(expr, t)? {
            Value::Scalar(_, value) => {
                output_points += 1;
                by_labels.entry(Labels::new()).or_default().push((t, value));
            }
            Value::Vector(samples) => {
                output_points += samples.len();
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

pub(crate) struct Evaluator<'a> {
    query_start_ms: i64,
    query_end_ms: i64,
    lookback_ms: i64,
    loaded: &'a Loaded,
    pub(crate) limits: &'a Limits,
    /// Samples selected and points produced so far: in an instant query all of them, in a range
    /// query those of the current step plus the output gathered so far (Prometheus bounds the
    /// samples held at once, not the sum over every step).
    samples: usize,
    /// The inner results of each subquery node, reused by later steps (see `subquery.rs`).
    pub(crate) subqueries: HashMap<usize, SubqueryCache>,
}


/// The key under which a selector's series are loaded: the selector without offset and `@`.
pub fn load_key(selector: &VectorSelector) -> String {
    let mut bare = selector.clone();
    bare.offset = None;
    bare.at = None;
    bare.to_string()
}

impl<'a> Evaluator<'a> {
    fn new(query_start_ms: i64, query_end_ms: i64, lookback_ms: i64, loaded: &'a Loaded, limits: &'a Limits) -> Evaluator<'a> {
        Evaluator { query_start_ms, query_end_ms, lookback_ms, loaded, limits, samples: 0, subqueries: HashMap::new() }
    }

    pub(crate) fn count(&mut self, points: usize) -> Result<(), Error> {
        if std::time::Instant::now() >= self.limits.deadline {
            return Err(Error::Timeout);
        }
        self.samples = self.samples.saturating_add(points);
        if self.samples > self.limits.max_samples {
            return Err(Error::TooManySamples { limit: self.limits.max_samples });
        }
        Ok(())
    }

    pub(crate) fn eval(&mut self, expr: &Expr, t_ms: i64) -> Result<Value, Error> {
        match expr {
            Expr::NumberLiteral(number) => Ok(Value::Scalar(t_ms, number.val)),
            Expr::StringLiteral(string) => Ok(Value::String(t_ms, string.val.clone())),
            Expr::Paren(paren) => self.eval(&paren.expr, t_ms),
            Expr::Unary(unary) => match self.eval(&unary.expr, t_ms)? {
                Value::Scalar(at, value) => Ok(Value::Scalar(at, -value)),
                Value::Vector(samples) => {
                    unique_labelsets(Value::Vector(samples.into_iter().map(|(labels, at, value)| (without_name(labels), at, -value)).collect()))
                }
                _ => Err(Error::Unsupported { construct: "unary minus on a range vector or string".to_string() }),
            },
            Expr::VectorSelector(selector) => {
                let samples = self.select_instant(selector, t_ms)?;
                Ok(Value::Vector(samples.into_iter().map(|(labels, _, v)| (labels, t_ms, v)).collect()))
            }
            Expr::MatrixSelector(matrix) => {
                let at = self.instant_of(&matrix.vs, t_ms);
                let range_ms = i64::try_from(matrix.range.as_millis()).unwrap_or(i64::MAX);
                let mut out = Vec::new();
                for series in self.series_of(&matrix.vs) {
                    let first = series.samples.partition_point(|(ts, _)| *ts < at.saturating_sub(range_ms));
                    let after = series.samples.partition_point(|(ts, _)| *ts <= at);
                    let window = series.samples.get(first..after).unwrap_or_default();
                    let samples: Vec<(i64, f64)> = window.iter().copied().filter(|(_, v)| !is_stale(*v)).collect();
                    self.count(samples.len())?;
                    if !samples.is_empty() {
                        out.push(Series { labels: series.labels.clone(), samples });
                    }
                }
                Ok(Value::Matrix(out))
            }
            Expr::Call(call) => unique_labelsets(self.call(call.func.name, &call.args.args, t_ms)?),
            Expr::Aggregate(aggregate) => {
                let out = self.aggregate(aggregate, t_ms)?;
                self.count(out.len())?;
                Ok(Value::Vector(out))
            }
            Expr::Binary(binary) => {
                let value = unique_labelsets(self.binary(binary, t_ms)?)?;
                if let Value::Vector(samples) = &value {
                    self.count(samples.len())?;
                }
                Ok(value)
            }
            Expr::Subquery(subquery) => Ok(Value::Matrix(self.subquery(subquery, t_ms)?.0)),
            Expr::Extension(_) => Err(Error::Unsupported { construct: "extension expression".to_string() }),
        }
    }

    fn aggregate(&mut self, aggregate: &AggregateExpr, t_ms: i64) -> Result<Vec<(Labels, i64, f64)>, Error> {
        let op = aggregate.op.to_string();
        let modifier = aggregate.modifier.as_ref();
        let Some(param) = &aggregate.param else {
            let Value::Vector(samples) = self.eval(&aggregate.expr, t_ms)? else {
                return Err(Error::Unsupported { construct: format!("aggregation {op} over a non-vector") });
            };
            return crate::aggregate::aggregate(&op, modifier, samples, t_ms);
        };
        let param = self.eval(param, t_ms)?;
        let Value::Vector(samples) = self.eval(&aggregate.expr, t_ms)? else {
            return Err(Error::Unsupported { construct: format!("aggregation {op} over a non-vector") });
        };
        match (op.as_str(), param) {
            ("count_values", Value::String(_, label)) => crate::aggregate::count_values(&label, modifier, samples, t_ms),
            ("topk" | "bottomk" | "quantile", Value::Scalar(_, param)) => {
                crate::aggregate::aggregate_with_param(&op, param, modifier, samples, t_ms)
            }
            _ => Err(Error::Unsupported { construct: format!("aggregation {op} with this parameter") }),
        }
    }

    fn binary(&mut self, binary: &BinaryExpr, t_ms: i64) -> Result<Value, Error> {
        let op = binary.op.to_string();
        let lhs = self.eval(&binary.lhs, t_ms)?;
        let rhs = self.eval(&binary.rhs, t_ms)?;
        let modifier = binary.modifier.as_ref();
        let return_bool = modifier.is_some_and(|modifier| modifier.return_bool);
        let (Value::Vector(l), Value::Vector(r)) = (&lhs, &rhs) else {
            return crate::arith::scalar_binop(&op, return_bool, lhs, rhs);
        };
        let matching = modifier.and_then(|m| m.matching.as_ref());
        let (l, r) = (l.clone(), r.clone());
        if matches!(op.as_str(), "and" | "or" | "unless") {
            return Ok(Value::Vector(crate::arith::set_op(&op, matching, l, r)?));
        }
        let group = match modifier.map(|m| &m.card) {
            Some(VectorMatchCardinality::ManyToOne(include)) => Some((false, include.labels.as_slice())),
            Some(VectorMatchCardinality::OneToMany(include)) => Some((true, include.labels.as_slice())),
            _ => None,
        };
        Ok(Value::Vector(crate::arith::group_binop(&op, return_bool, matching, group, l, r)?))
    }

    /// The newest sample of each series in the lookback window `[at - lookback, at]` (both ends
    /// closed in 2.x), with its own timestamp; a series whose newest sample is a stale marker has none.
    pub(crate) fn select_instant(&mut self, selector: &VectorSelector, t_ms: i64) -> Result<Vec<(Labels, i64, f64)>, Error> {
        let at = self.instant_of(selector, t_ms);
        let mut out = Vec::new();
        for series in self.series_of(selector) {
            // The samples are in time order: the newest at or before `at` is found by bisection.
            let after = series.samples.partition_point(|(ts, _)| *ts <= at);
            let newest = after.checked_sub(1).and_then(|i| series.samples.get(i));
            if let Some((ts, value)) = newest
                && *ts >= at.saturating_sub(self.lookback_ms)
                && !is_stale(*value)
            {
                out.push((series.labels.clone(), *ts, *value));
            }
        }
        self.count(out.len())?;
        Ok(out)
    }

    /// The instant a selector reads at: `@` pins it, then `offset` moves it back.
    pub(crate) fn instant_of(&self, selector: &VectorSelector, t_ms: i64) -> i64 {
        self.instant_with(selector.at.as_ref(), selector.offset.as_ref(), t_ms)
    }

    /// The instant `@ at` and `offset` give at evaluation time `t_ms`.
    pub(crate) fn instant_with(&self, at: Option<&AtModifier>, offset: Option<&Offset>, t_ms: i64) -> i64 {
        let pinned = match at {
            None => t_ms,
            Some(AtModifier::Start) => self.query_start_ms,
            Some(AtModifier::End) => self.query_end_ms,
            Some(AtModifier::At(time)) => match time.duration_since(std::time::UNIX_EPOCH) {
                Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
                Err(before) => i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX).saturating_neg(),
            },
        };
        let offset_ms = match offset {
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

/// Prometheus' stale marker (`value.StaleNaN`): a sample that ends a series.
const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

pub(crate) fn is_stale(value: f64) -> bool {
    value.to_bits() == STALE_NAN_BITS
}

pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// 2.42's check after every function, operator and unary minus: no two samples of a vector may
/// share a label set (as when dropping `__name__` merges two series).
fn unique_labelsets(value: Value) -> Result<Value, Error> {
    if let Value::Vector(samples) = &value {
        let mut labelsets: Vec<&Labels> = samples.iter().map(|(labels, _, _)| labels).collect();
        labelsets.sort();
        if labelsets.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(Error::Execution { message: "vector cannot contain metrics with the same labelset".to_string() });
        }
    }
    Ok(value)
}

pub(crate) fn without_name(mut labels: Labels) -> Labels {
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
    fn a_subquery_without_a_step_uses_the_default_step_from_the_limits() {
        let expr = parse("count_over_time(up[10m:])").unwrap_or_else(|error| panic!("{error}"));
        let with_step = |step_ms| {
            let limits = Limits { default_subquery_step_ms: step_ms, ..limits(1000) };
            single(eval_instant(&expr, 600_000, 300_000, &loaded(), &limits))
        };
        // Instants 0, 1m, ..., 10m (both window ends included), or 0, 2m, ..., 10m.
        assert_eq!(with_step(60_000), 11.0);
        assert_eq!(with_step(120_000), 6.0);
        let zero = Limits { default_subquery_step_ms: 0, ..limits(1000) };
        assert!(matches!(eval_instant(&expr, 600_000, 300_000, &loaded(), &zero), Err(Error::Unsupported { .. })));
    }

    #[test]
    fn subquery_instants_are_aligned_to_absolute_multiples_of_the_step() {
        // Window [30s, 5m30s] with a 1m step: instants 1m..5m, values 1..5 (offset moves it back 1m).
        assert_eq!(single(eval("sum_over_time(up[5m:1m])", 330_000, 1000)), 15.0);
        assert_eq!(single(eval("sum_over_time(up[5m:1m] offset 1m)", 390_000, 1000)), 15.0);
        assert_eq!(single(eval("sum_over_time(up[5m:1m] @ 330)", 0, 1000)), 15.0);
    }

    #[test]
    fn timestamp_of_a_selector_is_the_sample_time_otherwise_the_evaluation_time() {
        assert_eq!(single(eval("timestamp(up)", 150_000, 100)), 120.0);
        // As 2.42: with `@`, timestamp() reads at the pin and ignores the offset.
        assert_eq!(single(eval("timestamp(up @ 300 offset 1m)", 0, 100)), 300.0);
        assert_eq!(single(eval("up @ 300 offset 1m", 0, 100)), 4.0);
        assert_eq!(single(eval("timestamp(-up)", 150_000, 100)), 150.0);
    }

    #[test]
    fn the_sample_limit_and_unsupported_constructs_are_errors() {
        assert_eq!(eval("count_over_time(up[10m])", 540_000, 5), Err(Error::TooManySamples { limit: 5 }));
        // Native histograms are not stored, so their functions stay unsupported, by name.
        assert!(matches!(eval("histogram_count(up)", 0, 100), Err(Error::Unsupported { construct }) if construct.contains("histogram_count")));
        let Ok(Value::Vector(counted)) = eval("count_values(\"v\", up)", 60_000, 100) else { panic!() };
        assert_eq!(counted, vec![([("v".to_string(), "1".to_string())].into(), 60_000, 1.0)]);
    }
}
