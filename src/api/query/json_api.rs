//! hotrule's own metric query JSON (`/query/metrics`, `/query/metrics/list`,
//! `/query/metrics/entities`): the bodies, computed from parsed parameters. The thin handlers
//! are in `http::query`; a refused parameter is `400 invalid_parameter` naming it and why.
//!
//! Times (`start`, `end`) are epoch milliseconds, RFC 3339, or SkyWalking's `yyyy-MM-dd HHmm`
//! (also `yyyy-MM-dd HH`, `yyyy-MM-dd`), in UTC. `step` is `MINUTE` (default), `HOUR` or `DAY`.
//! Without `end` the range ends now; without `start` it spans 30 buckets of the step (the
//! entities route: one day). At most [`MAX_BUCKETS`] buckets per read.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::base::clock::now_ms;
use crate::data::metrics::prom::{percentile, series_labels};
use crate::data::metrics::{Entity, Granularity, MetricInfo, SeriesFilter};
use crate::control::outcome::{ApplyStatus, Outcome};

use super::invalid;
use super::time::{floor_to, query_range};
use super::{Gathered, QueryError, QueryService};

/// The most buckets one read may span (as Prometheus's 11,000 points per series).
pub const MAX_BUCKETS: i64 = 11_000;

impl From<QueryError> for Outcome {
    fn from(e: QueryError) -> Outcome {
        Outcome::new(ApplyStatus::StorageUnavailable, e.to_string())
    }
}

/// Refuses parameters the route does not know (a typo must not widen a query silently).
fn only_known(params: &HashMap<String, String>, known: &[&str]) -> Result<(), Outcome> {
    let mut unknown: Vec<&str> = params.keys().map(String::as_str).filter(|k| !known.contains(k)).collect();
    unknown.sort_unstable();
    match unknown.first() {
        None => Ok(()),
        Some(name) => Err(invalid(format!("unknown query parameter {name}; known: {}", known.join(", ")))),
    }
}

fn text<'a>(params: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

fn cluster_flag(params: &HashMap<String, String>) -> Result<bool, Outcome> {
    Ok(super::bool_param("cluster", text(params, "cluster"))?.unwrap_or(false))
}

/// A parsed read: which series, at which step, over which range, from where.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRequest {
    pub filter: SeriesFilter,
    pub step: Granularity,
    pub start_ms: i64,
    pub end_ms: i64,
    pub cluster: bool,
}

/// The parameters of `/query/metrics` (and, with `default_buckets`, of the entities route).
pub fn read_request(params: &HashMap<String, String>, now: i64, default_step: Granularity, default_buckets: i64) -> Result<ReadRequest, Outcome> {
    let metric = text(params, "name").ok_or_else(|| invalid("query parameter name is required (a metric name; see /query/metrics/list)"))?;
    let step = match text(params, "step") {
        None => default_step,
        Some(s) => Granularity::parse(s).ok_or_else(|| invalid(format!("query parameter step: {s:?} is not MINUTE, HOUR or DAY")))?,
    };
    let (start_ms, end_ms) = query_range(|name| text(params, name), now, default_buckets.saturating_mul(step.millis())).map_err(invalid)?;
    let buckets = (end_ms - floor_to(step, start_ms)) / step.millis() + 1;
    if buckets > MAX_BUCKETS {
        return Err(invalid(format!(
            "the range spans {buckets} {} buckets, more than {MAX_BUCKETS}: use a coarser step or a shorter range",
            step.as_str()
        )));
    }
    Ok(ReadRequest {
        filter: SeriesFilter {
            metric: metric.to_string(),
            service: text(params, "service").map(str::to_string),
            instance: text(params, "instance").map(str::to_string),
            endpoint: text(params, "endpoint").map(str::to_string),
        },
        step,
        start_ms,
        end_ms,
        cluster: cluster_flag(params)?,
    })
}

