//! Kept logs to an OTLP `ExportLogsServiceRequest`. Pure: the worker hands in a batch and
//! gets back the request.
//!
//! The mapping is the inverse of how SkyWalking's OpenTelemetry log receiver reads a log
//! (`OpenTelemetryLogHandler`; docs/configuration.md, "Log export"), so a SkyWalking OAP (or
//! hotrule itself) behind the collector reads back the same service, instance, layer,
//! timestamp, body and tags:
//!
//! | `LogRecord` (LAL)        | OTLP                                                          |
//! |--------------------------|---------------------------------------------------------------|
//! | service / instance / layer | resource `service.name` / `service.instance.id` / `service.layer` |
//! | rule, file               | scope `hotrule.lal` with attributes `hotrule.rule`, `hotrule.file` |
//! | timestamp_ms             | `time_unix_nano`; the receive time is `observed_time_unix_nano` |
//! | content                  | `body` as a string (SkyWalking reads only a string body)      |
//! | tags                     | attributes, keys unchanged; a repeated key keeps its first value (OTLP forbids duplicates; it is what `tag()` reads) |
//! | tag `level`              | also `severity_text` and `severity_number`                    |
//! | trace id                 | `trace_id` when it is 32 hex digits (W3C), else attribute `trace_id` |
//! | endpoint, segment id, span id | attributes `endpoint`, `segment_id`, `span_id` (int)     |
//! | output type and fields   | attributes `output_type` and `output.<field>`                 |
//!
//! An extra attribute never replaces a tag of the same key. Logs are grouped into one
//! `ResourceLogs` per (service, instance, layer) and one `ScopeLogs` per rule, in first-seen
//! order.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord as OtlpLogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::Value as Json;

use crate::data::logs::KeptLog;

/// The instrumentation scope name of exported logs.
pub const SCOPE_NAME: &str = "hotrule.lal";

/// The request for one batch.
pub fn request(logs: &[KeptLog]) -> ExportLogsServiceRequest {
    let mut resources: Vec<ResourceLogs> = Vec::new();
    // Per resource, its (service, instance, layer) and the (rule, file) of each of its scopes.
    type ScopeKeys<'a> = Vec<(&'a str, &'a str)>;
    let mut keys: Vec<((&str, &str, &str), ScopeKeys)> = Vec::new();
    for log in logs {
        let record = &log.record;
        let resource_key = (record.service.as_str(), record.instance.as_str(), record.layer.as_str());
        let at = match keys.iter().position(|(k, _)| *k == resource_key) {
            Some(at) => at,
            None => {
                keys.push((resource_key, Vec::new()));
                resources.push(ResourceLogs { resource: Some(resource(log)), scope_logs: Vec::new(), schema_url: String::new() });
                keys.len() - 1
            }
        };
        let scope_key = (log.rule.as_str(), log.file.as_str());
        let scopes = &mut resources[at].scope_logs;
        match keys[at].1.iter().position(|k| *k == scope_key) {
            Some(scope_at) => scopes[scope_at].log_records.push(record_of(log)),
            None => {
                keys[at].1.push(scope_key);
                scopes.push(ScopeLogs { scope: Some(scope(log)), log_records: vec![record_of(log)], schema_url: String::new() });
            }
        }
    }
    ExportLogsServiceRequest { resource_logs: resources }
}

fn string(text: &str) -> AnyValue {
    AnyValue { value: Some(any_value::Value::StringValue(text.to_string())) }
}

fn attribute(key: &str, value: AnyValue) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(value), ..Default::default() }
}

fn resource(log: &KeptLog) -> Resource {
    let record = &log.record;
    let mut attributes = vec![attribute("service.name", string(&record.service))];
    if !record.instance.is_empty() {
        attributes.push(attribute("service.instance.id", string(&record.instance)));
    }
    if !record.layer.is_empty() {
        attributes.push(attribute("service.layer", string(&record.layer)));
    }
    Resource { attributes, ..Default::default() }
}

