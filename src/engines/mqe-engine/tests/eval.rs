//! Evaluation over `MemSource`: the MQE doc's examples (`docs/en/api/metrics-query-expression.md`),
//! the port of `LogicalFunctionOpTest`, the empty-value rules, the alarm expressions, and errors.

use hotrule_mqe_engine::*;

const T1: i64 = 1_691_658_000_000;
const T2: i64 = 1_691_661_600_000;

fn hour_window() -> Duration {
    Duration::new(T1, T2, Step::Hour)
}

fn run(src: &MemSource, expr: &str) -> ExpressionResult {
    exec_expression(expr, src, &hour_window())
}

fn values(r: &ExpressionResult, i: usize) -> Vec<Option<f64>> {
    r.results[i].values.iter().map(|v| v.value).collect()
}

fn strings(r: &ExpressionResult, i: usize) -> Vec<Option<String>> {
    r.results[i].values.iter().map(|v| v.value_string()).collect()
}

fn labels(r: &ExpressionResult, i: usize) -> Vec<(String, String)> {
    r.results[i].labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect()
}

fn kv(k: &str, v: &str) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// The doc's data: service_resp_time 2500/3500, service_percentile p=50 1000/2000, p=75 2000/3000
/// (and p=95 present, to check the selector), service_cpm 6000/12000.
fn doc_source() -> MemSource {
    let mut s = MemSource::new();
    s.set("service_resp_time", T1, 2500.0);
    s.set("service_resp_time", T2, 3500.0);
    for (p, a, b) in [("50", 1000.0, 2000.0), ("75", 2000.0, 3000.0), ("95", 9000.0, 9000.0)] {
        s.set_labeled("service_percentile", &[("p", p)], T1, a);
        s.set_labeled("service_percentile", &[("p", p)], T2, b);
    }
    s.set("service_cpm", T1, 6000.0);
    s.set("service_cpm", T2, 12001.0);
    s.declare_common("existing_without_value");
    s
}

// doc "Common Value Metrics" and "Compare Operation"
#[test]
fn doc_plain_metric_and_compare() {
    let s = doc_source();
    let r = run(&s, "service_resp_time");
    assert_eq!((r.result_type, r.labeled_result, r.error.clone()), (ResultType::TimeSeriesValues, false, None));
    let ids: Vec<_> = r.results[0].values.iter().map(|v| v.id.clone().unwrap_or_default()).collect();
    assert_eq!(ids, ["1691658000000", "1691661600000"]);
    let r = run(&s, "service_resp_time > 3000");
    assert_eq!(strings(&r, 0), [Some("0".to_string()), Some("1".to_string())]);
    assert_eq!(r.result_type, ResultType::TimeSeriesValues);
}

// doc "Expression Query Example / Labeled Value Metrics"
#[test]
fn doc_labeled_examples() {
    let s = doc_source();
    let r = run(&s, "service_percentile{p='50,75'}");
    assert!(r.labeled_result);
    assert_eq!(r.results.len(), 2);
    assert_eq!((labels(&r, 0), labels(&r, 1)), (vec![kv("p", "50")], vec![kv("p", "75")]));
    let r = run(&s, "service_percentile{p='50,75'} / 1000");
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(1.0), Some(2.0)], vec![Some(2.0), Some(3.0)]));
    let r = run(&s, "avg(service_percentile{p='50,75'})");
    assert_eq!(r.result_type, ResultType::SingleValue);
    assert_eq!((strings(&r, 0), strings(&r, 1)), (vec![Some("1500".to_string())], vec![Some("2500".to_string())]));
    assert_eq!(r.results[0].values[0].id, None);
    // The doc shows -500/500 for both percentiles; mqe-rt's many2One uses the first single series
    // (p=50's 1500) for every series, so p=75 gives 500/1500. The code is what we follow.
    let r = run(&s, "service_percentile{p='50,75'} - avg(service_percentile{p='50,75'})");
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(-500.0), Some(500.0)], vec![Some(500.0), Some(1500.0)]));
    let r = run(&s, "service_resp_time - service_percentile{p='50,75'}");
    assert_eq!(r.result_type, ResultType::TimeSeriesValues);
    assert_eq!((labels(&r, 0), values(&r, 0)), (vec![kv("p", "50")], vec![Some(1500.0), Some(1500.0)]));
    assert_eq!((labels(&r, 1), values(&r, 1)), (vec![kv("p", "75")], vec![Some(500.0), Some(500.0)]));
}

