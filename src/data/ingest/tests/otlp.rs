//! OTLP mapping: labels, each metric type, drops and refusals (protobuf messages in, samples out).

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint, exponential_histogram_data_point, metric,
    number_data_point, summary_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::{by_label, find};
use crate::data::seam::{Catalog, Protocol};
use crate::data::ingest::otlp::{PointError, map_request};

pub(super) const T_NANOS: u64 = 1_700_000_000_123_456_789;
pub(super) const T_MS: i64 = 1_700_000_000_123;

pub(super) fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}
pub(super) fn s(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

pub(super) fn resource(attributes: Vec<KeyValue>, metrics: Vec<Metric>) -> ResourceMetrics {
    ResourceMetrics {
        resource: Some(Resource { attributes, ..Default::default() }),
        scope_metrics: vec![ScopeMetrics { metrics, ..Default::default() }],
        ..Default::default()
    }
}

pub(super) fn request(resources: Vec<ResourceMetrics>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest { resource_metrics: resources }
}

pub(super) fn number(value: number_data_point::Value, attributes: Vec<KeyValue>) -> NumberDataPoint {
    NumberDataPoint { attributes, time_unix_nano: T_NANOS, value: Some(value), ..Default::default() }
}

pub(super) fn gauge(name: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric { name: name.into(), data: Some(metric::Data::Gauge(Gauge { data_points: points })), ..Default::default() }
}

pub(super) fn sum(name: &str, temporality: i32, monotonic: bool, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        data: Some(metric::Data::Sum(Sum { data_points: points, aggregation_temporality: temporality, is_monotonic: monotonic })),
        ..Default::default()
    }
}

pub(super) fn histogram(name: &str, bounds: Vec<f64>, counts: Vec<u64>) -> Metric {
    let point = HistogramDataPoint {
        time_unix_nano: T_NANOS,
        count: counts.iter().sum(),
        sum: Some(12.5),
        bucket_counts: counts,
        explicit_bounds: bounds,
        ..Default::default()
    };
    Metric {
        name: name.into(),
        data: Some(metric::Data::Histogram(Histogram { data_points: vec![point], aggregation_temporality: 2 })),
        ..Default::default()
    }
}

fn d(v: f64) -> number_data_point::Value {
    number_data_point::Value::AsDouble(v)
}

#[test]
fn resource_attributes_become_labels_as_skywalking_maps_them() {
    let attributes = vec![
        s("service.name", "checkout"),
        s("host.name", "h1"),
        s("k8s.pod.name", "pod-1"),
        kv("ratio", any_value::Value::DoubleValue(1.0)),
        kv("big", any_value::Value::DoubleValue(1e10)),
        kv("port", any_value::Value::IntValue(8080)),
        kv("ready", any_value::Value::BoolValue(true)),
        kv("list", any_value::Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(any_value::Value::IntValue(1)) }] })),
        // First wins when two keys meet after the dot rewrite.
        s("a.b", "dotted"),
        s("a_b", "underscored"),
    ];
    let mapped = map_request(&request(vec![resource(attributes, vec![gauge("g", vec![number(d(1.5), vec![])])])]), 42);
    assert_eq!(mapped.batches.len(), 1);
    let batch = &mapped.batches[0];
    assert_eq!((batch.protocol, batch.catalog, batch.received_ms), (Protocol::Otlp, Catalog::Otel, 42));
    let sample = find(&batch.samples, "g", &[]);
    let expected: Vec<(&str, &str)> = vec![
        ("a_b", "dotted"),
        ("big", "1.0E10"),
        ("host_name", "h1"),
        ("job_name", "checkout"),
        ("k8s_pod_name", "pod-1"),
        ("list", ""),
        ("node_identifier_host_name", "h1"),
        ("port", "8080"),
        ("ratio", "1.0"),
        ("ready", "true"),
        ("service_name", "checkout"),
    ];
    let got: Vec<(&str, &str)> = sample.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, expected);
    assert_eq!((sample.value, sample.timestamp_ms), (1.5, T_MS));
}

