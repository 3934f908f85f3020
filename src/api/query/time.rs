//! Times and durations as the query APIs read and write them, and time buckets.
//!
//! - Prometheus API input: RFC 3339 (`2015-07-01T20:10:51.781Z`, any offset) or Unix seconds as
//!   a float (`1435781451.781`); durations `5m`, `1h30m`, `1.5` (float seconds).
//! - `/query/metrics` input: epoch milliseconds (all digits), RFC 3339, or SkyWalking's
//!   `yyyy-MM-dd HHmm` / `yyyy-MM-dd HH` / `yyyy-MM-dd` (UTC).
//! - Buckets are UTC `yyyyMMddHHmm` / `yyyyMMddHH` / `yyyyMMdd`, as `metrics` writes them.
//!
//! Everything here is pure: no clock is read.

use crate::data::metrics::Granularity;

/// Why a time or duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {text:?} to a valid {what}")]
pub struct TimeError {
    pub text: String,
    pub what: &'static str,
}

fn bad(text: &str, what: &'static str) -> TimeError {
    TimeError { text: text.to_string(), what }
}

pub use hotrule_mal_engine::{civil_from_days, days_from_civil};

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Epoch milliseconds of a UTC civil time, if the fields are in range.
fn civil_ms(year: i64, month: i64, day: i64, hour: i64, minute: i64, second: i64) -> Option<i64> {
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..61).contains(&second);
    valid.then(|| (days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second) * 1000)
}

/// The bucket (at `granularity`) holding the instant `ms`.
pub fn bucket_of(granularity: Granularity, ms: i64) -> i64 {
    granularity.bucket_of(ms)
}

/// The start (epoch ms, UTC) of a bucket, or `None` if it is not a valid bucket.
pub fn bucket_start_ms(granularity: Granularity, bucket: i64) -> Option<i64> {
    granularity.bucket_start_ms(bucket)
}

/// The start of the bucket holding `ms`.
pub fn floor_to(granularity: Granularity, ms: i64) -> i64 {
    ms - ms.rem_euclid(granularity.millis())
}

/// Prometheus's time parameter: Unix seconds (float) or RFC 3339. Returns epoch milliseconds.
pub fn parse_prom_time(text: &str) -> Result<i64, TimeError> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<f64>()
        && seconds.is_finite()
        && !trimmed.eq_ignore_ascii_case("inf")
    {
        let ms = (seconds * 1000.0).round();
        if ms.abs() < 9.0e15 {
            return Ok(ms as i64);
        }
    }
    parse_rfc3339(trimmed).ok_or_else(|| bad(text, "timestamp"))
}

/// RFC 3339 (`2015-07-01T20:10:51.781Z`, `...+02:00`; `t`/`z` and a space separator accepted).
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !text.is_ascii() {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let separators = bytes[4] == b'-' && bytes[7] == b'-' && matches!(bytes[10], b'T' | b't' | b' ') && bytes[13] == b':' && bytes[16] == b':';
    if !separators {
        return None;
    }
    let base = civil_ms(num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?)?;
    let mut rest = &text[19..];
    let mut frac_ms = 0i64;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let frac = &after_dot[..digits];
        let padded: String = frac.chars().chain("000".chars()).take(3).collect();
        frac_ms = padded.parse().ok()?;
        rest = &after_dot[digits..];
    }
    let offset_ms = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let offset = &rest[1..];
            if offset.len() != 5 || offset.as_bytes()[2] != b':' {
                return None;
            }
            let hours: i64 = offset[..2].parse().ok()?;
            let minutes: i64 = offset[3..].parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 3600 + minutes * 60) * 1000
        }
    };
    Some(base + frac_ms - offset_ms)
}

/// A read's `[start, end]` from its `start` and `end` parameters (`param` gives a parameter's
/// text, none when absent): `end` defaults to `now_ms`, `start` to `default_span_ms` before the
/// end. The message of a refusal names the parameter. `/query/metrics`, `/query/logs` and
/// `/query/alarms` read their ranges so.
pub fn query_range<'a>(param: impl Fn(&str) -> Option<&'a str>, now_ms: i64, default_span_ms: i64) -> Result<(i64, i64), String> {
    let time = |name: &str| param(name).map(|t| parse_query_time(t).map_err(|e| format!("query parameter {name}: {e}"))).transpose();
    let end_ms = time("end")?.unwrap_or(now_ms);
    let start_ms = time("start")?.unwrap_or(end_ms.saturating_sub(default_span_ms));
    if end_ms < start_ms {
        return Err(format!("query parameter end ({end_ms}) is before start ({start_ms})"));
    }
    Ok((start_ms, end_ms))
}

