//! Ports of the `oap-server/mqe-rt/src/test/java/org/apache/skywalking/mqe/rt/*Test.java` unit
//! tests, against the same operations (`ops`, `ops_labels`) on the same mock data.

mod common;

use common::*;
use hotrule_mqe_engine::ops::{aggregation_op, binary_op, bool_op, compare_op, math_op, round_op, trend_op};
use hotrule_mqe_engine::ops_labels::{aggregate_labels_op, sort_label_values_op, sort_values_op, top_n_of_op};
use hotrule_mqe_engine::{AggregationOp, BinaryOp, BoolOp, CompareOp, LabelsAgg, MathOp, Order, ResultType, Step, TrendOp};
use ResultType::*;

// ---- AggregationOpTest.java ----

// AggregationOpTest#seriesNoLabeledTest
#[test]
fn aggregation_series_no_labeled() {
    let cases: &[(AggregationOp, Option<&str>, f64)] = &[
        (AggregationOp::Avg, None, 200.0),
        (AggregationOp::Count, None, 2.0),
        (AggregationOp::Sum, None, 400.0),
        (AggregationOp::Latest, Some("300"), 300.0),
        (AggregationOp::Max, Some("300"), 300.0),
        (AggregationOp::Min, Some("100"), 100.0),
    ];
    for (op, want_id, want) in cases {
        let r = aggregation_op(series_no_labeled(), *op).unwrap();
        assert_eq!(r.result_type, SingleValue, "{:?}", op);
        assert_eq!(id(&r, 0, 0), *want_id, "{:?}", op);
        assert_eq!(dv(&r, 0, 0), *want, "{:?}", op);
    }
}

// AggregationOpTest#seriesLabeledTest
#[test]
fn aggregation_series_labeled() {
    let cases: &[(AggregationOp, Option<&str>, f64, f64)] = &[
        (AggregationOp::Avg, None, 200.0, 201.0),
        (AggregationOp::Count, None, 2.0, 2.0),
        (AggregationOp::Sum, None, 400.0, 402.0),
        (AggregationOp::Latest, Some("300"), 300.0, 301.0),
        (AggregationOp::Max, Some("300"), 300.0, 301.0),
        (AggregationOp::Min, Some("100"), 100.0, 101.0),
    ];
    for (op, want_id, a, b) in cases {
        let r = aggregation_op(series_labeled(), *op).unwrap();
        assert_eq!(r.result_type, SingleValue);
        assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1)), ("1", "21"));
        assert_eq!((lv(&r, 1, 0), lv(&r, 1, 1)), ("2", "21"));
        assert_eq!((id(&r, 0, 0), id(&r, 1, 0)), (*want_id, *want_id), "{:?}", op);
        assert_eq!((dv(&r, 0, 0), dv(&r, 1, 0)), (*a, *b), "{:?}", op);
    }
}

// ---- BinaryOpTest.java ----

// BinaryOpTest#seriesNoLabeledTest
#[test]
fn binary_series_no_labeled() {
    assert!(binary_op(empty(TimeSeriesValues, false), empty(TimeSeriesValues, false), BinaryOp::Add).is_err());
    let cases = [
        (BinaryOp::Add, 200.0, 600.0),
        (BinaryOp::Sub, 0.0, 0.0),
        (BinaryOp::Mul, 10000.0, 90000.0),
        (BinaryOp::Div, 1.0, 1.0),
        (BinaryOp::Mod, 0.0, 0.0),
    ];
    for (op, a, b) in cases {
        let r = binary_op(series_no_labeled(), series_no_labeled(), op).unwrap();
        assert_eq!(r.result_type, TimeSeriesValues);
        assert_eq!((id(&r, 0, 0), id(&r, 0, 1)), (Some("100"), Some("300")));
        assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (a, b), "{:?}", op);
    }
}

