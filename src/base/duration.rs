//! A duration setting as every config section writes it: `500ms`, `30s`, `5m`, `24h`, `7d`, or a
//! bare number of seconds. A leaf: each section's settings use it, and the config module that
//! assembles the sections imports them, so it cannot live in `config` itself.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A duration written as `500ms`, `30s`, `5m`, `24h`, `7d`, or a bare number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationSetting(pub Duration);

impl DurationSetting {
    pub fn parse(text: &str) -> Result<DurationSetting, String> {
        let text = text.trim();
        let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        if number.is_empty() {
            return Err(format!("{text:?} is not a duration (use e.g. 500ms, 30s, 5m, 24h)"));
        }
        let n: u64 = number.parse().map_err(|_| format!("{text:?} is out of range"))?;
        let millis = match unit.trim() {
            "ms" => Some(n),
            "" | "s" => n.checked_mul(1000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            "d" => n.checked_mul(86_400_000),
            other => return Err(format!("{text:?} has unknown unit {other:?} (use ms, s, m, h or d)")),
        };
        millis.map(|ms| DurationSetting(Duration::from_millis(ms))).ok_or_else(|| format!("{text:?} is out of range"))
    }
}

impl fmt::Display for DurationSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        match ms {
            0 => write!(f, "0s"),
            ms if ms % 3_600_000 == 0 => write!(f, "{}h", ms / 3_600_000),
            ms if ms % 60_000 == 0 => write!(f, "{}m", ms / 60_000),
            ms if ms % 1000 == 0 => write!(f, "{}s", ms / 1000),
            ms => write!(f, "{ms}ms"),
        }
    }
}

impl Serialize for DurationSetting {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for DurationSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = DurationSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 500ms, 30s, 5m, 24h, 7d, or a number of seconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationSetting, E> {
                Ok(DurationSetting(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationSetting, E> {
                u64::try_from(v)
                    .map(|s| DurationSetting(Duration::from_secs(s)))
                    .map_err(|_| E::custom(format!("{v} is negative; durations must be positive")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DurationSetting, E> {
                if v.is_finite() && v >= 0.0 {
                    Ok(DurationSetting(Duration::from_secs_f64(v)))
                } else {
                    Err(E::custom(format!("{v} is not a positive duration")))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSetting, E> {
                if v.trim_start().starts_with('-') {
                    return Err(E::custom(format!("{v:?} is negative; durations must be positive")));
                }
                DurationSetting::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}
