//! OTLP/JSON metrics into the protobuf messages, by the rules of the OTLP specification rather
//! than the `opentelemetry-proto` crate's serde derive, which silently loses what it cannot
//! read: `"asDouble": "NaN"` or `"asInt": "x"` give a point without a value, a histogram whose
//! `sum` is `"Infinity"` loses its data, and nothing is reported (see the test
//! `the_crates_serde_drops_what_it_cannot_read_and_ours_does_not`).
//!
//! - Keys are lowerCamelCase; anything else (snake_case included) is an unknown field and is
//!   ignored, as the specification says of unknown fields. `null` reads as absent.
//! - 64-bit integers (`timeUnixNano`, `asInt`, `count`, `bucketCounts`, `intValue`,
//!   `zeroCount`) are decimal strings or JSON integers.
//! - Doubles are numbers or the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (or a decimal).
//! - Enums (`aggregationTemporality`) are integers; the proto names are accepted too, as
//!   SkyWalking's `JsonFormat` does.
//! - Only what the metrics mapping reads is kept; `bytesValue`, `arrayValue` and `kvlistValue`
//!   become empty values (SkyWalking stringifies them to `""`), ids and exemplars are skipped.
//!
//! Every error names the field by its path, e.g.
//! `resourceMetrics[0].scopeMetrics[0].metrics[2].sum.dataPoints[1].asInt`.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint, exponential_histogram_data_point,
    metric, number_data_point, summary_data_point,
};
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

/// Parses an OTLP/JSON `ExportMetricsServiceRequest`.
pub fn decode(body: &[u8]) -> Result<ExportMetricsServiceRequest> {
    let value: Value = serde_json::from_slice(body).map_err(|e| JsonError { path: "$".into(), message: format!("not JSON: {e}") })?;
    let root = object(&value, "$")?;
    Ok(ExportMetricsServiceRequest { resource_metrics: list(root, "$", "resourceMetrics", resource_metrics)? })
}

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

fn double_field(map: &Map<String, Value>, path: &str, key: &str) -> Result<Option<f64>> {
    field(map, key).map(|v| double_at(v, &child(path, key))).transpose()
}

fn temporality(map: &Map<String, Value>, path: &str) -> Result<i32> {
    let key = "aggregationTemporality";
    match field(map, key) {
        Some(Value::String(name)) if !name.starts_with(|c: char| c.is_ascii_digit()) => {
            match name.as_str() {
                "AGGREGATION_TEMPORALITY_UNSPECIFIED" => Ok(0),
                "AGGREGATION_TEMPORALITY_DELTA" => Ok(1),
                "AGGREGATION_TEMPORALITY_CUMULATIVE" => Ok(2),
                _ => Err(error(&child(path, key), format!("expected an integer enum value (0, 1 or 2), found {name:?}"))),
            }
        }
        _ => i32_field(map, path, key),
    }
}

fn resource_metrics(value: &Value, path: &str) -> Result<ResourceMetrics> {
    let map = object(value, path)?;
    let resource = match field(map, "resource") {
        None => None,
        Some(resource) => {
            let path = child(path, "resource");
            let resource = object(resource, &path)?;
            Some(Resource { attributes: list(resource, &path, "attributes", key_value)?, ..Default::default() })
        }
    };
    Ok(ResourceMetrics {
        resource,
        scope_metrics: list(map, path, "scopeMetrics", scope_metrics)?,
        schema_url: string(map, path, "schemaUrl")?,
    })
}

fn scope_metrics(value: &Value, path: &str) -> Result<ScopeMetrics> {
    let map = object(value, path)?;
    Ok(ScopeMetrics { metrics: list(map, path, "metrics", metric)?, ..Default::default() })
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
    } else if field(map, "arrayValue").is_some() {
        Some(any_value::Value::ArrayValue(ArrayValue::default()))
    } else if field(map, "kvlistValue").is_some() {
        Some(any_value::Value::KvlistValue(KeyValueList::default()))
    } else if field(map, "bytesValue").is_some() {
        Some(any_value::Value::BytesValue(Vec::new()))
    } else {
        None
    };
    Ok(AnyValue { value })
}

