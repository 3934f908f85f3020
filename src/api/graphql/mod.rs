//! SkyWalking's GraphQL query protocol on the admin port (`POST /graphql`), so SkyWalking's own
//! UI (booster-ui), `swctl` and other clients read hotrule's MAL and LAL data: metadata
//! (layers, services, instances, endpoints), `execExpression` (MQE over the metric store),
//! dashboards and the menu, logs and alarms. The schema is [`SCHEMA_SDL`] (copied field for field
//! from `apache/skywalking-query-protocol`); `engines/graphql` parses, validates, introspects and
//! shapes the answer, and this module resolves each root field.
//!
//! - **One request, one look.** booster-ui sends up to six aliased `execExpression` fields per
//!   document; the metric definitions and the metadata catalog are read once per request
//!   ([`Lookups`]), not once per field. The expressions are evaluated concurrently, each reading
//!   its metrics at once, so a batch's store reads (and cluster fan-outs) overlap.
//! - **The answer is written once.** Resolvers give JSON trees; `hotrule-graphql` writes the
//!   selected shape straight into the response body ([`Answer`]).
//! - **Errors.** A malformed document is a top-level `errors` answer; a bad expression, entity or
//!   duration is that field's `ExpressionResult.error`, so the rest of a batch survives; a store
//!   failure is a field error with its path.
//! - **Dashboards** are the bundled ones with the runtime changes laid over them by id; the
//!   mutations (`addTemplate` / `changeTemplate` / `disableTemplate`) go through a
//!   [`TemplateStore`] the admin API implements (stored entries, written on the main).
//! - **In a cluster** every read is the cluster's (`QueryService` with `cluster` reach): values
//!   merged exactly from every live node's cells, metadata from every node's entities.

pub mod duration;
pub mod expression;
pub mod metadata;
pub mod records;
pub mod templates;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hotrule_graphql::{Prepared, Request, RootField, Schema};
use serde_json::{Map, Value, json};

use self::duration::QueryDuration;
use self::expression::{Prefetched, Wanted};
use self::metadata::Catalog;
use self::templates::{TemplateSet, TemplateStore};
use crate::base::entity_ids as ids;
use crate::control::ui_templates::TemplateOp;
use crate::api::query::{QueryService, Reach};
use crate::data::metrics::{Granularity, MetricInfo};

/// The schema hotrule serves (SDL).
pub const SCHEMA_SDL: &str = include_str!("../../../proto/skywalking-query/hotrule.graphqls");

/// What `version` answers: swctl reads the major version from it (≥ 9 selects the v2 metadata
/// queries), so it starts with the SkyWalking release whose protocol this is.
pub fn version() -> String {
    format!("10.4.0-hotrule-{}", env!("CARGO_PKG_VERSION"))
}

/// How many days back the metadata (services, instances, endpoints) is read from: a service is
/// listed while it has a value in the last this many UTC days. `getMetricsTTL.metadata` says it.
pub const METADATA_DAYS: i64 = 3;

/// Most `execExpression` fields of one request evaluated at once (each reads its metrics at
/// once: a store read each, and in a cluster a fan-out each).
const PARALLEL_EXPRESSIONS: usize = 8;

/// How long a metadata catalog is reused across requests.
const CATALOG_FRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// Retention in days, as `getMetricsTTL` / `getRecordsTTL` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttl {
    pub minute_days: i64,
    pub hour_days: i64,
    pub day_days: i64,
    pub log_days: i64,
    pub alarm_days: i64,
}

/// The query protocol's resolvers over one node's query service.
pub struct SkyWalkingQuery {
    schema: Schema,
    query: Arc<QueryService>,
    templates: Arc<TemplateSet>,
    /// Runtime template changes (stored entries, and the write path); none: read-only.
    changes: Option<Arc<dyn TemplateStore>>,
    ttl: Ttl,
    catalog: Mutex<Option<(Instant, Arc<Catalog>)>>,
}

/// Why the protocol could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("the query protocol schema does not parse: {0}")]
    Schema(String),
}

