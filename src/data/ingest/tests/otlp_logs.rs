//! The OTLP log mapping (SkyWalking's `OpenTelemetryLogHandler`) and the OTLP/JSON log decoder.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::data::seam::LogProtocol;
use crate::data::ingest::otlp_logs::{self, OtlpLogsError, RecordError, tag_value};
use crate::data::ingest::{otlp_json, otlp_logs_json};
use hotrule_lal_engine::Body;

/// One request with every mapping case; `SERVICE_LESS` resource 1 has no service.name.
pub(in crate::data::ingest) const LOGS_JSON_REQUEST: &str = r#"{"resourceLogs": [
  {"resource": {"attributes": [
      {"key": "service.name", "value": {"stringValue": "checkout"}},
      {"key": "service.instance.id", "value": {"stringValue": "pod-1"}},
      {"key": "service.instance", "value": {"stringValue": "ignored-when-id-is-set"}},
      {"key": "service.layer", "value": {"stringValue": "GENERAL"}},
      {"key": "host.name", "value": {"stringValue": "node-a"}},
      {"key": "k8s.pod.uid", "value": {"intValue": "77"}}]},
   "scopeLogs": [{"scope": {"name": "app", "attributes": [{"key": "scope.only", "value": {"stringValue": "x"}}]},
     "logRecords": [
       {"timeUnixNano": "1700000000123456789", "observedTimeUnixNano": "1700000009000000000",
        "severityNumber": 9, "severityText": "INFO",
        "body": {"stringValue": "GET /pay 200"},
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
        "attributes": [
          {"key": "http.status_code", "value": {"intValue": 200}},
          {"key": "level", "value": {"stringValue": "INFO"}},
          {"key": "ratio", "value": {"doubleValue": 0.5}},
          {"key": "big", "value": {"doubleValue": 1e21}},
          {"key": "ok", "value": {"boolValue": true}},
          {"key": "list", "value": {"arrayValue": {"values": [{"stringValue": "a\"b"}, {"intValue": "1"}]}}},
          {"key": "map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}}},
          {"key": "raw", "value": {"bytesValue": "aGk="}},
          {"key": "empty"}]},
       {"observedTimeUnixNano": "1700000009000000000",
        "body": {"kvlistValue": {"values": [{"key": "msg", "value": {"stringValue": "structured"}}]}}}]}]},
  {"resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "orphan"}}]},
   "scopeLogs": [{"logRecords": [{"body": {"stringValue": "a"}}, {"body": {"stringValue": "b"}}]}]}
]}"#;

fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn string_value(s: &str) -> Option<AnyValue> {
    Some(AnyValue { value: Some(any_value::Value::StringValue(s.into())) })
}

fn kv(key: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue { key: key.into(), value, ..Default::default() }
}

fn request(resources: Vec<(Vec<KeyValue>, Vec<LogRecord>)>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: resources
            .into_iter()
            .map(|(attributes, records)| ResourceLogs {
                resource: Some(Resource { attributes, ..Default::default() }),
                scope_logs: vec![ScopeLogs { log_records: records, ..Default::default() }],
                ..Default::default()
            })
            .collect(),
    }
}