// doc "Mathematical Operation": round(service_cpm / 60 , 2)
#[test]
fn doc_round() {
    let r = run(&doc_source(), "round(service_cpm / 60 , 2)");
    assert_eq!(values(&r, 0), [Some(100.0), Some(200.02)]);
    assert_eq!(strings(&r, 0), [Some("100".to_string()), Some("200.02".to_string())]);
}

// doc "Relabel Operation" (with the grammar's `relabels` spelling)
#[test]
fn doc_relabels() {
    let r = run(&doc_source(), "relabels(service_percentile{p='50,75'}, p='50,75', percentile='P50,P75')");
    assert_eq!((labels(&r, 0), labels(&r, 1)), (vec![kv("percentile", "P50")], vec![kv("percentile", "P75")]));
    let r = run(&doc_source(), "relabels(service_percentile{p='50,75'}, p='50,75', percentile='P50')");
    assert_eq!(r.error.as_deref(), Some("Target label [p]: the number of relabel values is not equal to the number of replace label."));
    let r = run(&doc_source(), "relabels(service_cpm, p='50', q='1')");
    assert_eq!(r.error.as_deref(), Some("The result of expression [service_cpm] is not a labeled result."));
}

// doc "AggregateLabels Operation"
#[test]
fn doc_aggregate_labels() {
    let mut s = MemSource::new();
    for (cmd, node, a) in [("get", "n1", 1.0), ("get", "n2", 2.0), ("set", "n1", 4.0)] {
        s.set_labeled("total_commands_rate", &[("cmd", cmd), ("node", node)], T1, a);
    }
    let r = run(&s, "aggregate_labels(total_commands_rate, sum)");
    assert!(!r.labeled_result);
    assert_eq!((r.results.len(), values(&r, 0)), (1, vec![Some(7.0), None]));
    let r = run(&s, "aggregate_labels(total_commands_rate, sum(cmd))");
    assert!(r.labeled_result);
    assert_eq!((labels(&r, 0), values(&r, 0)), (vec![kv("cmd", "get")], vec![Some(3.0), None]));
    assert_eq!((labels(&r, 1), values(&r, 1)), (vec![kv("cmd", "set")], vec![Some(4.0), None]));
    // an unknown label name is ignored (→ all labels aggregated)
    let r = run(&s, "aggregate_labels(total_commands_rate, max(nope))");
    assert_eq!(values(&r, 0), [Some(4.0), None]);
    let r = run(&s, "aggregate_labels(service_cpm, sum)");
    assert_eq!(r.error.as_deref(), Some("Metric: [service_cpm] does not exist."));
    let r = run(&doc_source(), "aggregate_labels(service_cpm / 2, sum)");
    assert_eq!(r.error.as_deref(), Some("The result of expression [service_cpm/2] is not a labeled result."));
}

// doc "SortValues Operation" (the doc writes `desc`, which the grammar does not have)
#[test]
fn doc_sort_values() {
    let mut s = MemSource::new();
    for (svc, a, b) in [("api", 160.0, 100.0), ("web", 120.0, 180.0), ("auth", 80.0, 10.0)] {
        s.set_labeled("http_requests_total", &[("service", svc)], T1, a);
        s.set_labeled("http_requests_total", &[("service", svc)], T2, b);
    }
    let r = run(&s, "sort_values(http_requests_total, 2, des, avg)");
    assert_eq!(r.results.len(), 2);
    assert_eq!((labels(&r, 0), values(&r, 0)), (vec![kv("service", "web")], vec![Some(120.0), Some(180.0)]));
    assert_eq!((labels(&r, 1), values(&r, 1)), (vec![kv("service", "api")], vec![Some(160.0), Some(100.0)]));
    // upstream's visitor always sorts by avg, whatever aggregation is written
    let r = run(&s, "sort_values(http_requests_total, 1, des, max)");
    assert_eq!(labels(&r, 0), vec![kv("service", "web")]);
}

