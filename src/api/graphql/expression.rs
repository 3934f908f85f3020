//! `execExpression` over the metric store: which series an expression needs (the entity's own,
//! and for `top_n` every entity's), an MQE [`MetricSource`] over what was read, and the
//! `ExpressionResult` as the protocol renders it. The read itself is the caller's (it is
//! async and cluster-wide); everything here is pure.
//!
//! - The entity's scope comes from each metric's definition, not from `Entity.scope` (OAP's
//!   `senseScope`); an entity input that lacks the names that scope needs is an error result.
//! - Values are the store's finalized values: a common value per point, a labeled value as one
//!   series per label set, a `histogram_percentile` metric as its percentiles labeled `p`, a plain
//!   histogram as its buckets labeled `le` (OAP reads both as labeled values).
//! - `top_n` ranks the entities by their mean over the duration (OAP's `sortMetrics` for the
//!   MAL functions); `attr0..5` conditions are not kept by hotrule and match nothing but an
//!   empty condition list.
//! - Sampled records (`top_n` of a `SAMPLED_RECORD` metric, RECORD_LIST) are the kept logs of the
//!   LAL output type that makes them ([`RECORD_METRICS`]): `top_n_database_statement` is the
//!   `SlowSQL` logs of the entity's service in the duration (MySQL, PostgreSQL and Redis slow-SQL
//!   rules), named by `statement`, valued by `latency`, with the log's trace id, as OAP's
//!   `TopNDatabaseStatement` records. The newest [`MAX_RECORDS_READ`] logs of the service in the
//!   duration are looked through.

use std::collections::{BTreeMap, HashMap, HashSet};

use hotrule_mal_engine::{DataType, ScopeType};
use hotrule_mqe_engine::{
    Duration, Expr, ExpressionResult, KeyValue, LabeledSeries, MetricKind, MetricSource, Owner, SourceError, TopNItem, TopNRequest,
};
use serde_json::Value;

use crate::base::entity_ids as ids;
use crate::control::alarms::window::MetricValue;
use crate::data::metrics::{Entity, MetricInfo, Series, SeriesFilter};

/// The `Entity` input: the names a metric's scope picks its entity by (empty when not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub service: String,
    pub instance: String,
    pub endpoint: String,
    pub process: String,
    pub dest_service: String,
    pub dest_instance: String,
}

impl Wanted {
    pub fn from_input(input: &Value) -> Wanted {
        let text = |field: &str| input.get(field).and_then(Value::as_str).unwrap_or("").to_string();
        Wanted {
            service: text("serviceName"),
            instance: text("serviceInstanceName"),
            endpoint: text("endpointName"),
            process: text("processName"),
            dest_service: text("destServiceName"),
            dest_instance: text("destServiceInstanceName"),
        }
    }

    /// The store filter that narrows a read of a metric of `scope` to this entity (the rest is
    /// matched by [`Wanted::matches`]).
    pub fn filter(&self, metric: &str, scope: ScopeType) -> SeriesFilter {
        let some = |name: &str| (!name.is_empty()).then(|| name.to_string());
        let mut filter = SeriesFilter { metric: metric.to_string(), ..SeriesFilter::default() };
        match scope {
            ScopeType::Service | ScopeType::ServiceInstance | ScopeType::Endpoint | ScopeType::Process => filter.service = some(&self.service),
            _ => {}
        }
        if scope == ScopeType::ServiceInstance {
            filter.instance = some(&self.instance);
        }
        if scope == ScopeType::Endpoint {
            filter.endpoint = some(&self.endpoint);
        }
        filter
    }

    /// The store filter of a metric of `scope` read under `top_n`: every entity competes, of
    /// the entity's service for instance and endpoint metrics, of the whole store for service
    /// metrics.
    pub fn ranked_filter(&self, metric: &str, scope: ScopeType) -> SeriesFilter {
        let mut filter = self.filter(metric, scope);
        filter.instance = None;
        filter.endpoint = None;
        if scope == ScopeType::Service {
            filter.service = None;
        }
        filter
    }