// BinaryOpTest#seriesLabeledTest
#[test]
fn binary_series_labeled() {
    assert!(binary_op(series_labeled(), empty(TimeSeriesValues, false), BinaryOp::Add).is_err());
    let cases = [
        // seriesLabeled + seriesNoLabeled
        (series_labeled(), series_no_labeled(), BinaryOp::Add, [200.0, 600.0, 201.0, 601.0]),
        // seriesLabeled + seriesLabeled
        (series_labeled(), series_labeled(), BinaryOp::Add, [200.0, 600.0, 202.0, 602.0]),
        // seriesNoLabeled - seriesLabeled
        (series_no_labeled(), series_labeled(), BinaryOp::Sub, [0.0, 0.0, -1.0, -1.0]),
    ];
    for (l, r, op, want) in cases {
        let r = binary_op(l, r, op).unwrap();
        assert_eq!(r.result_type, TimeSeriesValues);
        assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), lv(&r, 1, 0), lv(&r, 1, 1)), ("1", "21", "2", "21"));
        assert_eq!((id(&r, 0, 0), id(&r, 0, 1)), (Some("100"), Some("300")));
        assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], want);
    }
}

// BinaryOpTest#many2OneTest
#[test]
fn binary_many_to_one() {
    assert!(binary_op(empty(TimeSeriesValues, false), empty(SingleValue, false), BinaryOp::Add).is_err());
    assert!(binary_op(empty(TimeSeriesValues, true), empty(SingleValue, false), BinaryOp::Add).is_err());
    assert!(binary_op(empty(TimeSeriesValues, false), empty(SingleValue, true), BinaryOp::Add).is_err());
    let r = binary_op(list(), single(1000.0), BinaryOp::Add).unwrap();
    assert_eq!(r.result_type, SortedList);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0), id(&r, 0, 1), dv(&r, 0, 1)), (Some("service_A"), 1100.0, Some("service_B"), 1300.0));
    let r = binary_op(series_no_labeled(), single(1000.0), BinaryOp::Add).unwrap();
    assert_eq!(r.result_type, TimeSeriesValues);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0), id(&r, 0, 1), dv(&r, 0, 1)), (Some("100"), 1100.0, Some("300"), 1300.0));
    let r = binary_op(series_labeled(), single(1000.0), BinaryOp::Add).unwrap();
    assert_eq!(r.result_type, TimeSeriesValues);
    assert_eq!((lv(&r, 0, 0), lv(&r, 1, 0)), ("1", "2"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [1100.0, 1300.0, 1101.0, 1301.0]);
}

// BinaryOpTest#one2ManyTest
#[test]
fn binary_one_to_many() {
    assert!(binary_op(empty(SingleValue, false), empty(TimeSeriesValues, false), BinaryOp::Add).is_err());
    assert!(binary_op(empty(SingleValue, false), empty(TimeSeriesValues, true), BinaryOp::Add).is_err());
    let r = binary_op(single(1000.0), list(), BinaryOp::Sub).unwrap();
    assert_eq!(r.result_type, SortedList);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0), id(&r, 0, 1), dv(&r, 0, 1)), (Some("service_A"), 900.0, Some("service_B"), 700.0));
    let r = binary_op(single(1000.0), series_no_labeled(), BinaryOp::Sub).unwrap();
    assert_eq!(r.result_type, TimeSeriesValues);
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (900.0, 700.0));
    let r = binary_op(single(1000.0), series_labeled(), BinaryOp::Sub).unwrap();
    assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), lv(&r, 1, 0)), ("1", "21", "2"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [900.0, 700.0, 899.0, 699.0]);
}

// BinaryOpTest#single2SingleTest
#[test]
fn binary_single_to_single() {
    assert!(binary_op(empty(SingleValue, false), empty(SingleValue, false), BinaryOp::Add).is_err());
    assert!(binary_op(empty(SingleValue, false), empty(SingleValue, true), BinaryOp::Add).is_err());
    let r = binary_op(single(100.0), single(200.0), BinaryOp::Add).unwrap();
    assert_eq!((r.result_type, dv(&r, 0, 0)), (SingleValue, 300.0));
    let r = binary_op(single_labeled(100.0, 200.0), single(100.0), BinaryOp::Add).unwrap();
    assert_eq!(r.result_type, SingleValue);
    assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), dv(&r, 0, 0), lv(&r, 1, 0), dv(&r, 1, 0)), ("1", "21", 200.0, "2", 300.0));
    let r = binary_op(single(100.0), single_labeled(100.0, 200.0), BinaryOp::Add).unwrap();
    assert_eq!((lv(&r, 0, 0), dv(&r, 0, 0), lv(&r, 1, 0), dv(&r, 1, 0)), ("1", 200.0, "2", 300.0));
    let r = binary_op(single_labeled(100.0, 102.0), single_labeled(100.0, 200.0), BinaryOp::Add).unwrap();
    assert_eq!((lv(&r, 0, 0), dv(&r, 0, 0), lv(&r, 1, 0), dv(&r, 1, 0)), ("1", 200.0, "2", 302.0));
}

