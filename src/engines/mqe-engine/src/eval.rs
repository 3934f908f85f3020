//! The evaluator: `MQEVisitorBase` plus the metric reads of the GraphQL plugin's `MQEVisitor`,
//! over a [`MetricSource`]. Every failure becomes an error result; nothing panics.

use crate::ast::*;
use crate::ops::{self, OpError};
use crate::ops_labels;
use crate::result::{ExpressionResult, KeyValue, MQEValue, MQEValues, ResultType};
use crate::source::{Duration, MetricKind, MetricSource, SourceError, TopNRequest};

/// What the node being visited hangs under (upstream's `ctx.parent instanceof ...` checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    Root,
    Parens,
    Bool,
    Other,
}

/// How a metric is read.
enum Read<'e> {
    Plain,
    Trend(i64),
    Baseline(BaselineKind),
    TopN(&'e TopN),
}

/// Evaluates a parsed expression over `duration`.
pub fn evaluate(expr: &Expr, source: &dyn MetricSource, duration: &Duration) -> ExpressionResult {
    if duration.point_count().is_none() {
        return ExpressionResult::error("The query duration has too many points.");
    }
    Eval { source, duration: *duration }.visit(expr, Parent::Root)
}

struct Eval<'s> {
    source: &'s dyn MetricSource,
    duration: Duration,
}

fn op_result(r: Result<ExpressionResult, OpError>) -> ExpressionResult {
    r.unwrap_or_else(|e| ExpressionResult::error(e.0))
}

fn non_empty_error(r: &ExpressionResult) -> bool {
    r.error.as_deref().is_some_and(|e| !e.is_empty())
}

fn has_value(r: &ExpressionResult) -> bool {
    r.results.iter().any(|vs| vs.values.iter().any(|v| v.value.is_some()))
}

