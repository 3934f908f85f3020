//! OTLP/JSON: the same request in JSON and protobuf gives the same samples; 64-bit integers as
//! strings; special doubles; errors name the field.

use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use prost::Message;

use super::otlp::{T_NANOS, gauge, histogram, kv, number, request, resource, s, sum};
use crate::data::ingest::otlp::{decode_protobuf, map_request};
use crate::data::ingest::otlp_metrics_json::decode;

/// The JSON twin of [`protobuf_twin`], written as an OTLP exporter writes it.
pub(in crate::data::ingest) const JSON_REQUEST: &str = r#"{
  "resourceMetrics": [{
    "resource": {"attributes": [
      {"key": "service.name", "value": {"stringValue": "checkout"}},
      {"key": "host.name", "value": {"stringValue": "h1"}},
      {"key": "pid", "value": {"intValue": "4242"}},
      {"key": "ratio", "value": {"doubleValue": 0.25}}
    ]},
    "scopeMetrics": [{
      "scope": {"name": "my.library", "version": "1.0.0"},
      "metrics": [
        {"name": "queue.depth", "unit": "1", "gauge": {"dataPoints": [
          {"asInt": "17", "timeUnixNano": "1700000000123456789", "attributes": [{"key": "queue", "value": {"stringValue": "a"}}]}
        ]}},
        {"name": "requests", "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": [
          {"asDouble": 3.5, "timeUnixNano": "1700000000123456789", "startTimeUnixNano": "1699999999000000000"}
        ]}},
        {"name": "latency", "histogram": {"aggregationTemporality": 2, "dataPoints": [
          {"timeUnixNano": "1700000000123456789", "count": "10", "sum": 12.5,
           "bucketCounts": ["1", "2", "3", "4"], "explicitBounds": [0.005, 1, 10]}
        ]}}
      ]
    }]
  }]
}"#;

fn protobuf_twin() -> Vec<u8> {
    let attributes = vec![
        s("service.name", "checkout"),
        s("host.name", "h1"),
        kv("pid", any_value::Value::IntValue(4242)),
        kv("ratio", any_value::Value::DoubleValue(0.25)),
    ];
    let mut requests_sum = sum("requests", 2, true, vec![number(number_data_point::Value::AsDouble(3.5), vec![])]);
    if let Some(opentelemetry_proto::tonic::metrics::v1::metric::Data::Sum(sum)) = &mut requests_sum.data {
        sum.data_points[0].start_time_unix_nano = 1_699_999_999_000_000_000;
    }
    let metrics = vec![
        gauge("queue.depth", vec![number(number_data_point::Value::AsInt(17), vec![s("queue", "a")])]),
        requests_sum,
        histogram("latency", vec![0.005, 1.0, 10.0], vec![1, 2, 3, 4]),
    ];
    request(vec![resource(attributes, metrics)]).encode_to_vec()
}

#[test]
fn json_and_protobuf_of_the_same_request_give_the_same_samples() {
    let from_json = map_request(&decode(JSON_REQUEST.as_bytes()).expect("valid JSON"), 7);
    let from_protobuf = map_request(&decode_protobuf(&protobuf_twin()).expect("valid protobuf"), 7);
    assert_eq!(from_json, from_protobuf);
    let samples = &from_json.batches[0].samples;
    assert_eq!(samples.len(), 1 + 1 + 2 + 4);
    let depth = super::find(samples, "queue_depth", &[("queue", "a")]);
    assert_eq!((depth.value, depth.timestamp_ms, depth.label("pid"), depth.label("ratio")), (17.0, 1_700_000_000_123, "4242", "0.25"));
}

#[test]
fn int64_fields_take_strings_or_numbers_and_doubles_take_special_strings() {
    let text = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[
        {"asInt": 5, "timeUnixNano": 1700000000123456789},
        {"asDouble": "NaN", "timeUnixNano": "1700000000123456789"},
        {"asDouble": "-Infinity", "timeUnixNano": "1700000000123456789"},
        {"asInt": "-9223372036854775808", "timeUnixNano": "1700000000123456789"}
    ]}}]}]}]}"#;
    let request = decode(text.as_bytes()).expect("valid");
    let mapped = map_request(&request, 0);
    let values: Vec<f64> = mapped.batches[0].samples.iter().map(|s| s.value).collect();
    assert_eq!(values[0], 5.0);
    assert!(values[1].is_nan());
    assert_eq!(values[2], f64::NEG_INFINITY);
    assert_eq!(values[3], i64::MIN as f64);
    assert!(mapped.batches[0].samples.iter().all(|s| s.timestamp_ms == (T_NANOS / 1_000_000) as i64));
}