// ---- CompareOPTest.java ----

// CompareOPTest#seriesNoLabeledTest
#[test]
fn compare_series_no_labeled() {
    let cases = [
        ((100.0, 200.0), (200.0, 100.0), CompareOp::Gt, (0.0, 1.0)),
        ((200.0, 200.0), (200.0, 100.0), CompareOp::Gte, (1.0, 1.0)),
        ((200.0, 200.0), (200.0, 300.0), CompareOp::Lt, (0.0, 1.0)),
        ((200.0, 200.0), (200.0, 100.0), CompareOp::Lte, (1.0, 0.0)),
        ((200.0, 200.0), (200.0, 100.0), CompareOp::Neq, (0.0, 1.0)),
        ((200.0, 200.0), (200.0, 100.0), CompareOp::Eq, (1.0, 0.0)),
    ];
    for (l, r, op, want) in cases {
        let r = compare_op(series_no_labeled_of(l.0, l.1), series_no_labeled_of(r.0, r.1), op).unwrap();
        assert_eq!(r.result_type, TimeSeriesValues);
        assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), want, "{:?}", op);
        // compare results are present 0/1 values, not empties
        assert!(r.results[0].values.iter().all(|v| v.value.is_some()));
    }
}

// CompareOPTest#seriesLabeledTest
#[test]
fn compare_series_labeled() {
    let cases = [
        (series_labeled_of(100.0, 300.0, 101.0, 200.0), series_no_labeled_of(100.0, 200.0), [0.0, 1.0, 1.0, 0.0]),
        (series_labeled_of(101.0, 300.0, 100.0, 201.0), series_labeled_of(100.0, 300.0, 101.0, 200.0), [1.0, 0.0, 0.0, 1.0]),
        (series_no_labeled_of(101.0, 202.0), series_labeled_of(100.0, 300.0, 101.0, 201.0), [1.0, 0.0, 0.0, 1.0]),
    ];
    for (l, r, want) in cases {
        let r = compare_op(l, r, CompareOp::Gt).unwrap();
        assert_eq!(r.result_type, TimeSeriesValues);
        assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), lv(&r, 1, 0), lv(&r, 1, 1)), ("1", "21", "2", "21"));
        assert_eq!((id(&r, 1, 0), id(&r, 1, 1)), (Some("100"), Some("300")));
        assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], want);
    }
}

// CompareOPTest#many2OneTest
#[test]
fn compare_many_to_one() {
    let r = compare_op(list(), single(200.0), CompareOp::Gt).unwrap();
    assert_eq!(r.result_type, SortedList);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0), id(&r, 0, 1), dv(&r, 0, 1)), (Some("service_A"), 0.0, Some("service_B"), 1.0));
    let r = compare_op(series_no_labeled_of(100.0, 200.0), single(101.0), CompareOp::Gt).unwrap();
    assert_eq!((r.result_type, dv(&r, 0, 0), dv(&r, 0, 1)), (TimeSeriesValues, 0.0, 1.0));
    let r = compare_op(series_labeled_of(100.0, 300.0, 101.0, 200.0), single(101.0), CompareOp::Gt).unwrap();
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [0.0, 1.0, 0.0, 1.0]);
}