#[test]
fn every_mapping_case_of_the_skywalking_receiver() {
    let decoded = otlp_logs_json::decode(LOGS_JSON_REQUEST.as_bytes()).expect("valid");
    let mapped = otlp_logs::map_request(&decoded, 42).expect("maps");
    // One batch per ResourceLogs that has a service; the service-less one is refused whole.
    assert_eq!(mapped.batches.len(), 1);
    assert_eq!(mapped.refused.len(), 1);
    assert_eq!(mapped.refused[0].reason, RecordError::MissingService);
    assert_eq!(mapped.refused[0].count, 2);
    assert_eq!(mapped.refused[0].to_string(), "resourceLogs[1]: 2 log records refused: the resource has no service.name attribute (SkyWalking discards such logs)");
    assert_eq!(mapped.refused_counts(), (2, 0));
    let batch = &mapped.batches[0];
    assert_eq!((batch.protocol, batch.received_ms, batch.logs.len()), (LogProtocol::Otlp, 42, 2));
    let first = &batch.logs[0];
    assert_eq!(first.service, "checkout");
    assert_eq!(first.service_instance, "pod-1", "service.instance.id wins over service.instance");
    assert_eq!(first.layer, "GENERAL");
    assert_eq!(first.endpoint, "", "SkyWalking sets no endpoint");
    assert_eq!(first.timestamp_ms, 1_700_000_000_123, "time_unix_nano / 1e6");
    assert_eq!(first.body, Body::Text("GET /pay 200".into()));
    assert_eq!(first.trace_context, Default::default(), "trace and span ids are dropped");
    assert_eq!(
        first.tags,
        tags(&[
            ("http.status_code", "200"),
            ("level", "INFO"),
            ("ratio", "0.5"),
            ("big", "1.0E21"),
            ("ok", "true"),
            ("list", "values {\n  string_value: \"a\\\"b\"\n}\nvalues {\n  int_value: 1\n}\n"),
            ("map", ""),
            ("raw", ""),
            ("empty", ""),
        ])
    );
    // Every resource attribute, stringified the same way, for sourceAttribute().
    let source: Vec<(&str, &str)> = first.source_attributes.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        source,
        [
            ("host.name", "node-a"),
            ("k8s.pod.uid", "77"),
            ("service.instance", "ignored-when-id-is-set"),
            ("service.instance.id", "pod-1"),
            ("service.layer", "GENERAL"),
            ("service.name", "checkout"),
        ]
    );
    let second = &batch.logs[1];
    assert_eq!(second.timestamp_ms, 0, "observed time is ignored: 0 stays 0 (now at intake)");
    assert_eq!(second.body, Body::Text(String::new()), "a non-string body is empty text");
    assert!(second.tags.is_empty());
}

#[test]
fn instance_falls_back_to_service_instance_and_layer_to_empty() {
    let attributes = vec![kv("service.name", string_value("s")), kv("service.instance", string_value("i-1"))];
    let mapped = otlp_logs::map_request(&request(vec![(attributes, vec![LogRecord::default()])]), 0).expect("maps");
    let log = &mapped.batches[0].logs[0];
    assert_eq!((log.service_instance.as_str(), log.layer.as_str()), ("i-1", ""));
    assert_eq!(log.body, Body::Text(String::new()), "no body is empty text");
}

#[test]
fn a_non_string_service_name_is_stringified_and_an_empty_one_refuses_the_resource() {
    let int_service = vec![kv("service.name", Some(AnyValue { value: Some(any_value::Value::IntValue(7)) }))];
    let empty_service = vec![kv("service.name", string_value(""))];
    let no_records = vec![kv("host.name", string_value("h"))];
    let mapped = otlp_logs::map_request(
        &request(vec![(int_service, vec![LogRecord::default()]), (empty_service, vec![LogRecord::default()]), (no_records, vec![])]),
        0,
    )
    .expect("maps");
    assert_eq!(mapped.batches.len(), 1);
    assert_eq!(mapped.batches[0].logs[0].service, "7");
    // A service-less resource without records refuses nothing.
    assert_eq!(mapped.refused.len(), 1);
    assert_eq!(mapped.refused[0].resource, 1);
}

#[test]
fn a_repeated_record_attribute_refuses_that_record_only() {
    let attributes = vec![kv("service.name", string_value("s"))];
    let good = LogRecord { attributes: vec![kv("a", string_value("1"))], ..Default::default() };
    let bad = LogRecord { attributes: vec![kv("a", string_value("1")), kv("a", string_value("2"))], ..Default::default() };
    let mapped = otlp_logs::map_request(&request(vec![(attributes, vec![good, bad])]), 0).expect("maps");
    assert_eq!(mapped.log_count(), 1);
    assert_eq!(mapped.refused_counts(), (0, 1));
    assert_eq!(mapped.refused[0].reason, RecordError::DuplicateAttribute("a".into()));
    assert_eq!(mapped.refused[0].to_string(), "resourceLogs[0].scopeLogs[0].logRecords[1]: the attribute key \"a\" appears more than once");
}

#[test]
fn a_repeated_resource_attribute_fails_the_request() {
    let ok = vec![kv("service.name", string_value("s"))];
    let twice = vec![kv("service.name", string_value("s")), kv("service.name", string_value("t"))];
    let error = otlp_logs::map_request(&request(vec![(ok, vec![LogRecord::default()]), (twice, vec![LogRecord::default()])]), 0)
        .expect_err("refused");
    assert_eq!(error, OtlpLogsError::DuplicateResourceAttribute { resource: 1, key: "service.name".into() });
    assert_eq!(error.to_string(), "resourceLogs[1].resource.attributes: the key \"service.name\" appears more than once");
}