    /// Why this entity input cannot name an entity of `scope`, if it cannot (OAP's
    /// `Entity.isValid`).
    pub fn missing(&self, scope: ScopeType) -> Option<&'static str> {
        let need: &[(&str, &'static str)] = match scope {
            ScopeType::Service => &[(&self.service, "serviceName")],
            ScopeType::ServiceInstance => &[(&self.service, "serviceName"), (&self.instance, "serviceInstanceName")],
            ScopeType::Endpoint => &[(&self.service, "serviceName"), (&self.endpoint, "endpointName")],
            ScopeType::Process => &[(&self.service, "serviceName"), (&self.instance, "serviceInstanceName"), (&self.process, "processName")],
            ScopeType::ServiceRelation => &[(&self.service, "serviceName"), (&self.dest_service, "destServiceName")],
            ScopeType::ServiceInstanceRelation => &[
                (&self.service, "serviceName"),
                (&self.instance, "serviceInstanceName"),
                (&self.dest_service, "destServiceName"),
                (&self.dest_instance, "destServiceInstanceName"),
            ],
            ScopeType::ProcessRelation => &[(&self.process, "processName")],
        };
        need.iter().find(|(value, _)| value.is_empty()).map(|(_, field)| *field)
    }

    /// Whether `entity` is the one this input names.
    pub fn matches(&self, entity: &Entity) -> bool {
        match entity.scope {
            ScopeType::Service => entity.service_name == self.service,
            ScopeType::ServiceInstance => entity.service_name == self.service && entity.instance_name == self.instance,
            ScopeType::Endpoint => entity.service_name == self.service && entity.endpoint_name == self.endpoint,
            ScopeType::Process => entity.service_name == self.service && entity.process_name == self.process,
            ScopeType::ServiceRelation => entity.source_service_name == self.service && entity.dest_service_name == self.dest_service,
            ScopeType::ServiceInstanceRelation => {
                entity.source_service_name == self.service
                    && entity.source_instance_name == self.instance
                    && entity.dest_service_name == self.dest_service
                    && entity.dest_instance_name == self.dest_instance
            }
            ScopeType::ProcessRelation => false,
        }
    }
}

/// The metrics `expr` reads under `top_n`: those need every entity's series, not one.
pub fn ranked_metrics(expr: &Expr) -> HashSet<String> {
    let mut out = HashSet::new();
    expr.walk(&mut |e| match e {
        Expr::TopN(t) => {
            out.insert(t.metric.name.clone());
        }
        Expr::TopNOf { top_ns, .. } => out.extend(top_ns.iter().map(|t| t.metric.name.clone())),
        _ => {}
    });
    out
}

/// The MQE kind of a stored metric.
pub fn kind_of(info: &MetricInfo) -> MetricKind {
    match info.data_type {
        DataType::Single => MetricKind::Common,
        DataType::Labeled | DataType::Histogram | DataType::HistogramPercentile => MetricKind::Labeled,
    }
}

/// The sampled-record metrics hotrule serves, each with the LAL `outputType` whose kept logs are
/// its records.
pub const RECORD_METRICS: [(&str, &str); 1] = [("top_n_database_statement", "SlowSQL")];

/// The most kept logs one record metric's `top_n` looks through (the service's newest in the
/// duration).
pub const MAX_RECORDS_READ: usize = crate::data::logs::MAX_LIMIT;

/// The LAL output type whose logs are `metric`'s records, if it is a record metric.
pub fn record_output_type(metric: &str) -> Option<&'static str> {
    RECORD_METRICS.iter().find(|(name, _)| *name == metric).map(|(_, output)| *output)
}

/// The records of output type `output` among `logs`: each one with a numeric `latency` and a
/// `statement` field, as OAP's `TopNDatabaseStatement` (name: the statement, value: the
/// latency, trace id: the log's, when it has one).
pub fn records_of(logs: &[crate::data::logs::StoredLog], output: &str) -> Vec<TopNItem> {
    logs.iter()
        .map(|l| &l.log.record)
        .filter(|r| r.output_type.as_deref() == Some(output))
        .filter_map(|r| {
            let statement = r.fields.get("statement")?.as_str()?;
            let latency = r.fields.get("latency")?.as_f64()?;
            Some(TopNItem {
                name: statement.to_string(),
                value: latency,
                trace_id: (!r.trace_id.is_empty()).then(|| r.trace_id.clone()),
                owner: None,
            })
        })
        .collect()
}

/// What one metric's read gave: its definition, the wanted entity's values by point (epoch ms),
/// and (under `top_n`) every entity's mean over the duration.
struct Read {
    kind: MetricKind,
    /// Common values by point.
    common: BTreeMap<i64, f64>,
    /// Labeled values: label set (sorted by key) → point → value.
    labeled: BTreeMap<Vec<KeyValue>, BTreeMap<i64, f64>>,
    ranked: Vec<TopNItem>,
    /// Why the entity input cannot name this metric's entity.
    invalid: Option<String>,
}

/// An MQE source over series read ahead of evaluation.
#[derive(Default)]
pub struct Prefetched {
    reads: HashMap<String, Read>,
    /// Sampled-record metrics' records.
    records: HashMap<String, Vec<TopNItem>>,
}