/// `/query/metrics`' time parameter: epoch ms, RFC 3339, or `yyyy-MM-dd HHmm|HH|` (UTC).
pub fn parse_query_time(text: &str) -> Result<i64, TimeError> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) && trimmed.len() <= 15 {
        return trimmed.parse().map_err(|_| bad(text, "time"));
    }
    if let Some(ms) = parse_rfc3339(trimmed) {
        return Ok(ms);
    }
    parse_skywalking(trimmed).ok_or_else(|| bad(text, "time (epoch ms, RFC 3339, or yyyy-MM-dd HHmm)"))
}

/// SkyWalking's `Duration` times: `yyyy-MM-dd`, `yyyy-MM-dd HH`, `yyyy-MM-dd HHmm`.
fn parse_skywalking(text: &str) -> Option<i64> {
    [0, 2, 4].into_iter().find_map(|digits| skywalking_time(text, digits))
}

/// A SkyWalking `Duration` time with exactly `time_digits` digits after the date: 0
/// (`yyyy-MM-dd`, step DAY), 2 (`yyyy-MM-dd HH`, HOUR), 4 (`yyyy-MM-dd HHmm`, MINUTE) or 6
/// (`yyyy-MM-dd HHmmss`, SECOND); UTC epoch milliseconds, none when it is not one.
pub fn skywalking_time(text: &str, time_digits: usize) -> Option<i64> {
    let bytes = text.as_bytes();
    if !text.is_ascii() || bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let digits = |part: &str| -> Option<i64> { part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())? };
    let (year, month, day) = (digits(&text[0..4])?, digits(&text[5..7])?, digits(&text[8..10])?);
    let time = &text[10..];
    let (hour, minute, second) = match time_digits {
        0 if time.is_empty() => (0, 0, 0),
        2 | 4 | 6 if time.len() == time_digits + 1 && time.starts_with(' ') => {
            let field = |i: usize| if i < time_digits { digits(&time[1 + i..3 + i]) } else { Some(0) };
            (field(0)?, field(2)?, field(4)?)
        }
        _ => return None,
    };
    civil_ms(year, month, day, hour, minute, second)
}

/// A Prometheus duration: `5m`, `1h30m`, `250ms`, `1d`, `1w`, `1y`, or float seconds. In ms.
pub fn parse_duration(text: &str) -> Result<i64, TimeError> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<f64>() {
        if seconds.is_finite() && seconds.abs() < 9.0e12 {
            return Ok((seconds * 1000.0).round() as i64);
        }
        return Err(bad(text, "duration"));
    }
    parse_prom_duration(trimmed).ok_or_else(|| bad(text, "duration"))
}