// doc "SortLabelValues Operation"
#[test]
fn doc_sort_label_values() {
    let mut s = MemSource::new();
    for (a, b) in [("a", "2a"), ("a", "2c"), ("b", "2a"), ("b", "2c")] {
        s.set_labeled("metric", &[("label1", a), ("label2", b)], T1, 1.0);
    }
    let r = run(&s, "sort_label_values(metric, des, label1, label2)");
    let got: Vec<_> = (0..4).map(|i| (labels(&r, i)[0].1.clone(), labels(&r, i)[1].1.clone())).collect();
    let want = [("b", "2c"), ("b", "2a"), ("a", "2c"), ("a", "2a")].map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(got, want);
}

// doc "Trend Operation": increase(service_cpm, 2) reads 2 extra points before the window
#[test]
fn doc_trend() {
    let mut s = MemSource::new();
    let step = Step::Minute.millis();
    let vals = [Some(1.0), Some(3.0), Some(6.0), None, Some(15.0)]; // T1-2 .. T3
    for (i, v) in vals.iter().enumerate() {
        if let Some(v) = v {
            s.set("service_cpm", T1 + (i as i64 - 2) * step, *v);
        }
    }
    let w = Duration::new(T1, T1 + 2 * step, Step::Minute);
    let r = exec_expression("increase(service_cpm, 2)", &s, &w);
    assert_eq!(r.result_type, ResultType::TimeSeriesValues);
    // V(T1)-V(T1-2), V(T2)-V(T1-1) with V(T2) empty, V(T3)-V(T1)
    assert_eq!(values(&r, 0), [Some(5.0), None, Some(9.0)]);
    assert_eq!(r.results[0].values[0].id.as_deref(), Some(T1.to_string().as_str()));
    let r = exec_expression("rate(service_cpm, 2)", &s, &w);
    assert_eq!(values(&r, 0), [Some(5.0 / 120.0), None, Some(9.0 / 120.0)]);
    let r = exec_expression("increase(service_cpm, 0)", &s, &w);
    assert_eq!((r.result_type, r.error.as_deref()), (ResultType::Unknown, Some("The trend range must be greater than 0.")));
}

// doc "ViewAsSequence" / "IsPresent"; LogicalFunctionOpTest#viewAsSeqTest
#[test]
fn doc_view_as_seq_and_is_present() {
    let s = doc_source();
    let r = run(&s, "view_as_seq(not_existing, service_cpm)");
    assert_eq!(values(&r, 0), [Some(6000.0), Some(12001.0)]);
    // LogicalFunctionOpTest#viewAsSeqTest: empty first, non-empty second → second; both empty → first
    let r = run(&s, "view_as_seq(existing_without_value, service_resp_time)");
    assert_eq!(values(&r, 0), [Some(2500.0), Some(3500.0)]);
    let r = run(&s, "view_as_seq(existing_without_value, existing_without_value * 2)");
    assert_eq!((r.result_type, values(&r, 0)), (ResultType::TimeSeriesValues, vec![None, None]));
    let r = run(&s, "view_as_seq(not_existing, existing_without_value)");
    assert_eq!(r.error.as_deref(), Some("Metric: [not_existing] does not exist."));
    let r = run(&s, "is_present(not_existing, existing_without_value, service_cpm)");
    assert_eq!((r.result_type, values(&r, 0)), (ResultType::SingleValue, vec![Some(1.0)]));
    let r = run(&s, "is_present(not_existing, existing_without_value)");
    assert_eq!(values(&r, 0), [Some(0.0)]);
}