#[test]
fn enum_names_are_accepted_and_snake_case_keys_are_unknown_fields() {
    let text = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
        {"name":"named","sum":{"aggregationTemporality":"AGGREGATION_TEMPORALITY_DELTA","dataPoints":[{"asInt":"1"}]}},
        {"name":"snake","sum":{"aggregation_temporality":2,"data_points":[{"as_int":"1"}]}}
    ]}]}], "unknownTopLevel": {"x": 1}}"#;
    let mapped = map_request(&decode(text.as_bytes()).expect("valid"), 0);
    let names: Vec<&str> = mapped.batches[0].samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["named"], "snake_case keys are not read (OTLP/JSON is lowerCamelCase only)");
}

#[test]
fn errors_name_the_field_by_its_path() {
    let cases: &[(&str, &str)] = &[
        ("[1,2]", "$: expected an object, found an array"),
        ("{not json", "$: not JSON"),
        (r#"{"resourceMetrics": {}}"#, "resourceMetrics: expected an array, found an object"),
        (
            r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x"},{"name":"y","gauge":{"dataPoints":[{},{"asInt":"12x"}]}}]}]}]}"#,
            "resourceMetrics[0].scopeMetrics[0].metrics[1].gauge.dataPoints[1].asInt: expected a 64-bit integer (a decimal string or an integer), found \"12x\"",
        ),
        (
            r#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"k","value":{"intValue":1.5}}]}}]}"#,
            "resourceMetrics[0].resource.attributes[0].value.intValue: expected a 64-bit integer",
        ),
        (
            r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"dataPoints":[{"bucketCounts":["-1"]}]}}]}]}]}"#,
            "resourceMetrics[0].scopeMetrics[0].metrics[0].histogram.dataPoints[0].bucketCounts[0]: -1 is out of the range of a uint64",
        ),
        (
            r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"s","sum":{"aggregationTemporality":"SOMETIMES"}}]}]}]}"#,
            "resourceMetrics[0].scopeMetrics[0].metrics[0].sum.aggregationTemporality: expected an integer enum value",
        ),
        (
            r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asDouble":"lots"}]}}]}]}]}"#,
            "resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0].asDouble: expected a number",
        ),
        (r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":7}]}]}]}"#, "resourceMetrics[0].scopeMetrics[0].metrics[0].name: expected a string, found 7"),
    ];
    for (text, expected) in cases {
        let error = decode(text.as_bytes()).expect_err(text).to_string();
        assert!(error.starts_with(expected), "{text}\n  gave {error}\n  expected {expected}");
    }
}

#[test]
fn an_empty_object_is_an_empty_request() {
    let request = decode(b"{}").expect("valid");
    assert!(request.resource_metrics.is_empty());
    assert!(map_request(&request, 0).batches.is_empty());
}

#[test]
fn what_the_opentelemetry_proto_serializer_writes_reads_back_the_same() {
    let request = decode_protobuf(&protobuf_twin()).expect("valid protobuf");
    let written = serde_json::to_vec(&request).expect("the crate serializes");
    let read = decode(&written).expect("our decoder reads it");
    assert_eq!(map_request(&read, 0), map_request(&request, 0));
}

/// Why OTLP/JSON has its own mapping: the `opentelemetry-proto` serde derive silently loses what
/// it cannot read (no error, nothing named), where ours reads it or names the field.
#[test]
fn the_crates_serde_drops_what_it_cannot_read_and_ours_does_not() {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let data = |text: &str| -> Option<Data> {
        let request: ExportMetricsServiceRequest = serde_json::from_str(text).expect("the crate accepts it");
        request.resource_metrics[0].scope_metrics[0].metrics[0].data.clone()
    };
    let nan = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asDouble":"NaN"}]}}]}]}]}"#;
    let Some(Data::Gauge(gauge)) = data(nan) else { panic!("a gauge") };
    assert_eq!(gauge.data_points[0].value, None, "the crate loses the value");
    assert!(decode(nan.as_bytes()).is_ok_and(|r| map_request(&r, 0).sample_count() == 1));

    let infinite_sum = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"dataPoints":[{"sum":"Infinity","bucketCounts":["1"]}]}}]}]}]}"#;
    assert_eq!(data(infinite_sum), None, "the crate loses the whole histogram");
    assert!(decode(infinite_sum.as_bytes()).is_ok_and(|r| map_request(&r, 0).sample_count() == 3));

    let bad_int = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asInt":"x"}]}}]}]}]}"#;
    let Some(Data::Gauge(gauge)) = data(bad_int) else { panic!("a gauge") };
    assert_eq!(gauge.data_points[0].value, None, "the crate loses the value without an error");
    assert!(decode(bad_int.as_bytes()).is_err());
}
