//! How a stored value looks as Prometheus series: the one mapping the Prometheus query API and
//! the remote-write exporter share, so a metric read from hotrule and the same metric exported to
//! a TSDB carry the same labels.
//!
//! - `__name__` is the metric name; the entity's non-empty names become labels (`service`,
//!   `service_instance`, `endpoint`, `process`, `source_service`, `dest_service`,
//!   `source_service_instance`, `dest_service_instance`, `detect_point`, `layer`), and `scope`
//!   names the entity's scope.
//! - A labeled value becomes one series per key, its `k=v` pairs as labels.
//! - A histogram becomes a Prometheus classic histogram: one series per bucket with `le` (the
//!   bucket's upper bound, as stored; SkyWalking's `Long.MAX_VALUE` bound of the `Infinity`
//!   bucket as `+Inf`) and the **cumulative** count up to it, so `histogram_quantile` reads it as
//!   Prometheus reads `_bucket` series. (SkyWalking stores per-bucket counts; `/query/metrics`
//!   shows those.)
//! - A histogram percentile becomes one series per rank with `p`, computed as SkyWalking does:
//!   the key of the first bucket whose running count reaches `round(total × rank / 100)`.

use std::collections::BTreeMap;

use hotrule_mal_engine::DetectPoint;

use super::{Entity, Value};

/// A label set, sorted by name (as Prometheus wants it).
pub type Labels = BTreeMap<String, String>;

/// The labels naming `entity`, plus `__name__` = `metric`.
pub fn series_labels(metric: &str, entity: &Entity) -> Labels {
    let mut labels = Labels::new();
    labels.insert("__name__".to_string(), metric.to_string());
    labels.insert("scope".to_string(), entity.scope.as_str().to_string());
    let names = [
        ("service", &entity.service_name),
        ("service_instance", &entity.instance_name),
        ("endpoint", &entity.endpoint_name),
        ("process", &entity.process_name),
        ("source_service", &entity.source_service_name),
        ("dest_service", &entity.dest_service_name),
        ("source_service_instance", &entity.source_instance_name),
        ("dest_service_instance", &entity.dest_instance_name),
        ("layer", &entity.layer),
    ];
    for (label, value) in names {
        if !value.is_empty() {
            labels.insert(label.to_string(), value.clone());
        }
    }
    if let Some(point) = entity.detect_point {
        let text = match point {
            DetectPoint::Client => "CLIENT",
            DetectPoint::Server => "SERVER",
            DetectPoint::Proxy => "PROXY",
        };
        labels.insert("detect_point".to_string(), text.to_string());
    }
    labels
}

/// The Prometheus samples of one stored value: `(labels, value)` pairs.
pub fn expand(metric: &str, entity: &Entity, value: &Value) -> Vec<(Labels, f64)> {
    let base = series_labels(metric, entity);
    match value {
        Value::Single(v) => vec![(base, *v as f64)],
        Value::Labeled(entries) => entries
            .iter()
            .map(|(key, v)| {
                let mut labels = base.clone();
                add_key_labels(&mut labels, key);
                (labels, *v as f64)
            })
            .collect(),
        Value::Histogram { labels: group, buckets, percentiles } => {
            let mut with_group = base;
            add_key_labels(&mut with_group, group);
            if percentiles.is_empty() {
                let mut ascending = buckets.clone();
                ascending.sort_by_key(|(bound, _)| *bound);
                let mut running = 0.0;
                ascending
                    .iter()
                    .map(|(bound, count)| {
                        let mut labels = with_group.clone();
                        let le = if *bound == i64::MAX { "+Inf".to_string() } else { bound.to_string() };
                        labels.insert("le".to_string(), le);
                        running += *count as f64;
                        (labels, running)
                    })
                    .collect()
            } else {
                percentiles
                    .iter()
                    .map(|rank| {
                        let mut labels = with_group.clone();
                        labels.insert("p".to_string(), rank.to_string());
                        (labels, percentile(buckets, *rank) as f64)
                    })
                    .collect()
            }
        }
    }
}

/// `k1=v1,k2=v2` (a DataTable key) as labels; a part without `=` is kept under `label`.
fn add_key_labels(labels: &mut Labels, key: &str) {
    for part in key.split(',').filter(|part| !part.is_empty()) {
        match part.split_once('=') {
            Some((name, value)) if !name.is_empty() => {
                labels.insert(sanitize_label_name(name), value.to_string());
            }
            _ => {
                labels.insert("label".to_string(), part.to_string());
            }
        }
    }
}

