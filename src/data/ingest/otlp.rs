//! OTLP metrics to MAL samples, as SkyWalking's OpenTelemetry receiver maps them
//! (`OpenTelemetryMetricRequestProcessor` + `PrometheusMetricConverter`). Pure: a decoded
//! `ExportMetricsServiceRequest` in, batches and the refused points out.
//!
//! - One batch per `ResourceMetrics` (SkyWalking's unit of MAL evaluation); a resource that
//!   yields no sample yields no batch.
//! - Labels: resource attributes with `.` → `_` in keys (first wins), then the fallbacks
//!   `service.name` → `job_name`, `net.host.name` / `host.name` → `node_identifier_host_name`
//!   (only when the target is absent), then the data point's attributes (converted the same way,
//!   first wins) override. Scope attributes, exemplars, start times and metadata are ignored.
//! - Values: bool `true`/`false`, int decimal, double Java-spelled, string as is,
//!   array/kvlist/bytes `""`.
//! - Names: `.` and `/` → `_`; timestamps `time_unix_nano / 1e6`.
//! - Dropped as SkyWalking drops them: points flagged `NO_RECORDED_VALUE`, sums of UNSPECIFIED
//!   temporality. Refused (the rest of the request is still taken, answered as OTLP partial
//!   success): number points without a value, histogram points whose bucket counts do not match
//!   their bounds, metrics without data.

use std::collections::BTreeMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogramDataPoint, HistogramDataPoint, Metric, NumberDataPoint, SummaryDataPoint, metric,
    number_data_point,
};
use prost::Message;

use super::java::{double_to_string, escape_metric_name};
use crate::data::seam::{Batch, Catalog, Protocol, Sample};
use hotrule_mal_engine::LabelMap;

/// `DataPointFlags.NO_RECORDED_VALUE`.
const FLAG_NO_RECORDED_VALUE: u32 = 1;

/// Why a request body is not an OTLP metrics request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OtlpDecodeError {
    #[error("not an ExportMetricsServiceRequest in protobuf: {0}")]
    Protobuf(String),
    #[error(transparent)]
    Json(#[from] super::otlp_json::JsonError),
}

/// Why one data point (or one metric) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointError {
    #[error("the data point has neither asDouble nor asInt")]
    MissingValue,
    #[error("{buckets} bucket counts for {bounds} explicit bounds (expected {})", bounds + 1)]
    BucketCountMismatch { buckets: usize, bounds: usize },
    #[error("the metric has no gauge, sum, histogram, exponentialHistogram or summary")]
    NoData,
}

/// One refused point, located in the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resourceMetrics[{resource}] metric {metric:?} data point {point}: {reason}")]
pub struct RefusedPoint {
    pub resource: usize,
    pub metric: String,
    pub point: usize,
    pub reason: PointError,
}

/// What a request maps to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtlpMapping {
    pub batches: Vec<Batch>,
    pub refused: Vec<RefusedPoint>,
    /// Points flagged `NO_RECORDED_VALUE` (dropped, as SkyWalking drops them).
    pub no_recorded_value: usize,
    /// Points of sums with UNSPECIFIED temporality (dropped, as SkyWalking drops them).
    pub unspecified_temporality: usize,
}

impl OtlpMapping {
    pub fn sample_count(&self) -> usize {
        self.batches.iter().map(|b| b.samples.len()).sum()
    }
}

/// Decodes a protobuf `ExportMetricsServiceRequest`.
pub fn decode_protobuf(body: &[u8]) -> Result<ExportMetricsServiceRequest, OtlpDecodeError> {
    ExportMetricsServiceRequest::decode(body).map_err(|e| OtlpDecodeError::Protobuf(e.to_string()))
}

/// Maps a decoded request; `received_ms` stamps the batches.
pub fn map_request(request: &ExportMetricsServiceRequest, received_ms: i64) -> OtlpMapping {
    let mut out = OtlpMapping::default();
    for (resource_index, resource_metrics) in request.resource_metrics.iter().enumerate() {
        let attributes = resource_metrics.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let node = node_labels(attributes);
        let mut samples = Vec::new();
        for scope in &resource_metrics.scope_metrics {
            for metric in &scope.metrics {
                let mut refuse = |point: usize, reason: PointError| {
                    out.refused.push(RefusedPoint { resource: resource_index, metric: metric.name.clone(), point, reason })
                };
                map_metric(metric, &node, &mut samples, &mut refuse, &mut out.no_recorded_value, &mut out.unspecified_temporality);
            }
        }
        if !samples.is_empty() {
            out.batches.push(Batch { protocol: Protocol::Otlp, catalog: Catalog::Otel, samples, received_ms });
        }
    }
    out
}

