//! The label and list operations of `mqe-rt`: `AggregateLabelsOp`, `SortValuesOp`,
//! `SortLabelValuesOp`, `TopNOfOp`, and the `relabels` step of the visitor.

use std::cmp::Ordering;

use crate::ast::{AggregationOp, LabelsAgg, Order};
use crate::ops::{OpError, aggregation_op, java_cmp};
use crate::result::{ExpressionResult, KeyValue, MQEValue, MQEValues, ResultType};

/// `AggregateLabelsOp.doAggregateLabelsOp`: groups the series by the values of `label_names` (a
/// missing label counts as `""`; no names → one group), combining point by point. Unlike
/// `sum(...)`, a point where every series is empty stays empty. One group with no labels makes the
/// result unlabeled.
pub fn aggregate_labels_op(mut result: ExpressionResult, func: LabelsAgg, label_names: &[String]) -> ExpressionResult {
    if result.results.is_empty() {
        return result;
    }
    let mut groups: Vec<(Vec<KeyValue>, Vec<MQEValues>)> = Vec::new();
    for vs in std::mem::take(&mut result.results) {
        let key: Vec<KeyValue> = label_names
            .iter()
            .map(|n| vs.labels.iter().find(|l| &l.key == n).cloned().unwrap_or_else(|| KeyValue::new(n.clone(), "")))
            .collect();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(vs),
            None => groups.push((key, vec![vs])),
        }
    }
    if groups.len() == 1 && groups[0].0.is_empty() {
        result.labeled_result = false;
    }
    for (labels, members) in groups {
        let Some(first) = members.first() else { continue };
        let mut values = first.values.clone();
        for (i, v) in values.iter_mut().enumerate() {
            // upstream indexes every member at i (a shorter member would throw there); skip instead
            let present = members.iter().filter_map(|m| m.values.get(i).and_then(|x| x.value));
            let mut n = 0usize;
            let combined = present.fold(None::<f64>, |acc, x| {
                n += 1;
                Some(match (acc, func) {
                    (None, _) => x,
                    (Some(a), LabelsAgg::Sum | LabelsAgg::Avg) => a + x,
                    (Some(a), LabelsAgg::Max) => if x > a { x } else { a },
                    (Some(a), LabelsAgg::Min) => if x < a { x } else { a },
                })
            });
            v.trace_id = None;
            v.value = match func {
                LabelsAgg::Avg => combined.map(|s| s / n as f64),
                _ => combined,
            };
        }
        result.results.push(MQEValues { labels, values });
    }
    result
}

/// `SortValuesOp.doSortValuesOp`: for a labeled result, aggregates each series with `agg`, sorts
/// the series by that value (an empty aggregate counts as 0; stable), keeps the first `limit` and
/// returns them as TIME_SERIES_VALUES with their original values. Unlabeled: unchanged.
pub fn sort_values_op(result: ExpressionResult, limit: usize, order: Order, agg: AggregationOp) -> Result<ExpressionResult, OpError> {
    if !result.labeled_result {
        return Ok(result);
    }
    let original = result.results.clone();
    let aggregated = aggregation_op(result.clone(), agg)?;
    let mut idx: Vec<(usize, Option<f64>)> =
        aggregated.results.iter().enumerate().map(|(i, vs)| (i, vs.values.first().map(|v| v.value.unwrap_or(0.0)))).collect();
    idx.sort_by(|a, b| {
        let o = java_cmp(Some(a.1.unwrap_or(f64::NAN)), Some(b.1.unwrap_or(f64::NAN)));
        if order == Order::Asc { o } else { o.reverse() }
    });
    idx.truncate(limit);
    let mut out = result;
    out.results = idx.into_iter().filter_map(|(i, _)| original.get(i).cloned()).collect();
    out.result_type = ResultType::TimeSeriesValues;
    Ok(out)
}

/// `SortLabelValuesOp.doSortLabelValuesOp`: sorts the series by the first label's value, then
/// within equal values by the next label, and so on (string order; a missing label is `""`).
/// Duplicate names count once; a name no series carries sorts nothing.
pub fn sort_label_values_op(mut result: ExpressionResult, order: Order, label_names: &[String]) -> ExpressionResult {
    let mut names: Vec<&String> = Vec::new();
    for n in label_names {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if names.is_empty() {
        return result;
    }
    let cmp = |a: &str, b: &str| if order == Order::Asc { a.cmp(b) } else { b.cmp(a) };
    result.results = sort_by_labels(std::mem::take(&mut result.results), &names, &cmp);
    result
}

fn label_value<'a>(vs: &'a MQEValues, name: &str) -> &'a str {
    vs.labels.iter().find(|l| l.key == name).map(|l| l.value.as_str()).unwrap_or("")
}

