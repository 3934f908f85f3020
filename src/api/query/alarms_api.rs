//! `GET /query/alarms`: the stored alarm records (`data::alarm_records`) as JSON, newest first,
//! filtered and paged as SkyWalking's `queryAlarms`. The thin handler is in `api::admin::query`;
//! a refused parameter is `400 invalid_parameter` naming it.
//!
//! Parameters: `start`/`end` (on the start time; as `/query/metrics`: epoch ms, RFC 3339 or
//! `yyyy-MM-dd HHmm`, UTC; default: the [`DEFAULT_SPAN_MS`] before `end`, which defaults to now),
//! `scope` (`SERVICE`, `SERVICE_INSTANCE`, ...), `entity` (the entity's name), `id` (matching
//! `id0` or `id1`, as SkyWalking 11 does), `rule` (repeatable or a comma list: any of them),
//! `tag=key=value` (repeatable: every one), `keyword` (a case-sensitive substring of the
//! message), `pageNum`/`pageSize` (1 and [`DEFAULT_PAGE_SIZE`]; a page at most
//! [`MAX_PAGE_SIZE`], and it may not reach past the [`MAX_WINDOW`]-th record) and `cluster`.
//!
//! An alarm fires on one node, the entity's owner, which keeps its record. With `cluster=true`
//! (the default on a clustered node) every live peer is asked over the bus for its first
//! `pageNum × pageSize` matches and its count (`QueryAlarms`), and the pages merge newest first
//! (start time, then uuid); `total` is the sum of the counts. The answer lists the nodes that
//! answered (`nodes`) and those that did not, and why (`partial`): their records are missing.

use serde_json::{Value, json};

use crate::base::clock::now_ms;
use crate::base::ids::NodeId;
use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::control::outcome::Outcome;
use crate::data::alarm_records::{AlarmFilter, AlarmPage, AlarmRecord, MAX_PAGE_SIZE, MAX_WINDOW};

use super::time::query_range;
use super::invalid;
use super::{Missing, QueryError, QueryService, Reach, missing};

/// Records per page when `pageSize` is not given (SkyWalking's UI page).
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// The range read when `start` is not given: an hour.
pub const DEFAULT_SPAN_MS: i64 = 60 * 60_000;

const KNOWN: [&str; 11] = ["start", "end", "scope", "entity", "id", "rule", "tag", "keyword", "pageNum", "pageSize", "cluster"];

/// The filter the parameters describe as of `now`, and whether the read is cluster-wide (none:
/// not said, the node's default).
pub fn alarm_request(pairs: &[(String, String)], now: i64) -> Result<(AlarmFilter, Option<bool>), Outcome> {
    let mut single: Vec<(&str, &str)> = Vec::new();
    let (mut rules, mut tags) = (Vec::new(), Vec::new());
    for (name, value) in pairs {
        match name.as_str() {
            name if !KNOWN.contains(&name) => return Err(invalid(format!("unknown query parameter {name}; known: {}", KNOWN.join(", ")))),
            "rule" => rules.extend(value.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_string)),
            "tag" => match value.split_once('=') {
                Some((key, tag_value)) if !key.trim().is_empty() => tags.push((key.trim().to_string(), tag_value.to_string())),
                _ => return Err(invalid(format!("query parameter tag: {value:?} is not key=value"))),
            },
            name if single.iter().any(|(seen, _)| *seen == name) => {
                return Err(invalid(format!("query parameter {name} is given more than once; give it once")));
            }
            name => single.push((name, value)),
        }
    }
    let text = |name: &str| single.iter().find(|(n, _)| *n == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let (start_ms, end_ms) = query_range(text, now, DEFAULT_SPAN_MS).map_err(invalid)?;
    let number = |name: &str, default: usize, max: usize| -> Result<usize, Outcome> {
        match text(name) {
            None => Ok(default),
            Some(value) => match value.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(invalid(format!("query parameter {name}: {value:?} is not a number from 1 to {max}"))),
            },
        }
    };
    let page_size = number("pageSize", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let page_num = number("pageNum", 1, MAX_WINDOW)?;
    let skip = (page_num - 1).saturating_mul(page_size);
    if skip.saturating_add(page_size) > MAX_WINDOW {
        return Err(invalid(format!("query parameters pageNum {page_num} × pageSize {page_size} reach past record {MAX_WINDOW}; narrow the time range")));
    }
    let cluster = super::bool_param("cluster", text("cluster"))?;
    let owned = |name: &str| text(name).map(str::to_string);
    let filter = AlarmFilter {
        start_ms,
        end_ms,
        scope: owned("scope"),
        entity_name: owned("entity"),
        entity_id: owned("id"),
        rules,
        tags,
        keyword: single.iter().find(|(n, _)| *n == "keyword").map(|(_, v)| v.to_string()).filter(|v| !v.is_empty()),
        skip: skip as u64,
        limit: page_size as u64,
    };
    Ok((filter, cluster))
}

