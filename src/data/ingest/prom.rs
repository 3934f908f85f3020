//! Prometheus series (remote-write, scrapes, pushed exposition) into the samples MAL sees.
//!
//! SkyWalking reads Prometheus data only through an OpenTelemetry Collector (prometheus receiver
//! → OTLP → its OpenTelemetry receiver), and the bundled `otel-rules` are written against what
//! comes out of that path. This module reproduces it:
//!
//! | Prometheus | MAL sample |
//! |---|---|
//! | `__name__` | the sample name (`.` and `/` → `_`), not a label |
//! | `job` | `job_name` and `service_name` (collector: `service.name`) |
//! | `instance` | `service_instance_id`; its host → `server_address` and `node_identifier_host_name`, its port → `server_port` |
//! | other labels | kept; they override the ones above (data point attributes win) |
//! | `<n>_bucket{le}` (cumulative) | `<n>{le}` per-bucket counts, de-cumulated across `le`; `le` Java-spelled (`1.0`, `+Inf` → `Infinity`) |
//! | `<n>_sum`, `<n>_count` | as is |
//! | `quantile` | Java-spelled (`0.5`, `1.0`) |
//!
//! A bucket series is a sample named `*_bucket` with an `le` label. Buckets are de-cumulated per
//! series (name, labels without `le`, timestamp); a count lower than the previous bucket's (not
//! a cumulative histogram) gives 0. A missing `+Inf` bucket just means no `Infinity` bucket.

use std::collections::HashMap;
use std::sync::Arc;

use super::java::{double_to_string, escape_metric_name};
use crate::data::seam::Sample;
use hotrule_mal_engine::LabelMap;

/// A sample this conversion cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("series {series}: le={le:?} is not a number")]
pub struct BadBucket {
    /// The series as `name{labels}`.
    pub series: String,
    pub le: String,
}

/// `name{k="v",...}`, for error messages.
pub fn series_text(name: &str, labels: &LabelMap) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// Splits samples into scrapes: one group per (`job`, `instance`, timestamp), in order of first
/// appearance. Prometheus stamps every sample of one scrape with the scrape's time, so a group
/// is one scrape (or the part of it this request carries): the unit a collector turns into one
/// OTLP `ResourceMetrics`, and so SkyWalking's unit of evaluation.
pub fn split_scrapes(samples: Vec<Sample>) -> Vec<Vec<Sample>> {
    // Group numbers first, borrowing the label values; then move the samples.
    let mut group_of = Vec::with_capacity(samples.len());
    let mut sizes: Vec<usize> = Vec::new();
    {
        let mut index: HashMap<(&str, &str, i64), usize> = HashMap::new();
        for sample in &samples {
            let key = (sample.label("job"), sample.label("instance"), sample.timestamp_ms);
            let group = *index.entry(key).or_insert_with(|| {
                sizes.push(0);
                sizes.len() - 1
            });
            sizes[group] += 1;
            group_of.push(group);
        }
    }
    let mut groups: Vec<Vec<Sample>> = sizes.into_iter().map(Vec::with_capacity).collect();
    for (sample, group) in samples.into_iter().zip(group_of) {
        groups[group].push(sample);
    }
    groups
}

/// Converts Prometheus samples (labels still holding `job` and `instance`) into MAL samples.
/// Buckets with an unreadable `le` are returned as errors; everything else is converted. The
/// per-bucket samples of a histogram take the place of its first bucket in the output.
pub fn to_mal(samples: Vec<Sample>) -> (Vec<Sample>, Vec<BadBucket>) {
    // Consecutive samples of one series share their label map: convert it once.
    let mut last: Option<(Arc<LabelMap>, Arc<LabelMap>)> = None;
    convert(samples.into_iter().map(|mut sample| {
        let converted = match &last {
            Some((input, output)) if Arc::ptr_eq(input, &sample.labels) => output.clone(),
            _ => {
                let output = Arc::new(mal_labels(&sample.labels));
                last = Some((sample.labels.clone(), output.clone()));
                output
            }
        };
        let prometheus = std::mem::replace(&mut sample.labels, converted);
        (sample, move |name: &str| series_text(name, &prometheus))
    }))
}

