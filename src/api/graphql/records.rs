//! The root fields over kept records: logs (`queryLogs`, the tag autocompletes,
//! `supportQueryLogsByKeywords`) and alarms (`getAlarm` of 10.x, `queryAlarms` of 11.0, the
//! alarm tag autocompletes), read cluster-wide like every other answer.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::duration::QueryDuration;
use super::metadata::Catalog;
use super::SkyWalkingQuery;
use crate::base::entity_ids as ids;
use crate::data::alarm_records::{AlarmFilter, AlarmRecord};
use crate::data::logs::{LogFilter, LogOrder, StoredLog};

/// The most logs an autocomplete looks through (the newest in its duration).
const AUTOCOMPLETE_LOGS: usize = 1_000;

/// The root fields this module answers.
pub(super) async fn resolve(query: &SkyWalkingQuery, field: &str, args: &Map<String, Value>) -> Result<Value, String> {
    match field {
        "supportQueryLogsByKeywords" => Ok(json!(true)),
        "queryLogs" => query_logs(query, args.get("condition").unwrap_or(&Value::Null)).await,
        "queryLogTagAutocompleteKeys" | "queryLogTagAutocompleteValues" => {
            let duration = duration_of(args.get("duration"))?;
            let filter = LogFilter { start_ms: duration.start_ms, end_ms: duration.end_inclusive_ms(), limit: AUTOCOMPLETE_LOGS, ..LogFilter::default() };
            let page = read_logs(query, &filter).await?;
            let key = args.get("tagKey").and_then(Value::as_str);
            let found: BTreeSet<&str> = page
                .iter()
                .flat_map(|log| log.log.record.tags.iter())
                .filter_map(|(k, v)| match key {
                    None => Some(k.as_str()),
                    Some(wanted) => (k == wanted).then_some(v.as_str()),
                })
                .collect();
            Ok(json!(found))
        }
        "getAlarm" => {
            let duration = duration_of(args.get("duration"))?;
            let mut filter = alarm_filter(&duration, args.get("paging"))?;
            filter.scope = args.get("scope").and_then(Value::as_str).map(scope_name).map(str::to_string);
            filter.keyword = args.get("keyword").and_then(Value::as_str).filter(|k| !k.is_empty()).map(str::to_string);
            filter.tags = tags_of(args.get("tags"));
            alarms(query, &filter).await
        }
        "queryAlarms" => {
            let condition = args.get("condition").unwrap_or(&Value::Null);
            let duration = duration_of(condition.get("duration"))?;
            let mut filter = alarm_filter(&duration, condition.get("paging"))?;
            filter.keyword = condition.get("keyword").and_then(Value::as_str).filter(|k| !k.is_empty()).map(str::to_string);
            filter.tags = tags_of(condition.get("tags"));
            filter.rules = condition.get("ruleNames").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
            let entities: Vec<&Value> = condition.get("entities").and_then(Value::as_array).into_iter().flatten().filter(|e| !e.is_null()).collect();
            let layer = condition.get("layer").and_then(Value::as_str).filter(|l| !l.is_empty());
            let mut answer = alarms(query, &filter).await?;
            // Entities and layer are matched here: the store filters one entity name at a time.
            if let Some(msgs) = answer.get_mut("msgs").and_then(Value::as_array_mut) {
                msgs.retain(|m| {
                    let entity_ok = entities.is_empty() || entities.iter().any(|e| message_names_entity(m, e));
                    let layer_ok = layer.is_none_or(|l| m["layers"].as_array().is_some_and(|ls| ls.iter().any(|x| x == l)));
                    entity_ok && layer_ok
                });
            }
            Ok(answer)
        }
        "queryAlarmTagAutocompleteKeys" | "queryAlarmTagAutocompleteValues" => {
            let duration = duration_of(args.get("duration"))?;
            let filter = AlarmFilter { start_ms: duration.start_ms, end_ms: duration.end_inclusive_ms(), limit: 1_000, ..AlarmFilter::default() };
            let page = query.query().read_alarms(&filter, query.reach()).await.map_err(|e| e.to_string())?;
            let key = args.get("tagKey").and_then(Value::as_str);
            let found: BTreeSet<&str> = page
                .records
                .iter()
                .flat_map(|(_, r)| r.tags.iter())
                .filter_map(|t| match key {
                    None => Some(t.key.as_str()),
                    Some(wanted) => (t.key == wanted).then_some(t.value.as_str()),
                })
                .collect();
            Ok(json!(found))
        }
        other => Err(format!("hotrule does not serve {other}")),
    }
}