// CompareOPTest#one2ManyTest
#[test]
fn compare_one_to_many() {
    let r = compare_op(single(200.0), list(), CompareOp::Gt).unwrap();
    assert_eq!((r.result_type, dv(&r, 0, 0), dv(&r, 0, 1)), (SortedList, 1.0, 0.0));
    let r = compare_op(single(101.0), series_no_labeled_of(100.0, 200.0), CompareOp::Gt).unwrap();
    assert_eq!((r.result_type, dv(&r, 0, 0), dv(&r, 0, 1)), (TimeSeriesValues, 1.0, 0.0));
    let r = compare_op(single(101.0), series_labeled_of(100.0, 200.0, 200.0, 100.0), CompareOp::Gt).unwrap();
    assert_eq!((lv(&r, 0, 0), lv(&r, 1, 0)), ("1", "2"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [1.0, 0.0, 0.0, 1.0]);
}

// CompareOPTest#single2SingleTest
#[test]
fn compare_single_to_single() {
    let r = compare_op(single(100.0), single(200.0), CompareOp::Gt).unwrap();
    assert_eq!((r.result_type, r.results[0].values[0].value), (SingleValue, Some(0.0)));
    let r = compare_op(single_labeled(100.0, 200.0), single(100.0), CompareOp::Gt).unwrap();
    assert_eq!((lv(&r, 0, 0), dv(&r, 0, 0), lv(&r, 1, 0), dv(&r, 1, 0)), ("1", 0.0, "2", 1.0));
    let r = compare_op(single(101.0), single_labeled(100.0, 200.0), CompareOp::Gt).unwrap();
    assert_eq!((dv(&r, 0, 0), dv(&r, 1, 0)), (1.0, 0.0));
    let r = compare_op(single_labeled(100.0, 202.0), single_labeled(100.0, 200.0), CompareOp::Gt).unwrap();
    assert_eq!((r.result_type, dv(&r, 0, 0), dv(&r, 1, 0)), (SingleValue, 0.0, 1.0));
}

// ---- BoolOpTest.java ----

fn present_zero(mut r: hotrule_mqe_engine::ExpressionResult, i: usize) -> hotrule_mqe_engine::ExpressionResult {
    // upstream: `setEmptyValue(false)` on a mock 0 (which MockData made empty)
    if r.results[i].values[0].value.is_none() {
        r.results[i].values[0].value = Some(0.0);
    }
    r.bool_result = true;
    r
}

// BoolOpTest#boolOpNoLabeledTest
#[test]
fn bool_no_labeled() {
    for (op, want) in [(BoolOp::And, 0.0), (BoolOp::Or, 1.0)] {
        let r = bool_op(present_zero(single(1.0), 0), present_zero(single(0.0), 0), op).unwrap();
        assert_eq!((r.result_type, r.results[0].values[0].value), (SingleValue, Some(want)));
    }
    // not compare results
    assert!(bool_op(single(1.0), present_zero(single(0.0), 0), BoolOp::And).is_err());
}

// BoolOpTest#boolOpLabeledTest
#[test]
fn bool_labeled() {
    for (op, want) in [(BoolOp::And, [0.0, 0.0]), (BoolOp::Or, [1.0, 1.0])] {
        let l = present_zero(single_labeled(1.0, 0.0), 1);
        let r = present_zero(single_labeled(0.0, 1.0), 0);
        let r = bool_op(l, r, op).unwrap();
        assert_eq!(r.result_type, SingleValue);
        assert_eq!([r.results[0].values[0].value, r.results[1].values[0].value], want.map(Some));
    }
}

// ---- MathematicalFunctionOpTest.java ----

// MathematicalFunctionOpTest#seriesNoLabeledTest
#[test]
fn math_series_no_labeled() {
    let r = math_op(series_no_labeled_of(-100.111, -300.0), MathOp::Abs);
    assert_eq!((r.result_type, id(&r, 0, 0), dv(&r, 0, 0), dv(&r, 0, 1)), (TimeSeriesValues, Some("100"), 100.111, 300.0));
    let r = math_op(series_no_labeled_of(100.111, 300.2), MathOp::Ceil);
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (101.0, 301.0));
    let r = math_op(series_no_labeled_of(100.111, 300.2), MathOp::Floor);
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (100.0, 300.0));
    let r = round_op(series_no_labeled_of(100.111, 300.222), 2);
    assert_eq!((id(&r, 0, 1), dv(&r, 0, 0), dv(&r, 0, 1)), (Some("300"), 100.11, 300.22));
}