// doc "TopN Operation" and "Multiple TopNs Merging"
#[test]
fn doc_top_n() {
    let mut s = doc_source();
    let item = |n: &str, v: f64| TopNItem { name: n.to_string(), value: v, trace_id: None, owner: None };
    s.set_top_n("service_cpm_all", vec![item("a", 1.0), item("b", 5.0), item("c", 3.0)]);
    s.set_top_n("k8s_service_cpm", vec![item("k", 4.0)]);
    s.set_records("top_n_database_statement", vec![TopNItem { name: "select 1".into(), value: 9.0, trace_id: Some("t1".into()), owner: None }]);
    let r = run(&s, "top_n(service_cpm_all, 2, des)");
    assert_eq!(r.result_type, ResultType::SortedList);
    let ids: Vec<_> = r.results[0].values.iter().map(|v| (v.id.clone().unwrap_or_default(), v.value)).collect();
    assert_eq!(ids, [("b".to_string(), Some(5.0)), ("c".to_string(), Some(3.0))]);
    let r = run(&s, "top_n_of(top_n(service_cpm_all, 10, des), top_n(k8s_service_cpm, 10, des), 2, des)");
    assert_eq!(values(&r, 0), [Some(5.0), Some(4.0)]);
    let r = run(&s, "top_n(top_n_database_statement, 10, des)");
    assert_eq!((r.result_type, r.results[0].values[0].trace_id.as_deref()), (ResultType::RecordList, Some("t1")));
    let r = run(&s, "top_n_of(top_n(service_cpm_all, 10, des), top_n(top_n_database_statement, 10, des), 2, des)");
    assert_eq!(r.error.as_deref(), Some("TopN type is not consistent, one is SORTED_LIST, another is RECORD_LIST"));
    assert_eq!(run(&s, "top_n(service_cpm_all, 0, des)").error.as_deref(), Some("TopN value must be > 0."));
    assert_eq!(
        run(&s, "top_n(service_percentile, 1, des)").error.as_deref(),
        Some("Metric: [service_percentile] is labeled value, does not support top_n query.")
    );
    assert_eq!(
        run(&s, "top_n_database_statement").error.as_deref(),
        Some("Metric: [top_n_database_statement] is topN record, need top_n function for query.")
    );
}

// doc "Baseline Operation": empty without a baseline service
#[test]
fn doc_baseline() {
    let mut s = doc_source();
    let r = run(&s, "baseline(service_resp_time, upper)");
    assert_eq!((r.result_type, values(&r, 0)), (ResultType::TimeSeriesValues, vec![None, None]));
    // the e2e alarm rule: no baseline → every compare point empty → sum is 0 → no alarm
    let rule = "sum(service_resp_time > baseline(service_resp_time, lower)) >= 1";
    assert_eq!(run(&s, rule).first_value(), Some(0.0));
    s.set_baseline("service_resp_time", BaselineKind::Lower, T2, 3000.0);
    s.set_baseline("service_resp_time", BaselineKind::Lower, T1, 3000.0);
    let r = run(&s, rule);
    assert_eq!((r.first_value(), r.bool_result), (Some(1.0), true));
}