fn duration_of(value: Option<&Value>) -> Result<QueryDuration, String> {
    QueryDuration::from_input(value.unwrap_or(&Value::Null)).map_err(|e| e.to_string())
}

/// `pageNum` (from 1) and `pageSize` as a skip and a limit.
fn paging(value: Option<&Value>) -> (u64, u64) {
    let size = value.and_then(|p| p.get("pageSize")).and_then(Value::as_i64).unwrap_or(20).clamp(0, 10_000) as u64;
    let num = value.and_then(|p| p.get("pageNum")).and_then(Value::as_i64).unwrap_or(1).clamp(1, 100_000) as u64;
    ((num - 1).saturating_mul(size), size)
}

fn tags_of(value: Option<&Value>) -> Vec<(String, String)> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.get("key")?.as_str()?.to_string(), t.get("value").and_then(Value::as_str).unwrap_or("").to_string())))
        .collect()
}

async fn read_logs(query: &SkyWalkingQuery, filter: &LogFilter) -> Result<Vec<StoredLog>, String> {
    let page = query.query().read_cluster_logs(filter, None, query.reach()).await.map_err(|e| e.to_string())?;
    Ok(page.logs.into_iter().map(|l| l.stored).collect())
}

/// `queryLogs(condition)`: OAP needs a duration or a trace; an empty trace id (what swctl sends)
/// is no trace filter. Keywords must all be in the content and the excluded ones must not.
async fn query_logs(query: &SkyWalkingQuery, condition: &Value) -> Result<Value, String> {
    let trace = condition.get("relatedTrace").and_then(|t| t.get("traceId")).and_then(Value::as_str).filter(|t| !t.is_empty());
    let (start_ms, end_ms) = match condition.get("queryDuration").filter(|d| !d.is_null()) {
        Some(d) => {
            let d = duration_of(Some(d))?;
            (d.start_ms, d.end_inclusive_ms())
        }
        None if trace.is_some() => (0, i64::MAX),
        None => return Ok(json!({"errorReason": "queryDuration or relatedTrace is required", "logs": [], "debuggingTrace": null})),
    };
    let id = |field: &str| condition.get(field).and_then(Value::as_str).filter(|v| !v.is_empty());
    let service = id("serviceId").map(|i| ids::service_name(i).ok_or(format!("serviceId {i:?} is not a service id"))).transpose()?;
    let child = |field: &str| id(field).map(|i| ids::child_names(i).map(|(_, name)| name).ok_or(format!("{field} {i:?} is not an id"))).transpose();
    let (instance, endpoint) = (child("serviceInstanceId")?, child("endpointId")?);
    let words = |field: &str| -> Vec<String> {
        condition.get(field).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).filter(|w| !w.is_empty()).map(str::to_string).collect()
    };
    let (keywords, excluded) = (words("keywordsOfContent"), words("excludingKeywordsOfContent"));
    let (skip, size) = paging(condition.get("paging"));
    let order = match condition.get("queryOrder").and_then(Value::as_str) {
        Some("ASC") => LogOrder::OldestFirst,
        _ => LogOrder::NewestFirst,
    };
    // The store filters one keyword; the others and the exclusions are checked here, so the
    // read takes a wider page when there are any.
    let extra_checks = keywords.len() > 1 || !excluded.is_empty() || trace.is_some();
    let wanted = (skip + size) as usize;
    let filter = LogFilter {
        service,
        instance,
        endpoint,
        start_ms,
        end_ms,
        tags: tags_of(condition.get("tags")),
        keyword: keywords.first().cloned(),
        limit: if extra_checks { crate::data::logs::MAX_LIMIT } else { wanted.min(crate::data::logs::MAX_LIMIT) },
        after: None,
        order,
    };
    let logs = read_logs(query, &filter).await?;
    let logs: Vec<Value> = logs
        .iter()
        .filter(|l| {
            let r = &l.log.record;
            keywords.iter().all(|k| r.content.contains(k.as_str()))
                && !excluded.iter().any(|k| r.content.contains(k.as_str()))
                && trace.is_none_or(|t| r.trace_id == t)
        })
        .skip(skip as usize)
        .take(size as usize)
        .map(log_json)
        .collect();
    Ok(json!({"errorReason": null, "logs": logs, "debuggingTrace": null}))
}