#[test]
fn tag_values_print_as_java_and_protobuf_java_print_them() {
    let value = |v: any_value::Value| tag_value(Some(&AnyValue { value: Some(v) }));
    assert_eq!(value(any_value::Value::IntValue(-3)), "-3");
    assert_eq!(value(any_value::Value::DoubleValue(3.0)), "3.0");
    assert_eq!(value(any_value::Value::DoubleValue(f64::NAN)), "NaN");
    assert_eq!(value(any_value::Value::DoubleValue(1e-5)), "1.0E-5");
    assert_eq!(value(any_value::Value::BoolValue(false)), "false");
    assert_eq!(value(any_value::Value::BytesValue(b"x".to_vec())), "");
    assert_eq!(value(any_value::Value::KvlistValue(KeyValueList::default())), "");
    assert_eq!(value(any_value::Value::StringValueStrindex(3)), "");
    assert_eq!(tag_value(None), "");
    assert_eq!(tag_value(Some(&AnyValue { value: None })), "");
    assert_eq!(value(any_value::Value::ArrayValue(ArrayValue::default())), "", "an empty message prints nothing");
    // Nested values, escapes (C escapes, octal for non-ASCII UTF-8 bytes), an empty element,
    // a kvlist with an empty key, bytes, double and bool.
    let nested = ArrayValue {
        values: vec![
            AnyValue { value: Some(any_value::Value::StringValue("é\n\t'\\".into())) },
            AnyValue { value: None },
            AnyValue {
                value: Some(any_value::Value::KvlistValue(KeyValueList {
                    values: vec![kv("", Some(AnyValue { value: Some(any_value::Value::BoolValue(true)) })), kv("k", None)],
                })),
            },
            AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(any_value::Value::DoubleValue(2.5)) }] })) },
            AnyValue { value: Some(any_value::Value::BytesValue(vec![0, 0x7f, b'a'])) },
        ],
    };
    let expected = "values {\n  string_value: \"\\303\\251\\n\\t\\'\\\\\"\n}\nvalues {\n}\nvalues {\n  kvlist_value {\n    values {\n      value {\n        bool_value: true\n      }\n    }\n    values {\n      key: \"k\"\n    }\n  }\n}\nvalues {\n  array_value {\n    values {\n      double_value: 2.5\n    }\n  }\n}\nvalues {\n  bytes_value: \"\\000\\177a\"\n}\n";
    assert_eq!(value(any_value::Value::ArrayValue(nested)), expected);
}

#[test]
fn json_errors_name_the_field_by_its_path() {
    let cases = [
        (r#"[]"#, "$: expected an object, found an array"),
        (r#"{"resourceLogs": {}}"#, "resourceLogs: expected an array, found an object"),
        (
            r#"{"resourceLogs": [{"scopeLogs": [{"logRecords": [{}, {"timeUnixNano": "soon"}]}]}]}"#,
            "resourceLogs[0].scopeLogs[0].logRecords[1].timeUnixNano: expected a 64-bit integer (a decimal string or an integer), found \"soon\"",
        ),
        (
            r#"{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": [{"key": "a", "value": {"intValue": "x"}}]}]}]}]}"#,
            "resourceLogs[0].scopeLogs[0].logRecords[0].attributes[0].value.intValue: expected a 64-bit integer (a decimal string or an integer), found \"x\"",
        ),
        (
            r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "a", "value": {"arrayValue": {"values": [{"doubleValue": "many"}]}}}]}}]}"#,
            "resourceLogs[0].resource.attributes[0].value.arrayValue.values[0].doubleValue: expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", found \"many\"",
        ),
        (
            r#"{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"bytesValue": "***"}}]}]}]}"#,
            "resourceLogs[0].scopeLogs[0].logRecords[0].body.bytesValue: not base64",
        ),
        (
            r#"{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": 3}}]}]}]}"#,
            "resourceLogs[0].scopeLogs[0].logRecords[0].body.stringValue: expected a string, found 3",
        ),
        ("{", "$: not JSON: EOF while parsing an object at line 1 column 1"),
    ];
    for (body, expected) in cases {
        let error = otlp_logs_json::decode(body.as_bytes()).expect_err(body);
        assert_eq!(error.to_string(), expected, "{body}");
    }
}

