//! OTLP logs to [`LogData`], as SkyWalking's OpenTelemetry log receiver maps them
//! (`OpenTelemetryLogHandler`). Pure: a decoded `ExportLogsServiceRequest` in, one
//! [`LogBatch`] per `ResourceLogs` and the refused records out.
//!
//! | LogData | from |
//! |---|---|
//! | `service` | resource attribute `service.name`; absent or empty: every record of the resource is refused |
//! | `serviceInstance` | `service.instance.id`, else `service.instance`, else `""` |
//! | `layer` | `service.layer`, else `""` (the `auto`/GENERAL route) |
//! | `endpoint`, `traceContext` | never set (SkyWalking drops `trace_id`, `span_id`, `flags`) |
//! | `timestamp` | `time_unix_nano / 1e6`; `observed_time_unix_nano` is ignored, so 0 stays 0 (= now at intake) |
//! | `body` | always text: `body.stringValue`, `""` for any other body |
//! | `tags` | the record's attributes, keys unchanged, values as [`tag_value`] |
//! | `source_attributes` | every resource attribute, values as [`tag_value`] (read by `sourceAttribute()`) |
//!
//! Severity, event name, scope and scope attributes are dropped, as SkyWalking drops them.
//! SkyWalking collects attributes with `Collectors.toMap`, which throws on a repeated key: a
//! repeated key in a record's attributes refuses that record (SkyWalking drops it); a repeated
//! key in a resource's attributes fails the whole request (here: nothing of it is taken).

use std::collections::{BTreeMap, BTreeSet};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use prost::Message;

use super::java::double_to_string;
use crate::data::seam::{LogBatch, LogData, LogProtocol};
use hotrule_lal_engine::Body;

/// Why a request is not an OTLP logs request (400, nothing taken).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OtlpLogsError {
    #[error("not an ExportLogsServiceRequest in protobuf: {0}")]
    Protobuf(String),
    #[error(transparent)]
    Json(#[from] super::otlp_json::JsonError),
    #[error("resourceLogs[{resource}].resource.attributes: the key {key:?} appears more than once")]
    DuplicateResourceAttribute { resource: usize, key: String },
}

/// Why a record was refused (answered as OTLP partial success).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the resource has no service.name attribute (SkyWalking discards such logs)")]
    MissingService,
    #[error("the attribute key {0:?} appears more than once")]
    DuplicateAttribute(String),
}

/// Refused records, located in the request: `count` records of a resource without service,
/// or one record with an invalid attribute list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRecords {
    pub resource: usize,
    /// `(scope, record)` of a single refused record; `None` for all records of the resource.
    pub record: Option<(usize, usize)>,
    pub count: usize,
    pub reason: RecordError,
}

impl std::fmt::Display for RefusedRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.record {
            Some((scope, record)) => {
                write!(f, "resourceLogs[{}].scopeLogs[{scope}].logRecords[{record}]: {}", self.resource, self.reason)
            }
            None => write!(f, "resourceLogs[{}]: {} log records refused: {}", self.resource, self.count, self.reason),
        }
    }
}

/// What a request maps to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogsMapping {
    pub batches: Vec<LogBatch>,
    pub refused: Vec<RefusedRecords>,
}

impl LogsMapping {
    pub fn log_count(&self) -> usize {
        self.batches.iter().map(|b| b.logs.len()).sum()
    }

    /// Refused records counted by reason: `(records without service, records with invalid attributes)`.
    pub fn refused_counts(&self) -> (usize, usize) {
        self.refused.iter().fold((0, 0), |(missing, invalid), r| match r.reason {
            RecordError::MissingService => (missing + r.count, invalid),
            RecordError::DuplicateAttribute(_) => (missing, invalid + r.count),
        })
    }
}

/// Decodes a protobuf `ExportLogsServiceRequest`.
pub fn decode_protobuf(body: &[u8]) -> Result<ExportLogsServiceRequest, OtlpLogsError> {
    ExportLogsServiceRequest::decode(body).map_err(|e| OtlpLogsError::Protobuf(e.to_string()))
}

