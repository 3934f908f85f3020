//! Port of `oap-server/mqe-rt/src/test/java/org/apache/skywalking/mqe/rt/MockData.java`.
//! As upstream, a mock value of exactly 0 is an empty value.
#![allow(dead_code)]

use hotrule_mqe_engine::{ExpressionResult, KeyValue, MQEValue, MQEValues, ResultType};

pub fn v(id: Option<&str>, value: f64) -> MQEValue {
    MQEValue::new(id.map(str::to_string), if value == 0.0 { None } else { Some(value) })
}

fn labels(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect()
}

fn result(ty: ResultType, labeled: bool, results: Vec<MQEValues>) -> ExpressionResult {
    ExpressionResult { result_type: ty, labeled_result: labeled, results, ..Default::default() }
}

pub fn series_no_labeled() -> ExpressionResult {
    series_no_labeled_of(100.0, 300.0)
}

pub fn series_no_labeled_of(id100: f64, id300: f64) -> ExpressionResult {
    result(ResultType::TimeSeriesValues, false, vec![MQEValues {
        labels: vec![],
        values: vec![v(Some("100"), id100), v(Some("300"), id300)],
    }])
}

pub fn series_labeled() -> ExpressionResult {
    series_labeled_of(100.0, 300.0, 101.0, 301.0)
}

pub fn series_labeled_of(id1001: f64, id3001: f64, id1002: f64, id3002: f64) -> ExpressionResult {
    result(ResultType::TimeSeriesValues, true, vec![
        MQEValues { labels: labels(&[("label", "1"), ("label2", "21")]), values: vec![v(Some("100"), id1001), v(Some("300"), id3001)] },
        MQEValues { labels: labels(&[("label", "2"), ("label2", "21")]), values: vec![v(Some("100"), id1002), v(Some("300"), id3002)] },
    ])
}

pub fn series_complex_labeled() -> ExpressionResult {
    let mut out = Vec::new();
    let mut value = 100.0;
    for l in ["a", "b"] {
        for l2 in ["2a", "2b"] {
            for l3 in ["31", "32"] {
                out.push(MQEValues { labels: labels(&[("label", l), ("label2", l2), ("label3", l3)]), values: vec![v(Some("100"), value)] });
                value += 1.0;
            }
        }
    }
    result(ResultType::TimeSeriesValues, true, out)
}

pub fn list() -> ExpressionResult {
    list_of(100.0, 300.0)
}

pub fn list_of(a: f64, b: f64) -> ExpressionResult {
    result(ResultType::SortedList, false, vec![MQEValues {
        labels: vec![],
        values: vec![v(Some("service_A"), a), v(Some("service_B"), b)],
    }])
}

pub fn single(value: f64) -> ExpressionResult {
    result(ResultType::SingleValue, false, vec![MQEValues { labels: vec![], values: vec![v(None, value)] }])
}

pub fn single_labeled(id1001: f64, id1002: f64) -> ExpressionResult {
    result(ResultType::SingleValue, true, vec![
        MQEValues { labels: labels(&[("label", "1"), ("label2", "21")]), values: vec![v(Some("100"), id1001)] },
        MQEValues { labels: labels(&[("label", "2"), ("label2", "21")]), values: vec![v(Some("100"), id1002)] },
    ])
}

pub fn empty(ty: ResultType, labeled: bool) -> ExpressionResult {
    result(ty, labeled, vec![])
}

/// `getDoubleValue()` of result `i`, value `j` (an empty value reads as upstream's default 0).
pub fn dv(r: &ExpressionResult, i: usize, j: usize) -> f64 {
    r.results[i].values[j].value.unwrap_or(0.0)
}

pub fn id(r: &ExpressionResult, i: usize, j: usize) -> Option<&str> {
    r.results[i].values[j].id.as_deref()
}

/// Label value `k` of result `i`.
pub fn lv(r: &ExpressionResult, i: usize, k: usize) -> &str {
    &r.results[i].labels[k].value
}