fn sort_by_labels(mut results: Vec<MQEValues>, names: &[&String], cmp: &dyn Fn(&str, &str) -> Ordering) -> Vec<MQEValues> {
    let Some((current, rest)) = names.split_first() else { return results };
    if rest.is_empty() {
        results.sort_by(|a, b| cmp(label_value(a, current), label_value(b, current)));
        return results;
    }
    // group by the current label (first-seen order), sort each group by the next label, then
    // order the groups by the current label's value (stable)
    let mut groups: Vec<(String, Vec<MQEValues>)> = Vec::new();
    for vs in results {
        let v = label_value(&vs, current).to_string();
        match groups.iter_mut().find(|(k, _)| *k == v) {
            Some((_, g)) => g.push(vs),
            None => groups.push((v, vec![vs])),
        }
    }
    let mut sorted: Vec<(String, Vec<MQEValues>)> = groups.into_iter().map(|(k, g)| (k, sort_by_labels(g, rest, cmp))).collect();
    sorted.sort_by(|a, b| cmp(&a.0, &b.0));
    sorted.into_iter().flat_map(|(_, g)| g).collect()
}

/// `TopNOfOp.doMergeTopNResult`: merges the first list of each `top_n` result, drops empties,
/// sorts by value (stable) and keeps `limit`. The first error result is returned as is; mixing
/// SORTED_LIST and RECORD_LIST is an error.
pub fn top_n_of_op(top_ns: Vec<ExpressionResult>, limit: usize, order: Order) -> Result<ExpressionResult, OpError> {
    let mut ty: Option<ResultType> = None;
    let mut all: Vec<MQEValue> = Vec::new();
    for r in top_ns {
        if r.error.as_deref().is_some_and(|e| !e.is_empty()) {
            return Ok(r);
        }
        if let Some(t) = ty.filter(|t| *t != r.result_type) {
            return Err(OpError(format!(
                "TopN type is not consistent, one is {}, another is {}",
                t.as_str(),
                r.result_type.as_str()
            )));
        }
        ty = Some(r.result_type);
        if let Some(first) = r.results.into_iter().next() {
            all.extend(first.values);
        }
    }
    let mut merged: Vec<MQEValue> = all.into_iter().filter(|v| v.value.is_some()).collect();
    merged.sort_by(|a, b| {
        let o = java_cmp(a.value, b.value);
        if order == Order::Asc { o } else { o.reverse() }
    });
    merged.truncate(limit);
    Ok(ExpressionResult {
        result_type: ty.unwrap_or(ResultType::Unknown),
        results: vec![MQEValues { labels: Vec::new(), values: merged }],
        ..Default::default()
    })
}

/// Upstream's `parseLabelValue`: `'a,b'` → two labels (split on `,` only when the comma is not
/// the first character; Java's `split` drops trailing empty strings), a blank value → none.
pub fn split_label_value(key: &str, value: &str) -> Vec<KeyValue> {
    if value.trim().is_empty() {
        return Vec::new();
    }
    if value.find(',').is_some_and(|i| i > 0) {
        let mut parts: Vec<&str> = value.split(',').collect();
        while parts.last().is_some_and(|p| p.is_empty()) {
            parts.pop();
        }
        parts.into_iter().map(|p| KeyValue::new(key, p)).collect()
    } else {
        vec![KeyValue::new(key, value)]
    }
}

/// The `relabels(expr, target='a,b', new='x,y')` step: each label equal to a target pair is
/// replaced by the pair at the same position. `expr_text` is for the error message.
pub fn relabels_op(mut result: ExpressionResult, expr_text: &str, target: &KeyValue, replace: &KeyValue) -> ExpressionResult {
    if !result.labeled_result {
        result.error = Some(format!("The result of expression [{}] is not a labeled result.", expr_text));
        return result;
    }
    let targets = split_label_value(&target.key, &target.value);
    let replaces = split_label_value(&replace.key, &replace.value);
    if targets.is_empty() || replaces.is_empty() {
        return result;
    }
    if targets.len() != replaces.len() {
        result.error = Some(format!(
            "Target label [{}]: the number of relabel values is not equal to the number of replace label.",
            target.key
        ));
        return result;
    }
    for vs in &mut result.results {
        for l in &mut vs.labels {
            // HashMap put: a later duplicate target wins
            if let Some(i) = targets.iter().rposition(|t| t == l) {
                *l = replaces[i].clone();
            }
        }
    }
    result
}
