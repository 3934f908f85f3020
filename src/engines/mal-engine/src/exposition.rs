//! A parser of the Prometheus text exposition format 0.0.4 (what `/metrics` endpoints and
//! node_exporter serve), into engine [`Sample`]s. Pure and allocation-frugal: label maps are
//! built once per series line; nothing else is kept.
//!
//! What it accepts, following the format's specification and Prometheus' own parser:
//! - lines separated by `\n` (a trailing `\r` is tolerated); blank lines are ignored; leading
//!   and trailing blanks (spaces, tabs) are ignored, tokens are separated by blanks;
//! - `# HELP name text` (escapes `\\` and `\n` in the text) and `# TYPE name type` (`counter`,
//!   `gauge`, `histogram`, `summary`, `untyped`); at most one of each per metric name, and a
//!   TYPE line must come before the metric's first sample (its `_bucket`, `_sum`, `_count` and
//!   `_created` series included); any other `#` line is a comment;
//! - `name{label="value",...} value [timestamp]`: names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names
//!   `[a-zA-Z_][a-zA-Z0-9_]*`, label values in double quotes with the escapes `\\`, `\"` and
//!   `\n` (any other escape is an error), an optional trailing comma, no repeated label; the
//!   value is a float (`NaN`, `+Inf`, `-Inf` and `Inf` in any case included); the timestamp is
//!   integer milliseconds since the epoch.
//!
//! Every error names its 1-based line. A sample's own timestamp is kept; samples without one get
//! the caller's default.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::sample::{LabelMap, Sample};

/// What `# TYPE` declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn parse(text: &str) -> Option<MetricType> {
        Some(match text {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            _ => return None,
        })
    }
}

/// Why a text is not valid exposition; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpositionError {
    #[error("line {line}: invalid metric name {name:?}")]
    InvalidMetricName { line: usize, name: String },
    #[error("line {line}: invalid label name {name:?}")]
    InvalidLabelName { line: usize, name: String },
    #[error("line {line}: expected {expected} {found}")]
    Unexpected {
        line: usize,
        expected: &'static str,
        found: String,
    },
    #[error("line {line}: label value of {label:?} is not closed by a double quote")]
    UnterminatedLabelValue { line: usize, label: String },
    #[error("line {line}: invalid escape sequence \\{escape} in the label value of {label:?}")]
    InvalidEscape {
        line: usize,
        label: String,
        escape: char,
    },
    #[error("line {line}: label {label:?} is repeated")]
    DuplicateLabel { line: usize, label: String },
    #[error("line {line}: sample value {text:?} is not a number")]
    InvalidValue { line: usize, text: String },
    #[error("line {line}: timestamp {text:?} is not an integer of milliseconds")]
    InvalidTimestamp { line: usize, text: String },
    #[error("line {line}: unexpected text {text:?} after the timestamp")]
    TrailingText { line: usize, text: String },
    #[error("line {line}: unknown metric type {text:?} (counter, gauge, histogram, summary or untyped)")]
    UnknownType { line: usize, text: String },
    #[error("line {line}: second {keyword} line for metric {name:?}")]
    DuplicateMetadata {
        line: usize,
        keyword: &'static str,
        name: String,
    },
    #[error("line {line}: TYPE line for metric {name:?} after its samples")]
    TypeAfterSamples { line: usize, name: String },
    #[error("line {line}: more than {limit} samples")]
    TooManySamples { line: usize, limit: usize },
}

impl ExpositionError {
    /// The 1-based line the error is on.
    pub fn line(&self) -> usize {
        match self {
            ExpositionError::InvalidMetricName { line, .. }
            | ExpositionError::InvalidLabelName { line, .. }
            | ExpositionError::Unexpected { line, .. }
            | ExpositionError::UnterminatedLabelValue { line, .. }
            | ExpositionError::InvalidEscape { line, .. }
            | ExpositionError::DuplicateLabel { line, .. }
            | ExpositionError::InvalidValue { line, .. }
            | ExpositionError::InvalidTimestamp { line, .. }
            | ExpositionError::TrailingText { line, .. }
            | ExpositionError::UnknownType { line, .. }
            | ExpositionError::DuplicateMetadata { line, .. }
            | ExpositionError::TypeAfterSamples { line, .. }
            | ExpositionError::TooManySamples { line, .. } => *line,
        }
    }
}