#[test]
fn fallbacks_apply_only_when_the_target_is_absent_and_point_attributes_win() {
    let attributes = vec![
        s("job_name", "explicit"),
        s("service.name", "svc"),
        s("net.host.name", "first-host"),
        s("host.name", "second-host"),
        s("zone", "resource-zone"),
    ];
    let point = number(d(2.0), vec![s("zone", "point-zone"), s("http.method", "GET"), s("http.method", "POST")]);
    let mapped = map_request(&request(vec![resource(attributes, vec![gauge("g", vec![point])])]), 0);
    let sample = find(&mapped.batches[0].samples, "g", &[]);
    assert_eq!(sample.label("job_name"), "explicit");
    assert_eq!(sample.label("node_identifier_host_name"), "first-host");
    assert_eq!(sample.label("zone"), "point-zone");
    assert_eq!(sample.label("http_method"), "GET", "first point attribute wins");
}

#[test]
fn names_lose_dots_and_slashes_and_each_resource_is_one_batch() {
    let first = resource(vec![s("service.name", "a")], vec![gauge("http.server/active", vec![number(d(1.0), vec![])])]);
    let empty = resource(vec![s("service.name", "b")], vec![]);
    let third = resource(vec![s("service.name", "c")], vec![gauge("x", vec![number(number_data_point::Value::AsInt(7), vec![])])]);
    let mapped = map_request(&request(vec![first, empty, third]), 0);
    assert_eq!(mapped.batches.len(), 2, "a resource without samples yields no batch");
    assert_eq!(mapped.batches[0].samples[0].name, "http_server_active");
    assert_eq!(find(&mapped.batches[1].samples, "x", &[("job_name", "c")]).value, 7.0);
}

#[test]
fn sums_pass_as_is_except_unspecified_temporality() {
    let metrics = vec![
        sum("unspecified", 0, true, vec![number(d(1.0), vec![])]),
        sum("delta", 1, true, vec![number(d(2.0), vec![])]),
        sum("cumulative", 2, true, vec![number(number_data_point::Value::AsInt(3), vec![])]),
        sum("updown", 2, false, vec![number(d(-4.0), vec![])]),
    ];
    let mapped = map_request(&request(vec![resource(vec![], metrics)]), 0);
    let samples = &mapped.batches[0].samples;
    assert!(samples.iter().all(|s| s.name != "unspecified"));
    assert_eq!(mapped.unspecified_temporality, 1);
    assert_eq!(find(samples, "delta", &[]).value, 2.0);
    assert_eq!(find(samples, "cumulative", &[]).value, 3.0);
    assert_eq!(find(samples, "updown", &[]).value, -4.0);
}

#[test]
fn a_histogram_gives_count_sum_and_per_bucket_counts_with_java_le() {
    let mapped = map_request(&request(vec![resource(vec![], vec![histogram("latency", vec![0.005, 1.0, 10.0], vec![1, 2, 3, 4])])]), 0);
    let samples = &mapped.batches[0].samples;
    assert_eq!(find(samples, "latency_count", &[]).value, 10.0);
    assert_eq!(find(samples, "latency_sum", &[]).value, 12.5);
    assert_eq!(
        by_label(samples, "latency", "le"),
        vec![("0.005".into(), 1.0), ("1.0".into(), 2.0), ("10.0".into(), 3.0), ("Infinity".into(), 4.0)]
    );
    assert!(samples.iter().all(|s| s.name != "latency_bucket"));
    assert!(samples.iter().all(|s| s.timestamp_ms == T_MS));
}