// MathematicalFunctionOpTest#seriesLabeledTest
#[test]
fn math_series_labeled() {
    let r = math_op(series_labeled_of(-100.111, -300.0, -101.333, -301.666), MathOp::Abs);
    assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), lv(&r, 1, 0)), ("1", "21", "2"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [100.111, 300.0, 101.333, 301.666]);
}

// MathematicalFunctionOpTest#listTest
#[test]
fn math_list() {
    let r = math_op(list_of(-100.111, -300.0), MathOp::Abs);
    assert_eq!((r.result_type, id(&r, 0, 0), dv(&r, 0, 0), id(&r, 0, 1), dv(&r, 0, 1)), (SortedList, Some("service_A"), 100.111, Some("service_B"), 300.0));
}

// ---- TrendOpTest.java ----

// TrendOpTest#increaseNoLabeledTest, #increaseLabeledTest, #rateNoLabeledTest, #rateLabeledTest
#[test]
fn trend_increase_and_rate() {
    let r = trend_op(series_no_labeled_of(100.0, 280.0), TrendOp::Increase, 1, Step::Minute);
    assert_eq!((r.result_type, r.results[0].values.len(), id(&r, 0, 0), dv(&r, 0, 0)), (TimeSeriesValues, 1, Some("300"), 180.0));
    let r = trend_op(series_labeled_of(100.0, 280.0, 100.0, 220.0), TrendOp::Increase, 1, Step::Minute);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0), id(&r, 1, 0), dv(&r, 1, 0)), (Some("300"), 180.0, Some("300"), 120.0));
    let r = trend_op(series_no_labeled_of(100.0, 280.0), TrendOp::Rate, 1, Step::Minute);
    assert_eq!((id(&r, 0, 0), dv(&r, 0, 0)), (Some("300"), 3.0));
    let r = trend_op(series_labeled_of(100.0, 280.0, 100.0, 220.0), TrendOp::Rate, 1, Step::Minute);
    assert_eq!((dv(&r, 0, 0), dv(&r, 1, 0)), (3.0, 2.0));
}

// ---- AggregateLabelsOpTest.java ----

// AggregateLabelsOpTest#seriesLabeledTest
#[test]
fn aggregate_labels_series_labeled() {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Avg, &[]);
    assert_eq!((r.results.len(), r.results[0].labels.len(), r.result_type), (1, 0, TimeSeriesValues));
    assert!(!r.labeled_result);
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), ((100.0 + 101.0) / 2.0, (300.0 + 301.0) / 2.0));

    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Sum, &names(&["label"]));
    assert_eq!(r.results.len(), 2);
    assert_eq!((r.results[0].labels.len(), r.results[0].labels[0].key.as_str(), r.results[1].labels[0].key.as_str()), (1, "label", "label"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [100.0, 300.0, 101.0, 301.0]);

    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Sum, &names(&["label2"]));
    assert_eq!((r.results.len(), r.results[0].labels.len(), r.results[0].labels[0].key.as_str(), lv(&r, 0, 0)), (1, 1, "label2", "21"));
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (201.0, 601.0));

    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Sum, &names(&["label", "label2"]));
    assert_eq!(r.results.len(), 2);
    assert_eq!((lv(&r, 0, 0), lv(&r, 0, 1), lv(&r, 1, 0), lv(&r, 1, 1)), ("1", "21", "2", "21"));
    assert_eq!([dv(&r, 0, 0), dv(&r, 0, 1), dv(&r, 1, 0), dv(&r, 1, 1)], [100.0, 300.0, 101.0, 301.0]);

    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Min, &names(&["label2"]));
    assert_eq!((r.result_type, dv(&r, 0, 0), dv(&r, 0, 1)), (TimeSeriesValues, 100.0, 300.0));
    let r = aggregate_labels_op(series_labeled(), LabelsAgg::Max, &names(&["label2"]));
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (101.0, 301.0));
}

// ---- SortValuesOpTest.java ----

