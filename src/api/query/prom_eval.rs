//! Stored series as Prometheus series, and the bucket granularity a query reads (pure).
//!
//! Each stored point becomes Prometheus samples through `metrics::prom::expand`, stamped at its
//! bucket's start; `promql-engine` evaluates over them. A range query reads minute buckets when
//! the step is under an hour, hour buckets under a day, day buckets otherwise.

use std::collections::BTreeMap;

use crate::data::metrics::prom::{Labels, expand, series_labels};
use crate::data::metrics::{Granularity, Series, Value};

/// The most points per series a range query may ask for (Prometheus's limit).
pub const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// One Prometheus series: its labels and its samples `(ms, value)` in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSeries {
    pub labels: Labels,
    pub samples: Vec<(i64, f64)>,
}

/// The granularity a range query reads for `step_ms`.
pub fn granularity_for_step(step_ms: i64) -> Granularity {
    if step_ms < Granularity::Hour.millis() {
        Granularity::Minute
    } else if step_ms < Granularity::Day.millis() {
        Granularity::Hour
    } else {
        Granularity::Day
    }
}

/// The granularity a metadata read (series, labels, label values) uses for a window: minute
/// buckets up to 3 hours, hour buckets up to 3 days, day buckets beyond.
pub fn granularity_for_window(window_ms: i64) -> Granularity {
    if window_ms <= 3 * Granularity::Hour.millis() {
        Granularity::Minute
    } else if window_ms <= 3 * Granularity::Day.millis() {
        Granularity::Hour
    } else {
        Granularity::Day
    }
}

/// The stored series as Prometheus series, keeping those whose labels `keep` accepts (a
/// selector's matchers); sorted by labels. Entities that map to the same labels share one series.
pub fn to_prom_series(series: &[Series], keep: impl Fn(&Labels) -> bool) -> Vec<PromSeries> {
    let mut by_labels: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
    for one in series {
        // Single values carry the entity's labels alone: built and matched once per series.
        if one.points.iter().all(|p| matches!(p.value, Value::Single(_))) {
            let labels = series_labels(&one.metric, &one.entity);
            if keep(&labels) {
                let samples = by_labels.entry(labels).or_default();
                samples.extend(one.points.iter().filter_map(|p| match p.value {
                    Value::Single(v) => Some((p.start_ms, v as f64)),
                    _ => None,
                }));
            }
            continue;
        }
        for point in &one.points {
            for (labels, value) in expand(&one.metric, &one.entity, &point.value) {
                if keep(&labels) {
                    by_labels.entry(labels).or_default().push((point.start_ms, value));
                }
            }
        }
    }
    by_labels
        .into_iter()
        .map(|(labels, mut samples)| {
            samples.sort_by_key(|(ms, _)| *ms);
            samples.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    earlier.1 = later.1;
                }
                same
            });
            PromSeries { labels, samples }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::metrics::{Entity, Point};
    use hotrule_mal_engine::ScopeType;

    fn series(service: &str, points: &[(i64, i64)]) -> Series {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = service.to_string();
        Series {
            metric: "m".into(),
            entity,
            points: points.iter().map(|(ms, v)| Point { bucket: *ms / 60_000, start_ms: *ms, value: Value::Single(*v) }).collect(),
        }
    }

    #[test]
    fn the_selectors_test_filters_expanded_series() {
        let stored = vec![series("a", &[(0, 1)]), series("b", &[(0, 2)])];
        let got = to_prom_series(&stored, |labels| labels.get("service").is_some_and(|s| s == "b"));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].labels.get("service").map(String::as_str), Some("b"));
        assert_eq!(got[0].samples, vec![(0, 2.0)]);
        assert_eq!(to_prom_series(&stored, |_| true).len(), 2);
    }

    #[test]
    fn step_and_window_choose_granularity() {
        assert_eq!(granularity_for_step(60_000), Granularity::Minute);
        assert_eq!(granularity_for_step(3_599_999), Granularity::Minute);
        assert_eq!(granularity_for_step(3_600_000), Granularity::Hour);
        assert_eq!(granularity_for_step(86_400_000), Granularity::Day);
        assert_eq!(granularity_for_window(3_600_000), Granularity::Minute);
        assert_eq!(granularity_for_window(86_400_000), Granularity::Hour);
        assert_eq!(granularity_for_window(30 * 86_400_000), Granularity::Day);
    }
}