/// One request's answer: the response body (JSON text) and how it went.
#[derive(Debug, Clone)]
pub struct Answer {
    pub body: Vec<u8>,
    pub outcome: Outcome,
}

/// How a request went, as `hotrule_graphql_requests_total{outcome}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No errors.
    Ok,
    /// Some fields failed; `data` holds the rest (or is null when a non-null root failed).
    FieldError,
    /// The body or document was refused before anything was resolved.
    DocumentError,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::FieldError => "field_error",
            Outcome::DocumentError => "document_error",
        }
    }
}

/// What one request reads once and every field of it shares.
#[derive(Default)]
struct Lookups {
    /// OAP's health score (0: healthy) and what is wrong, as the caller sees the node.
    health: (i32, Option<String>),
    metrics: Option<Arc<BTreeMap<String, MetricInfo>>>,
    catalog: Option<Arc<Catalog>>,
}

impl SkyWalkingQuery {
    pub fn new(query: Arc<QueryService>, templates: Arc<TemplateSet>, ttl: Ttl) -> Result<SkyWalkingQuery, ProtocolError> {
        let schema = Schema::parse(SCHEMA_SDL).map_err(|e| ProtocolError::Schema(e.to_string()))?;
        Ok(SkyWalkingQuery { schema, query, templates, changes: None, ttl, catalog: Mutex::new(None) })
    }

    /// Serves `addTemplate` / `changeTemplate` / `disableTemplate` through `changes`, and lays
    /// its stored templates over the bundled ones.
    pub fn with_template_store(mut self, changes: Arc<dyn TemplateStore>) -> SkyWalkingQuery {
        self.changes = Some(changes);
        self
    }

    /// The bundled dashboards (without runtime changes).
    pub fn bundled_templates(&self) -> &TemplateSet {
        &self.templates
    }

    /// The dashboards in force on this node: the bundled ones with the stored changes laid
    /// over them by id.
    fn current_templates(&self) -> Result<Arc<TemplateSet>, String> {
        let Some(changes) = &self.changes else { return Ok(self.templates.clone()) };
        let stored = changes.list()?;
        if stored.is_empty() {
            return Ok(self.templates.clone());
        }
        Ok(Arc::new(self.templates.with_changes(stored.iter().cloned())))
    }

    /// One template mutation: `TemplateChangeStatus`. A refused input is answered before
    /// anything is written.
    async fn change_template(&self, op: TemplateOp) -> Value {
        let id = op.id().to_string();
        let status = |ok: bool, message: String| json!({"id": id, "status": ok, "message": message});
        if let Err(e) = op.validate() {
            return status(false, e.to_string());
        }
        let Some(changes) = &self.changes else {
            return status(false, "dashboards cannot be changed on this node".to_string());
        };
        match changes.write(op).await {
            Ok(message) => status(true, message),
            Err(message) => status(false, message),
        }
    }

    /// Answers one `POST /graphql` body: the whole response body. `health` is the node's
    /// health score and details, for `checkHealth`.
    pub async fn execute(&self, body: &[u8], health: (i32, Option<String>)) -> Answer {
        let refused = |errors: &[hotrule_graphql::GraphQLError]| Answer {
            body: serde_json::to_vec(&hotrule_graphql::error_response(errors)).unwrap_or_default(),
            outcome: Outcome::DocumentError,
        };
        let request = match Request::from_json(body) {
            Ok(request) => request,
            Err(errors) => return refused(&errors),
        };
        let prepared = match hotrule_graphql::prepare(&self.schema, &request) {
            Ok(prepared) => prepared,
            Err(errors) => return refused(&errors),
        };
        let resolved = self.resolve_all(&prepared, health).await;
        let completed = hotrule_graphql::complete_body(&self.schema, &prepared, resolved);
        let outcome = if completed.has_errors { Outcome::FieldError } else { Outcome::Ok };
        Answer { body: completed.body, outcome }
    }