// reference §3 "How empty values behave"
#[test]
fn empty_value_rules() {
    let mut s = MemSource::new();
    s.set("m", T1, 5.0); // T2 missing
    s.declare_common("none");
    for (expr, want) in [
        ("m + 1", vec![Some(6.0), None]),
        ("m > 1", vec![Some(1.0), None]),
        ("m * m", vec![Some(25.0), None]),
        ("sum(m)", vec![Some(5.0)]),
        ("count(m)", vec![Some(1.0)]),
        ("latest(m)", vec![Some(5.0)]),
        ("sum(none)", vec![Some(0.0)]),
        ("count(none)", vec![Some(0.0)]),
        ("avg(none)", vec![None]),
        ("max(none)", vec![None]),
        ("min(none)", vec![None]),
        ("latest(none)", vec![None]),
        ("avg(none) + 1", vec![None]),
        ("avg(none) > 1", vec![None]),
        ("sum(m > 1) >= 1", vec![Some(1.0)]),
        ("abs(none)", vec![None, None]),
        // a SINGLE_VALUE side meeting a series: upstream reads an empty single value as 0
        ("m > avg(none)", vec![Some(1.0), None]),
    ] {
        let r = run(&s, expr);
        assert_eq!(r.error, None, "{expr}");
        assert_eq!(values(&r, 0), want, "{expr}");
    }
    // labeled with labeled: labels must match, otherwise empty
    let mut l = MemSource::new();
    l.set_labeled("a", &[("p", "50")], T1, 10.0);
    l.set_labeled("a", &[("p", "75")], T1, 20.0);
    l.set_labeled("b", &[("p", "50")], T1, 1.0);
    let r = run(&l, "a - b");
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(9.0), None], vec![None, None]));
    // labeled with unlabeled: per label group
    l.set("c", T1, 2.0);
    l.set("c", T2, 2.0);
    let r = run(&l, "a * c");
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(20.0), None], vec![Some(40.0), None]));
    let r = run(&l, "c * a");
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(20.0), None], vec![Some(40.0), None]));
}

// reference §3.3: the shipped and documented alarm expressions
#[test]
fn alarm_expressions() {
    let mut s = MemSource::new();
    let step = Step::Minute.millis();
    let w = Duration::new(T1, T1 + 4 * step, Step::Minute);
    for (i, (rt, sla)) in [(50.0, 10000.0), (150.0, 9000.0), (200.0, 10000.0), (300.0, 100.0), (120.0, 9900.0)].iter().enumerate() {
        s.set("service_resp_time", T1 + i as i64 * step, *rt);
        s.set("service_sla", T1 + i as i64 * step, *sla);
    }
    for p in ["50", "99"] {
        for i in 0..5 {
            s.set_labeled("service_percentile", &[("p", p)], T1 + i * step, if p == "99" { 1500.0 } else { 10.0 });
        }
    }
    let cases = [
        ("sum(service_resp_time > 100) >= 3", vec![Some(1.0)]),
        ("sum(service_resp_time > 100) >= 5", vec![Some(0.0)]),
        ("sum(service_sla / 100 < 95) >= 1", vec![Some(1.0)]),
        ("sum((service_resp_time > 100) && (service_sla > 9500)) >= 2", vec![Some(1.0)]),
        ("sum(service_resp_time > 100 || service_sla < 9500) >= 5", vec![Some(0.0)]),
        ("avg(service_resp_time) > 100", vec![Some(1.0)]),
        ("sum(abs(increase(service_resp_time,1)) > 0) >= 1", vec![Some(1.0)]),
        ("sum((service_resp_time > 100) * (service_resp_time < 250)) >= 3", vec![Some(1.0)]),
    ];
    for (expr, want) in cases {
        let r = exec_expression(expr, &s, &w);
        assert_eq!(r.error, None, "{expr}");
        assert_eq!((r.result_type, values(&r, 0)), (ResultType::SingleValue, want), "{expr}");
        assert_eq!(parse(expr).map(|e| e.is_bool_result()), Ok(true), "{expr}");
    }
    // labeled: one value per label group
    let r = exec_expression("sum(service_percentile{p='50,99'} > 1000) >= 3", &s, &w);
    assert_eq!((values(&r, 0), values(&r, 1)), (vec![Some(0.0)], vec![Some(1.0)]));
    let r = exec_expression("sum(aggregate_labels(service_percentile, sum) > 1000) >= 1", &s, &w);
    assert_eq!((r.labeled_result, values(&r, 0)), (false, vec![Some(1.0)]));
    // bool operands must be compare results
    let r = exec_expression("sum(service_resp_time && service_sla > 1) >= 1", &s, &w);
    assert_eq!(r.error.as_deref(), Some("Bool Operation: The result of the left expression is not a compare result."));
}