/// A parsed exposition: the samples in text order, and the metadata lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    pub types: HashMap<String, MetricType>,
    pub help: HashMap<String, String>,
}

/// Parses `text`; samples without a timestamp get `default_timestamp_ms`. At most `max_samples`
/// samples are accepted (`usize::MAX` for no bound): one more is an error, so a caller can bound
/// its input without parsing all of it.
pub fn parse(
    text: &str,
    default_timestamp_ms: i64,
    max_samples: usize,
) -> Result<Exposition, ExpositionError> {
    let mut out = Exposition::default();
    let mut sampled: HashSet<&str> = HashSet::new();
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let content = raw.trim_matches(is_blank);
        if content.is_empty() {
            continue;
        }
        if let Some(comment) = content.strip_prefix('#') {
            metadata(comment, line, &sampled, &mut out)?;
            continue;
        }
        if out.samples.len() >= max_samples {
            return Err(ExpositionError::TooManySamples {
                line,
                limit: max_samples,
            });
        }
        let sample = sample_line(content, line, default_timestamp_ms)?;
        // The name borrowed from the text, for the TYPE-after-samples check.
        sampled.insert(&content[..sample.name.len()]);
        out.samples.push(sample);
    }
    Ok(out)
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

/// A `#` line: HELP, TYPE, or a plain comment.
fn metadata<'t>(
    comment: &'t str,
    line: usize,
    sampled: &HashSet<&'t str>,
    out: &mut Exposition,
) -> Result<(), ExpositionError> {
    let rest = comment.trim_start_matches(is_blank);
    let (keyword, rest) = split_token(rest);
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(());
    }
    let (name, rest) = split_token(rest.trim_start_matches(is_blank));
    if !valid_metric_name(name) {
        return Err(ExpositionError::InvalidMetricName {
            line,
            name: name.to_owned(),
        });
    }
    let rest = rest.trim_start_matches(is_blank);
    if keyword == "HELP" {
        if out.help.contains_key(name) {
            return Err(ExpositionError::DuplicateMetadata {
                line,
                keyword: "HELP",
                name: name.to_owned(),
            });
        }
        out.help.insert(name.to_owned(), unescape_help(rest));
        return Ok(());
    }
    let (type_text, trailing) = split_token(rest);
    if !trailing.trim_matches(is_blank).is_empty() {
        return Err(ExpositionError::TrailingText {
            line,
            text: trailing.trim_matches(is_blank).to_owned(),
        });
    }
    let metric_type = MetricType::parse(type_text).ok_or_else(|| ExpositionError::UnknownType {
        line,
        text: type_text.to_owned(),
    })?;
    if out.types.contains_key(name) {
        return Err(ExpositionError::DuplicateMetadata {
            line,
            keyword: "TYPE",
            name: name.to_owned(),
        });
    }
    let seen = sampled.contains(name)
        || ["_bucket", "_sum", "_count", "_created"]
            .iter()
            .any(|suffix| sampled.contains(format!("{name}{suffix}").as_str()));
    if seen {
        return Err(ExpositionError::TypeAfterSamples {
            line,
            name: name.to_owned(),
        });
    }
    out.types.insert(name.to_owned(), metric_type);
    Ok(())
}

/// The next blank-separated token and what follows it.
fn split_token(text: &str) -> (&str, &str) {
    match text.find(is_blank) {
        Some(end) => (&text[..end], &text[end..]),
        None => (text, ""),
    }
}