    /// Every root field: the others in document order, then the `execExpression`s, up to
    /// [`PARALLEL_EXPRESSIONS`] at once (a dashboard batch's reads overlap instead of queueing).
    async fn resolve_all(&self, prepared: &Prepared, health: (i32, Option<String>)) -> Vec<Result<Value, String>> {
        let mut lookups = Lookups { health, ..Lookups::default() };
        let mut out: Vec<Option<Result<Value, String>>> = prepared.fields.iter().map(|_| None).collect();
        let mut expressions = Vec::new();
        for (i, field) in prepared.fields.iter().enumerate() {
            if field.name == "execExpression" {
                expressions.push((i, field));
            } else if let Some(slot) = out.get_mut(i) {
                *slot = Some(self.resolve(field, &mut lookups).await);
            }
        }
        if !expressions.is_empty() {
            let metrics = self.metrics(&mut lookups).await;
            for chunk in expressions.chunks(PARALLEL_EXPRESSIONS) {
                let runs = chunk.iter().map(|(_, field)| async {
                    match &metrics {
                        Ok(metrics) => self.exec_expression(&field.args, metrics).await,
                        Err(e) => Err(e.clone()),
                    }
                });
                for ((i, _), result) in chunk.iter().zip(futures_util::future::join_all(runs).await) {
                    if let Some(slot) = out.get_mut(*i) {
                        *slot = Some(result);
                    }
                }
            }
        }
        out.into_iter().map(|r| r.unwrap_or_else(|| Err("the field was not resolved".to_string()))).collect()
    }

    fn reach(&self) -> Reach {
        self.query.reach(true, None)
    }