fn scope(log: &KeptLog) -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE_NAME.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        attributes: vec![attribute("hotrule.rule", string(&log.rule)), attribute("hotrule.file", string(&log.file))],
        dropped_attributes_count: 0,
    }
}

/// Epoch milliseconds to nanoseconds; before 1970 (never a real log) is 0, "unknown".
fn nanos(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

fn record_of(log: &KeptLog) -> OtlpLogRecord {
    let record = &log.record;
    let mut attributes: Vec<KeyValue> = Vec::with_capacity(record.tags.len() + 4);
    let add = |attributes: &mut Vec<KeyValue>, key: &str, value: AnyValue| {
        if !attributes.iter().any(|a| a.key == key) {
            attributes.push(attribute(key, value));
        }
    };
    for (key, value) in &record.tags {
        add(&mut attributes, key, string(value));
    }
    if !record.endpoint.is_empty() {
        add(&mut attributes, "endpoint", string(&record.endpoint));
    }
    let trace_id = w3c_trace_id(&record.trace_id);
    if trace_id.is_none() && !record.trace_id.is_empty() {
        add(&mut attributes, "trace_id", string(&record.trace_id));
    }
    if !record.segment_id.is_empty() {
        add(&mut attributes, "segment_id", string(&record.segment_id));
    }
    if let Some(span_id) = record.span_id {
        add(&mut attributes, "span_id", AnyValue { value: Some(any_value::Value::IntValue(i64::from(span_id))) });
    }
    if let Some(output_type) = &record.output_type {
        add(&mut attributes, "output_type", string(output_type));
    }
    for (name, value) in &record.fields {
        add(&mut attributes, &format!("output.{name}"), json_value(value));
    }
    let level = record.tag("level").unwrap_or_default();
    OtlpLogRecord {
        time_unix_nano: nanos(record.timestamp_ms),
        observed_time_unix_nano: nanos(log.received_ms),
        severity_number: severity_number(level),
        severity_text: level.to_string(),
        body: Some(string(&record.content)),
        attributes,
        dropped_attributes_count: 0,
        flags: 0,
        trace_id: trace_id.unwrap_or_default(),
        span_id: Vec::new(),
        event_name: String::new(),
    }
}

/// A W3C trace id (32 hex digits, not all zero) as its 16 bytes.
fn w3c_trace_id(text: &str) -> Option<Vec<u8>> {
    if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Vec<u8> = (0..16).filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    (bytes.len() == 16 && bytes.iter().any(|b| *b != 0)).then_some(bytes)
}

/// OTLP's `SeverityNumber` for a level name (the first of each range); 0 (unspecified) when
/// the level is unknown.
pub fn severity_number(level: &str) -> i32 {
    match level.trim().to_ascii_uppercase().as_str() {
        "TRACE" | "FINEST" | "FINER" => 1,
        "DEBUG" | "FINE" => 5,
        "INFO" | "INFORMATION" | "NOTICE" => 9,
        "WARN" | "WARNING" => 13,
        "ERROR" | "ERR" | "SEVERE" => 17,
        "FATAL" | "CRITICAL" | "CRIT" | "ALERT" | "EMERG" | "PANIC" => 21,
        _ => 0,
    }
}

/// An output field: scalars keep their type, arrays and objects travel as JSON text.
fn json_value(value: &Json) -> AnyValue {
    let value = match value {
        Json::Null => return AnyValue { value: None },
        Json::Bool(b) => any_value::Value::BoolValue(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => any_value::Value::StringValue(s.clone()),
        other => any_value::Value::StringValue(other.to_string()),
    };
    AnyValue { value: Some(value) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotrule_lal_engine::{ContentType, LogRecord};

    fn kept(service: &str, instance: &str, rule: &str, content: &str) -> KeptLog {
        KeptLog {
            rule: rule.to_string(),
            file: "lal/test".to_string(),
            record: LogRecord {
                service: service.to_string(),
                instance: instance.to_string(),
                layer: "NGINX".to_string(),
                timestamp_ms: 1_700_000_000_123,
                content_type: ContentType::Text,
                content: content.to_string(),
                ..LogRecord::default()
            },
            received_ms: 1_700_000_000_456,
        }
    }

    fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
        attributes.iter().find(|a| a.key == key)?.value.as_ref()?.value.as_ref()
    }

    #[test]
    fn logs_group_by_resource_then_rule_in_first_seen_order() {
        let logs = vec![
            kept("a", "i1", "NGINX:access", "1"),
            kept("b", "", "NGINX:access", "2"),
            kept("a", "i1", "NGINX:error", "3"),
            kept("a", "i1", "NGINX:access", "4"),
        ];
        let request = request(&logs);
        assert_eq!(request.resource_logs.len(), 2);
        let a = &request.resource_logs[0];
        let attrs = &a.resource.as_ref().expect("resource").attributes;
        assert_eq!(attr(attrs, "service.name"), Some(&any_value::Value::StringValue("a".into())));
        assert_eq!(attr(attrs, "service.instance.id"), Some(&any_value::Value::StringValue("i1".into())));
        assert_eq!(attr(attrs, "service.layer"), Some(&any_value::Value::StringValue("NGINX".into())));
        let bodies: Vec<Vec<String>> = a
            .scope_logs
            .iter()
            .map(|s| s.log_records.iter().map(|r| format!("{:?}", r.body.as_ref().and_then(|b| b.value.as_ref()))).collect())
            .collect();
        assert_eq!(bodies.len(), 2, "one scope per rule: {bodies:?}");
        assert_eq!(bodies[0].len(), 2);
        let b = &request.resource_logs[1];
        assert!(attr(&b.resource.as_ref().expect("resource").attributes, "service.instance.id").is_none(), "no empty instance");
    }

    #[test]
    fn repeated_tags_keep_the_first_and_extras_never_replace_a_tag() {
        let mut log = kept("a", "", "r", "x");
        log.record.tags = vec![("k".into(), "first".into()), ("k".into(), "second".into()), ("endpoint".into(), "tagged".into())];
        log.record.endpoint = "/from-extractor".into();
        let record = record_of(&log);
        assert_eq!(record.attributes.len(), 2);
        assert_eq!(attr(&record.attributes, "k"), Some(&any_value::Value::StringValue("first".into())));
        assert_eq!(attr(&record.attributes, "endpoint"), Some(&any_value::Value::StringValue("tagged".into())));
    }

    #[test]
    fn trace_ids_levels_and_times() {
        let mut log = kept("a", "", "r", "x");
        log.record.trace_id = "4BF92F3577B34DA6A3CE929D0E0E4736".into();
        log.record.tags = vec![("level".into(), "warning".into())];
        let record = record_of(&log);
        assert_eq!(record.trace_id.len(), 16);
        assert_eq!(record.trace_id[0], 0x4b);
        assert_eq!((record.severity_number, record.severity_text.as_str()), (13, "warning"));
        assert_eq!(record.time_unix_nano, 1_700_000_000_123_000_000);
        assert_eq!(record.observed_time_unix_nano, 1_700_000_000_456_000_000);
        log.record.trace_id = "a1b2.33.1700000000".into();
        log.record.timestamp_ms = -5;
        let record = record_of(&log);
        assert!(record.trace_id.is_empty());
        assert_eq!(attr(&record.attributes, "trace_id"), Some(&any_value::Value::StringValue("a1b2.33.1700000000".into())));
        assert_eq!(record.time_unix_nano, 0);
        assert!(w3c_trace_id(&"0".repeat(32)).is_none(), "the all-zero id is invalid");
        assert_eq!(severity_number("nonsense"), 0);
    }
}
