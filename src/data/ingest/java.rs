//! The spellings SkyWalking's receivers produce, which bundled rules match on: Java's
//! `Double.toString` (bucket bounds, quantiles, double attributes) and the metric-name escape
//! (`.` and `/` become `_`).

/// Java's `Double.toString`: the shortest digits that read back as the same double, in decimal
/// notation with at least one fractional digit when `1e-3 <= |v| < 1e7` (`1.0`, `0.005`,
/// `1234567.0`), else computerized scientific notation (`1.0E10`, `1.0E-4`, `1.2345678E7`);
/// `NaN`, `Infinity`, `-Infinity`, `0.0`, `-0.0`.
pub fn double_to_string(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let magnitude = value.abs();
    // Rust's `{:e}` gives the shortest round-tripping digits: `d[.ddd]e<exp>`.
    let scientific = format!("{magnitude:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (1e-3..1e7).contains(&magnitude) {
        let text = if exponent >= 0 {
            let point = exponent as usize + 1;
            let padded = format!("{digits:0<point$}");
            let (whole, fraction) = padded.split_at(point);
            let fraction = if fraction.is_empty() { "0" } else { fraction };
            format!("{whole}.{fraction}")
        } else {
            let zeros = "0".repeat((-exponent - 1) as usize);
            format!("0.{zeros}{digits}")
        };
        return format!("{sign}{text}");
    }
    let (first, rest) = digits.split_at(1);
    let rest = if rest.is_empty() { "0" } else { rest };
    format!("{sign}{first}.{rest}E{exponent}")
}

/// SkyWalking's metric-name escape: `.` and `/` become `_`.
pub fn escape_metric_name(name: &str) -> String {
    name.replace(['.', '/'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_are_spelled_as_java_spells_them() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.005, "0.005"),
            (0.001, "0.001"),
            (0.0005, "5.0E-4"),
            (2.5, "2.5"),
            (10.0, "10.0"),
            (100.0, "100.0"),
            (1234567.0, "1234567.0"),
            (9999999.0, "9999999.0"),
            (1e7, "1.0E7"),
            (12345678.0, "1.2345678E7"),
            (1e10, "1.0E10"),
            (1.5e-5, "1.5E-5"),
            (0.1, "0.1"),
            (0.123, "0.123"),
            (-2.5, "-2.5"),
            (-1e10, "-1.0E10"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (300.0, "300.0"),
            (0.25, "0.25"),
        ];
        for (value, expected) in cases {
            assert_eq!(double_to_string(*value), *expected, "{value:?}");
        }
    }

    #[test]
    fn names_lose_dots_and_slashes() {
        assert_eq!(escape_metric_name("http.server/duration"), "http_server_duration");
        assert_eq!(escape_metric_name("node_load1"), "node_load1");
    }
}