/// A `Log`.
fn log_json(stored: &StoredLog) -> Value {
    let r = &stored.log.record;
    let content_type = match r.content_type {
        hotrule_lal_engine::ContentType::Json => "JSON",
        hotrule_lal_engine::ContentType::Yaml => "YAML",
        _ => "TEXT",
    };
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    json!({
        "serviceName": some(&r.service),
        "serviceId": some(&r.service).map(|s| ids::service_id(&s)),
        "serviceInstanceName": some(&r.instance),
        "serviceInstanceId": some(&r.instance).map(|i| ids::instance_id(&r.service, &i)),
        "endpointName": some(&r.endpoint),
        "endpointId": some(&r.endpoint).map(|e| ids::endpoint_id(&r.service, &e)),
        "traceId": some(&r.trace_id),
        "timestamp": r.timestamp_ms,
        "contentType": content_type,
        "content": r.content,
        "tags": r.tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
    })
}

/// The services of the logs kept in `[start, end]`, in their layers (a LAL-only layer such as
/// MySQL slow SQL has logs and no metrics). At most [`AUTOCOMPLETE_LOGS`] logs are looked at; a
/// node without a log store adds none.
pub(super) async fn add_log_services(query: &SkyWalkingQuery, catalog: &mut Catalog, start_ms: i64, end_ms: i64) {
    let filter = LogFilter { start_ms, end_ms, limit: AUTOCOMPLETE_LOGS, ..LogFilter::default() };
    if let Ok(logs) = read_logs(query, &filter).await {
        for log in &logs {
            let r = &log.log.record;
            if r.service.is_empty() {
                continue;
            }
            let entry = catalog.add_service(&r.service, &r.layer);
            if !r.instance.is_empty() {
                entry.instances.entry(r.instance.clone()).or_default();
            }
            if !r.endpoint.is_empty() {
                entry.endpoints.insert(r.endpoint.clone());
            }
        }
    }
}

fn alarm_filter(duration: &QueryDuration, paging_value: Option<&Value>) -> Result<AlarmFilter, String> {
    let (skip, limit) = paging(paging_value);
    Ok(AlarmFilter { start_ms: duration.start_ms, end_ms: duration.end_inclusive_ms(), skip, limit, ..AlarmFilter::default() })
}

/// The stored scope name of a `Scope` enum value (`ServiceInstance` → `SERVICE_INSTANCE`).
fn scope_name(scope: &str) -> &str {
    match scope {
        "Service" => "SERVICE",
        "ServiceInstance" => "SERVICE_INSTANCE",
        "Endpoint" => "ENDPOINT",
        "ServiceRelation" => "SERVICE_RELATION",
        "ServiceInstanceRelation" => "SERVICE_INSTANCE_RELATION",
        "EndpointRelation" => "ENDPOINT_RELATION",
        "Process" => "PROCESS",
        "ProcessRelation" => "PROCESS_RELATION",
        other => other,
    }
}

/// The `Scope` enum value of a stored scope name.
fn scope_enum(stored: &str) -> Option<&'static str> {
    Some(match stored.to_ascii_uppercase().as_str() {
        "SERVICE" => "Service",
        "SERVICE_INSTANCE" => "ServiceInstance",
        "ENDPOINT" => "Endpoint",
        "SERVICE_RELATION" => "ServiceRelation",
        "SERVICE_INSTANCE_RELATION" => "ServiceInstanceRelation",
        "ENDPOINT_RELATION" => "EndpointRelation",
        "PROCESS" => "Process",
        "PROCESS_RELATION" => "ProcessRelation",
        "ALL" => "All",
        _ => return None,
    })
}

async fn alarms(query: &SkyWalkingQuery, filter: &AlarmFilter) -> Result<Value, String> {
    let page = query.query().read_alarms(filter, query.reach()).await.map_err(|e| e.to_string())?;
    Ok(json!({"msgs": page.records.iter().map(|(_, r)| alarm_json(r)).collect::<Vec<_>>()}))
}

/// An `AlarmMessage` (with `layers` and `name` kept for `queryAlarms`' own filtering).
fn alarm_json(record: &AlarmRecord) -> Value {
    let metrics: Vec<Value> = record.metrics_snapshot.iter().map(|(name, text)| json!({"name": name, "results": snapshot_results(text)})).collect();
    json!({
        "startTime": record.start_time,
        "recoveryTime": record.recovery_time,
        "scope": scope_enum(&record.scope),
        "id": record.id0,
        "name": record.name,
        "message": record.alarm_message,
        "events": [],
        "tags": record.tags.iter().map(|t| json!({"key": t.key, "value": t.value})).collect::<Vec<_>>(),
        "snapshot": {"expression": record.expression, "metrics": metrics},
        "layers": record.layers,
    })
}

