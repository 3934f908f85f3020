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