    /// One root field other than `execExpression` (which [`Self::resolve_all`] evaluates).
    async fn resolve(&self, field: &RootField, lookups: &mut Lookups) -> Result<Value, String> {
        let args = &field.args;
        let text = |name: &str| args.get(name).and_then(Value::as_str);
        match field.name.as_str() {
            "version" => Ok(json!(version())),
            "checkHealth" => {
                let (score, details) = &lookups.health;
                Ok(json!({"score": score, "details": details}))
            }
            "getTimeInfo" => Ok(json!({"timezone": "+0000", "currentTimestamp": crate::base::clock::wall_clock_ms()})),
            "getMetricsTTL" => Ok(json!({
                "metadata": METADATA_DAYS, "minute": self.ttl.minute_days, "hour": self.ttl.hour_days, "day": self.ttl.day_days,
                "coldMinute": -1, "coldHour": -1, "coldDay": -1,
            })),
            "getRecordsTTL" => Ok(json!({
                "normal": self.ttl.alarm_days, "trace": 0, "zipkinTrace": 0, "log": self.ttl.log_days, "browserErrorLog": 0,
                "coldNormal": -1, "coldTrace": -1, "coldZipkinTrace": -1, "coldLog": -1, "coldBrowserErrorLog": -1,
            })),
            "hasQueryTracesV2Support" => Ok(json!(false)),
            "listLayers" => Ok(json!(self.catalog(lookups).await?.layers())),
            "listServices" => {
                let catalog = self.catalog(lookups).await?;
                Ok(catalog.services(text("layer").filter(|l| !l.is_empty())).map(metadata::service_json).collect())
            }
            "getAllServices" => {
                let catalog = self.catalog(lookups).await?;
                let group = text("group").filter(|g| !g.is_empty());
                Ok(catalog
                    .services(None)
                    .filter(|s| group.is_none_or(|g| ids::group_and_short_name(&s.name).0 == g))
                    .map(metadata::service_json)
                    .collect())
            }
            "getService" | "findService" => {
                let catalog = self.catalog(lookups).await?;
                let name = match field.name.as_str() {
                    "getService" => text("serviceId").and_then(ids::service_name),
                    _ => text("serviceName").map(str::to_string),
                };
                Ok(name.and_then(|n| catalog.service(&n).map(metadata::service_json)).unwrap_or(Value::Null))
            }
            "listInstances" => {
                let catalog = self.catalog(lookups).await?;
                let service = text("serviceId").and_then(ids::service_name);
                Ok(service
                    .and_then(|s| catalog.service(&s))
                    .map(|s| s.instances.iter().map(|(name, attributes)| metadata::instance_json(&s.name, name, attributes)).collect())
                    .unwrap_or_else(|| json!([])))
            }
            "getInstance" => {
                let catalog = self.catalog(lookups).await?;
                let found = text("instanceId").and_then(ids::child_names).and_then(|(service, instance)| {
                    let entry = catalog.service(&service)?;
                    entry.instances.get(&instance).map(|attributes| metadata::instance_json(&service, &instance, attributes))
                });
                Ok(found.unwrap_or(Value::Null))
            }
            "findEndpoint" => {
                let catalog = self.catalog(lookups).await?;
                let keyword = text("keyword").unwrap_or("");
                let limit = args.get("limit").and_then(Value::as_i64).unwrap_or(0).clamp(0, 10_000) as usize;
                let service = text("serviceId").and_then(ids::service_name);
                Ok(service
                    .and_then(|s| catalog.service(&s))
                    .map(|s| s.endpoints.iter().filter(|e| e.contains(keyword)).take(limit).map(|e| metadata::endpoint_json(&s.name, e)).collect())
                    .unwrap_or_else(|| json!([])))
            }
            "getEndpointInfo" => {
                let catalog = self.catalog(lookups).await?;
                let found = text("endpointId").and_then(ids::child_names).filter(|(service, endpoint)| {
                    catalog.service(service).is_some_and(|s| s.endpoints.contains(endpoint))
                });
                Ok(found.map(|(service, endpoint)| metadata::endpoint_info_json(&service, &endpoint)).unwrap_or(Value::Null))
            }
            "getMenuItems" => {
                let catalog = self.catalog(lookups).await?;
                let layers = catalog.layers();
                Ok(json!(templates::menu_json(&self.templates.menu, &|layer| layers.contains(layer))))
            }
            "getAllTemplates" => Ok(self.current_templates()?.enabled().map(templates::template_json).collect()),
            "getTemplate" => {
                let Some(id) = text("id") else { return Ok(Value::Null) };
                let stored = match &self.changes {
                    Some(changes) => changes.list()?.iter().find(|t| t.id == id).cloned(),
                    None => None,
                };
                Ok(stored
                    .as_ref()
                    .or_else(|| self.templates.templates.get(id))
                    .filter(|t| !t.disabled)
                    .map(templates::template_json)
                    .unwrap_or(Value::Null))
            }
            "addTemplate" | "changeTemplate" => {
                let setting = args.get("setting");
                let field_of = |name: &str| setting.and_then(|s| s.get(name)).and_then(Value::as_str).unwrap_or_default().to_string();
                let configuration = field_of("configuration");
                let op = match field.name.as_str() {
                    "addTemplate" => TemplateOp::Add { id: crate::control::ui_templates::new_id(), configuration },
                    _ => TemplateOp::Change { id: field_of("id"), configuration },
                };
                Ok(self.change_template(op).await)
            }
            "disableTemplate" => Ok(self.change_template(TemplateOp::Disable { id: text("id").unwrap_or_default().to_string() }).await),
            "typeOfMetrics" => {
                let metrics = self.metrics(lookups).await?;
                Ok(json!(text("name").and_then(|n| metrics.get(n)).map_or("UNKNOWN", metrics_type)))
            }
            "listMetrics" => {
                let metrics = self.metrics(lookups).await?;
                let regex = match text("regex").filter(|r| !r.is_empty()) {
                    Some(r) => Some(regex::Regex::new(&format!("^(?:{r})$")).map_err(|e| format!("regex: {e}"))?),
                    None => None,
                };
                Ok(metrics
                    .values()
                    .filter(|info| regex.as_ref().is_none_or(|r| r.is_match(&info.name)))
                    .map(|info| json!({"name": info.name, "type": metrics_type(info), "catalog": "METRICS"}))
                    .collect())
            }
            other => records::resolve(self, other, args).await,
        }
    }