/// A label name Prometheus accepts: `[a-zA-Z_][a-zA-Z0-9_]*`, other characters as `_`.
pub fn sanitize_label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// SkyWalking's percentile: per-bucket counts in ascending bound order, `total = Σ`, `roof =
/// round(total × rank / 100)`; the bound of the first bucket whose running count reaches `roof`.
/// An empty histogram gives 0.
pub fn percentile(buckets: &[(i64, i64)], rank: u32) -> i64 {
    let mut sorted: Vec<(i64, i64)> = buckets.to_vec();
    sorted.sort_by_key(|(bound, _)| *bound);
    let total: i64 = sorted.iter().map(|(_, count)| *count).sum();
    if total <= 0 {
        return 0;
    }
    let roof = (total as f64 * f64::from(rank) / 100.0).round() as i64;
    let mut running = 0;
    for (bound, count) in &sorted {
        running += count;
        if running >= roof {
            return *bound;
        }
    }
    sorted.last().map_or(0, |(bound, _)| *bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotrule_mal_engine::ScopeType;

    fn service(name: &str) -> Entity {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = name.to_string();
        entity.layer = "OS_LINUX".to_string();
        entity
    }

    #[test]
    fn single_value_carries_the_entity_labels() {
        let samples = expand("meter_vm_cpu", &service("vm-1"), &Value::Single(42));
        assert_eq!(samples.len(), 1);
        let (labels, value) = &samples[0];
        assert_eq!(value, &42.0);
        assert_eq!(labels.get("__name__").map(String::as_str), Some("meter_vm_cpu"));
        assert_eq!(labels.get("service").map(String::as_str), Some("vm-1"));
        assert_eq!(labels.get("layer").map(String::as_str), Some("OS_LINUX"));
        assert_eq!(labels.get("scope").map(String::as_str), Some("SERVICE"));
        assert!(!labels.contains_key("endpoint"), "empty names are not labels");
    }

    #[test]
    fn labeled_value_is_one_series_per_key() {
        let value = Value::Labeled(vec![("mode=idle".to_string(), 7), ("mode=user,cpu=0".to_string(), 3)]);
        let samples = expand("m", &service("s"), &value);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].0.get("mode").map(String::as_str), Some("idle"));
        assert_eq!(samples[1].0.get("cpu").map(String::as_str), Some("0"));
        assert_eq!(samples[1].1, 3.0);
    }

    #[test]
    fn percentile_walks_buckets_without_interpolation() {
        // 10 samples: 5 ≤ 100, 3 ≤ 250, 2 ≤ 500. p50 → roof 5 → 100; p90 → roof 9 → 500.
        let buckets = vec![(250, 3), (100, 5), (500, 2)];
        assert_eq!(percentile(&buckets, 50), 100);
        assert_eq!(percentile(&buckets, 80), 250);
        assert_eq!(percentile(&buckets, 90), 500);
        assert_eq!(percentile(&[], 99), 0);
        assert_eq!(percentile(&[(100, 0)], 99), 0);
    }

    #[test]
    fn a_histogram_is_a_classic_prometheus_histogram() {
        // SkyWalking's per-bucket counts, `Infinity` stored as Long.MAX_VALUE, in any order.
        let value = Value::Histogram { labels: "status=200".into(), buckets: vec![(50, 3), (5, 5), (i64::MAX, 1), (500, 2)], percentiles: vec![] };
        let samples = expand("latency", &service("s"), &value);
        let got: Vec<(String, f64)> = samples.iter().map(|(l, v)| (l["le"].clone(), *v)).collect();
        assert_eq!(got, vec![("5".into(), 5.0), ("50".into(), 8.0), ("500".into(), 10.0), ("+Inf".into(), 11.0)]);
        assert!(samples.iter().all(|(l, _)| l.get("status").map(String::as_str) == Some("200")));
    }

    #[test]
    fn histogram_percentile_value_is_one_series_per_rank() {
        let value = Value::Histogram { labels: String::new(), buckets: vec![(100, 5), (250, 3), (500, 2)], percentiles: vec![50, 90] };
        let samples = expand("latency", &service("s"), &value);
        let got: Vec<(String, f64)> = samples.iter().map(|(l, v)| (l["p"].clone(), *v)).collect();
        assert_eq!(got, vec![("50".to_string(), 100.0), ("90".to_string(), 500.0)]);
    }

    #[test]
    fn label_names_are_sanitized() {
        assert_eq!(sanitize_label_name("http.status"), "http_status");
        assert_eq!(sanitize_label_name("0abc"), "_0abc");
        assert_eq!(sanitize_label_name(""), "_");
    }
}
