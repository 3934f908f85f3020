//! SkyWalking's native log API body (`POST /v3/logs`): a JSON array of LogData.

use crate::data::seam::LogProtocol;
use crate::data::ingest::native_logs::{NativeLogsError, decode};
use hotrule_lal_engine::{Body, TraceContext};

/// Text, json and yaml bodies, a trace context, tags, int64 as a string and as a number.
pub(in crate::data::ingest) const NATIVE_REQUEST: &str = r#"[
  {"timestamp": "1700000000123", "service": "nginx", "serviceInstance": "nginx-0", "endpoint": "/pay", "layer": "NGINX",
   "body": {"text": {"text": "GET /pay 200"}},
   "traceContext": {"traceId": "t-1", "traceSegmentId": "seg-1", "spanId": "3"},
   "tags": {"data": [{"key": "level", "value": "INFO"}, {"key": "level", "value": "WARN"}]}},
  {"timestamp": 1700000000456, "service": "app", "body": {"type": "json", "json": {"json": "{\"status\": 500}"}}},
  {"service": "app", "body": {"yaml": {"yaml": "status: 404\n"}}},
  {"service": "app"}
]"#;

#[test]
fn every_field_of_the_native_log_data() {
    let batch = decode(NATIVE_REQUEST.as_bytes(), 9).expect("valid");
    assert_eq!((batch.protocol, batch.received_ms, batch.logs.len()), (LogProtocol::SkyWalking, 9, 4));
    let text = &batch.logs[0];
    assert_eq!(text.timestamp_ms, 1_700_000_000_123, "int64 as a string");
    assert_eq!((text.service.as_str(), text.service_instance.as_str()), ("nginx", "nginx-0"));
    assert_eq!((text.endpoint.as_str(), text.layer.as_str()), ("/pay", "NGINX"));
    assert_eq!(text.body, Body::Text("GET /pay 200".into()));
    assert_eq!(text.trace_context, TraceContext { trace_id: "t-1".into(), trace_segment_id: "seg-1".into(), span_id: 3 });
    let tags: Vec<(&str, &str)> = text.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(tags, [("level", "INFO"), ("level", "WARN")], "tags in order, repeats kept");
    assert!(text.source_attributes.is_empty());
    assert_eq!(batch.logs[1].timestamp_ms, 1_700_000_000_456, "int64 as a number");
    assert_eq!(batch.logs[1].body, Body::Json("{\"status\": 500}".into()));
    assert_eq!(batch.logs[2].body, Body::Yaml("status: 404\n".into()));
    assert_eq!((batch.logs[3].timestamp_ms, &batch.logs[3].body), (0, &Body::None), "0 is now at intake");
}

#[test]
fn an_empty_array_is_a_batch_without_logs() {
    assert!(decode(b"[]", 0).expect("valid").logs.is_empty());
}

#[test]
fn errors_name_the_element_and_the_field() {
    let cases: [(&str, &str); 8] = [
        ("{", "the body is not JSON: EOF while parsing an object at line 1 column 1"),
        (r#"{"service": "a"}"#, "the body must be a JSON array of LogData, found an object"),
        ("null", "the body must be a JSON array of LogData, found null"),
        (r#"[{"service": "a"}, 3]"#, "[1]: a log must be a JSON object"),
        (r#"[{"service": 5}]"#, "[0]: field 'service' has the wrong type: expected a string"),
        (r#"[{}, {"timestamp": "soon"}]"#, "[1]: field 'timestamp' has the wrong type: expected an integer or an integer string"),
        (r#"[{"traceContext": {"spanId": 4294967296}}]"#, "[0]: field 'traceContext.spanId' has the wrong type: expected a 32-bit integer"),
        (r#"[{"body": "text"}]"#, "[0]: field 'body' has the wrong type: expected {text|json|yaml: {...}}"),
    ];
    for (body, expected) in cases {
        let error = decode(body.as_bytes(), 0).expect_err(body);
        assert_eq!(error.to_string(), expected, "{body}");
    }
    assert!(matches!(decode(b"[1]", 0), Err(NativeLogsError::Log { index: 0, .. })));
}