    /// The metric definitions of every live node, read once per request and shared by its
    /// fields.
    async fn metrics(&self, lookups: &mut Lookups) -> Result<Arc<BTreeMap<String, MetricInfo>>, String> {
        if let Some(metrics) = &lookups.metrics {
            return Ok(metrics.clone());
        }
        let gathered = self.query.list(self.reach()).await.map_err(|e| e.to_string())?;
        let metrics = Arc::new(gathered.metrics);
        lookups.metrics = Some(metrics.clone());
        Ok(metrics)
    }

    /// The metadata catalog: every entity with a day value in the last [`METADATA_DAYS`] days,
    /// on every live node; reused for [`CATALOG_FRESH`].
    async fn catalog(&self, lookups: &mut Lookups) -> Result<Arc<Catalog>, String> {
        if let Some(catalog) = &lookups.catalog {
            return Ok(catalog.clone());
        }
        let cached = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((at, catalog)) = cached
            && at.elapsed() < CATALOG_FRESH
        {
            lookups.catalog = Some(catalog.clone());
            return Ok(catalog);
        }
        let now = crate::base::clock::wall_clock_ms();
        let start = crate::api::query::time::floor_to(Granularity::Day, now) - (METADATA_DAYS - 1) * Granularity::Day.millis();
        let filter = crate::data::metrics::SeriesFilter::default();
        let gathered = self.query.read(&filter, Granularity::Day, start, now, self.reach()).await.map_err(|e| e.to_string())?;
        let mut catalog = Catalog::from_entities(gathered.series.iter().map(|s| &s.entity));
        records::add_log_services(self, &mut catalog, start, now).await;
        let catalog = Arc::new(catalog);
        *self.catalog.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), catalog.clone()));
        lookups.catalog = Some(catalog.clone());
        Ok(catalog)
    }

    /// `execExpression`: every problem of the expression, entity or duration is the result's
    /// `error`; only a store failure is a field error.
    async fn exec_expression(&self, args: &Map<String, Value>, metrics: &BTreeMap<String, MetricInfo>) -> Result<Value, String> {
        let Some(text) = args.get("expression").and_then(Value::as_str) else { return Ok(expression::error_json("expression is required")) };
        let duration = match args.get("duration").map(QueryDuration::from_input).unwrap_or(Err(duration::DurationError::Shape("required"))) {
            Ok(d) => match d.bounded() {
                Ok(d) => d,
                Err(e) => return Ok(expression::error_json(e.to_string())),
            },
            Err(e) => return Ok(expression::error_json(e.to_string())),
        };
        let granularity = match duration.step {
            hotrule_mqe_engine::Step::Minute => Granularity::Minute,
            hotrule_mqe_engine::Step::Hour => Granularity::Hour,
            hotrule_mqe_engine::Step::Day => Granularity::Day,
            hotrule_mqe_engine::Step::Second => {
                return Ok(expression::error_json("metrics are kept per minute, hour and day: step SECOND is not one of them"));
            }
        };
        // As OAP: what follows a complete expression is ignored (a shipped dashboard relies on it).
        let expr = match hotrule_mqe_engine::parse_lenient(text) {
            Ok((expr, trailing)) => {
                if let Some(trailing) = trailing {
                    tracing::debug!(expression = text, %trailing, "execExpression: trailing tokens ignored, as OAP does");
                }
                expr
            }
            Err(e) => return Ok(expression::error_json(e.to_string())),
        };
        let wanted = Wanted::from_input(args.get("entity").unwrap_or(&Value::Null));
        let ranked = expression::ranked_metrics(&expr);
        let window = duration.mqe();
        // `increase(m, N)` / `rate(m, N)` read N steps before the window.
        let read_from = window.extended_back(i64::from(expr.max_trend_range())).start_ms;
        // The expression's metrics are read at once; an unknown metric is the engine's to report.
        let reads = expr.metric_names().into_iter().filter_map(|name| {
            let info = metrics.get(&name)?;
            let is_ranked = ranked.contains(&name);
            let filter = if is_ranked { wanted.ranked_filter(&name, info.scope) } else { wanted.filter(&name, info.scope) };
            Some(async move {
                let gathered = self.query.read(&filter, granularity, read_from, duration.end_inclusive_ms(), self.reach()).await;
                (info, is_ranked, gathered)
            })
        });
        let mut source = Prefetched::default();
        for (info, is_ranked, gathered) in futures_util::future::join_all(reads).await {
            let gathered = gathered.map_err(|e| e.to_string())?;
            source.add(info, &gathered.series, &wanted, is_ranked, &window);
        }
        for name in expr.metric_names().into_iter().filter(|n| !metrics.contains_key(n)) {
            let Some(output) = expression::record_output_type(&name) else { continue };
            let filter = crate::data::logs::LogFilter {
                service: (!wanted.service.is_empty()).then(|| wanted.service.clone()),
                start_ms: duration.start_ms,
                end_ms: duration.end_inclusive_ms(),
                limit: expression::MAX_RECORDS_READ,
                ..crate::data::logs::LogFilter::default()
            };
            let logs = self.query.read_cluster_logs(&filter, None, self.reach()).await.map_err(|e| e.to_string())?;
            let logs: Vec<_> = logs.logs.into_iter().map(|l| l.stored).collect();
            source.add_records(&name, expression::records_of(&logs, output));
        }
        Ok(expression::result_json(hotrule_mqe_engine::evaluate(&expr, &source, &window)))
    }

    pub(crate) fn query(&self) -> &QueryService {
        &self.query
    }
}

