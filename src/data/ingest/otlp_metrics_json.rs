//! OTLP/JSON metrics into the protobuf messages, by the rules of the OTLP specification (see
//! [`super::otlp_json`], whose readers this shares) rather than the `opentelemetry-proto`
//! crate's serde derive, which silently loses what it cannot read: `"asDouble": "NaN"` or `"asInt": "x"` give a point without a value, a histogram whose
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
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint, exponential_histogram_data_point,
    metric, number_data_point, summary_data_point,
};
use serde_json::{Map, Value};

use super::otlp_json::{
    Nested, Result, boolean, child, double_at, double_field, error, field, i32_field, i64_at, list, object, resource, string,
    u32_field, u64_at, u64_field,
};

/// Parses an OTLP/JSON `ExportMetricsServiceRequest`.
pub fn decode(body: &[u8]) -> Result<ExportMetricsServiceRequest> {
    Ok(ExportMetricsServiceRequest { resource_metrics: super::otlp_json::request(body, "resourceMetrics", resource_metrics)? })
}

/// An attribute: nested values are emptied (see [`Nested::Emptied`]).
fn key_value(value: &Value, path: &str) -> Result<KeyValue> {
    super::otlp_json::key_value(value, path, Nested::Emptied)
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
    let resource = resource(map, path, Nested::Emptied)?;
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

/// The object at `key` of `map` and its path; none when the field is absent.
fn member<'v>(map: &'v Map<String, Value>, path: &str, key: &str) -> Result<Option<(&'v Map<String, Value>, String)>> {
    let Some(value) = field(map, key) else { return Ok(None) };
    let at = child(path, key);
    Ok(Some((object(value, &at)?, at)))
}

fn metric(value: &Value, path: &str) -> Result<Metric> {
    let map = object(value, path)?;
    let data = if let Some((gauge, at)) = member(map, path, "gauge")? {
        Some(metric::Data::Gauge(Gauge { data_points: list(gauge, &at, "dataPoints", number_point)? }))
    } else if let Some((sum, at)) = member(map, path, "sum")? {
        Some(metric::Data::Sum(Sum {
            data_points: list(sum, &at, "dataPoints", number_point)?,
            aggregation_temporality: temporality(sum, &at)?,
            is_monotonic: boolean(sum, &at, "isMonotonic")?,
        }))
    } else if let Some((histogram, at)) = member(map, path, "histogram")? {
        Some(metric::Data::Histogram(Histogram {
            data_points: list(histogram, &at, "dataPoints", histogram_point)?,
            aggregation_temporality: temporality(histogram, &at)?,
        }))
    } else if let Some((histogram, at)) = member(map, path, "exponentialHistogram")? {
        Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
            data_points: list(histogram, &at, "dataPoints", exponential_point)?,
            aggregation_temporality: temporality(histogram, &at)?,
        }))
    } else if let Some((summary, at)) = member(map, path, "summary")? {
        Some(metric::Data::Summary(Summary { data_points: list(summary, &at, "dataPoints", summary_point)? }))
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