/// The labels every sample of a resource carries.
pub fn node_labels(attributes: &[KeyValue]) -> LabelMap {
    let mut labels = LabelMap::new();
    for kv in attributes {
        labels.entry(kv.key.replace('.', "_")).or_insert_with(|| value_to_string(kv.value.as_ref()));
    }
    for kv in attributes {
        let target = match kv.key.as_str() {
            "net.host.name" | "host.name" => "node_identifier_host_name",
            "service.name" => "job_name",
            _ => continue,
        };
        labels.entry(target.to_owned()).or_insert_with(|| value_to_string(kv.value.as_ref()));
    }
    labels
}

/// A data point's own labels (first wins on a key collision).
fn point_labels(attributes: &[KeyValue]) -> LabelMap {
    let mut labels = LabelMap::new();
    for kv in attributes {
        labels.entry(kv.key.replace('.', "_")).or_insert_with(|| value_to_string(kv.value.as_ref()));
    }
    labels
}

/// SkyWalking's `anyValueToString`.
pub fn value_to_string(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => double_to_string(*d),
        Some(any_value::Value::StringValue(s)) => s.clone(),
        _ => String::new(),
    }
}

fn merged(node: &LabelMap, attributes: &[KeyValue]) -> LabelMap {
    let mut labels = node.clone();
    labels.extend(point_labels(attributes));
    labels
}

fn ms(time_unix_nano: u64) -> i64 {
    // u64 nanoseconds / 1e6 always fits an i64.
    (time_unix_nano / 1_000_000) as i64
}

fn recorded(flags: u32) -> bool {
    flags & FLAG_NO_RECORDED_VALUE == 0
}

fn map_metric(
    metric: &Metric,
    node: &LabelMap,
    samples: &mut Vec<Sample>,
    refuse: &mut impl FnMut(usize, PointError),
    no_recorded_value: &mut usize,
    unspecified: &mut usize,
) {
    let name = escape_metric_name(&metric.name);
    match &metric.data {
        Some(metric::Data::Gauge(gauge)) => {
            number_points(&name, &gauge.data_points, node, samples, refuse, no_recorded_value);
        }
        Some(metric::Data::Sum(sum)) => {
            // Only UNSPECIFIED is dropped; DELTA and CUMULATIVE (monotonic or not) pass as is.
            if sum.aggregation_temporality == 0 {
                *unspecified += sum.data_points.len();
            } else {
                number_points(&name, &sum.data_points, node, samples, refuse, no_recorded_value);
            }
        }
        Some(metric::Data::Histogram(histogram)) => {
            for (index, point) in histogram.data_points.iter().enumerate() {
                if !recorded(point.flags) {
                    *no_recorded_value += 1;
                    continue;
                }
                match explicit_buckets(point) {
                    Ok(buckets) => histogram_samples(&name, merged(node, &point.attributes), point_common(point), buckets, samples),
                    Err(reason) => refuse(index, reason),
                }
            }
        }
        Some(metric::Data::ExponentialHistogram(histogram)) => {
            for point in &histogram.data_points {
                if !recorded(point.flags) {
                    *no_recorded_value += 1;
                    continue;
                }
                let common = (point.count, point.sum.unwrap_or(0.0), ms(point.time_unix_nano));
                histogram_samples(&name, merged(node, &point.attributes), common, exponential_buckets(point), samples);
            }
        }
        Some(metric::Data::Summary(summary)) => {
            for point in &summary.data_points {
                if !recorded(point.flags) {
                    *no_recorded_value += 1;
                    continue;
                }
                summary_samples(&name, merged(node, &point.attributes), point, samples);
            }
        }
        None => refuse(0, PointError::NoData),
    }
}

fn number_points(
    name: &str,
    points: &[NumberDataPoint],
    node: &LabelMap,
    samples: &mut Vec<Sample>,
    refuse: &mut impl FnMut(usize, PointError),
    no_recorded_value: &mut usize,
) {
    for (index, point) in points.iter().enumerate() {
        if !recorded(point.flags) {
            *no_recorded_value += 1;
            continue;
        }
        let value = match point.value {
            Some(number_data_point::Value::AsDouble(d)) => d,
            Some(number_data_point::Value::AsInt(i)) => i as f64,
            None => {
                refuse(index, PointError::MissingValue);
                continue;
            }
        };
        samples.push(Sample::new(name, Arc::new(merged(node, &point.attributes)), value, ms(point.time_unix_nano)));
    }
}