/// `MetricsType` of a stored metric.
fn metrics_type(info: &MetricInfo) -> &'static str {
    match info.data_type {
        hotrule_mal_engine::DataType::Single => "REGULAR_VALUE",
        hotrule_mal_engine::DataType::Labeled | hotrule_mal_engine::DataType::HistogramPercentile => "LABELED_VALUE",
        hotrule_mal_engine::DataType::Histogram => "HEATMAP",
    }
}

#[cfg(test)]
mod template_tests {
    use std::sync::Mutex;

    use super::templates::Template;
    use super::*;

    /// A store of runtime templates in memory: what was written, applied as the main would.
    #[derive(Default)]
    struct FakeStore {
        stored: Mutex<Vec<Template>>,
        writes: Mutex<Vec<TemplateOp>>,
    }

    impl TemplateStore for FakeStore {
        fn list(&self) -> Result<Arc<Vec<Template>>, String> {
            Ok(Arc::new(self.stored.lock().expect("lock").clone()))
        }

        fn write<'a>(&'a self, op: TemplateOp) -> crate::BoxFuture<'a, Result<String, String>> {
            Box::pin(async move {
                self.writes.lock().expect("lock").push(op.clone());
                let template = match &op {
                    TemplateOp::Add { id, configuration } | TemplateOp::Change { id, configuration } => {
                        Template { id: id.clone(), configuration: configuration.clone(), disabled: false }
                    }
                    TemplateOp::Disable { id } => Template { id: id.clone(), configuration: "{}".into(), disabled: true },
                };
                let mut stored = self.stored.lock().expect("lock");
                stored.retain(|t| t.id != template.id);
                stored.push(template);
                Ok("done".to_string())
            })
        }
    }

    fn protocol(store: Arc<FakeStore>) -> SkyWalkingQuery {
        let query = Arc::new(QueryService::new(crate::base::ids::NodeId("t".into()), None, None, Default::default()));
        let bundled = TemplateSet {
            templates: [("B", "{\"b\":1}"), ("C", "{\"c\":1}")]
                .into_iter()
                .map(|(id, c)| (id.to_string(), Template { id: id.into(), configuration: c.into(), disabled: false }))
                .collect(),
            menu: Vec::new(),
        };
        let ttl = Ttl { minute_days: 1, hour_days: 1, day_days: 1, log_days: 1, alarm_days: 1 };
        SkyWalkingQuery::new(query, Arc::new(bundled), ttl).expect("schema").with_template_store(store)
    }

    async fn run(protocol: &SkyWalkingQuery, query: &str, variables: Value) -> Value {
        let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
        let answer = protocol.execute(&body, (0, None)).await;
        let answer: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
        assert!(answer.get("errors").is_none(), "{answer}");
        answer["data"].clone()
    }

    fn ids(data: &Value) -> Vec<String> {
        data["getAllTemplates"].as_array().expect("list").iter().map(|t| t["id"].as_str().expect("id").to_string()).collect()
    }

    #[tokio::test]
    async fn mutations_reach_the_store_and_reads_lay_it_over_the_bundled_set() {
        let store = Arc::new(FakeStore::default());
        let protocol = protocol(store.clone());
        let all = "{ getAllTemplates { id configuration } }";
        assert_eq!(ids(&run(&protocol, all, Value::Null).await), ["B", "C"]);

        let added = run(&protocol, "mutation { addTemplate(setting: {configuration: \"{\\\"a\\\":1}\"}) { id status message } }", Value::Null).await;
        let id = added["addTemplate"]["id"].as_str().expect("id").to_string();
        assert_eq!(added["addTemplate"]["status"], true, "{added}");
        let change = "mutation($s: DashboardSetting!) { changeTemplate(setting: $s) { id status message } }";
        let changed = run(&protocol, change, json!({"s": {"id": "B", "configuration": "{\"b\":2}"}})).await;
        assert_eq!(changed["changeTemplate"], json!({"id": "B", "status": true, "message": "done"}));
        run(&protocol, "mutation { disableTemplate(id: \"C\") { status } }", Value::Null).await;

        let mut want = vec!["B".to_string(), id.clone()];
        want.sort();
        assert_eq!(ids(&run(&protocol, all, Value::Null).await), want);
        let one = "query($id: String!) { getTemplate(id: $id) { id configuration } }";
        assert_eq!(run(&protocol, one, json!({"id": "B"})).await["getTemplate"]["configuration"], "{\"b\":2}");
        assert_eq!(run(&protocol, one, json!({"id": "C"})).await["getTemplate"], Value::Null, "disabled");
        assert_eq!(run(&protocol, one, json!({"id": id})).await["getTemplate"]["configuration"], "{\"a\":1}");
        assert_eq!(store.writes.lock().expect("lock").len(), 3);
    }

    #[tokio::test]
    async fn refused_inputs_never_reach_the_store() {
        let store = Arc::new(FakeStore::default());
        let protocol = protocol(store.clone());
        let change = "mutation($s: DashboardSetting!) { changeTemplate(setting: $s) { id status message } }";
        for (id, configuration) in [("B", "not json"), ("B", "[]"), ("", "{}")] {
            let answer = run(&protocol, change, json!({"s": {"id": id, "configuration": configuration}})).await;
            assert_eq!(answer["changeTemplate"]["status"], false, "{answer}");
            assert!(answer["changeTemplate"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
        }
        let add = "mutation($s: NewDashboardSetting!) { addTemplate(setting: $s) { status } }";
        assert_eq!(run(&protocol, add, json!({"s": {"configuration": "1"}})).await["addTemplate"]["status"], false);
        assert!(store.writes.lock().expect("lock").is_empty());

        // Without a store the protocol is read-only.
        let query = Arc::new(QueryService::new(crate::base::ids::NodeId("t".into()), None, None, Default::default()));
        let ttl = Ttl { minute_days: 1, hour_days: 1, day_days: 1, log_days: 1, alarm_days: 1 };
        let read_only = SkyWalkingQuery::new(query, Arc::new(TemplateSet::default()), ttl).expect("schema");
        let answer = run(&read_only, add, json!({"s": {"configuration": "{}"}})).await;
        assert_eq!(answer["addTemplate"]["status"], false);
    }
}