/// [`to_mal`] of samples whose labels are already converted ([`mal_labels_of`]); `series_text`
/// names a bucket whose `le` does not parse (given the sample's name), as [`series_text`] of
/// its Prometheus labels would.
pub fn convert<F: FnOnce(&str) -> String>(samples: impl IntoIterator<Item = (Sample, F)>) -> (Vec<Sample>, Vec<BadBucket>) {
    /// Where an output sample comes from: a plain sample, or the histogram series at an index.
    enum Slot {
        Plain(Sample),
        Histogram(usize),
    }
    struct Series {
        name: String,
        labels: LabelMap,
        timestamp_ms: i64,
        /// (bound, cumulative count)
        buckets: Vec<(f64, f64)>,
    }
    let samples = samples.into_iter();
    let mut slots = Vec::with_capacity(samples.size_hint().0);
    let mut bad = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    let mut index: HashMap<(String, LabelMap, i64), usize> = HashMap::new();
    for (sample, text) in samples {
        let converted = sample.labels.clone();
        let bucket_base = sample.name.strip_suffix("_bucket").filter(|_| converted.contains_key("le"));
        if let Some(base) = bucket_base {
            let mut labels = LabelMap::clone(&converted);
            let le_text = labels.remove("le").unwrap_or_default();
            let Some(bound) = parse_bound(&le_text) else {
                bad.push(BadBucket { series: text(&sample.name), le: le_text });
                continue;
            };
            let key = (escape_metric_name(base), labels, sample.timestamp_ms);
            let at = match index.get(&key) {
                Some(at) => *at,
                None => {
                    let (name, labels, timestamp_ms) = key.clone();
                    series.push(Series { name, labels, timestamp_ms, buckets: Vec::new() });
                    slots.push(Slot::Histogram(series.len() - 1));
                    index.insert(key, series.len() - 1);
                    series.len() - 1
                }
            };
            series[at].buckets.push((bound, sample.value));
            continue;
        }
        let labels = match converted.get("quantile").and_then(|q| parse_bound(q)) {
            Some(q) => {
                let mut labels = LabelMap::clone(&converted);
                labels.insert("quantile".to_owned(), double_to_string(q));
                Arc::new(labels)
            }
            None => converted,
        };
        let name = if sample.name.contains(['.', '/']) { escape_metric_name(&sample.name) } else { sample.name };
        slots.push(Slot::Plain(Sample::new(name, labels, sample.value, sample.timestamp_ms)));
    }
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Slot::Plain(sample) => out.push(sample),
            Slot::Histogram(at) => {
                let Series { name, labels, timestamp_ms, mut buckets } = std::mem::replace(
                    &mut series[at],
                    Series { name: String::new(), labels: LabelMap::new(), timestamp_ms: 0, buckets: Vec::new() },
                );
                buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                let mut previous = 0.0;
                for (bound, cumulative) in buckets {
                    let count = (cumulative - previous).max(0.0);
                    previous = cumulative;
                    let mut bucket_labels = labels.clone();
                    bucket_labels.insert("le".to_owned(), double_to_string(bound));
                    out.push(Sample::new(name.clone(), Arc::new(bucket_labels), count, timestamp_ms));
                }
            }
        }
    }
    (out, bad)
}

/// The name [`to_mal`] gives the samples of a Prometheus series named `name` (`bucket`: it has
/// an `le` label): a `*_bucket` series is named after its histogram; `.` and `/` become `_`.
pub fn mal_name(name: &str, bucket: bool) -> std::borrow::Cow<'_, str> {
    let name = match name.strip_suffix("_bucket") {
        Some(base) if bucket => base,
        _ => name,
    };
    match name.contains(['.', '/']) {
        true => std::borrow::Cow::Owned(escape_metric_name(name)),
        false => std::borrow::Cow::Borrowed(name),
    }
}

/// A bound or quantile: a float, with Prometheus' `+Inf` / `-Inf` spellings.
pub fn parse_bound(text: &str) -> Option<f64> {
    match text.trim() {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        other => other.parse::<f64>().ok().filter(|v| !v.is_nan()),
    }
}

/// The collector's resource attributes from `job` and `instance`, with the series' other labels
/// overriding them.
fn mal_labels(prometheus: &LabelMap) -> LabelMap {
    mal_labels_of(prometheus.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// [`mal_labels`] of a series' labels given as distinct `(name, value)` pairs.
pub fn mal_labels_of<'a>(prometheus: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> LabelMap {
    let mut labels = LabelMap::new();
    let (mut job, mut instance) = (None, None);
    for (key, value) in prometheus.clone() {
        match key {
            "job" => job = Some(value),
            "instance" => instance = Some(value),
            _ => {}
        }
    }
    if let Some(job) = job {
        labels.insert("job_name".to_owned(), job.to_owned());
        labels.insert("service_name".to_owned(), job.to_owned());
    }
    if let Some(instance) = instance {
        labels.insert("service_instance_id".to_owned(), instance.to_owned());
        let (host, port) = split_host_port(instance);
        labels.insert("server_address".to_owned(), host.to_owned());
        labels.insert("node_identifier_host_name".to_owned(), host.to_owned());
        if let Some(port) = port {
            labels.insert("server_port".to_owned(), port.to_owned());
        }
    }
    for (key, value) in prometheus {
        if key != "job" && key != "instance" && key != "__name__" {
            labels.insert(key.to_owned(), value.to_owned());
        }
    }
    labels
}

/// `host:port`, `[v6]:port`, or a bare host.
fn split_host_port(instance: &str) -> (&str, Option<&str>) {
    if let Some(rest) = instance.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (host, after.strip_prefix(':').filter(|p| !p.is_empty()));
    }
    match instance.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, Some(port))
        }
        _ => (instance, None),
    }
}