/// `(count, sum, timestamp_ms)` of a histogram point; an absent sum reads 0 (protobuf-java's
/// default, which SkyWalking stores).
fn point_common(point: &HistogramDataPoint) -> (u64, f64, i64) {
    (point.count, point.sum.unwrap_or(0.0), ms(point.time_unix_nano))
}

/// Upper bound → per-bucket count; the last bucket's bound is `+Infinity`. A point without
/// buckets (count and sum only) is valid and has none.
fn explicit_buckets(point: &HistogramDataPoint) -> Result<Vec<(f64, u64)>, PointError> {
    let (counts, bounds) = (&point.bucket_counts, &point.explicit_bounds);
    if counts.is_empty() && bounds.is_empty() {
        return Ok(Vec::new());
    }
    if counts.len() != bounds.len() + 1 {
        return Err(PointError::BucketCountMismatch { buckets: counts.len(), bounds: bounds.len() });
    }
    let mut buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(counts.iter().copied()).collect();
    buckets.push((f64::INFINITY, counts[bounds.len()]));
    Ok(buckets)
}

/// SkyWalking's `buildBucketsFromExponentialHistogram`: positive bucket i has the bound
/// `base^(offset+i+1)` with `base = 2^(2^-scale)`, the last positive bucket becomes
/// `+Infinity`; negative bucket i has `-base^(offset+i)`; `zero_count` is ignored. Bounds out of
/// the double range give no buckets at all.
fn exponential_buckets(point: &ExponentialHistogramDataPoint) -> Vec<(f64, u64)> {
    let base = 2f64.powf(2f64.powf(-f64::from(point.scale)));
    if base.is_infinite() {
        return Vec::new();
    }
    let mut buckets = Vec::new();
    if let Some(negative) = &point.negative {
        for (i, count) in negative.bucket_counts.iter().enumerate() {
            let bound = -base.powf(f64::from(negative.offset) + i as f64);
            if bound.is_infinite() {
                return Vec::new();
            }
            buckets.push((bound, *count));
        }
    }
    if let Some(positive) = &point.positive
        && let Some((last, rest)) = positive.bucket_counts.split_last()
    {
        for (i, count) in rest.iter().enumerate() {
            let bound = base.powf(f64::from(positive.offset) + i as f64 + 1.0);
            if bound.is_infinite() {
                return Vec::new();
            }
            buckets.push((bound, *count));
        }
        buckets.push((f64::INFINITY, *last));
    }
    buckets
}

fn with_label(labels: &LabelMap, key: &str, value: String) -> Arc<LabelMap> {
    let mut labels = labels.clone();
    labels.insert(key.to_owned(), value);
    Arc::new(labels)
}

fn histogram_samples(name: &str, labels: LabelMap, (count, sum, ts): (u64, f64, i64), buckets: Vec<(f64, u64)>, samples: &mut Vec<Sample>) {
    samples.push(Sample::new(format!("{name}_count"), Arc::new(labels.clone()), count as f64, ts));
    samples.push(Sample::new(format!("{name}_sum"), Arc::new(labels.clone()), sum, ts));
    // Java's HashMap keyed by bound: a repeated bound keeps the later count.
    let mut by_bound: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (bound, count) in buckets {
        by_bound.insert(double_to_string(bound), (bound, count));
    }
    let mut ordered: Vec<(String, f64, u64)> = by_bound.into_iter().map(|(le, (bound, count))| (le, bound, count)).collect();
    ordered.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (le, _, count) in ordered {
        samples.push(Sample::new(name, with_label(&labels, "le", le), count as f64, ts));
    }
}

fn summary_samples(name: &str, labels: LabelMap, point: &SummaryDataPoint, samples: &mut Vec<Sample>) {
    let ts = ms(point.time_unix_nano);
    samples.push(Sample::new(format!("{name}_count"), Arc::new(labels.clone()), point.count as f64, ts));
    samples.push(Sample::new(format!("{name}_sum"), Arc::new(labels.clone()), point.sum, ts));
    let mut by_quantile: BTreeMap<String, f64> = BTreeMap::new();
    for quantile in &point.quantile_values {
        by_quantile.insert(double_to_string(quantile.quantile), quantile.value);
    }
    for (quantile, value) in by_quantile {
        samples.push(Sample::new(name, with_label(&labels, "quantile", quantile), value, ts));
    }
}