#[test]
fn a_histogram_without_buckets_gives_count_and_sum_and_a_mismatched_one_is_refused() {
    let no_buckets = histogram("empty", vec![], vec![]);
    let mismatched = histogram("bad", vec![1.0, 2.0], vec![1, 2]);
    let mapped = map_request(&request(vec![resource(vec![], vec![no_buckets, mismatched])]), 0);
    let samples = &mapped.batches[0].samples;
    let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["empty_count", "empty_sum"]);
    assert_eq!(mapped.refused.len(), 1);
    assert_eq!(mapped.refused[0].reason, PointError::BucketCountMismatch { buckets: 2, bounds: 2 });
    assert_eq!(
        mapped.refused[0].to_string(),
        "resourceMetrics[0] metric \"bad\" data point 0: 2 bucket counts for 2 explicit bounds (expected 3)"
    );
}

#[test]
fn an_exponential_histogram_maps_its_buckets_to_bounds() {
    let point = ExponentialHistogramDataPoint {
        time_unix_nano: T_NANOS,
        count: 11,
        sum: Some(20.0),
        scale: 0,
        zero_count: 100,
        positive: Some(exponential_histogram_data_point::Buckets { offset: 0, bucket_counts: vec![1, 2, 3] }),
        negative: Some(exponential_histogram_data_point::Buckets { offset: 1, bucket_counts: vec![5] }),
        ..Default::default()
    };
    let metric = Metric {
        name: "exp".into(),
        data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram { data_points: vec![point], aggregation_temporality: 1 })),
        ..Default::default()
    };
    let mapped = map_request(&request(vec![resource(vec![], vec![metric])]), 0);
    let samples = &mapped.batches[0].samples;
    assert_eq!(find(samples, "exp_count", &[]).value, 11.0);
    assert_eq!(find(samples, "exp_sum", &[]).value, 20.0);
    // base 2: positive i → 2^(i+1), the last → Infinity; negative i → -(2^(offset+i)); zero_count ignored.
    assert_eq!(
        by_label(samples, "exp", "le"),
        vec![("-2.0".into(), 5.0), ("2.0".into(), 1.0), ("4.0".into(), 2.0), ("Infinity".into(), 3.0)]
    );
}

#[test]
fn a_summary_gives_count_sum_and_java_quantiles() {
    let point = SummaryDataPoint {
        time_unix_nano: T_NANOS,
        count: 4,
        sum: 9.0,
        quantile_values: vec![
            summary_data_point::ValueAtQuantile { quantile: 0.5, value: 2.0 },
            summary_data_point::ValueAtQuantile { quantile: 1.0, value: 5.0 },
        ],
        ..Default::default()
    };
    let metric = Metric { name: "rpc".into(), data: Some(metric::Data::Summary(Summary { data_points: vec![point] })), ..Default::default() };
    let mapped = map_request(&request(vec![resource(vec![], vec![metric])]), 0);
    let samples = &mapped.batches[0].samples;
    assert_eq!(find(samples, "rpc_count", &[]).value, 4.0);
    assert_eq!(find(samples, "rpc_sum", &[]).value, 9.0);
    assert_eq!(by_label(samples, "rpc", "quantile"), vec![("0.5".into(), 2.0), ("1.0".into(), 5.0)]);
}

#[test]
fn no_recorded_value_points_are_dropped_and_valueless_points_refused() {
    let mut flagged = number(d(1.0), vec![s("which", "flagged")]);
    flagged.flags = 1;
    let kept = number(d(2.0), vec![s("which", "kept")]);
    let mut valueless = number(d(0.0), vec![]);
    valueless.value = None;
    let no_data = Metric { name: "nodata".into(), ..Default::default() };
    let mapped = map_request(&request(vec![resource(vec![], vec![gauge("g", vec![flagged, kept, valueless]), no_data])]), 0);
    let samples = &mapped.batches[0].samples;
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].label("which"), "kept");
    assert_eq!(mapped.no_recorded_value, 1);
    let reasons: Vec<(&str, usize, &PointError)> = mapped.refused.iter().map(|r| (r.metric.as_str(), r.point, &r.reason)).collect();
    assert_eq!(reasons, vec![("g", 2, &PointError::MissingValue), ("nodata", 0, &PointError::NoData)]);
}
