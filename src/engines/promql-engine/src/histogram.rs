//! `histogram_quantile` over classic `le` buckets, as Prometheus 2.42's funcHistogramQuantile and
//! `bucketQuantile` (`promql/quantile.go`). Native histograms are not stored by hotrule, so only
//! the classic form exists here.

use std::collections::BTreeMap;

use crate::eval::Labels;

type Sample = (Labels, i64, f64);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    upper_bound: f64,
    count: f64,
}

/// Groups `samples` by all labels but `le` (a series whose `le` does not parse as a float is
/// ignored) and gives each group's φ-quantile, labelled without `le` and `__name__`.
pub(crate) fn histogram_quantile(q: f64, samples: Vec<Sample>, t_ms: i64) -> Vec<Sample> {
    let mut groups: BTreeMap<Labels, Vec<Bucket>> = BTreeMap::new();
    for (mut labels, _, count) in samples {
        let Some(upper_bound) = labels.remove("le").and_then(|le| parse_go_float(&le)) else { continue };
        groups.entry(labels).or_default().push(Bucket { upper_bound, count });
    }
    groups
        .into_iter()
        .map(|(mut labels, buckets)| {
            labels.remove("__name__");
            (labels, t_ms, bucket_quantile(q, buckets))
        })
        .collect()
}

/// Go's `strconv.ParseFloat(s, 64)` for the forms an `le` label takes.
fn parse_go_float(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => Some(if lower.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY }),
        "nan" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// 2.42's bucketQuantile: NaN without a +Inf bucket or observations, linear interpolation
/// inside the bucket that holds the rank, buckets made monotonic first.
fn bucket_quantile(q: f64, mut buckets: Vec<Bucket>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.upper_bound.total_cmp(&b.upper_bound));
    if buckets.last().is_none_or(|last| last.upper_bound != f64::INFINITY) {
        return f64::NAN;
    }
    let mut buckets = coalesce(buckets);
    ensure_monotonic(&mut buckets);
    if buckets.len() < 2 {
        return f64::NAN;
    }
    let observations = buckets[buckets.len() - 1].count;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    // sort.Search over all but the +Inf bucket: the first whose count reaches the rank.
    let b = buckets[..buckets.len() - 1].iter().position(|bucket| bucket.count >= rank).unwrap_or(buckets.len() - 1);
    if b == buckets.len() - 1 {
        return buckets[buckets.len() - 2].upper_bound;
    }
    if b == 0 && buckets[0].upper_bound <= 0.0 {
        return buckets[0].upper_bound;
    }
    let bucket_end = buckets[b].upper_bound;
    let mut count = buckets[b].count;
    let mut bucket_start = 0.0;
    if b > 0 {
        bucket_start = buckets[b - 1].upper_bound;
        count -= buckets[b - 1].count;
        rank -= buckets[b - 1].count;
    }
    bucket_start + (bucket_end - bucket_start) * (rank / count)
}

/// Buckets with the same upper bound are added together.
fn coalesce(buckets: Vec<Bucket>) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::with_capacity(buckets.len());
    for bucket in buckets {
        match out.last_mut() {
            Some(last) if last.upper_bound == bucket.upper_bound => last.count += bucket.count,
            _ => out.push(bucket),
        }
    }
    out
}

/// A bucket's count is at least the largest count below it.
fn ensure_monotonic(buckets: &mut [Bucket]) {
    let Some(first) = buckets.first() else { return };
    let mut max = first.count;
    for bucket in buckets.iter_mut().skip(1) {
        if bucket.count > max {
            max = bucket.count;
        } else if bucket.count < max {
            bucket.count = max;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(pairs: &[(f64, f64)]) -> Vec<Bucket> {
        pairs.iter().map(|&(upper_bound, count)| Bucket { upper_bound, count }).collect()
    }

    #[test]
    fn interpolates_inside_the_bucket_holding_the_rank() {
        let b = buckets(&[(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (f64::INFINITY, 40.0)]);
        assert!((bucket_quantile(0.5, b.clone()) - 0.3).abs() < 1e-12);
        assert_eq!(bucket_quantile(1.0, b.clone()), 1.0);
        assert_eq!(bucket_quantile(-0.5, b.clone()), f64::NEG_INFINITY);
        assert_eq!(bucket_quantile(1.5, b.clone()), f64::INFINITY);
        assert!(bucket_quantile(f64::NAN, b).is_nan());
    }

    #[test]
    fn without_an_inf_bucket_or_observations_it_is_nan() {
        assert!(bucket_quantile(0.5, buckets(&[(0.1, 10.0), (1.0, 20.0)])).is_nan());
        assert!(bucket_quantile(0.5, buckets(&[(1.0, 0.0), (f64::INFINITY, 0.0)])).is_nan());
        assert!(bucket_quantile(0.5, Vec::new()).is_nan());
    }

    #[test]
    fn non_monotonic_counts_are_raised_to_the_running_maximum() {
        // Counts 10, 5, 20: the second becomes 10, so the median rank 10 falls in the first bucket.
        let b = buckets(&[(1.0, 10.0), (2.0, 5.0), (f64::INFINITY, 20.0)]);
        assert_eq!(bucket_quantile(0.5, b), 1.0);
    }

    #[test]
    fn an_unparsable_le_is_ignored_and_the_name_dropped() {
        let sample = |le: &str, v: f64| -> Sample {
            ([("__name__".to_string(), "h_bucket".to_string()), ("le".to_string(), le.to_string())].into(), 0, v)
        };
        let out = histogram_quantile(0.5, vec![sample("1", 10.0), sample("+Inf", 10.0), sample("x", 100.0)], 7);
        assert_eq!(out, vec![(Labels::new(), 7, 0.5)]);
    }
}
