//! `GET /query/logs`: the kept logs of this node's log store as JSON, filtered and paged. The
//! thin handler is in `http::query`; a refused parameter is `400 invalid_parameter` naming it.
//!
//! Parameters: `service`, `instance`, `endpoint` (exact), `tag=key:value` (repeatable; every one
//! must match), `keyword` (a case-sensitive substring of the content), `start`/`end` (as
//! `/query/metrics`: epoch ms, RFC 3339 or `yyyy-MM-dd HHmm`, UTC; default: the
//! [`DEFAULT_SPAN_MS`] before `end`, which defaults to now), `limit` (1 to
//! [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]), `order` (`newest`, the default, or `oldest`) and
//! `after` (a log's `cursor`: the page after it in that order; oldest first, that is tailing)
//! and `cluster` (`true`: every live node's logs, merged by time, see below).
//! Every parameter but `tag` is given at most once.
//!
//! With `cluster=true` every live peer is asked over the bus for its own page (`QueryLogs`, with
//! the query's per-peer deadline), and the pages merge in the cluster order
//! `(timestamp, node id, sequence)` ([`cluster`]). Each log then names the node holding it
//! (`node`), its `cursor` is a cluster cursor `<timestamp ms>-<node id>-<sequence>` (the only
//! kind `after` takes in that mode, and a node's own cursor the only kind it takes otherwise),
//! and the answer lists the nodes that answered (`nodes`) and those that did not, and why
//! (`partial`): their logs are missing from the page, and a cursor taken past them skips them.

use serde_json::{Value, json};

use crate::base::clock::{iso8601, now_ms};
use crate::base::ids::NodeId;
use crate::cluster::bus::log_query::LogQuery;
use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::data::logs::{LogCursor, LogFilter, LogOrder, MAX_LIMIT, StoredLog};
use crate::control::outcome::Outcome;

use super::time::query_range;
use super::invalid;
use super::{Missing, QueryError, QueryService, Reach, missing};

pub mod cluster;

use cluster::{ClusterCursor, ClusterLogs, NodeLog, cluster_cursor_text, merge_pages, node_filter, parse_cluster_cursor};

/// Logs per answer when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// The range read when `start` is not given: 15 minutes.
pub const DEFAULT_SPAN_MS: i64 = 15 * 60_000;

const KNOWN: [&str; 11] = ["service", "instance", "endpoint", "start", "end", "tag", "keyword", "limit", "after", "order", "cluster"];

/// A cursor as the API writes it: `<timestamp ms>-<sequence>`.
pub fn cursor_text(cursor: LogCursor) -> String {
    format!("{}-{}", cursor.timestamp_ms, cursor.sequence)
}

/// A cursor back from its text.
pub fn parse_cursor(text: &str) -> Option<LogCursor> {
    let (timestamp, sequence) = text.trim().rsplit_once('-')?;
    Some(LogCursor { timestamp_ms: timestamp.parse().ok()?, sequence: sequence.parse().ok()? })
}

/// Where a log read goes: this node's store, or every live node's from a cluster cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogsReach {
    Node,
    Cluster { after: Option<ClusterCursor> },
}

/// The filter the parameters describe, as of `now` (the local read's; see [`log_request`]).
pub fn log_filter(pairs: &[(String, String)], now: i64) -> Result<LogFilter, Outcome> {
    log_request(pairs, now).map(|(filter, _)| filter)
}

