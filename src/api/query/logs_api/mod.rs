//! `GET /query/logs`: the kept logs of this node's log store as JSON, filtered and paged. The
//! thin handler is in `http::query`; a refused parameter is `400 invalid_parameter` naming it.
//!
//! Parameters: `service`, `instance`, `endpoint` (exact), `tag=key:value` (repeatable; every one
//! must match), `keyword` (a case-sensitive substring of the content), `start`/`end` (as
//! `/query/metrics`: epoch ms, RFC 3339 or `yyyy-MM-dd HHmm`, UTC; default: the
//! [`DEFAULT_SPAN_MS`] before `end`, which defaults to now), `limit` (1 to
//! [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]), `order` (`newest`, the default, or `oldest`) and
//! `after` (a log's `cursor`: the page after it in that order; oldest first, that is tailing).
//! Every parameter but `tag` is given at most once.

use serde_json::{Value, json};

use crate::base::clock::{iso8601, now_ms};
use crate::data::logs::{LogCursor, LogFilter, LogOrder, MAX_LIMIT, StoredLog};
use crate::control::outcome::{ApplyStatus, Outcome};

use super::time::parse_query_time;
use super::{QueryError, QueryService};

/// Logs per answer when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// The range read when `start` is not given: 15 minutes.
pub const DEFAULT_SPAN_MS: i64 = 15 * 60_000;

const KNOWN: [&str; 10] = ["service", "instance", "endpoint", "start", "end", "tag", "keyword", "limit", "after", "order"];

fn invalid(message: impl Into<String>) -> Outcome {
    Outcome::new(ApplyStatus::InvalidParameter, message)
}

/// A cursor as the API writes it: `<timestamp ms>-<sequence>`.
pub fn cursor_text(cursor: LogCursor) -> String {
    format!("{}-{}", cursor.timestamp_ms, cursor.sequence)
}

/// A cursor back from its text.
pub fn parse_cursor(text: &str) -> Option<LogCursor> {
    let (timestamp, sequence) = text.trim().rsplit_once('-')?;
    Some(LogCursor { timestamp_ms: timestamp.parse().ok()?, sequence: sequence.parse().ok()? })
}

/// The filter the parameters describe, as of `now`.
pub fn log_filter(pairs: &[(String, String)], now: i64) -> Result<LogFilter, Outcome> {
    let mut single: Vec<(&str, &str)> = Vec::new();
    let mut tags = Vec::new();
    for (name, value) in pairs {
        if !KNOWN.contains(&name.as_str()) {
            return Err(invalid(format!("unknown query parameter {name}; known: {}", KNOWN.join(", "))));
        }
        if name == "tag" {
            match value.split_once(':') {
                Some((key, tag_value)) if !key.trim().is_empty() => tags.push((key.trim().to_string(), tag_value.to_string())),
                _ => return Err(invalid(format!("query parameter tag: {value:?} is not key:value"))),
            }
        } else if single.iter().any(|(seen, _)| seen == name) {
            return Err(invalid(format!("query parameter {name} is given more than once; give it once")));
        } else {
            single.push((name, value));
        }
    }
    let text = |name: &str| single.iter().find(|(n, _)| *n == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let time = |name: &str| -> Result<Option<i64>, Outcome> {
        text(name).map(|t| parse_query_time(t).map_err(|e| invalid(format!("query parameter {name}: {e}")))).transpose()
    };
    let end_ms = time("end")?.unwrap_or(now);
    let start_ms = time("start")?.unwrap_or(end_ms.saturating_sub(DEFAULT_SPAN_MS));
    if end_ms < start_ms {
        return Err(invalid(format!("query parameter end ({end_ms}) is before start ({start_ms})")));
    }
    let limit = match text("limit") {
        None => DEFAULT_LIMIT,
        Some(limit) => match limit.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return Err(invalid(format!("query parameter limit: {limit:?} is not a number from 1 to {MAX_LIMIT}"))),
        },
    };
    let order = match text("order").map(str::to_ascii_lowercase).as_deref() {
        None | Some("newest") => LogOrder::NewestFirst,
        Some("oldest") => LogOrder::OldestFirst,
        Some(other) => return Err(invalid(format!("query parameter order: {other:?} is not newest or oldest"))),
    };
    let after = match text("after") {
        None => None,
        Some(after) => Some(parse_cursor(after).ok_or_else(|| {
            invalid(format!("query parameter after: {after:?} is not a cursor (<timestamp ms>-<sequence>, from a log's cursor)"))
        })?),
    };
    let owned = |name: &str| text(name).map(str::to_string);
    Ok(LogFilter {
        service: owned("service"),
        instance: owned("instance"),
        endpoint: owned("endpoint"),
        start_ms,
        end_ms,
        tags,
        keyword: single.iter().find(|(n, _)| *n == "keyword").map(|(_, v)| v.to_string()).filter(|v| !v.is_empty()),
        limit,
        after,
        order,
    })
}

fn content_type(kind: hotrule_lal_engine::ContentType) -> &'static str {
    use hotrule_lal_engine::ContentType as C;
    match kind {
        C::None => "NONE",
        C::Text => "TEXT",
        C::Json => "JSON",
        C::Yaml => "YAML",
    }
}

/// One stored log as JSON (SkyWalking's log query field names where there is one).
pub fn log_json(stored: &StoredLog) -> Value {
    let log = &stored.log;
    let r = &log.record;
    json!({
        "cursor": cursor_text(stored.cursor),
        "timestamp": r.timestamp_ms,
        "time": u64::try_from(r.timestamp_ms).map(iso8601).unwrap_or_default(),
        "service": r.service,
        "instance": r.instance,
        "endpoint": r.endpoint,
        "layer": r.layer,
        "traceId": r.trace_id,
        "segmentId": r.segment_id,
        "spanId": r.span_id,
        "contentType": content_type(r.content_type),
        "content": r.content,
        "tags": r.tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "outputType": r.output_type,
        "fields": r.fields,
        "rule": log.rule,
        "file": log.file,
        "receivedMs": log.received_ms,
    })
}

/// The answer for `filter`'s logs: `next` is the last log's cursor when the page is full (more
/// may follow), null otherwise.
pub fn logs_body(filter: &LogFilter, logs: &[StoredLog]) -> Value {
    let next = match logs.last() {
        Some(last) if logs.len() >= filter.limit => Value::String(cursor_text(last.cursor)),
        _ => Value::Null,
    };
    json!({
        "start": filter.start_ms,
        "end": filter.end_ms,
        "order": match filter.order { LogOrder::NewestFirst => "newest", LogOrder::OldestFirst => "oldest" },
        "limit": filter.limit,
        "logs": logs.iter().map(log_json).collect::<Vec<_>>(),
        "next": next,
    })
}

impl QueryService {
    /// The logs of `filter` in this node's log store, read off the async threads.
    pub async fn read_logs(&self, filter: LogFilter) -> Result<Vec<StoredLog>, QueryError> {
        let reader = self.logs.clone().ok_or(QueryError::NoLogStorage)?;
        tokio::task::spawn_blocking(move || reader.query(&filter))
            .await
            .map_err(|e| QueryError::Task(e.to_string()))?
            .map_err(QueryError::LogStore)
    }
}

/// `GET /query/logs`.
pub async fn logs(service: &QueryService, pairs: &[(String, String)]) -> Result<Value, Outcome> {
    let filter = log_filter(pairs, now_ms() as i64)?;
    let logs = service.read_logs(filter.clone()).await?;
    Ok(logs_body(&filter, &logs))
}

#[cfg(test)]
mod tests;