fn metric(value: &Value, path: &str) -> Result<Metric> {
    let map = object(value, path)?;
    let data = if let Some(v) = field(map, "gauge") {
        let path = child(path, "gauge");
        let gauge = object(v, &path)?;
        Some(metric::Data::Gauge(Gauge { data_points: list(gauge, &path, "dataPoints", number_point)? }))
    } else if let Some(v) = field(map, "sum") {
        let path = child(path, "sum");
        let sum = object(v, &path)?;
        Some(metric::Data::Sum(Sum {
            data_points: list(sum, &path, "dataPoints", number_point)?,
            aggregation_temporality: temporality(sum, &path)?,
            is_monotonic: boolean(sum, &path, "isMonotonic")?,
        }))
    } else if let Some(v) = field(map, "histogram") {
        let path = child(path, "histogram");
        let histogram = object(v, &path)?;
        Some(metric::Data::Histogram(Histogram {
            data_points: list(histogram, &path, "dataPoints", histogram_point)?,
            aggregation_temporality: temporality(histogram, &path)?,
        }))
    } else if let Some(v) = field(map, "exponentialHistogram") {
        let path = child(path, "exponentialHistogram");
        let histogram = object(v, &path)?;
        Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
            data_points: list(histogram, &path, "dataPoints", exponential_point)?,
            aggregation_temporality: temporality(histogram, &path)?,
        }))
    } else if let Some(v) = field(map, "summary") {
        let path = child(path, "summary");
        let summary = object(v, &path)?;
        Some(metric::Data::Summary(Summary { data_points: list(summary, &path, "dataPoints", summary_point)? }))
    } else {
        None
    };
    Ok(Metric {
        name: string(map, path, "name")?,
        description: string(map, path, "description")?,
        unit: string(map, path, "unit")?,
        data,
        ..Default::default()
    })
}

fn number_point(value: &Value, path: &str) -> Result<NumberDataPoint> {
    let map = object(value, path)?;
    let value = if let Some(v) = field(map, "asDouble") {
        Some(number_data_point::Value::AsDouble(double_at(v, &child(path, "asDouble"))?))
    } else if let Some(v) = field(map, "asInt") {
        Some(number_data_point::Value::AsInt(i64_at(v, &child(path, "asInt"))?))
    } else {
        None
    };
    Ok(NumberDataPoint {
        attributes: list(map, path, "attributes", key_value)?,
        start_time_unix_nano: u64_field(map, path, "startTimeUnixNano")?,
        time_unix_nano: u64_field(map, path, "timeUnixNano")?,
        flags: u32_field(map, path, "flags")?,
        value,
        ..Default::default()
    })
}

fn histogram_point(value: &Value, path: &str) -> Result<HistogramDataPoint> {
    let map = object(value, path)?;
    Ok(HistogramDataPoint {
        attributes: list(map, path, "attributes", key_value)?,
        start_time_unix_nano: u64_field(map, path, "startTimeUnixNano")?,
        time_unix_nano: u64_field(map, path, "timeUnixNano")?,
        count: u64_field(map, path, "count")?,
        sum: double_field(map, path, "sum")?,
        bucket_counts: list(map, path, "bucketCounts", u64_at)?,
        explicit_bounds: list(map, path, "explicitBounds", double_at)?,
        flags: u32_field(map, path, "flags")?,
        min: double_field(map, path, "min")?,
        max: double_field(map, path, "max")?,
        ..Default::default()
    })
}

fn buckets(map: &Map<String, Value>, path: &str, key: &str) -> Result<Option<exponential_histogram_data_point::Buckets>> {
    let Some(value) = field(map, key) else { return Ok(None) };
    let path = child(path, key);
    let buckets = object(value, &path)?;
    Ok(Some(exponential_histogram_data_point::Buckets {
        offset: i32_field(buckets, &path, "offset")?,
        bucket_counts: list(buckets, &path, "bucketCounts", u64_at)?,
    }))
}

fn exponential_point(value: &Value, path: &str) -> Result<ExponentialHistogramDataPoint> {
    let map = object(value, path)?;
    Ok(ExponentialHistogramDataPoint {
        attributes: list(map, path, "attributes", key_value)?,
        start_time_unix_nano: u64_field(map, path, "startTimeUnixNano")?,
        time_unix_nano: u64_field(map, path, "timeUnixNano")?,
        count: u64_field(map, path, "count")?,
        sum: double_field(map, path, "sum")?,
        scale: i32_field(map, path, "scale")?,
        zero_count: u64_field(map, path, "zeroCount")?,
        positive: buckets(map, path, "positive")?,
        negative: buckets(map, path, "negative")?,
        flags: u32_field(map, path, "flags")?,
        min: double_field(map, path, "min")?,
        max: double_field(map, path, "max")?,
        zero_threshold: double_field(map, path, "zeroThreshold")?.unwrap_or(0.0),
        ..Default::default()
    })
}

fn summary_point(value: &Value, path: &str) -> Result<SummaryDataPoint> {
    let map = object(value, path)?;
    let quantile = |value: &Value, path: &str| -> Result<summary_data_point::ValueAtQuantile> {
        let map = object(value, path)?;
        Ok(summary_data_point::ValueAtQuantile {
            quantile: double_field(map, path, "quantile")?.unwrap_or(0.0),
            value: double_field(map, path, "value")?.unwrap_or(0.0),
        })
    };
    Ok(SummaryDataPoint {
        attributes: list(map, path, "attributes", key_value)?,
        start_time_unix_nano: u64_field(map, path, "startTimeUnixNano")?,
        time_unix_nano: u64_field(map, path, "timeUnixNano")?,
        count: u64_field(map, path, "count")?,
        sum: double_field(map, path, "sum")?.unwrap_or(0.0),
        quantile_values: list(map, path, "quantileValues", quantile)?,
        flags: u32_field(map, path, "flags")?,
    })
}