/// An entity as JSON: its scope and non-empty names, labelled as in the Prometheus API.
pub fn entity_json(entity: &Entity) -> Value {
    let labels = series_labels("", entity);
    Value::Object(labels.into_iter().filter(|(k, _)| k != "__name__").map(|(k, v)| (k, Value::String(v))).collect())
}

/// A stored value as JSON: a number, `{key: n}` for labeled values, or buckets (`[[le, n]]`)
/// with the percentiles they give.
pub fn value_json(value: &crate::data::metrics::Value) -> Value {
    use crate::data::metrics::Value as V;
    match value {
        V::Single(v) => json!(v),
        V::Labeled(entries) => Value::Object(entries.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
        V::Histogram { labels, buckets, percentiles } => {
            let mut body = json!({"labels": labels, "buckets": buckets.iter().map(|(le, n)| json!([le, n])).collect::<Vec<_>>()});
            if !percentiles.is_empty() {
                body["percentiles"] = Value::Object(percentiles.iter().map(|p| (p.to_string(), json!(percentile(buckets, *p)))).collect());
            }
            body
        }
    }
}

fn info_json(info: &MetricInfo) -> Value {
    let shape = crate::compiler::MetricShape { scope: info.scope, downsampling: info.downsampling, data_type: info.data_type };
    json!({
        "name": info.name,
        "scope": info.scope.as_str(),
        "dataType": format!("{:?}", info.data_type),
        "downsampling": info.downsampling.camel(),
        "function": shape.function_name(),
    })
}

/// Who answered a read and who did not (`partial` names the nodes left out, and why).
fn provenance(body: &mut Value, gathered: &Gathered) {
    body["nodes"] = json!(gathered.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>());
    body["partial"] = gathered.missing.iter().map(|m| json!({"node": m.node.0, "reason": m.reason})).collect();
}

/// One bucket of a series in `/query/metrics` (serialized directly: a day of minutes is 1440).
#[derive(Debug, serde::Serialize)]
pub struct PointBody {
    pub bucket: i64,
    pub time: i64,
    pub value: Value,
}

#[derive(Debug, serde::Serialize)]
pub struct SeriesBody {
    pub entity: Value,
    pub points: Vec<PointBody>,
}

/// The answer of `/query/metrics`.
#[derive(Debug, serde::Serialize)]
pub struct MetricsBody {
    pub name: String,
    pub step: &'static str,
    pub start: i64,
    pub end: i64,
    pub cluster: bool,
    pub metric: Value,
    pub series: Vec<SeriesBody>,
    pub nodes: Value,
    pub partial: Value,
}

/// `GET /query/metrics`.
pub async fn metrics(service: &QueryService, params: &HashMap<String, String>) -> Result<MetricsBody, Outcome> {
    only_known(params, &["name", "service", "instance", "endpoint", "start", "end", "step", "cluster"])?;
    let request = read_request(params, now_ms() as i64, Granularity::Minute, 30)?;
    let reach = service.reach(request.cluster, None);
    let gathered = service.read(&request.filter, request.step, floor_to(request.step, request.start_ms), request.end_ms, reach).await?;
    let series = gathered
        .series
        .iter()
        .map(|s| SeriesBody {
            entity: entity_json(&s.entity),
            points: s.points.iter().map(|p| PointBody { bucket: p.bucket, time: p.start_ms, value: value_json(&p.value) }).collect(),
        })
        .collect();
    let mut provenance_body = json!({});
    provenance(&mut provenance_body, &gathered);
    Ok(MetricsBody {
        step: request.step.as_str(),
        start: request.start_ms,
        end: request.end_ms,
        cluster: reach.cluster,
        metric: gathered.metrics.get(&request.filter.metric).map_or(Value::Null, info_json),
        name: request.filter.metric,
        series,
        nodes: provenance_body["nodes"].take(),
        partial: provenance_body["partial"].take(),
    })
}

/// `GET /query/metrics/list`.
pub async fn list(service: &QueryService, params: &HashMap<String, String>) -> Result<Value, Outcome> {
    only_known(params, &["cluster"])?;
    let reach = service.reach(cluster_flag(params)?, None);
    let gathered = service.list(reach).await?;
    let mut body = json!({"cluster": reach.cluster, "metrics": gathered.metrics.values().map(info_json).collect::<Vec<_>>()});
    provenance(&mut body, &gathered);
    Ok(body)
}

/// `GET /query/metrics/entities`: the entities with a value of `name` in the range (default:
/// the last day, read at DAY buckets).
pub async fn entities(service: &QueryService, params: &HashMap<String, String>) -> Result<Value, Outcome> {
    only_known(params, &["name", "service", "instance", "endpoint", "start", "end", "step", "cluster"])?;
    let request = read_request(params, now_ms() as i64, Granularity::Day, 1)?;
    let reach = service.reach(request.cluster, None);
    let gathered = service.read(&request.filter, request.step, floor_to(request.step, request.start_ms), request.end_ms, reach).await?;
    let entities: std::collections::BTreeSet<&Entity> = gathered.series.iter().map(|s| &s.entity).collect();
    let mut body = json!({
        "name": request.filter.metric,
        "step": request.step.as_str(),
        "start": request.start_ms,
        "end": request.end_ms,
        "cluster": reach.cluster,
        "entities": entities.into_iter().map(entity_json).collect::<Vec<_>>(),
    });
    provenance(&mut body, &gathered);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const NOW: i64 = 1_735_732_800_000; // 2025-01-01T12:00:00Z

    #[test]
    fn defaults_and_formats() {
        let request = read_request(&params(&[("name", "m")]), NOW, Granularity::Minute, 30).expect("valid");
        assert_eq!((request.start_ms, request.end_ms, request.step, request.cluster), (NOW - 1_800_000, NOW, Granularity::Minute, false));
        let request = read_request(
            &params(&[("name", "m"), ("start", "2025-01-01 1100"), ("end", "2025-01-01T12:00:00Z"), ("step", "hour"), ("service", "s"), ("cluster", "true")]),
            NOW,
            Granularity::Minute,
            30,
        )
        .expect("valid");
        assert_eq!((request.start_ms, request.end_ms, request.step), (NOW - 3_600_000, NOW, Granularity::Hour));
        assert_eq!(request.filter.service.as_deref(), Some("s"));
        assert!(request.cluster);
    }

    #[test]
    fn bad_parameters_are_named() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "name"),
            (&[("name", "m"), ("step", "SECOND")], "step"),
            (&[("name", "m"), ("start", "yesterday")], "start"),
            (&[("name", "m"), ("end", "2025-13-01")], "end"),
            (&[("name", "m"), ("start", "2025-01-02"), ("end", "2025-01-01")], "before start"),
            (&[("name", "m"), ("start", "2024-01-01"), ("end", "2025-01-01")], "coarser step"),
            (&[("name", "m"), ("cluster", "maybe")], "cluster"),
        ];
        for (pairs, needle) in cases {
            let error = read_request(&params(pairs), NOW, Granularity::Minute, 30).expect_err(needle);
            assert_eq!(error.status, ApplyStatus::InvalidParameter);
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
        let unknown = only_known(&params(&[("serivce", "x")]), &["service"]).expect_err("typo");
        assert!(unknown.message.contains("serivce"));
    }

    #[test]
    fn values_render_by_kind() {
        use crate::data::metrics::Value as V;
        assert_eq!(value_json(&V::Single(7)), json!(7));
        assert_eq!(value_json(&V::Labeled(vec![("k=a".into(), 1)])), json!({"k=a": 1}));
        let histogram = V::Histogram { labels: String::new(), buckets: vec![(100, 5), (250, 3), (500, 2)], percentiles: vec![50, 90] };
        assert_eq!(value_json(&histogram), json!({"labels": "", "buckets": [[100, 5], [250, 3], [500, 2]], "percentiles": {"50": 100, "90": 500}}));
    }
}
