//! The range functions over one series' window: `rate`, `increase` and `delta` (Prometheus 2.42's
//! `extrapolatedRate`), irate idelta deriv changes resets stddev/stdvar_over_time, and the linear
//! regression of deriv/predict_linear and holt_winters.

use crate::functions::kahan_inc;

/// One series' samples in a window: (ms, value), in time order.
pub(crate) type Points = [(i64, f64)];

/// A range function's window: (start, end, range), in ms; both ends included.
pub(crate) type Window = (i64, i64, i64);

/// The extrapolated rate of `samples` in the window `(range_start, range_end, range_ms)`, or `None`
/// with fewer than two samples. Counter resets add the value before the reset.
pub fn extrapolated_rate(samples: &[(i64, f64)], window: (i64, i64, i64), is_counter: bool, is_rate: bool) -> Option<f64> {
    let (range_start, range_end, range_ms) = window;
    let (&(first_t, first_v), &(last_t, last_v)) = (samples.first()?, samples.last()?);
    if samples.len() < 2 {
        return None;
    }
    let mut result = last_v - first_v;
    if is_counter {
        let mut last_value = 0.0;
        for &(_, v) in samples {
            if v < last_value {
                result += last_value;
            }
            last_value = v;
        }
    }
    let mut duration_to_start = (first_t - range_start) as f64 / 1000.0;
    let duration_to_end = (range_end - last_t) as f64 / 1000.0;
    let sampled_interval = (last_t - first_t) as f64 / 1000.0;
    let average_between_samples = sampled_interval / (samples.len() - 1) as f64;
    if is_counter && result > 0.0 && first_v >= 0.0 {
        let duration_to_zero = sampled_interval * (first_v / result);
        if duration_to_zero < duration_to_start {
            duration_to_start = duration_to_zero;
        }
    }
    let threshold = average_between_samples * 1.1;
    let mut extrapolate_to = sampled_interval;
    extrapolate_to += if duration_to_start < threshold { duration_to_start } else { average_between_samples / 2.0 };
    extrapolate_to += if duration_to_end < threshold { duration_to_end } else { average_between_samples / 2.0 };
    result *= extrapolate_to / sampled_interval;
    if is_rate {
        result /= range_ms as f64 / 1000.0;
    }
    Some(result)
}

/// The range functions over a series' window samples that may yield no sample (Prometheus 2.42's
/// funcIrate, funcIdelta, funcDeriv, funcChanges, funcResets, funcStddevOverTime,
/// funcStdvarOverTime); `None` when `name` is not one.
pub fn range_function(name: &str) -> Option<fn(&Points) -> Option<f64>> {
    Some(match name {
        "irate" => |s| instant_value(s, true),
        "idelta" => |s| instant_value(s, false),
        "deriv" => deriv,
        "changes" => |s| {
            let changes = s.windows(2).filter(|w| w[0].1 != w[1].1 && !(w[0].1.is_nan() && w[1].1.is_nan())).count();
            (!s.is_empty()).then_some(changes as f64)
        },
        "resets" => |s| {
            let resets = s.windows(2).filter(|w| w[1].1 < w[0].1).count();
            (!s.is_empty()).then_some(resets as f64)
        },
        "stdvar_over_time" => |s| variance(s),
        "stddev_over_time" => |s| variance(s).map(f64::sqrt),
        _ => return None,
    })
}

/// irate/idelta: the last two samples; a counter reset makes irate use the last value alone.
fn instant_value(samples: &[(i64, f64)], is_rate: bool) -> Option<f64> {
    let [.., previous, last] = samples else { return None };
    let mut result = if is_rate && last.1 < previous.1 { last.1 } else { last.1 - previous.1 };
    let interval_ms = last.0 - previous.0;
    if interval_ms == 0 {
        return None;
    }
    if is_rate {
        result /= interval_ms as f64 / 1000.0;
    }
    Some(result)
}

/// Population variance by Welford's method, Kahan-compensated as 2.42's funcStdvarOverTime.
fn variance(samples: &[(i64, f64)]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (_, v) in samples {
        count += 1.0;
        let delta = v - (mean + c_mean);
        (mean, c_mean) = kahan_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_inc(delta * (v - (mean + c_mean)), aux, c_aux);
    }
    Some((aux + c_aux) / count)
}

/// deriv: the least-squares slope per second, x measured from the first sample.
fn deriv(samples: &[(i64, f64)]) -> Option<f64> {
    let [first, _, ..] = samples else { return None };
    Some(linear_regression(samples, first.0).0)
}

/// 2.42's linearRegression: (slope per second, value at `intercept_ms`), Kahan-compensated; a
/// constant series has slope 0 (NaN when the constant is infinite).
pub(crate) fn linear_regression(samples: &[(i64, f64)], intercept_ms: i64) -> (f64, f64) {
    let Some(&(_, init_y)) = samples.first() else { return (f64::NAN, f64::NAN) };
    let const_y = samples.iter().all(|(_, v)| *v == init_y);
    if const_y {
        return if init_y.is_infinite() { (f64::NAN, f64::NAN) } else { (0.0, init_y) };
    }
    let (mut n, mut sum_x, mut c_x, mut sum_y, mut c_y) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut sum_xy, mut c_xy, mut sum_x2, mut c_x2) = (0.0, 0.0, 0.0, 0.0);
    for (t, v) in samples {
        n += 1.0;
        let x = t.saturating_sub(intercept_ms) as f64 / 1e3;
        (sum_x, c_x) = kahan_inc(x, sum_x, c_x);
        (sum_y, c_y) = kahan_inc(*v, sum_y, c_y);
        (sum_xy, c_xy) = kahan_inc(x * v, sum_xy, c_xy);
        (sum_x2, c_x2) = kahan_inc(x * x, sum_x2, c_x2);
    }
    let (sum_x, sum_y, sum_xy, sum_x2) = (sum_x + c_x, sum_y + c_y, sum_xy + c_xy, sum_x2 + c_x2);
    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    let slope = cov_xy / var_x;
    (slope, sum_y / n - slope * sum_x / n)
}

/// 2.42's funcHoltWinters (double exponential smoothing); `None` with fewer than two samples.
pub(crate) fn holt_winters(samples: &[(i64, f64)], smoothing: f64, trend: f64) -> Option<f64> {
    let [first, second, ..] = samples else { return None };
    let (mut s0, mut s1, mut b) = (0.0, first.1, second.1 - first.1);
    for (i, (_, v)) in samples.iter().enumerate().skip(1) {
        let x = smoothing * v;
        if i > 1 {
            b = trend * (s1 - s0) + (1.0 - trend) * b;
        }
        let y = (1.0 - smoothing) * (s1 + b);
        (s0, s1) = (s1, x + y);
    }
    Some(s1)
}