impl Prefetched {
    /// Adds what the store gave for `info` (`series` of every entity read; only `wanted`'s make
    /// the metric's values, and with `ranked` every entity's mean over `window` ranks it).
    pub fn add(&mut self, info: &MetricInfo, series: &[Series], wanted: &Wanted, ranked: bool, window: &Duration) {
        let invalid = (!ranked).then(|| wanted.missing(info.scope)).flatten().map(|field| {
            format!("the entity has no {field}, which a metric of scope {} ({}) needs", info.scope.as_str(), info.name)
        });
        let mut read = Read { kind: kind_of(info), common: BTreeMap::new(), labeled: BTreeMap::new(), ranked: Vec::new(), invalid };
        for one in series.iter().filter(|s| wanted.matches(&s.entity)) {
            for point in &one.points {
                match point_value(&point.value) {
                    Some(MetricValue::Single(v)) => {
                        read.common.insert(point.start_ms, v);
                    }
                    Some(MetricValue::Labeled(pairs)) => {
                        for (key, v) in pairs {
                            read.labeled.entry(label_set(&key)).or_default().insert(point.start_ms, v);
                        }
                    }
                    None => {}
                }
            }
        }
        if ranked {
            read.ranked = rank(series, window);
        }
        self.reads.insert(info.name.clone(), read);
    }

    /// Adds a sampled-record metric's records (see [`records_of`]).
    pub fn add_records(&mut self, name: &str, items: Vec<TopNItem>) {
        self.records.insert(name.to_string(), items);
    }

    fn read(&self, name: &str) -> Result<Option<&Read>, SourceError> {
        match self.reads.get(name) {
            Some(Read { invalid: Some(why), .. }) => Err(SourceError::Illegal(why.clone())),
            other => Ok(other),
        }
    }
}

/// A stored value as MQE reads it (see the module doc); a plain histogram's buckets are
/// labeled `le`.
fn point_value(value: &crate::data::metrics::Value) -> Option<MetricValue> {
    use crate::data::metrics::Value as V;
    match value {
        V::Histogram { labels, buckets, percentiles } if percentiles.is_empty() => Some(MetricValue::Labeled(
            buckets
                .iter()
                .map(|(le, count)| (if labels.is_empty() { format!("le={le}") } else { format!("{labels},le={le}") }, *count as f64))
                .collect(),
        )),
        other => crate::data::alarms::alarm_value(other),
    }
}

/// `k1=v1,k2=v2` (a stored labeled value's key) as labels sorted by key.
pub(super) fn label_set(key: &str) -> Vec<KeyValue> {
    let mut labels: Vec<KeyValue> = key
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('=') {
            Some((k, v)) => KeyValue::new(k, v),
            None => KeyValue::new(part, ""),
        })
        .collect();
    labels.sort();
    labels
}

/// Every entity's mean over the window's points, with its owner (OAP 10.2's `Owner`).
fn rank(series: &[Series], window: &Duration) -> Vec<TopNItem> {
    let end = window.end_ms.saturating_add(window.step.millis());
    series
        .iter()
        .filter_map(|one| {
            let values: Vec<f64> = one
                .points
                .iter()
                .filter(|p| p.start_ms >= window.start_ms && p.start_ms < end)
                .filter_map(|p| match point_value(&p.value) {
                    Some(MetricValue::Single(v)) => Some(v),
                    _ => None,
                })
                .collect();
            if values.is_empty() {
                return None;
            }
            let (name, owner) = owner_of(&one.entity);
            Some(TopNItem { name, value: values.iter().sum::<f64>() / values.len() as f64, trace_id: None, owner: Some(owner) })
        })
        .collect()
}

/// The display name and `Owner` of an entity in a sorted list.
fn owner_of(entity: &Entity) -> (String, Owner) {
    let mut owner = Owner {
        service_id: Some(ids::service_id(&entity.service_name)),
        service_name: Some(entity.service_name.clone()),
        normal: Some(true),
        ..Owner::default()
    };
    let name = match entity.scope {
        ScopeType::ServiceInstance => {
            owner.scope = Some("ServiceInstance".into());
            owner.service_instance_id = Some(ids::instance_id(&entity.service_name, &entity.instance_name));
            owner.service_instance_name = Some(entity.instance_name.clone());
            entity.instance_name.clone()
        }
        ScopeType::Endpoint => {
            owner.scope = Some("Endpoint".into());
            owner.endpoint_id = Some(ids::endpoint_id(&entity.service_name, &entity.endpoint_name));
            owner.endpoint_name = Some(entity.endpoint_name.clone());
            entity.endpoint_name.clone()
        }
        _ => {
            owner.scope = Some("Service".into());
            entity.service_name.clone()
        }
    };
    (name, owner)
}