impl Eval<'_> {
    fn visit(&self, e: &Expr, parent: Parent) -> ExpressionResult {
        match e {
            Expr::Metric(m) => self.read_metric(m, Read::Plain),
            Expr::Scalar { value, .. } => ExpressionResult::single(Some(*value)),
            Expr::Parens(inner) => {
                let mut r = self.visit(inner, Parent::Parens);
                if r.bool_result && !matches!(parent, Parent::Bool | Parent::Parens) {
                    r.bool_result = false;
                }
                r
            }
            Expr::Binary { op, left, right } => self.lr(left, right, |l, r| ops::binary_op(l, r, *op)),
            Expr::Compare { op, left, right, .. } => {
                let mut r = self.lr(left, right, |l, r| ops::compare_op(l, r, *op));
                if !r.has_error() && matches!(parent, Parent::Root | Parent::Parens | Parent::Bool) {
                    r.bool_result = true;
                }
                r
            }
            Expr::Bool { op, left, right } => {
                let mut r = self.lr_with(left, right, Parent::Bool, |l, r| ops::bool_op(l, r, *op));
                if !r.has_error() && matches!(parent, Parent::Root | Parent::Parens | Parent::Bool) {
                    r.bool_result = true;
                }
                r
            }
            Expr::Aggregation { op, expr } => self.unary(expr, |r| ops::aggregation_op(r, *op)),
            Expr::Math { op, expr } => self.unary(expr, |r| Ok(ops::math_op(r, *op))),
            Expr::Round { expr, scale } => match scale.parse::<i32>() {
                Ok(s) => self.unary(expr, |r| Ok(ops::round_op(r, s))),
                Err(_) => ExpressionResult::error(format!("The round scale [{}] is not a valid integer.", scale)),
            },
            Expr::Trend { op, metric, range } => {
                let range = match range.parse::<i64>() {
                    Ok(r) if r < 1 => return ExpressionResult::error("The trend range must be greater than 0."),
                    Ok(r) if r <= crate::source::MAX_POINTS => r,
                    _ => return ExpressionResult::error(format!("The trend range [{}] is too large.", range)),
                };
                let r = self.read_metric(metric, Read::Trend(range));
                if non_empty_error(&r) {
                    return r;
                }
                if r.result_type != ResultType::TimeSeriesValues {
                    let mut r = r;
                    r.error = Some(format!("The result of expression [{}] is not a time series result.", metric.text()));
                    return r;
                }
                ops::trend_op(r, *op, range as usize, self.duration.step)
            }
            Expr::Logical { op: LogicalOp::ViewAsSeq, exprs } => {
                let mut first: Option<ExpressionResult> = None;
                for e in exprs {
                    let r = self.visit(e, Parent::Other);
                    if has_value(&r) {
                        return r;
                    }
                    if first.is_none() {
                        first = Some(r);
                    }
                }
                first.unwrap_or_default()
            }
            Expr::Logical { op: LogicalOp::IsPresent, exprs } => {
                let present = exprs.iter().any(|e| has_value(&self.visit(e, Parent::Other)));
                ExpressionResult::single(Some(if present { 1.0 } else { 0.0 }))
            }
            Expr::TopN(t) => self.read_metric(&t.metric, Read::TopN(t)),
            Expr::TopNOf { top_ns, n, order } => {
                let results: Vec<ExpressionResult> = top_ns.iter().map(|t| self.read_metric(&t.metric, Read::TopN(t))).collect();
                let Ok(limit) = n.parse::<usize>() else {
                    return ExpressionResult::error(format!("The top number [{}] is not a valid integer.", n));
                };
                op_result(ops_labels::top_n_of_op(results, limit, *order))
            }
            Expr::Relabels { expr, target, replace } => {
                let r = self.visit(expr, Parent::Other);
                ops_labels::relabels_op(r, &expr.text(), &target.key_value(), &replace.key_value())
            }
            Expr::AggregateLabels { expr, func, labels } => {
                let r = self.visit(expr, Parent::Other);
                if non_empty_error(&r) {
                    return r;
                }
                if !r.labeled_result {
                    let mut r = r;
                    r.error = Some(format!("The result of expression [{}] is not a labeled result.", expr.text()));
                    return r;
                }
                let Some(first) = r.results.first() else { return r };
                // label names the result does not carry are ignored
                let names: Vec<String> = labels
                    .iter()
                    .flatten()
                    .filter(|n| first.labels.iter().any(|l| &l.key == *n))
                    .cloned()
                    .collect();
                ops_labels::aggregate_labels_op(r, *func, &names)
            }
            Expr::SortValues { expr, limit, order, .. } => {
                let r = self.visit(expr, Parent::Other);
                let Ok(limit) = limit.parse::<usize>() else {
                    return ExpressionResult::error(format!("The limit [{}] is not a valid integer.", limit));
                };
                // upstream's visitor passes AVG whatever aggregation is written
                op_result(ops_labels::sort_values_op(r, limit, *order, AggregationOp::Avg))
            }
            Expr::SortLabelValues { expr, order, labels } => {
                let r = self.visit(expr, Parent::Other);
                ops_labels::sort_label_values_op(r, *order, labels)
            }
            Expr::Baseline { metric, kind } => self.read_metric(metric, Read::Baseline(*kind)),
        }
    }

    fn unary(&self, e: &Expr, f: impl FnOnce(ExpressionResult) -> Result<ExpressionResult, OpError>) -> ExpressionResult {
        let r = self.visit(e, Parent::Other);
        if non_empty_error(&r) {
            return r;
        }
        op_result(f(r))
    }

    fn lr(&self, l: &Expr, r: &Expr, f: impl FnOnce(ExpressionResult, ExpressionResult) -> Result<ExpressionResult, OpError>) -> ExpressionResult {
        self.lr_with(l, r, Parent::Other, f)
    }

    fn lr_with(
        &self,
        l: &Expr,
        r: &Expr,
        parent: Parent,
        f: impl FnOnce(ExpressionResult, ExpressionResult) -> Result<ExpressionResult, OpError>,
    ) -> ExpressionResult {
        let left = self.visit(l, parent);
        if left.has_error() {
            return left;
        }
        let right = self.visit(r, parent);
        if right.has_error() {
            return right;
        }
        op_result(f(left, right))
    }

    fn read_metric(&self, m: &Metric, how: Read<'_>) -> ExpressionResult {
        match self.try_read(m, how) {
            Ok(r) => r,
            Err(e) => ExpressionResult::error(e.to_string()),
        }
    }

    fn try_read(&self, m: &Metric, how: Read<'_>) -> Result<ExpressionResult, SourceError> {
        let name = m.name.as_str();
        let illegal = |s: String| Err(SourceError::Illegal(s));
        let Some(kind) = self.source.metric_kind(name) else {
            return illegal(format!("Metric: [{}] does not exist.", name));
        };
        let duration = match how {
            Read::Trend(n) => self.duration.extended_back(n),
            _ => self.duration,
        };
        let points = duration.points();
        let mut result = ExpressionResult::default();
        if let Read::TopN(t) = how {
            if kind == MetricKind::Labeled {
                return illegal(format!("Metric: [{}] is labeled value, does not support top_n query.", name));
            }
            let top_n = match t.n.parse::<usize>() {
                Ok(0) | Err(_) => return illegal("TopN value must be > 0.".to_string()),
                Ok(n) => n,
            };
            let request = TopNRequest { metric: name, top_n, order: t.order, attrs: &t.attrs };
            let (items, ty) = if kind == MetricKind::Record {
                (self.source.read_records(&request, &duration)?, ResultType::RecordList)
            } else {
                (self.source.sort_metrics(&request, &duration)?, ResultType::SortedList)
            };
            let values = items
                .into_iter()
                .map(|i| MQEValue { id: Some(i.name), value: Some(i.value), trace_id: i.trace_id, owner: i.owner })
                .collect();
            result.results.push(MQEValues { labels: Vec::new(), values });
            result.result_type = ty;
            return Ok(result);
        }
        let series = |values: Vec<Option<f64>>| -> Vec<MQEValue> {
            points.iter().zip(values).map(|(p, v)| MQEValue::new(Some(p.to_string()), v)).collect()
        };
        match kind {
            MetricKind::Record => illegal(format!("Metric: [{}] is topN record, need top_n function for query.", name)),
            MetricKind::Common => {
                let values = match how {
                    Read::Baseline(k) => self.source.read_baseline(name, k, &duration)?.unwrap_or_else(|| vec![None; points.len()]),
                    _ => self.source.read_values(name, &duration)?,
                };
                // a series of the wrong length is dropped and the type stays UNKNOWN, as upstream
                if values.len() == points.len() {
                    result.results.push(MQEValues { labels: Vec::new(), values: series(values) });
                    result.result_type = ResultType::TimeSeriesValues;
                }
                Ok(result)
            }
            MetricKind::Labeled => {
                let selectors: Vec<KeyValue> = m.labels.iter().flat_map(|l| ops_labels::split_label_value(&l.name, &l.value)).collect();
                let list = match how {
                    Read::Baseline(k) => self.source.read_labeled_baseline(name, &selectors, k, &duration)?,
                    _ => self.source.read_labeled_values(name, &selectors, &duration)?,
                };
                for s in list {
                    if s.values.len() != points.len() {
                        continue;
                    }
                    let mut labels = s.labels;
                    labels.sort_by(|a, b| a.key.cmp(&b.key));
                    result.results.push(MQEValues { labels, values: series(s.values) });
                }
                result.result_type = ResultType::TimeSeriesValues;
                result.labeled_result = true;
                Ok(result)
            }
        }
    }
}