/// The filter the parameters describe, as of `now`, and where it reads. A cluster read's
/// filter has no `after`: each node's comes from the cluster cursor ([`cluster::node_filter`]).
pub fn log_request(pairs: &[(String, String)], now: i64) -> Result<(LogFilter, LogsReach), Outcome> {
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
    let (start_ms, end_ms) = query_range(text, now, DEFAULT_SPAN_MS).map_err(invalid)?;
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
    let cluster = super::bool_param("cluster", text("cluster"))?.unwrap_or(false);
    let (after, reach) = match (text("after"), cluster) {
        (None, false) => (None, LogsReach::Node),
        (None, true) => (None, LogsReach::Cluster { after: None }),
        (Some(after), false) => match parse_cursor(after) {
            Some(cursor) => (Some(cursor), LogsReach::Node),
            None if parse_cluster_cursor(after).is_some() => {
                return Err(invalid(format!("query parameter after: {after:?} is a cluster cursor; read with cluster=true to page with it")));
            }
            None => return Err(invalid(format!("query parameter after: {after:?} is not a cursor (<timestamp ms>-<sequence>, from a log's cursor)"))),
        },
        (Some(after), true) => match parse_cluster_cursor(after) {
            Some(cursor) => (None, LogsReach::Cluster { after: Some(cursor) }),
            None => {
                return Err(invalid(format!(
                    "query parameter after: {after:?} is not a cluster cursor (<timestamp ms>-<node id>-<sequence>, from a log's cursor in a cluster=true answer)"
                )));
            }
        },
    };
    let owned = |name: &str| text(name).map(str::to_string);
    let filter = LogFilter {
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
    };
    Ok((filter, reach))
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

/// One log of a cluster read: [`log_json`] with its cluster cursor and the node holding it.
pub fn node_log_json(log: &NodeLog) -> Value {
    let mut body = log_json(&log.stored);
    body["cursor"] = Value::String(cluster_cursor_text(&log.cursor()));
    body["node"] = Value::String(log.node.0.clone());
    body
}

/// The answer of a cluster read: as [`logs_body`], with cluster cursors, each log's node, the
/// nodes that answered (in id order) and those that did not (`partial`, with why).
pub fn cluster_logs_body(filter: &LogFilter, page: &ClusterLogs) -> Value {
    let next = match page.logs.last() {
        Some(last) if page.logs.len() >= filter.limit => Value::String(cluster_cursor_text(&last.cursor())),
        _ => Value::Null,
    };
    json!({
        "start": filter.start_ms,
        "end": filter.end_ms,
        "order": match filter.order { LogOrder::NewestFirst => "newest", LogOrder::OldestFirst => "oldest" },
        "limit": filter.limit,
        "cluster": true,
        "logs": page.logs.iter().map(node_log_json).collect::<Vec<_>>(),
        "next": next,
        "nodes": page.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
        "partial": page.missing.iter().map(|m| json!({"node": m.node.0, "reason": m.reason})).collect::<Vec<_>>(),
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

impl QueryService {
    /// The page of `filter` past `after` across this node and, with `reach.cluster`, every live
    /// peer: each node asked for its own page past the cursor, the pages merged. This node's
    /// read failing fails the whole; a peer's only leaves it out (named in `missing`).
    pub async fn read_cluster_logs(&self, filter: &LogFilter, after: Option<&ClusterCursor>, reach: Reach) -> Result<ClusterLogs, QueryError> {
        let local = self.read_logs(node_filter(filter, after, &self.node_id)).await?;
        let mut page = ClusterLogs { nodes: vec![self.node_id.clone()], ..ClusterLogs::default() };
        let mut pages = vec![(self.node_id.clone(), local)];
        if reach.cluster {
            let request = |peer: &NodeId| BusRequest::QueryLogs { query: LogQuery::from(&node_filter(filter, after, peer)) };
            for (node, answer) in self.ask_peers(request, reach.timeout).await {
                match answer {
                    Ok(BusResponse::Logs { logs }) => match logs.into_iter().map(StoredLog::try_from).collect::<Result<Vec<_>, _>>() {
                        Ok(logs) => {
                            page.nodes.push(node.clone());
                            pages.push((node, logs));
                        }
                        Err(e) => page.missing.push(Missing { node, reason: e.to_string() }),
                    },
                    other => page.missing.push(missing(node, other)),
                }
            }
        }
        page.nodes.sort();
        page.logs = merge_pages(pages, filter.order, filter.limit);
        Ok(page)
    }
}

/// `GET /query/logs`.
pub async fn logs(service: &QueryService, pairs: &[(String, String)]) -> Result<Value, Outcome> {
    let (filter, reach) = log_request(pairs, now_ms() as i64)?;
    match reach {
        LogsReach::Node => {
            let logs = service.read_logs(filter.clone()).await?;
            Ok(logs_body(&filter, &logs))
        }
        LogsReach::Cluster { after } => {
            let page = service.read_cluster_logs(&filter, after.as_ref(), service.reach(true, None)).await?;
            Ok(cluster_logs_body(&filter, &page))
        }
    }
}

#[cfg(test)]
mod tests;