// SortValuesOpTest#sortValueTest
#[test]
fn sort_values() {
    for order in [Order::Des, Order::Asc] {
        let r = sort_values_op(series_no_labeled(), 3, order, AggregationOp::Avg).unwrap();
        assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1)), (100.0, 300.0));
    }
    let r = sort_values_op(series_labeled(), 3, Order::Des, AggregationOp::Avg).unwrap();
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1), lv(&r, 0, 0), lv(&r, 0, 1)), (101.0, 301.0, "2", "21"));
    assert_eq!((dv(&r, 1, 0), dv(&r, 1, 1), lv(&r, 1, 0), r.results[1].labels[1].key.as_str()), (100.0, 300.0, "1", "label2"));
    let r = sort_values_op(series_labeled(), 3, Order::Asc, AggregationOp::Avg).unwrap();
    assert_eq!((dv(&r, 0, 0), lv(&r, 0, 0), dv(&r, 1, 1), lv(&r, 1, 0)), (100.0, "1", 301.0, "2"));
    let r = sort_values_op(series_labeled(), 1, Order::Des, AggregationOp::Avg).unwrap();
    assert_eq!(r.results.len(), 1);
    assert_eq!((dv(&r, 0, 0), dv(&r, 0, 1), lv(&r, 0, 0)), (101.0, 301.0, "2"));
}

// ---- SortLabelValuesOpTest.java ----

fn label_column(r: &hotrule_mqe_engine::ExpressionResult, k: usize) -> Vec<&str> {
    r.results.iter().map(|vs| vs.labels[k].value.as_str()).collect()
}

fn assert_des(r: &hotrule_mqe_engine::ExpressionResult) {
    assert_eq!(label_column(r, 0), ["b", "b", "b", "b", "a", "a", "a", "a"]);
    assert_eq!(label_column(r, 1), ["2b", "2b", "2a", "2a", "2b", "2b", "2a", "2a"]);
    assert_eq!(label_column(r, 2), ["32", "31", "32", "31", "32", "31", "32", "31"]);
}

// SortLabelValuesOpTest#sortLabelValueTest
#[test]
fn sort_label_values() {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let des = sort_label_values_op(series_complex_labeled(), Order::Des, &names(&["label", "label2", "label3"]));
    assert_des(&des);
    let asc = sort_label_values_op(des, Order::Asc, &names(&["label", "label2", "label3"]));
    assert_eq!(label_column(&asc, 0), ["a", "a", "a", "a", "b", "b", "b", "b"]);
    assert_eq!(label_column(&asc, 1), ["2a", "2a", "2b", "2b", "2a", "2a", "2b", "2b"]);
    assert_eq!(label_column(&asc, 2), ["31", "32", "31", "32", "31", "32", "31", "32"]);
    // distinct
    assert_des(&sort_label_values_op(series_complex_labeled(), Order::Des, &names(&["label", "label2", "label3", "label"])));
    // ignore
    assert_des(&sort_label_values_op(series_complex_labeled(), Order::Des, &names(&["label", "labelIgnore", "label2", "label3"])));
}

// ---- TopNOfOpTest.java ----

// TopNOfOpTest#mergeTopNResultTest
#[test]
fn top_n_of_merge() {
    let lists = || vec![list_of(1000.0, 100.0), list_of(600.0, 500.0), list_of(300.0, 2000.0)];
    let r = top_n_of_op(lists(), 2, Order::Des).unwrap();
    assert_eq!((r.result_type, r.results[0].values.len()), (SortedList, 2));
    assert_eq!((dv(&r, 0, 0), id(&r, 0, 0), dv(&r, 0, 1), id(&r, 0, 1)), (2000.0, Some("service_B"), 1000.0, Some("service_A")));
    let r = top_n_of_op(lists(), 8, Order::Asc).unwrap();
    assert_eq!(r.results[0].values.len(), 6);
    assert_eq!((dv(&r, 0, 0), id(&r, 0, 0), dv(&r, 0, 5), id(&r, 0, 5)), (100.0, Some("service_B"), 2000.0, Some("service_B")));
    let mut mixed = lists();
    mixed[2].result_type = RecordList;
    assert!(top_n_of_op(mixed, 2, Order::Des).is_err());
}