#[test]
fn errors_are_results() {
    let s = doc_source();
    let r = run(&s, "nope + 1");
    assert_eq!((r.result_type, r.error.as_deref()), (ResultType::Unknown, Some("Metric: [nope] does not exist.")));
    let r = run(&s, "latest(avg(service_cpm))");
    assert_eq!(r.error.as_deref(), Some("LATEST can only be used in time series result."));
    let r = run(&s, "top_n(service_cpm, 1, des) + service_cpm");
    assert_eq!(r.error.as_deref(), Some("Unsupported binary operation: Unsupported operation."));
    let r = run(&s, "avg(service_cpm");
    assert_eq!(r.result_type, ResultType::Unknown);
    assert!(r.error.as_deref().is_some_and(|e| e.starts_with("line 1:15 ")), "{:?}", r.error);
    let r = exec_expression("service_cpm", &s, &Duration::new(0, i64::MAX, Step::Second));
    assert_eq!(r.error.as_deref(), Some("The query duration has too many points."));
    // a source returning the wrong number of points: the series is dropped, type stays UNKNOWN
    struct Short;
    impl MetricSource for Short {
        fn metric_kind(&self, _: &str) -> Option<MetricKind> {
            Some(MetricKind::Common)
        }
        fn read_values(&self, _: &str, _: &Duration) -> Result<Vec<Option<f64>>, SourceError> {
            Ok(vec![Some(1.0)])
        }
        fn read_labeled_values(&self, _: &str, _: &[KeyValue], _: &Duration) -> Result<Vec<LabeledSeries>, SourceError> {
            Err(SourceError::Io("disk".into()))
        }
        fn sort_metrics(&self, _: &TopNRequest<'_>, _: &Duration) -> Result<Vec<TopNItem>, SourceError> {
            Ok(vec![])
        }
        fn read_records(&self, _: &TopNRequest<'_>, _: &Duration) -> Result<Vec<TopNItem>, SourceError> {
            Ok(vec![])
        }
    }
    let r = exec_expression("m", &Short, &hour_window());
    assert_eq!((r.result_type, r.results.len(), r.error), (ResultType::Unknown, 0, None));
}

#[test]
fn value_strings_follow_decimal_format() {
    for (v, s) in [
        (1.0, "1"),
        (2500.0, "2500"),
        (1234567.0, "1234567"),
        (0.1 + 0.2, "0.3"),
        (1.23456, "1.235"),
        (0.0625, "0.062"),
        (0.0005, "0.001"),
        (-0.0001, "-0"),
        (-2.5, "-2.5"),
        (1e20, "100000000000000000000"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "\u{221e}"),
    ] {
        assert_eq!(format_value(v), s, "{v}");
    }
    // Whole numbers take a shortcut: the same text as fixed-point formatting with the zeros cut.
    let general = |v: f64| {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    for v in [0.0, -0.0, 7.0, -7.0, 1e15, -1e15, 8.9e15, 9.1e15, 2f64.powi(53), -(2f64.powi(60))] {
        assert_eq!(format_value(v), general(v), "{v}");
    }
}

// MathematicalFunctionOp's round: BigDecimal.valueOf(x).setScale(n, HALF_UP) — the shortest
// decimal form of x is rounded, half away from zero (so 2.675 → 2.68, where f64 arithmetic gives 2.67)
#[test]
fn round_is_half_up_on_the_shortest_decimal_form() {
    use hotrule_mqe_engine::ops::round_half_up;
    for (x, n, want) in [
        (2.675, 2, 2.68),
        (1.005, 2, 1.01),
        (-2.5, 0, -3.0),
        (0.5, 0, 1.0),
        (0.4999, 0, 0.0),
        (99.995, 2, 100.0),
        (0.005, 2, 0.01),
        (0.0005, 2, 0.0),
        (123.0, 5, 123.0),
        (1e300, 2, 1e300),
        (1.23e-7, 8, 1.2e-7),
    ] {
        assert_eq!(round_half_up(x, n), want, "round({x}, {n})");
    }
    assert!(round_half_up(f64::NAN, 2).is_nan());
}
