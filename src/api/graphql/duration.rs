//! The query protocol's `Duration` input: `start` and `end` in the format of the `step`
//! (`yyyy-MM-dd`, `yyyy-MM-dd HH`, `yyyy-MM-dd HHmm`, `yyyy-MM-dd HHmmss`; hotrule's time zone
//! is UTC, `getTimeInfo` says `+0000`), and the time points it names: one per step, start and
//! end inclusive, as OAP's `DurationUtils` counts them.

use hotrule_mqe_engine::Step;
use serde_json::Value;

use crate::api::query::time::skywalking_time;

/// The most points one metric read may span. OAP refuses more than 500; booster-ui never asks
/// for more than 60 minutes or 24 hours, but a day at minute step (1,440) is what a script or
/// Grafana asks, so hotrule allows two weeks of minutes and says so when refused.
pub const MAX_POINTS: i64 = 20_160;

/// A parsed `Duration`: the first and last points' epoch milliseconds (each the start of its
/// step), the step, and whether the cold stage was asked for (hotrule has none; ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryDuration {
    pub start_ms: i64,
    pub end_ms: i64,
    pub step: Step,
}

/// Why a `Duration` was refused; the message goes into the answer's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("duration: {0}")]
    Shape(&'static str),
    #[error("duration {field} {text:?} is not {format} (the format of step {step})")]
    Format { field: &'static str, text: String, format: &'static str, step: &'static str },
    #[error("duration end {end:?} is before start {start:?}")]
    Reversed { start: String, end: String },
    #[error("duration spans {points} points at step {step}; at most {MAX_POINTS} (use a coarser step)")]
    TooLong { points: i64, step: &'static str },
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Second => "SECOND",
        Step::Minute => "MINUTE",
        Step::Hour => "HOUR",
        Step::Day => "DAY",
    }
}

/// The `Step` enum value.
pub fn parse_step(text: &str) -> Option<Step> {
    match text {
        "SECOND" => Some(Step::Second),
        "MINUTE" => Some(Step::Minute),
        "HOUR" => Some(Step::Hour),
        "DAY" => Some(Step::Day),
        _ => None,
    }
}

impl QueryDuration {
    /// Reads a coerced `Duration` input object (the GraphQL layer checked its shape already; this
    /// checks it again, so a hand-built value cannot panic it).
    pub fn from_input(input: &Value) -> Result<QueryDuration, DurationError> {
        let text = |field: &str| input.get(field).and_then(Value::as_str);
        let step = text("step").and_then(parse_step).ok_or(DurationError::Shape("step is not DAY, HOUR, MINUTE or SECOND"))?;
        let (start, end) = match (text("start"), text("end")) {
            (Some(start), Some(end)) => (start.trim(), end.trim()),
            _ => return Err(DurationError::Shape("start and end are required")),
        };
        let (digits, format) = match step {
            Step::Day => (0, "yyyy-MM-dd"),
            Step::Hour => (2, "yyyy-MM-dd HH"),
            Step::Minute => (4, "yyyy-MM-dd HHmm"),
            Step::Second => (6, "yyyy-MM-dd HHmmss"),
        };
        let parse = |field: &'static str, text: &str| {
            skywalking_time(text, digits).ok_or_else(|| DurationError::Format { field, text: text.to_string(), format, step: step_name(step) })
        };
        let (start_ms, end_ms) = (parse("start", start)?, parse("end", end)?);
        if end_ms < start_ms {
            return Err(DurationError::Reversed { start: start.to_string(), end: end.to_string() });
        }
        Ok(QueryDuration { start_ms, end_ms, step })
    }

    /// The same, refused when it spans more than [`MAX_POINTS`] points (metric reads).
    pub fn bounded(self) -> Result<QueryDuration, DurationError> {
        let points = (self.end_ms - self.start_ms) / self.step.millis() + 1;
        if points > MAX_POINTS {
            return Err(DurationError::TooLong { points, step: step_name(self.step) });
        }
        Ok(self)
    }

    /// The MQE engine's window.
    pub fn mqe(self) -> hotrule_mqe_engine::Duration {
        hotrule_mqe_engine::Duration::new(self.start_ms, self.end_ms, self.step)
    }

    /// The last millisecond the duration covers (the end point's whole step).
    pub fn end_inclusive_ms(self) -> i64 {
        self.end_ms.saturating_add(self.step.millis() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOON: i64 = 1_704_110_400_000; // 2024-01-01T12:00:00Z

    #[test]
    fn every_step_reads_its_format() {
        let cases = [
            ("MINUTE", "2024-01-01 1200", "2024-01-01 1300", NOON, NOON + 3_600_000, 61),
            ("HOUR", "2024-01-01 12", "2024-01-01 13", NOON, NOON + 3_600_000, 2),
            ("DAY", "2024-01-01", "2024-01-02", NOON - 43_200_000, NOON + 43_200_000, 2),
            ("SECOND", "2024-01-01 120000", "2024-01-01 120059", NOON, NOON + 59_000, 60),
        ];
        for (step, start, end, start_ms, end_ms, points) in cases {
            let d = QueryDuration::from_input(&json!({"start": start, "end": end, "step": step, "coldStage": false})).expect(step);
            assert_eq!((d.start_ms, d.end_ms), (start_ms, end_ms), "{step}");
            assert_eq!(d.mqe().point_count(), Some(points), "{step}: start and end inclusive");
        }
    }

    #[test]
    fn refusals_say_why() {
        let cases = [
            (json!({"start": "2024-01-01 12", "end": "2024-01-01 1300", "step": "MINUTE"}), "yyyy-MM-dd HHmm"),
            (json!({"start": "2024-01-01 1300", "end": "2024-01-01 1200", "step": "MINUTE"}), "before start"),
            (json!({"start": "2024-02-30", "end": "2024-03-01", "step": "DAY"}), "2024-02-30"),
            (json!({"start": "2024-01-01", "step": "DAY"}), "required"),
            (json!({"start": "2024-01-01", "end": "2024-01-01", "step": "WEEK"}), "step"),
            (json!(null), "step"),
        ];
        for (input, needle) in cases {
            let e = QueryDuration::from_input(&input).expect_err(needle).to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let long = QueryDuration::from_input(&json!({"start": "2024-01-01 0000", "end": "2024-02-01 0000", "step": "MINUTE"})).expect("parses");
        assert!(long.bounded().expect_err("a month of minutes").to_string().contains("coarser step"));
        let day = QueryDuration::from_input(&json!({"start": "2024-01-01 0000", "end": "2024-01-01 2359", "step": "MINUTE"})).expect("parses");
        assert_eq!(day.bounded().expect("a day of minutes").mqe().point_count(), Some(1440));
    }
}