/// The `[0-9]+(ms|s|m|h|d|w|y)` units of PromQL durations, largest first, each at most once.
pub fn parse_prom_duration(text: &str) -> Option<i64> {
    const UNITS: [(&str, i64); 7] =
        [("y", 365 * 86_400_000), ("w", 7 * 86_400_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)];
    let mut rest = text;
    let mut total: i64 = 0;
    let mut last_unit = None;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let value: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = if rest.starts_with("ms") { 2 } else { rest.chars().next().map_or(0, char::len_utf8) };
        let unit = rest.get(..unit_len)?;
        let index = UNITS.iter().position(|(name, _)| *name == unit)?;
        if last_unit.is_some_and(|last| index <= last) {
            return None;
        }
        last_unit = Some(index);
        total = total.checked_add(value.checked_mul(UNITS[index].1)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// A timestamp as Prometheus writes it: a JSON number of seconds with at most 3 decimals
/// (`1435781451.781`, `1435781451`).
pub fn prom_timestamp(ms: i64) -> serde_json::Value {
    if ms % 1000 == 0 {
        serde_json::Value::from(ms / 1000)
    } else {
        serde_json::Number::from_f64(ms as f64 / 1000.0).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// A value as Prometheus writes it: Go's shortest `'f'` formatting, `'e'` when |v| < 1e-6 or
/// ≥ 1e21, and `+Inf`, `-Inf`, `NaN`.
pub fn prom_value(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    format!("{value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_and_unix_seconds() {
        assert_eq!(parse_prom_time("1435781451.781"), Ok(1_435_781_451_781));
        assert_eq!(parse_prom_time("1435781451"), Ok(1_435_781_451_000));
        assert_eq!(parse_prom_time("2015-07-01T20:10:51.781Z"), Ok(1_435_781_451_781));
        assert_eq!(parse_prom_time("2015-07-01T22:10:51.781+02:00"), Ok(1_435_781_451_781));
        assert_eq!(parse_prom_time("2015-07-01T20:10:51Z"), Ok(1_435_781_451_000));
        assert_eq!(parse_prom_time("2015-07-01T20:10:51.123456789Z"), Ok(1_435_781_451_123));
        for bad in ["", "yesterday", "2015-13-01T00:00:00Z", "2015-02-29T00:00:00Z", "2015-07-01T20:10:51", "NaN", "Inf"] {
            assert!(parse_prom_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_times_in_three_spellings() {
        assert_eq!(parse_query_time("1735732800000"), Ok(1_735_732_800_000));
        assert_eq!(parse_query_time("2025-01-01T12:00:00Z"), Ok(1_735_732_800_000));
        assert_eq!(parse_query_time("2025-01-01 1200"), Ok(1_735_732_800_000));
        assert_eq!(parse_query_time("2025-01-01 12"), Ok(1_735_732_800_000));
        assert_eq!(parse_query_time("2025-01-01"), Ok(1_735_689_600_000));
        assert!(parse_query_time("2025-01-01 1260").is_err());
        assert!(parse_query_time("01/01/2025").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m"), Ok(300_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("250ms"), Ok(250));
        assert_eq!(parse_duration("1.5"), Ok(1500));
        assert_eq!(parse_duration("60"), Ok(60_000));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("30m1h").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn buckets_round_trip() {
        let ms = 1_735_732_800_000 + 34 * 60_000 + 5_000; // 2025-01-01 12:34:05
        assert_eq!(bucket_of(Granularity::Minute, ms), 202_501_011_234);
        assert_eq!(bucket_of(Granularity::Hour, ms), 2_025_010_112);
        assert_eq!(bucket_of(Granularity::Day, ms), 20_250_101);
        assert_eq!(bucket_start_ms(Granularity::Minute, 202_501_011_234), Some(1_735_732_800_000 + 34 * 60_000));
        assert_eq!(bucket_start_ms(Granularity::Hour, 2_025_010_112), Some(1_735_732_800_000));
        assert_eq!(bucket_start_ms(Granularity::Day, 20_250_101), Some(1_735_689_600_000));
        assert_eq!(bucket_start_ms(Granularity::Minute, 202_501_011_261), None);
    }

    #[test]
    fn values_format_like_go() {
        assert_eq!(prom_value(1.0), "1");
        assert_eq!(prom_value(0.5), "0.5");
        assert_eq!(prom_value(f64::INFINITY), "+Inf");
        assert_eq!(prom_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(prom_value(f64::NAN), "NaN");
        assert_eq!(prom_value(0.0), "0");
        assert_eq!(prom_value(-2.25), "-2.25");
        assert_eq!(prom_value(1e-7), "1e-07");
        assert_eq!(prom_value(1.5e21), "1.5e+21");
        assert_eq!(prom_value(123_456_789.0), "123456789");
        assert_eq!(prom_value(0.000001), "0.000001");
    }

    #[test]
    fn timestamps_are_seconds_with_at_most_three_decimals() {
        assert_eq!(prom_timestamp(1_435_781_451_781).to_string(), "1435781451.781");
        assert_eq!(prom_timestamp(1_435_781_451_000).to_string(), "1435781451");
        assert_eq!(prom_timestamp(1_435_781_451_500).to_string(), "1435781451.5");
    }
}
