//! OTLP/JSON logs into the protobuf messages, by the OTLP specification's JSON rules (see
//! [`super::otlp_json`], whose readers this shares), not the `opentelemetry-proto` crate's
//! serde derive. For logs the derive does not lose values silently as it does for metrics (64-bit
//! strings, arrays, kvlists and bytes read right), but it refuses valid OTLP/JSON: a
//! `"doubleValue": "NaN"` (or `"Infinity"`, `"-Infinity"`) fails the whole request, and its
//! errors give a line and column instead of the field (see the test
//! `the_crates_serde_refuses_valid_otlp_doubles_and_names_no_field_and_ours_does_both`).
//!
//! - Attribute values are read in full: arrays and kvlists element by element (a tag of an
//!   array value is its protobuf text), `bytesValue` as base64.
//! - Of a log record only what the mapping reads is kept: `timeUnixNano`,
//!   `observedTimeUnixNano`, `severityText`, `body`, `attributes`. Trace and span ids, flags,
//!   severity numbers and event names are skipped unread (SkyWalking drops them), so a hex id
//!   is never misread as base64.
//!
//! Every error names the field by its path, e.g.
//! `resourceLogs[0].scopeLogs[0].logRecords[2].attributes[1].value.intValue`.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::Value;

use super::otlp_json::{JsonError, Result, boolean, child, double_at, error, field, i64_at, kind, list, object, string, u64_field};

/// Parses an OTLP/JSON `ExportLogsServiceRequest`.
pub fn decode(body: &[u8]) -> Result<ExportLogsServiceRequest> {
    let value: Value = serde_json::from_slice(body).map_err(|e| JsonError { path: "$".into(), message: format!("not JSON: {e}") })?;
    let root = object(&value, "$")?;
    Ok(ExportLogsServiceRequest { resource_logs: list(root, "$", "resourceLogs", resource_logs)? })
}

fn resource_logs(value: &Value, path: &str) -> Result<ResourceLogs> {
    let map = object(value, path)?;
    let resource = match field(map, "resource") {
        None => None,
        Some(resource) => {
            let path = child(path, "resource");
            let resource = object(resource, &path)?;
            Some(Resource { attributes: list(resource, &path, "attributes", key_value)?, ..Default::default() })
        }
    };
    Ok(ResourceLogs { resource, scope_logs: list(map, path, "scopeLogs", scope_logs)?, schema_url: string(map, path, "schemaUrl")? })
}

fn scope_logs(value: &Value, path: &str) -> Result<ScopeLogs> {
    let map = object(value, path)?;
    Ok(ScopeLogs { log_records: list(map, path, "logRecords", log_record)?, ..Default::default() })
}

fn log_record(value: &Value, path: &str) -> Result<LogRecord> {
    let map = object(value, path)?;
    let body = match field(map, "body") {
        None => None,
        Some(v) => Some(any_value(v, &child(path, "body"))?),
    };
    Ok(LogRecord {
        time_unix_nano: u64_field(map, path, "timeUnixNano")?,
        observed_time_unix_nano: u64_field(map, path, "observedTimeUnixNano")?,
        severity_text: string(map, path, "severityText")?,
        body,
        attributes: list(map, path, "attributes", key_value)?,
        ..Default::default()
    })
}

fn key_value(value: &Value, path: &str) -> Result<KeyValue> {
    let map = object(value, path)?;
    let value = match field(map, "value") {
        None => None,
        Some(v) => Some(any_value(v, &child(path, "value"))?),
    };
    Ok(KeyValue { key: string(map, path, "key")?, value, ..Default::default() })
}

fn any_value(value: &Value, path: &str) -> Result<AnyValue> {
    let map = object(value, path)?;
    let value = if let Some(v) = field(map, "stringValue") {
        let s = v.as_str().ok_or_else(|| error(&child(path, "stringValue"), format!("expected a string, found {}", kind(v))))?;
        Some(any_value::Value::StringValue(s.to_owned()))
    } else if field(map, "boolValue").is_some() {
        Some(any_value::Value::BoolValue(boolean(map, path, "boolValue")?))
    } else if let Some(v) = field(map, "intValue") {
        Some(any_value::Value::IntValue(i64_at(v, &child(path, "intValue"))?))
    } else if let Some(v) = field(map, "doubleValue") {
        Some(any_value::Value::DoubleValue(double_at(v, &child(path, "doubleValue"))?))
    } else if let Some(v) = field(map, "arrayValue") {
        let path = child(path, "arrayValue");
        let array = object(v, &path)?;
        Some(any_value::Value::ArrayValue(ArrayValue { values: list(array, &path, "values", any_value)? }))
    } else if let Some(v) = field(map, "kvlistValue") {
        let path = child(path, "kvlistValue");
        let kvlist = object(v, &path)?;
        Some(any_value::Value::KvlistValue(KeyValueList { values: list(kvlist, &path, "values", key_value)? }))
    } else if let Some(v) = field(map, "bytesValue") {
        let path = child(path, "bytesValue");
        let text = v.as_str().ok_or_else(|| error(&path, format!("expected a base64 string, found {}", kind(v))))?;
        Some(any_value::Value::BytesValue(base64(text).ok_or_else(|| error(&path, "not base64"))?))
    } else {
        None
    };
    Ok(AnyValue { value })
}

/// Standard or URL-safe base64, padding optional (proto3 JSON accepts both alphabets).
pub(super) fn base64(text: &str) -> Option<Vec<u8>> {
    let digits = text.trim_end_matches('=');
    if text.len() - digits.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in digits.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover digit carries fewer than 8 bits: not a valid encoding.
    (bits < 6).then_some(out)
}