/// A page gathered from one node or several: records newest first with the node holding each.
#[derive(Debug, Default)]
pub struct ClusterAlarms {
    pub records: Vec<(NodeId, AlarmRecord)>,
    pub total: u64,
    pub nodes: Vec<NodeId>,
    pub missing: Vec<Missing>,
}

/// The page `filter` asks for out of every node's first `skip + limit` matches: merged newest
/// first (start time, then uuid), then skipped and cut.
pub fn merge_pages(pages: Vec<(NodeId, AlarmPage)>, filter: &AlarmFilter) -> (Vec<(NodeId, AlarmRecord)>, u64) {
    let (skip, limit) = filter.window();
    let total = pages.iter().map(|(_, page)| page.total).sum();
    let mut all: Vec<(NodeId, AlarmRecord)> = pages.into_iter().flat_map(|(node, page)| page.records.into_iter().map(move |r| (node.clone(), r))).collect();
    all.sort_by(|a, b| b.1.order_key().cmp(&a.1.order_key()).then_with(|| a.0.cmp(&b.0)));
    (all.into_iter().skip(skip).take(limit).collect(), total)
}

/// One record as JSON: SkyWalking's `AlarmMessage` of `queryAlarms`, with hotrule's extras
/// (`id0`, `id1`, `scopeId`, `ruleName`, `node`).
pub fn record_json(node: &NodeId, record: &AlarmRecord) -> Value {
    let metrics: Vec<Value> = record
        .metrics_snapshot
        .iter()
        .map(|(name, values)| json!({"name": name, "results": serde_json::from_str::<Value>(values).unwrap_or_else(|_| Value::String(values.clone()))}))
        .collect();
    json!({
        "startTime": record.start_time,
        "recoveryTime": record.recovery_time,
        "scope": record.scope,
        "scopeId": record.scope_id,
        "name": record.name,
        "id0": record.id0,
        "id1": record.id1,
        "id": record.id0,
        "message": record.alarm_message,
        "ruleName": record.rule_name,
        "uuid": record.uuid,
        "tags": record.tags.iter().map(|t| json!({"key": t.key, "value": t.value})).collect::<Vec<_>>(),
        "layers": record.layers,
        "snapshot": {"expression": record.expression, "metrics": metrics},
        "node": node.0,
    })
}

pub fn alarms_body(page: &ClusterAlarms) -> Value {
    json!({
        "msgs": page.records.iter().map(|(node, record)| record_json(node, record)).collect::<Vec<_>>(),
        "total": page.total,
        "nodes": page.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
        "partial": page.missing.iter().map(|m| json!({"node": m.node.0, "reason": m.reason})).collect::<Vec<_>>(),
    })
}

impl QueryService {
    /// The page of `filter` from this node's alarm records and, with `reach.cluster`, every live
    /// peer's. This node's read failing fails the whole; a peer's only leaves it out.
    pub async fn read_alarms(&self, filter: &AlarmFilter, reach: Reach) -> Result<ClusterAlarms, QueryError> {
        let (skip, limit) = filter.window();
        // Each node's first `skip + limit`: the page is among them.
        let each = AlarmFilter { skip: 0, limit: (skip + limit) as u64, ..filter.clone() };
        let reader = self.alarms.clone().ok_or(QueryError::NoAlarmStorage)?;
        let local_filter = each.clone();
        let local = tokio::task::spawn_blocking(move || reader.query(&local_filter))
            .await
            .map_err(|e| QueryError::Task(e.to_string()))?
            .map_err(QueryError::AlarmStore)?;
        let mut out = ClusterAlarms { nodes: vec![self.node_id.clone()], ..ClusterAlarms::default() };
        let mut pages = vec![(self.node_id.clone(), local)];
        if reach.cluster {
            for (node, answer) in self.ask_peers(|_| BusRequest::QueryAlarms { filter: each.clone() }, reach.timeout).await {
                match answer {
                    Ok(BusResponse::Alarms { records, total }) => match records.into_iter().map(AlarmRecord::try_from).collect::<Result<Vec<_>, _>>() {
                        Ok(records) => {
                            out.nodes.push(node.clone());
                            pages.push((node, AlarmPage { records, total }));
                        }
                        Err(e) => out.missing.push(Missing { node, reason: e.to_string() }),
                    },
                    other => out.missing.push(missing(node, other)),
                }
            }
        }
        out.nodes.sort();
        (out.records, out.total) = merge_pages(pages, filter);
        Ok(out)
    }
}

/// `GET /query/alarms`.
pub async fn alarms(service: &QueryService, pairs: &[(String, String)]) -> Result<Value, Outcome> {
    let (filter, cluster) = alarm_request(pairs, now_ms() as i64)?;
    let reach = service.reach(cluster.unwrap_or(service.clustered()), None);
    let page = service.read_alarms(&filter, reach).await?;
    Ok(alarms_body(&page))
}

#[cfg(test)]
#[path = "alarms_api_tests.rs"]
mod tests;
