//! OTLP/JSON into the protobuf messages, by the rules of the OTLP specification rather than the
//! `opentelemetry-proto` crate's serde derive: the readers both planes' decoders share
//! ([`super::otlp_metrics_json`], [`super::otlp_logs_json`]). The derive silently loses what it
//! cannot read in metrics, and refuses valid OTLP/JSON in logs, naming no field.
//!
//! - Keys are lowerCamelCase; anything else (snake_case included) is an unknown field and is
//!   ignored, as the specification says of unknown fields. `null` reads as absent.
//! - 64-bit integers (`timeUnixNano`, `asInt`, `count`, `bucketCounts`, `intValue`,
//!   `zeroCount`) are decimal strings or JSON integers.
//! - Doubles are numbers or the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (or a decimal).
//! - Attribute values ([`any_value`]) are read in full, or with their nested values emptied
//!   ([`Nested`]), as a mapping needs them.
//!
//! Every error names the field by its path, e.g.
//! `resourceMetrics[0].scopeMetrics[0].metrics[2].sum.dataPoints[1].asInt`.

use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::{Map, Value};

/// A field that is not what OTLP/JSON allows there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JsonError {
    /// Where, e.g. `resourceMetrics[0].resource.attributes[1].value.intValue`; `$` is the body.
    pub path: String,
    pub message: String,
}

pub(super) type Result<T> = std::result::Result<T, JsonError>;

pub(super) fn error(path: &str, message: impl Into<String>) -> JsonError {
    JsonError { path: path.to_owned(), message: message.into() }
}

pub(super) fn child(path: &str, key: &str) -> String {
    if path == "$" { key.to_owned() } else { format!("{path}.{key}") }
}

/// What a JSON value is, for error messages (never the whole value).
pub(super) fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.len() <= 40 => format!("{s:?}"),
        Value::String(_) => "a long string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

pub(super) fn object<'v>(value: &'v Value, path: &str) -> Result<&'v Map<String, Value>> {
    value.as_object().ok_or_else(|| error(path, format!("expected an object, found {}", kind(value))))
}

/// A present, non-null field.
pub(super) fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// A repeated field: each element read by `read` at its indexed path.
pub(super) fn list<T>(map: &Map<String, Value>, path: &str, key: &str, read: impl Fn(&Value, &str) -> Result<T>) -> Result<Vec<T>> {
    let path = child(path, key);
    let Some(value) = field(map, key) else { return Ok(Vec::new()) };
    let items = value.as_array().ok_or_else(|| error(&path, format!("expected an array, found {}", kind(value))))?;
    items.iter().enumerate().map(|(i, item)| read(item, &format!("{path}[{i}]"))).collect()
}

pub(super) fn string(map: &Map<String, Value>, path: &str, key: &str) -> Result<String> {
    match field(map, key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(error(&child(path, key), format!("expected a string, found {}", kind(other)))),
    }
}

pub(super) fn boolean(map: &Map<String, Value>, path: &str, key: &str) -> Result<bool> {
    match field(map, key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(error(&child(path, key), format!("expected true or false, found {}", kind(other)))),
    }
}

/// A 64-bit integer: a decimal string or a JSON integer.
pub(super) fn int64_value(value: &Value, path: &str) -> Result<i128> {
    let parsed = match value {
        Value::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)),
        Value::String(s) => s.trim().parse::<i128>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| error(path, format!("expected a 64-bit integer (a decimal string or an integer), found {}", kind(value))))
}

pub(super) fn ranged<T: TryFrom<i128>>(value: i128, path: &str, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| error(path, format!("{value} is out of the range of {what}")))
}

pub(super) fn u64_at(value: &Value, path: &str) -> Result<u64> {
    ranged(int64_value(value, path)?, path, "a uint64")
}

pub(super) fn u64_field(map: &Map<String, Value>, path: &str, key: &str) -> Result<u64> {
    field(map, key).map_or(Ok(0), |v| u64_at(v, &child(path, key)))
}

pub(super) fn i64_at(value: &Value, path: &str) -> Result<i64> {
    ranged(int64_value(value, path)?, path, "an int64")
}

pub(super) fn i32_field(map: &Map<String, Value>, path: &str, key: &str) -> Result<i32> {
    field(map, key).map_or(Ok(0), |v| {
        let path = child(path, key);
        ranged(int64_value(v, &path)?, &path, "an int32")
    })
}