/// A stored snapshot (`[{"id": ts, "labels": "k=v", "value": v}, ...]`) as `[MQEValues]`: one
/// series per label set, values as the protocol's strings.
fn snapshot_results(text: &str) -> Value {
    let points: Vec<Value> = serde_json::from_str(text).unwrap_or_default();
    let mut series: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for point in points {
        let labels = point.get("labels").and_then(Value::as_str).unwrap_or("").to_string();
        let value = point.get("value").and_then(Value::as_f64).map(hotrule_mqe_engine::format_value);
        let id = match point.get("id") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        series.entry(labels).or_default().push(json!({"id": id, "value": value, "traceID": null, "owner": null}));
    }
    series
        .into_iter()
        .map(|(labels, values)| {
            let labels: Vec<Value> = super::expression::label_set(&labels).into_iter().map(|l| json!({"key": l.key, "value": l.value})).collect();
            json!({"metric": {"labels": labels}, "values": values})
        })
        .collect()
}

/// Whether an alarm message is about the `Entity` input `entity` (OAP 11.0: a plain entity
/// matches either side of the message by name, a relation both).
fn message_names_entity(message: &Value, entity: &Value) -> bool {
    let text = |field: &str| entity.get(field).and_then(Value::as_str).unwrap_or("");
    let name = message["name"].as_str().unwrap_or("");
    let (service, instance, endpoint, dest) = (text("serviceName"), text("serviceInstanceName"), text("endpointName"), text("destServiceName"));
    let plain = if !endpoint.is_empty() {
        format!("{endpoint} in {service}")
    } else if !instance.is_empty() {
        format!("{instance} of {service}")
    } else {
        service.to_string()
    };
    if dest.is_empty() { name == plain || name.starts_with(&format!("{plain} to ")) || name.ends_with(&format!(" to {plain}")) } else { name == format!("{service} to {dest}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_become_mqe_values() {
        let text = r#"[{"id":"60000","value":1.5},{"id":"60000","labels":"p=50","value":2.0},{"id":"120000","labels":"p=50","value":2.25}]"#;
        assert_eq!(
            snapshot_results(text),
            json!([
                {"metric": {"labels": []}, "values": [{"id": "60000", "value": "1.5", "traceID": null, "owner": null}]},
                {"metric": {"labels": [{"key": "p", "value": "50"}]}, "values": [
                    {"id": "60000", "value": "2", "traceID": null, "owner": null},
                    {"id": "120000", "value": "2.25", "traceID": null, "owner": null}]},
            ])
        );
        assert_eq!(snapshot_results("not json"), json!([]));
    }

    #[test]
    fn scopes_map_both_ways() {
        for scope in ["Service", "ServiceInstance", "Endpoint", "ServiceRelation", "ServiceInstanceRelation", "EndpointRelation"] {
            assert_eq!(scope_enum(scope_name(scope)), Some(scope));
        }
        assert_eq!(scope_enum("nonsense"), None);
    }

    #[test]
    fn alarm_entities_match_by_name() {
        let message = |name: &str| json!({"name": name});
        let service = json!({"serviceName": "svc"});
        assert!(message_names_entity(&message("svc"), &service));
        assert!(message_names_entity(&message("svc to db"), &service), "either side of a relation");
        assert!(!message_names_entity(&message("svc2"), &service));
        assert!(message_names_entity(&message("i1 of svc"), &json!({"serviceName": "svc", "serviceInstanceName": "i1"})));
        assert!(message_names_entity(&message("svc to db"), &json!({"serviceName": "svc", "destServiceName": "db"})));
        assert!(!message_names_entity(&message("db to svc"), &json!({"serviceName": "svc", "destServiceName": "db"})));
    }

    #[test]
    fn paging_is_skip_and_limit() {
        assert_eq!(paging(Some(&json!({"pageNum": 3, "pageSize": 21}))), (42, 21));
        assert_eq!(paging(Some(&json!({"pageSize": 5}))), (0, 5));
        assert_eq!(paging(Some(&json!({"pageNum": -4, "pageSize": 1_000_000}))), (0, 10_000));
    }
}