#[test]
fn json_ids_severity_and_unknown_fields_are_skipped_and_null_reads_as_absent() {
    // Hex ids that are not base64, a severity enum name, snake_case and unknown keys, nulls.
    let body = r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
        "scopeLogs": [{"logRecords": [{"traceId": "zz", "spanId": 12, "severityNumber": "SEVERITY_NUMBER_INFO",
          "time_unix_nano": "5", "unknown": {"x": 1}, "body": null, "attributes": null, "timeUnixNano": 2000000}]}]}]}"#;
    let decoded = otlp_logs_json::decode(body.as_bytes()).expect("valid");
    let mapped = otlp_logs::map_request(&decoded, 0).expect("maps");
    let log = &mapped.batches[0].logs[0];
    assert_eq!(log.timestamp_ms, 2);
    assert_eq!(log.body, Body::Text(String::new()));
}

#[test]
fn json_and_protobuf_give_the_same_mapping() {
    use prost::Message;
    let decoded = otlp_logs_json::decode(LOGS_JSON_REQUEST.as_bytes()).expect("valid");
    let from_protobuf = otlp_logs::decode_protobuf(&decoded.encode_to_vec()).expect("valid protobuf");
    assert_eq!(otlp_logs::map_request(&from_protobuf, 1), otlp_logs::map_request(&decoded, 1));
    let error = otlp_logs::decode_protobuf(&[0xff, 0xff]).expect_err("not protobuf");
    assert!(error.to_string().starts_with("not an ExportLogsServiceRequest in protobuf"), "{error}");
}

#[test]
fn base64_reads_both_alphabets_with_or_without_padding() {
    assert_eq!(otlp_json::base64("aGk=").as_deref(), Some(&b"hi"[..]));
    assert_eq!(otlp_json::base64("aGk").as_deref(), Some(&b"hi"[..]));
    assert_eq!(otlp_json::base64("-_8").as_deref(), Some(&[0xfb, 0xff][..]));
    assert_eq!(otlp_json::base64("+/8=").as_deref(), Some(&[0xfb, 0xff][..]));
    assert_eq!(otlp_json::base64("").as_deref(), Some(&[][..]));
    assert_eq!(otlp_json::base64("a"), None, "one digit is not a byte");
    assert_eq!(otlp_json::base64("aG=k"), None);
    assert_eq!(otlp_json::base64("a==="), None);
}

#[test]
fn the_crates_serde_refuses_valid_otlp_doubles_and_names_no_field_and_ours_does_both() {
    let body = |double: &str| {
        format!(
            r#"{{"resourceLogs": [{{"resource": {{"attributes": [{{"key": "service.name", "value": {{"stringValue": "s"}}}}]}},
            "scopeLogs": [{{"logRecords": [{{"attributes": [
              {{"key": "d", "value": {{"doubleValue": {double}}}}},
              {{"key": "i", "value": {{"intValue": "12"}}}},
              {{"key": "a", "value": {{"arrayValue": {{"values": [{{"intValue": "1"}}]}}}}}}]}}]}}]}}]}}"#
        )
    };
    // What the crate reads, it reads right (64-bit strings, arrays): logs lose nothing silently.
    let plain = body("2.5");
    let crate_plain = serde_json::from_str::<ExportLogsServiceRequest>(&plain).expect("the crate reads it");
    let ours_plain = otlp_logs_json::decode(plain.as_bytes()).expect("valid");
    assert_eq!(otlp_logs::map_request(&crate_plain, 0), otlp_logs::map_request(&ours_plain, 0));
    // But OTLP/JSON allows "NaN", "Infinity" and "-Infinity" for doubles: the crate refuses the
    // whole request, with a line and column rather than the field.
    for special in ["\"NaN\"", "\"Infinity\"", "\"-Infinity\""] {
        let text = body(special);
        let crate_error = serde_json::from_str::<ExportLogsServiceRequest>(&text).expect_err("the crate refuses");
        assert!(crate_error.to_string().contains("expected f64"), "{crate_error}");
        let ours = otlp_logs::map_request(&otlp_logs_json::decode(text.as_bytes()).expect("valid OTLP/JSON"), 0).expect("maps");
        assert_eq!(ours.batches[0].logs[0].tags[0], ("d".to_owned(), special.trim_matches('"').to_owned()));
    }
}
