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
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use serde_json::Value;

use super::otlp_json::{Nested, Result, any_value, child, field, list, object, resource, string, u64_field};

/// Parses an OTLP/JSON `ExportLogsServiceRequest`.
pub fn decode(body: &[u8]) -> Result<ExportLogsServiceRequest> {
    Ok(ExportLogsServiceRequest { resource_logs: super::otlp_json::request(body, "resourceLogs", resource_logs)? })
}

fn resource_logs(value: &Value, path: &str) -> Result<ResourceLogs> {
    let map = object(value, path)?;
    let resource = resource(map, path, Nested::Read)?;
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
        Some(v) => Some(any_value(v, &child(path, "body"), Nested::Read)?),
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

/// An attribute, read in full (see [`Nested::Read`]).
fn key_value(value: &Value, path: &str) -> Result<KeyValue> {
    super::otlp_json::key_value(value, path, Nested::Read)
}