fn unescape_help(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            // HELP text is lenient, as Prometheus': an unknown escape stays as written.
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn valid_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_' | b':'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

fn valid_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// One sample line (already trimmed, not a comment).
fn sample_line(text: &str, line: usize, default_ts: i64) -> Result<Sample, ExpositionError> {
    let name_end = text
        .find(|c: char| c == '{' || is_blank(c))
        .unwrap_or(text.len());
    let name = &text[..name_end];
    if !valid_metric_name(name) {
        return Err(ExpositionError::InvalidMetricName {
            line,
            name: name.to_owned(),
        });
    }
    let mut rest = text[name_end..].trim_start_matches(is_blank);
    let mut labels = LabelMap::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = label_set(after_brace, line, &mut labels)?;
    }
    let rest = rest.trim_start_matches(is_blank);
    let (value_text, rest) = split_token(rest);
    if value_text.is_empty() {
        return Err(ExpositionError::Unexpected {
            line,
            expected: "a sample value",
            found: "at the end of the line".to_owned(),
        });
    }
    let value = parse_value(value_text).ok_or_else(|| ExpositionError::InvalidValue {
        line,
        text: value_text.to_owned(),
    })?;
    let rest = rest.trim_start_matches(is_blank);
    let (ts_text, trailing) = split_token(rest);
    let timestamp_ms = if ts_text.is_empty() {
        default_ts
    } else {
        ts_text
            .parse::<i64>()
            .map_err(|_| ExpositionError::InvalidTimestamp {
                line,
                text: ts_text.to_owned(),
            })?
    };
    let trailing = trailing.trim_matches(is_blank);
    if !trailing.is_empty() {
        return Err(ExpositionError::TrailingText {
            line,
            text: trailing.to_owned(),
        });
    }
    Ok(Sample::new(name, Arc::new(labels), value, timestamp_ms))
}

/// Go's `ParseFloat` spellings of the special values, and ordinary decimal floats.
fn parse_value(text: &str) -> Option<f64> {
    let unsigned = text.trim_start_matches(['+', '-']);
    if text.len() - unsigned.len() > 1 {
        return None;
    }
    let negative = text.starts_with('-');
    let special = match unsigned.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "inf" | "infinity" => Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }),
        _ => None,
    };
    if special.is_some() {
        return special;
    }
    // Rust's parser accepts what Go's does for decimals (`1`, `-1.5e3`, `.5`, `5.`); refuse the
    // odd forms it would also take by the special-value path above.
    if !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    text.parse::<f64>().ok()
}

/// The inside of `{...}` (after the opening brace); returns what follows the closing brace.
fn label_set<'t>(
    mut rest: &'t str,
    line: usize,
    labels: &mut LabelMap,
) -> Result<&'t str, ExpositionError> {
    loop {
        rest = rest.trim_start_matches(is_blank);
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let label = &rest[..name_end];
        if !valid_label_name(label) {
            let shown = rest
                .split(['=', ',', '}'])
                .next()
                .unwrap_or(rest);
            return Err(if rest.is_empty() {
                ExpositionError::Unexpected {
                    line,
                    expected: "a label name or '}'",
                    found: "at the end of the line".to_owned(),
                }
            } else {
                ExpositionError::InvalidLabelName {
                    line,
                    name: shown.to_owned(),
                }
            });
        }
        rest = rest[name_end..].trim_start_matches(is_blank);
        rest = expect_char(rest, '=', line, "'=' after a label name")?;
        rest = rest.trim_start_matches(is_blank);
        rest = expect_char(rest, '"', line, "'\"' to open a label value")?;
        let (value, after) = label_value(rest, line, label)?;
        if labels.insert(label.to_owned(), value).is_some() {
            return Err(ExpositionError::DuplicateLabel {
                line,
                label: label.to_owned(),
            });
        }
        rest = after.trim_start_matches(is_blank);
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(unexpected(rest, line, "',' or '}' after a label value"));
        }
    }
}

fn expect_char<'t>(
    text: &'t str,
    wanted: char,
    line: usize,
    expected: &'static str,
) -> Result<&'t str, ExpositionError> {
    text.strip_prefix(wanted)
        .ok_or_else(|| unexpected(text, line, expected))
}

fn unexpected(text: &str, line: usize, expected: &'static str) -> ExpositionError {
    let found = match text.chars().next() {
        Some(c) => format!("but found {c:?}"),
        None => "at the end of the line".to_owned(),
    };
    ExpositionError::Unexpected {
        line,
        expected,
        found,
    }
}

/// A quoted label value (after the opening quote): the unescaped value and what follows the
/// closing quote.
fn label_value<'t>(
    text: &'t str,
    line: usize,
    label: &str,
) -> Result<(String, &'t str), ExpositionError> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[index + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                Some((_, escape)) => {
                    return Err(ExpositionError::InvalidEscape {
                        line,
                        label: label.to_owned(),
                        escape,
                    });
                }
                None => break,
            },
            other => value.push(other),
        }
    }
    Err(ExpositionError::UnterminatedLabelValue {
        line,
        label: label.to_owned(),
    })
}

#[cfg(test)]
#[path = "exposition_tests.rs"]
mod tests;
