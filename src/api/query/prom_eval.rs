//! Evaluating a vector selector over stored series, as Prometheus evaluates one (pure).
//!
//! Each stored point becomes Prometheus samples through `metrics::prom::expand`, stamped at its
//! bucket's start. At an evaluation time `t` a series' value is its latest sample in
//! `(t - lookback, t]`; an instant query evaluates once at `time`, a range query at `start`,
//! `start + step`, ... up to `end` inclusive. A range query reads minute buckets when the step is
//! under an hour, hour buckets under a day, day buckets otherwise, and its lookback is at least
//! one bucket, so an hour or day value holds for its whole bucket.

use std::collections::BTreeMap;

use crate::data::metrics::prom::{Labels, expand, series_labels};
use crate::data::metrics::{Granularity, Series, Value};

use super::matcher::{Matcher, matches_all};

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

/// The stored series as Prometheus series, keeping those whose labels pass `matchers`; sorted by
/// labels. Entities that map to the same labels share one series.
pub fn to_prom_series(series: &[Series], matchers: &[Matcher]) -> Vec<PromSeries> {
    let mut by_labels: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
    for one in series {
        // Single values carry the entity's labels alone: built and matched once per series.
        if one.points.iter().all(|p| matches!(p.value, Value::Single(_))) {
            let labels = series_labels(&one.metric, &one.entity);
            if matches_all(matchers, &labels) {
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
                if matches_all(matchers, &labels) {
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

/// The latest sample of `samples` (time-ordered) in `(t - lookback, t]`, from index `from` on;
/// returns the value and the index to resume from for a later `t`.
fn value_at(samples: &[(i64, f64)], from: usize, t: i64, lookback_ms: i64) -> (Option<f64>, usize) {
    let mut index = from;
    while index < samples.len() && samples[index].0 <= t {
        index += 1;
    }
    let value = index.checked_sub(1).map(|i| samples[i]).filter(|(ms, _)| *ms > t - lookback_ms).map(|(_, v)| v);
    (value, index)
}

/// An instant query: each series' value at `t` (series without one are left out).
pub fn instant(series: &[PromSeries], t: i64, lookback_ms: i64) -> Vec<(Labels, f64)> {
    series
        .iter()
        .filter_map(|s| value_at(&s.samples, 0, t, lookback_ms).0.map(|v| (s.labels.clone(), v)))
        .collect()
}

/// A range query: each series' values at `start`, `start + step`, ... `≤ end` (series without
/// any are left out).
pub fn range(series: &[PromSeries], start: i64, end: i64, step: i64, lookback_ms: i64) -> Vec<(Labels, Vec<(i64, f64)>)> {
    let mut out = Vec::new();
    for s in series {
        let mut values = Vec::new();
        let mut from = 0;
        let mut t = start;
        while t <= end {
            // Samples before `t - lookback` can never count again; `from` only moves forward.
            let (value, next) = value_at(&s.samples, from, t, lookback_ms);
            from = next.saturating_sub(1).max(from);
            if let Some(v) = value {
                values.push((t, v));
            }
            t += step;
        }
        if !values.is_empty() {
            out.push((s.labels.clone(), values));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::metrics::{Entity, Point};
    use crate::api::query::matcher::MatchOp;
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

    fn one(points: &[(i64, f64)]) -> Vec<PromSeries> {
        vec![PromSeries { labels: Labels::new(), samples: points.to_vec() }]
    }

    #[test]
    fn instant_takes_the_latest_point_within_the_lookback() {
        let s = one(&[(60_000, 1.0), (120_000, 2.0)]);
        let value = |t| instant(&s, t, 300_000).first().map(|(_, v)| *v);
        assert_eq!(value(59_999), None, "nothing at or before t");
        assert_eq!(value(60_000), Some(1.0), "a point at t counts");
        assert_eq!(value(119_999), Some(1.0));
        assert_eq!(value(120_000), Some(2.0));
        assert_eq!(value(419_999), Some(2.0), "within 5m of the last point");
        assert_eq!(value(420_000), None, "the lookback window is open on the left");
    }

    #[test]
    fn range_steps_start_at_start_and_include_end() {
        let s = one(&[(0, 1.0), (60_000, 2.0), (120_000, 3.0)]);
        let got = range(&s, 30_000, 150_000, 60_000, 300_000);
        assert_eq!(got[0].1, vec![(30_000, 1.0), (90_000, 2.0), (150_000, 3.0)]);
        let aligned = range(&s, 0, 120_000, 60_000, 300_000);
        assert_eq!(aligned[0].1, vec![(0, 1.0), (60_000, 2.0), (120_000, 3.0)]);
        let stale = range(&s, 0, 900_000, 300_000, 300_000);
        assert_eq!(stale[0].1, vec![(0, 1.0), (300_000, 3.0)], "no value once the last point is older than the lookback");
        assert!(range(&s, 1_000_000, 2_000_000, 60_000, 300_000).is_empty());
    }

    #[test]
    fn matchers_filter_expanded_series() {
        let stored = vec![series("a", &[(0, 1)]), series("b", &[(0, 2)])];
        let only_b = [Matcher::new("service", MatchOp::Equal, "b").expect("matcher")];
        let got = to_prom_series(&stored, &only_b);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].labels.get("service").map(String::as_str), Some("b"));
        assert_eq!(got[0].samples, vec![(0, 2.0)]);
        assert_eq!(to_prom_series(&stored, &[]).len(), 2);
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