impl MetricSource for Prefetched {
    fn metric_kind(&self, name: &str) -> Option<MetricKind> {
        match self.reads.get(name) {
            Some(read) => Some(read.kind),
            None => self.records.contains_key(name).then_some(MetricKind::Record),
        }
    }

    fn read_values(&self, name: &str, duration: &Duration) -> Result<Vec<Option<f64>>, SourceError> {
        let read = self.read(name)?;
        Ok(duration.points().iter().map(|p| read.and_then(|r| r.common.get(p).copied())).collect())
    }

    fn read_labeled_values(&self, name: &str, selectors: &[KeyValue], duration: &Duration) -> Result<Vec<LabeledSeries>, SourceError> {
        let Some(read) = self.read(name)? else { return Ok(Vec::new()) };
        let points = duration.points();
        // Several selectors of one key are alternatives (`m{k='a,b'}` arrives as k=a, k=b).
        let passes = |labels: &[KeyValue]| {
            selectors.iter().all(|s| {
                let have = labels.iter().find(|l| l.key == s.key).map(|l| l.value.as_str());
                selectors.iter().filter(|o| o.key == s.key).any(|o| Some(o.value.as_str()) == have)
            })
        };
        Ok(read
            .labeled
            .iter()
            .filter(|(labels, _)| passes(labels))
            .map(|(labels, values)| LabeledSeries { labels: labels.clone(), values: points.iter().map(|p| values.get(p).copied()).collect() })
            .collect())
    }

    fn sort_metrics(&self, request: &TopNRequest<'_>, _duration: &Duration) -> Result<Vec<TopNItem>, SourceError> {
        let Some(read) = self.reads.get(request.metric) else { return Ok(Vec::new()) };
        if !request.attrs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(best(read.ranked.clone(), request))
    }

    fn read_records(&self, request: &TopNRequest<'_>, _duration: &Duration) -> Result<Vec<TopNItem>, SourceError> {
        match self.records.get(request.metric) {
            Some(items) if request.attrs.is_empty() => Ok(best(items.clone(), request)),
            _ => Ok(Vec::new()),
        }
    }
}

/// The first `request.top_n` of `items` in the request's order (ties by name).
fn best(mut items: Vec<TopNItem>, request: &TopNRequest<'_>) -> Vec<TopNItem> {
    items.sort_by(|a, b| {
        let order = a.value.total_cmp(&b.value).then_with(|| a.name.cmp(&b.name));
        if request.order == hotrule_mqe_engine::Order::Asc { order } else { order.reverse() }
    });
    items.truncate(request.top_n);
    items
}

/// An `ExpressionResult` as the protocol renders it: values as strings with at most three
/// decimals, `null` for a missing point. Takes the result, so ids and labels move into the
/// answer (a day of minutes is thousands of values per expression).
pub fn result_json(result: ExpressionResult) -> Value {
    fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
        Value::Object(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    fn text(s: Option<String>) -> Value {
        s.map_or(Value::Null, Value::String)
    }
    let owner = |o: Owner| {
        object([
            ("scope", text(o.scope)),
            ("serviceID", text(o.service_id)),
            ("serviceName", text(o.service_name)),
            ("normal", o.normal.map_or(Value::Null, Value::Bool)),
            ("serviceInstanceID", text(o.service_instance_id)),
            ("serviceInstanceName", text(o.service_instance_name)),
            ("endpointID", text(o.endpoint_id)),
            ("endpointName", text(o.endpoint_name)),
        ])
    };
    let results: Vec<Value> = result
        .results
        .into_iter()
        .map(|series| {
            let labels = series.labels.into_iter().map(|l| object([("key", Value::String(l.key)), ("value", Value::String(l.value))])).collect();
            let values = series
                .values
                .into_iter()
                .map(|v| {
                    let value = text(v.value_string());
                    object([("id", text(v.id)), ("value", value), ("traceID", text(v.trace_id)), ("owner", v.owner.map_or(Value::Null, owner))])
                })
                .collect();
            object([("metric", object([("labels", Value::Array(labels))])), ("values", Value::Array(values))])
        })
        .collect();
    object([
        ("type", Value::String(result.result_type.as_str().to_string())),
        ("results", Value::Array(results)),
        ("error", text(result.error)),
        ("debuggingTrace", Value::Null),
    ])
}

/// An error result (type UNKNOWN), as OAP answers an expression it cannot run.
pub fn error_json(message: impl Into<String>) -> Value {
    result_json(ExpressionResult::error(message))
}