pub(super) fn u32_field(map: &Map<String, Value>, path: &str, key: &str) -> Result<u32> {
    field(map, key).map_or(Ok(0), |v| {
        let path = child(path, key);
        ranged(int64_value(v, &path)?, &path, "a uint32")
    })
}

/// A double: a number, `"NaN"`, `"Infinity"`, `"-Infinity"`, or a decimal string.
pub(super) fn double_at(value: &Value, path: &str) -> Result<f64> {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            text if text.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.') => text.parse().ok(),
            _ => None,
        },
        _ => None,
    };
    parsed.ok_or_else(|| error(path, format!("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", found {}", kind(value))))
}

pub(super) fn double_field(map: &Map<String, Value>, path: &str, key: &str) -> Result<Option<f64>> {
    field(map, key).map(|v| double_at(v, &child(path, key))).transpose()
}

/// An export request's body: a JSON object whose `key` lists the resources, each read by `read`.
pub(super) fn request<T>(body: &[u8], key: &str, read: impl Fn(&Value, &str) -> Result<T>) -> Result<Vec<T>> {
    let value: Value = serde_json::from_slice(body).map_err(|e| JsonError { path: "$".into(), message: format!("not JSON: {e}") })?;
    let root = object(&value, "$")?;
    list(root, "$", key, read)
}

/// How an attribute value's nested values (`arrayValue`, `kvlistValue`, `bytesValue`) are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nested {
    /// Element by element (`bytesValue` as base64): the logs mapping keeps them.
    Read,
    /// As empty values, unread: the metrics mapping stringifies them to `""` as SkyWalking does.
    Emptied,
}

/// The `resource` of a `ResourceMetrics` or `ResourceLogs` (only its attributes are kept).
pub(super) fn resource(map: &Map<String, Value>, path: &str, nested: Nested) -> Result<Option<Resource>> {
    let Some(resource) = field(map, "resource") else { return Ok(None) };
    let path = child(path, "resource");
    let resource = object(resource, &path)?;
    Ok(Some(Resource { attributes: list(resource, &path, "attributes", |v, p| key_value(v, p, nested))?, ..Default::default() }))
}

pub(super) fn key_value(value: &Value, path: &str, nested: Nested) -> Result<KeyValue> {
    let map = object(value, path)?;
    let value = match field(map, "value") {
        None => None,
        Some(v) => Some(any_value(v, &child(path, "value"), nested)?),
    };
    Ok(KeyValue { key: string(map, path, "key")?, value, ..Default::default() })
}

pub(super) fn any_value(value: &Value, path: &str, nested: Nested) -> Result<AnyValue> {
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
        Some(any_value::Value::ArrayValue(ArrayValue { values: nested_values(v, path, "arrayValue", nested, any_value)? }))
    } else if let Some(v) = field(map, "kvlistValue") {
        Some(any_value::Value::KvlistValue(KeyValueList { values: nested_values(v, path, "kvlistValue", nested, key_value)? }))
    } else if let Some(v) = field(map, "bytesValue") {
        Some(any_value::Value::BytesValue(match nested {
            Nested::Emptied => Vec::new(),
            Nested::Read => {
                let path = child(path, "bytesValue");
                let text = v.as_str().ok_or_else(|| error(&path, format!("expected a base64 string, found {}", kind(v))))?;
                base64(text).ok_or_else(|| error(&path, "not base64"))?
            }
        }))
    } else {
        None
    };
    Ok(AnyValue { value })
}

/// The `values` of an `arrayValue` or `kvlistValue` at `key`, each read by `read`; none when
/// nested values are emptied.
fn nested_values<T>(
    value: &Value,
    path: &str,
    key: &str,
    nested: Nested,
    read: fn(&Value, &str, Nested) -> Result<T>,
) -> Result<Vec<T>> {
    match nested {
        Nested::Emptied => Ok(Vec::new()),
        Nested::Read => {
            let path = child(path, key);
            let values = object(value, &path)?;
            list(values, &path, "values", |v, p| read(v, p, nested))
        }
    }
}

/// Standard or URL-safe base64, padding optional (proto3 JSON accepts both alphabets).
pub(super) fn base64(text: &str) -> Option<Vec<u8>> {
    crate::base::base64::decode(text)
}

