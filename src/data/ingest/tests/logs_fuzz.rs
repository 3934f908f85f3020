//! No log decoder or mapping panics on any input: random bytes, and valid bodies with random
//! bytes flipped, cut or spliced (a bounded, seeded loop, as for the metric decoders).

use prost::Message;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::fuzz::mutate;
use super::native_logs::NATIVE_REQUEST;
use super::otlp_logs::LOGS_JSON_REQUEST;
use crate::data::ingest::{native_logs, otlp_logs, otlp_logs_json};

const ROUNDS: usize = 3000;

fn seeds() -> Vec<Vec<u8>> {
    let protobuf = otlp_logs_json::decode(LOGS_JSON_REQUEST.as_bytes()).expect("valid").encode_to_vec();
    vec![LOGS_JSON_REQUEST.as_bytes().to_vec(), protobuf, NATIVE_REQUEST.as_bytes().to_vec()]
}

/// Feeds `input` to every log decoder; returns how many decoded.
fn every_decoder(input: &[u8]) -> usize {
    let mut decoded = 0;
    if let Ok(request) = otlp_logs::decode_protobuf(input) {
        decoded += 1;
        let _ = otlp_logs::map_request(&request, 0);
    }
    if let Ok(request) = otlp_logs_json::decode(input) {
        decoded += 1;
        let _ = otlp_logs::map_request(&request, 0);
    }
    if native_logs::decode(input, 0).is_ok() {
        decoded += 1;
    }
    decoded
}

#[test]
fn no_log_decoder_panics_on_random_or_mutated_input() {
    let mut rng = StdRng::seed_from_u64(0x10_95_eed);
    let seeds = seeds();
    for seed in &seeds {
        assert!(every_decoder(seed) >= 1, "every seed is valid for its decoder");
    }
    let mut decoded = 0;
    for round in 0..ROUNDS {
        decoded += every_decoder(&mutate(&mut rng, &seeds[round % seeds.len()]));
    }
    // Deeply nested values stay within the decoders' recursion limits.
    let deep_json = format!("{}{}", r#"{"resourceLogs": [{"resource": {"attributes": [{"key": "a", "value": "#.to_owned() + &r#"{"arrayValue": {"values": ["#.repeat(200), "]}}".repeat(200));
    every_decoder(deep_json.as_bytes());
    // Some mutations still decode (so the mapping ran on odd but valid input too).
    assert!(decoded > 0);
}

#[test]
fn deeply_nested_array_attributes_decode_within_the_limit_and_map_without_overflow() {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    let nested = |depth: usize| {
        let mut value = AnyValue { value: Some(any_value::Value::IntValue(1)) };
        for _ in 0..depth {
            value = AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![value] })) };
        }
        let service = KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue("s".into())) }),
            ..Default::default()
        };
        let record = LogRecord { attributes: vec![KeyValue { key: "deep".into(), value: Some(value), ..Default::default() }], ..Default::default() };
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource { attributes: vec![service], ..Default::default() }),
                scope_logs: vec![ScopeLogs { log_records: vec![record], ..Default::default() }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    };
    // Within prost's recursion limit: decoded, and the protobuf text of the tag is complete.
    let request = otlp_logs::decode_protobuf(&nested(40)).expect("decodes");
    let mapped = otlp_logs::map_request(&request, 0).expect("maps");
    let tag = &mapped.batches[0].logs[0].tags[0].1;
    assert_eq!(tag.matches("array_value {").count(), 39);
    assert!(tag.contains("int_value: 1\n"), "{tag}");
    // Beyond it: refused as undecodable, not a stack overflow.
    assert!(otlp_logs::decode_protobuf(&nested(150)).is_err());
}
