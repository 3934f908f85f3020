//! The samples of the exactness tests (`exact.rs` in process, `exact_process.rs` on real
//! processes): a rule with every downsampling function, labeled values and histograms, and
//! emissions of one entity to spread over nodes.

/// Every downsampling function, labeled values and histograms, for service `s`.
pub const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: x
metricsRules:
  - name: avg
    exp: load.sum(['svc'])
  - name: sum
    exp: load.sum(['svc']).downsampling(SUM)
  - name: latest
    exp: load.sum(['svc']).downsampling(LATEST)
  - name: max
    exp: load.sum(['svc']).downsampling(MAX)
  - name: min
    exp: load.sum(['svc']).downsampling(MIN)
  - name: per_min
    exp: load.sum(['svc']).downsampling(SUM_PER_MIN)
  - name: labeled
    exp: load.sum(['svc', 'mode'])
  - name: labeled_latest
    exp: load.sum(['svc', 'mode']).downsampling(LATEST)
  - name: hist
    exp: latency.sum(['svc', 'le']).histogram().downsampling(SUM)
  - name: pct
    exp: latency.sum(['svc', 'le']).histogram().histogram_percentile([50, 90])
";

/// The metrics [`RULE`] computes.
pub const METRICS: [&str; 10] =
    ["x_avg", "x_sum", "x_latest", "x_max", "x_min", "x_per_min", "x_labeled", "x_labeled_latest", "x_hist", "x_pct"];

/// Emission `n` of the minute starting at `minute_ms`: the exposition text of one push (one
/// batch, so one emission per rule). Values and sample times differ per emission; the sample
/// times are out of push order for `latest`. The last bucket is `le="Infinity"`: MAL's
/// `histogram()` reads `le` as Java's `Double.parseDouble` does and refuses `+Inf`.
pub fn emission(n: i64, minute_ms: i64) -> String {
    let at = minute_ms + [7_000, 2_000, 9_000, 4_000, 1_000, 8_000, 3_000][(n % 7) as usize] + n;
    let idle = [10, 10, 10, 50, 20, 5, 70][(n % 7) as usize];
    let user = [1, 2, 3, 4, 5, 6, 7][(n % 7) as usize];
    let mut text = format!("load{{svc=\"s\",mode=\"idle\"}} {idle} {at}\nload{{svc=\"s\",mode=\"user\"}} {user} {at}\n");
    let mut cumulative = 0;
    for (le, count) in [("100", 1 + n % 3), ("250", 2), ("500", n % 2), ("Infinity", 1)] {
        cumulative += count;
        text.push_str(&format!("latency{{svc=\"s\",le=\"{le}\"}} {cumulative} {at}\n"));
    }
    text
}

/// What emission `n` adds to `x_sum` (idle + user).
pub fn sum_of(n: i64) -> i64 {
    [11, 12, 13, 54, 25, 11, 77][(n % 7) as usize]
}