/// Maps a decoded request; `received_ms` stamps the batches.
pub fn map_request(request: &ExportLogsServiceRequest, received_ms: i64) -> Result<LogsMapping, OtlpLogsError> {
    let mut out = LogsMapping::default();
    for (resource_index, resource_logs) in request.resource_logs.iter().enumerate() {
        let attributes = resource_logs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let source = attribute_map(attributes)
            .map_err(|key| OtlpLogsError::DuplicateResourceAttribute { resource: resource_index, key })?;
        let records = resource_logs.scope_logs.iter().map(|s| s.log_records.len()).sum::<usize>();
        let service = source.get("service.name").cloned().unwrap_or_default();
        if service.is_empty() {
            if records > 0 {
                out.refused.push(RefusedRecords { resource: resource_index, record: None, count: records, reason: RecordError::MissingService });
            }
            continue;
        }
        let instance = source
            .get("service.instance.id")
            .or_else(|| source.get("service.instance"))
            .cloned()
            .unwrap_or_default();
        let layer = source.get("service.layer").cloned().unwrap_or_default();
        let mut logs = Vec::with_capacity(records);
        for (scope_index, scope) in resource_logs.scope_logs.iter().enumerate() {
            for (record_index, record) in scope.log_records.iter().enumerate() {
                let tags = match tags(&record.attributes) {
                    Ok(tags) => tags,
                    Err(key) => {
                        out.refused.push(RefusedRecords {
                            resource: resource_index,
                            record: Some((scope_index, record_index)),
                            count: 1,
                            reason: RecordError::DuplicateAttribute(key),
                        });
                        continue;
                    }
                };
                let body = match record.body.as_ref().and_then(|b| b.value.as_ref()) {
                    Some(any_value::Value::StringValue(text)) => text.clone(),
                    _ => String::new(),
                };
                logs.push(LogData {
                    // u64 nanoseconds / 1e6 always fits an i64.
                    timestamp_ms: (record.time_unix_nano / 1_000_000) as i64,
                    service: service.clone(),
                    service_instance: instance.clone(),
                    layer: layer.clone(),
                    body: Body::Text(body),
                    tags,
                    source_attributes: source.clone(),
                    ..LogData::default()
                });
            }
        }
        if !logs.is_empty() {
            out.batches.push(LogBatch { protocol: LogProtocol::Otlp, logs, received_ms });
        }
    }
    Ok(out)
}

/// Attributes as a map; `Err(key)` on the first repeated key.
fn attribute_map(attributes: &[KeyValue]) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for kv in attributes {
        if map.insert(kv.key.clone(), tag_value(kv.value.as_ref())).is_some() {
            return Err(kv.key.clone());
        }
    }
    Ok(map)
}

/// A record's attributes as tags, in arrival order (SkyWalking's order is a `HashMap`'s, so no
/// order is promised); `Err(key)` on the first repeated key.
fn tags(attributes: &[KeyValue]) -> Result<Vec<(String, String)>, String> {
    let mut seen = BTreeSet::new();
    let mut tags = Vec::with_capacity(attributes.len());
    for kv in attributes {
        if !seen.insert(kv.key.as_str()) {
            return Err(kv.key.clone());
        }
        tags.push((kv.key.clone(), tag_value(kv.value.as_ref())));
    }
    Ok(tags)
}

/// SkyWalking's `buildTagValue`: a string as is, int and bool as Java prints them, a double as
/// `String.valueOf(double)`, an array as protobuf-java's `toString()` (the text format), and
/// `""` for a kvlist, bytes or an empty value.
pub fn tag_value(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => double_to_string(*d),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::ArrayValue(array)) => {
            let mut out = String::new();
            array_text(array, 0, &mut out);
            out
        }
        _ => String::new(),
    }
}

/// protobuf-java's text format of an `ArrayValue`'s fields at `depth` (two spaces each).
fn array_text(array: &ArrayValue, depth: usize, out: &mut String) {
    for value in &array.values {
        message_text("values", value, depth, out, any_value_text);
    }
}

fn kvlist_text(list: &KeyValueList, depth: usize, out: &mut String) {
    for kv in &list.values {
        message_text("values", kv, depth, out, |kv, depth, out| {
            if !kv.key.is_empty() {
                scalar_text("key", &quoted(kv.key.as_bytes()), depth, out);
            }
            if let Some(value) = &kv.value {
                message_text("value", value, depth, out, any_value_text);
            }
        });
    }
}

fn any_value_text(value: &AnyValue, depth: usize, out: &mut String) {
    match &value.value {
        // A profiling string index is read as absent outside profiles (the OTLP spec says so).
        None | Some(any_value::Value::StringValueStrindex(_)) => {}
        Some(any_value::Value::StringValue(s)) => scalar_text("string_value", &quoted(s.as_bytes()), depth, out),
        Some(any_value::Value::BoolValue(b)) => scalar_text("bool_value", &b.to_string(), depth, out),
        Some(any_value::Value::IntValue(i)) => scalar_text("int_value", &i.to_string(), depth, out),
        Some(any_value::Value::DoubleValue(d)) => scalar_text("double_value", &double_to_string(*d), depth, out),
        Some(any_value::Value::BytesValue(bytes)) => scalar_text("bytes_value", &quoted(bytes), depth, out),
        Some(any_value::Value::ArrayValue(array)) => message_text("array_value", array, depth, out, array_text),
        Some(any_value::Value::KvlistValue(list)) => message_text("kvlist_value", list, depth, out, kvlist_text),
    }
}

fn message_text<T>(name: &str, message: &T, depth: usize, out: &mut String, fields: impl Fn(&T, usize, &mut String)) {
    indent(depth, out);
    out.push_str(name);
    out.push_str(" {\n");
    fields(message, depth + 1, out);
    indent(depth, out);
    out.push_str("}\n");
}

fn scalar_text(name: &str, value: &str, depth: usize, out: &mut String) {
    indent(depth, out);
    out.push_str(name);
    out.push_str(": ");
    out.push_str(value);
    out.push('\n');
}

fn indent(depth: usize, out: &mut String) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// protobuf-java's `TextFormat.escapeBytes`, quoted: C escapes, other bytes outside printable
/// ASCII (UTF-8 included) as three octal digits.
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}
