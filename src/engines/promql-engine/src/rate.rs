//! `rate`, `increase` and `delta`: Prometheus 2.42's `extrapolatedRate`.

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
pub fn range_function(name: &str) -> Option<fn(&[(i64, f64)]) -> Option<f64>> {
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

/// Population variance by Welford's method.
fn variance(samples: &[(i64, f64)]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let (mut count, mut mean, mut aux) = (0.0, 0.0, 0.0);
    for (_, v) in samples {
        count += 1.0;
        let delta = v - mean;
        mean += delta / count;
        aux += delta * (v - mean);
    }
    Some(aux / count)
}

/// deriv: the least-squares slope per second, x measured from the first sample (Prometheus'
/// linearRegression with interceptTime = the first timestamp); a constant series has slope 0.
fn deriv(samples: &[(i64, f64)]) -> Option<f64> {
    let [first, _, ..] = samples else { return None };
    if samples.iter().all(|(_, v)| *v == first.1) {
        return Some(if first.1.is_infinite() { f64::NAN } else { 0.0 });
    }
    let (mut n, mut sum_x, mut sum_y, mut sum_xy, mut sum_x2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (t, v) in samples {
        let x = (t - first.0) as f64 / 1000.0;
        n += 1.0;
        sum_x += x;
        sum_y += v;
        sum_xy += x * v;
        sum_x2 += x * x;
    }
    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    Some(cov_xy / var_x)
}
