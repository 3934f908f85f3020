//! The Prometheus HTTP API subset: what Grafana's Prometheus data source and `promtool query`
//! call. GET or form-encoded POST; the envelope, time and value formats and the errorType →
//! HTTP status table of Prometheus's `web/api/v1`.
//!
//! Reads are cluster-wide unless `cluster=false`: every live peer is asked with a deadline and
//! one that does not answer is named in `warnings`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::base::clock::now_ms;
use crate::data::metrics::SeriesFilter;
use crate::data::metrics::prom::Labels;

use super::prom_eval::{self, MAX_POINTS_PER_SERIES, PromSeries};
use hotrule_promql_engine::{Expr, SelectorLoad, TimeWindow, Value as EngineValue};
use super::time::{floor_to, parse_duration, parse_prom_time, prom_timestamp, prom_value};
use super::{Missing, QueryError, QueryService, Reach};

/// The routes, on their own state; `http` mounts them behind the admin token.
pub fn router(service: Arc<QueryService>) -> Router {
    Router::new()
        .route("/api/v1/query", get(query).post(query))
        .route("/api/v1/query_range", get(query_range).post(query_range))
        .route("/api/v1/series", get(series).post(series))
        .route("/api/v1/labels", get(labels).post(labels))
        .route("/api/v1/label/{name}/values", get(label_values))
        .route("/api/v1/metadata", get(metadata))
        .route("/api/v1/query_exemplars", get(no_exemplars).post(no_exemplars))
        .route("/api/v1/status/buildinfo", get(buildinfo))
        .with_state(service)
}

/// Prometheus's error types and their HTTP statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    BadData,
    Execution,
    Internal,
    Unavailable,
    Timeout,
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::BadData => "bad_data",
            ErrorType::Execution => "execution",
            ErrorType::Internal => "internal",
            ErrorType::Unavailable => "unavailable",
            ErrorType::Timeout => "timeout",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorType::BadData => StatusCode::BAD_REQUEST,
            ErrorType::Execution => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorType::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorType::Unavailable | ErrorType::Timeout => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A failed API call: its type and message.
#[derive(Debug)]
pub struct ApiError(pub ErrorType, pub String);

impl ApiError {
    fn bad(message: impl Into<String>) -> ApiError {
        ApiError(ErrorType::BadData, message.into())
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> ApiError {
        let kind = match e {
            QueryError::NoStorage | QueryError::NoLogStorage | QueryError::NoAlarmStorage => ErrorType::Unavailable,
            QueryError::Store(_) | QueryError::LogStore(_) | QueryError::AlarmStore(_) => ErrorType::Execution,
            QueryError::Task(_) => ErrorType::Internal,
        };
        ApiError(kind, e.to_string())
    }
}

impl From<hotrule_promql_engine::Error> for ApiError {
    fn from(e: hotrule_promql_engine::Error) -> ApiError {
        use hotrule_promql_engine::Error;
        let kind = match &e {
            Error::Parse { .. } | Error::Unsupported { .. } => ErrorType::BadData,
            Error::TooManySamples { .. } | Error::Execution { .. } => ErrorType::Execution,
            Error::Timeout => ErrorType::Timeout,
        };
        ApiError(kind, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"status": "error", "errorType": self.0.as_str(), "error": self.1});
        (self.0.status(), axum::Json(body)).into_response()
    }
}

/// Prometheus's success envelope, serialized directly (a day of minute steps is 1441 pairs).
#[derive(serde::Serialize)]
struct Envelope<T> {
    status: &'static str,
    data: T,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// A successful answer: `data`, and `warnings` when there are any.
pub fn success<T: serde::Serialize>(data: T, warnings: Vec<String>) -> Response {
    axum::Json(Envelope { status: "success", data, warnings }).into_response()
}

/// A `matrix` result: series with `[time, "value"]` pairs.
#[derive(serde::Serialize)]
struct Matrix {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    result: Vec<MatrixSeries>,
}

#[derive(serde::Serialize)]
struct MatrixSeries {
    metric: Labels,
    values: Vec<(Value, String)>,
}

fn matrix_series(metric: Labels, values: Vec<(i64, f64)>) -> MatrixSeries {
    MatrixSeries { metric, values: values.into_iter().map(|(t, v)| (prom_timestamp(t), prom_value(v))).collect() }
}

/// The parameters of a call: the query string, then a form-encoded body (Go's `r.Form` order).
pub struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    pub fn read(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Form {
        let mut pairs: Vec<(String, String)> =
            form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
        if is_form {
            // Body values come first, as in Go's ParseForm.
            let mut body_pairs: Vec<(String, String)> = form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            body_pairs.append(&mut pairs);
            pairs = body_pairs;
        }
        Form { pairs }
    }

    /// The first value of `name`, if given and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }

    fn time(&self, name: &str, default: i64) -> Result<i64, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(text) => parse_prom_time(text).map_err(|e| ApiError::bad(format!("invalid parameter \"{name}\": {e}"))),
        }
    }

    fn required_time(&self, name: &str) -> Result<i64, ApiError> {
        let text = self.get(name).unwrap_or("");
        parse_prom_time(text).map_err(|e| ApiError::bad(format!("invalid parameter \"{name}\": {e}")))
    }

    fn duration(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name).map(|text| parse_duration(text).map_err(|e| ApiError::bad(format!("invalid parameter \"{name}\": {e}")))).transpose()
    }

    fn limit(&self) -> Result<Option<usize>, ApiError> {
        match self.get("limit") {
            None => Ok(None),
            Some(text) => match text.trim().parse::<i64>() {
                Ok(0) => Ok(None),
                Ok(n) if n > 0 => Ok(Some(n as usize)),
                _ => Err(ApiError::bad(format!("invalid parameter \"limit\": cannot parse {text:?} to a non-negative integer"))),
            },
        }
    }

    /// Cluster-wide unless `cluster=false`; `timeout` caps the per-peer deadline.
    fn reach(&self, service: &QueryService) -> Result<Reach, ApiError> {
        let cluster = match self.get("cluster").map(|v| v.trim().to_ascii_lowercase()) {
            None => true,
            Some(v) if matches!(v.as_str(), "true" | "1" | "yes") => true,
            Some(v) if matches!(v.as_str(), "false" | "0" | "no") => false,
            Some(v) => return Err(ApiError::bad(format!("invalid parameter \"cluster\": {v:?} is not true or false"))),
        };
        let timeout = self.duration("timeout")?.filter(|ms| *ms > 0).map(|ms| Duration::from_millis(ms as u64));
        Ok(service.reach(cluster, timeout))
    }
}

fn warnings(missing: &[Missing]) -> Vec<String> {
    missing.iter().map(Missing::warning).collect()
}

/// The Prometheus series `selection` selects, read at `granularity` over its window: the store
/// narrows by metric and the entity's equality matchers, the rest of the matchers apply here.
async fn select(service: &QueryService, selection: &SelectorLoad, granularity: crate::data::metrics::Granularity, reach: Reach) -> Result<(Vec<PromSeries>, Vec<Missing>), ApiError> {
    let fixed = |label: &str| selection.fixed(label).map(str::to_string);
    let filter = SeriesFilter {
        metric: selection.metric.clone().unwrap_or_default(),
        service: fixed("service"),
        instance: fixed("service_instance"),
        endpoint: fixed("endpoint"),
    };
    let window = selection.window;
    let gathered = service.read(&filter, granularity, floor_to(granularity, window.start_ms), window.end_ms, reach).await?;
    Ok((prom_eval::to_prom_series(&gathered.series, |labels| selection.selects(labels)), gathered.missing))
}

fn metric_json(labels: &Labels) -> Value {
    Value::Object(labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

fn truncate<T>(items: &mut Vec<T>, limit: Option<usize>, warnings: &mut Vec<String>) {
    if let Some(limit) = limit
        && items.len() > limit
    {
        items.truncate(limit);
        warnings.push("results truncated due to limit".to_string());
    }
}

async fn query(State(service): State<Arc<QueryService>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::read(&uri, &headers, &body);
    instant_query(&service, &form).await.unwrap_or_else(IntoResponse::into_response)
}

async fn instant_query(service: &QueryService, form: &Form) -> Result<Response, ApiError> {
    let expr = hotrule_promql_engine::parse(form.get("query").unwrap_or(""))?;
    let t = form.time("time", now_ms() as i64)?;
    let lookback = lookback(service, form)?;
    let reach = form.reach(service)?;
    let limit = form.limit()?;
    let (loaded, missing) = load(service, &expr, crate::data::metrics::Granularity::Minute, (t, t), lookback, reach).await?;
    let value = evaluate(service, move |limits| hotrule_promql_engine::eval_instant(&expr, t, lookback, &loaded, &limits)).await?;
    let mut warnings = warnings(&missing);
    let data = match value {
        EngineValue::Scalar(_, v) => json!({"resultType": "scalar", "result": [prom_timestamp(t), prom_value(v)]}),
        EngineValue::String(_, text) => json!({"resultType": "string", "result": [prom_timestamp(t), text]}),
        EngineValue::Vector(samples) => {
            let mut result: Vec<Value> = samples
                .into_iter()
                .map(|(labels, _, v)| json!({"metric": metric_json(&labels), "value": [prom_timestamp(t), prom_value(v)]}))
                .collect();
            truncate(&mut result, limit, &mut warnings);
            json!({"resultType": "vector", "result": result})
        }
        EngineValue::Matrix(series) => {
            let mut result: Vec<MatrixSeries> = series.into_iter().map(|s| matrix_series(s.labels, s.samples)).collect();
            truncate(&mut result, limit, &mut warnings);
            return Ok(success(Matrix { result_type: "matrix", result }, warnings));
        }
    };
    Ok(success(data, warnings))
}

/// Runs one PromQL evaluation off the async threads, once one of `query.max_concurrency` slots is
/// free, with `query.max_samples`, `query.timeout` (counted from the call, queueing included) and
/// `query.evaluation_interval`: a pathological query holds one blocking thread until its limits
/// stop it, never an async worker.
async fn evaluate<T: Send + 'static>(
    service: &QueryService,
    work: impl FnOnce(hotrule_promql_engine::Limits) -> Result<T, hotrule_promql_engine::Error> + Send + 'static,
) -> Result<T, ApiError> {
    let settings = &service.settings;
    let limits = hotrule_promql_engine::Limits {
        max_samples: settings.max_samples,
        deadline: std::time::Instant::now() + settings.timeout,
        default_subquery_step_ms: settings.subquery_step_ms,
    };
    let permit = tokio::time::timeout(settings.timeout, service.evaluations.clone().acquire_owned())
        .await
        .map_err(|_| ApiError(ErrorType::Timeout, "query timed out in query queue".to_string()))?
        .map_err(|_| ApiError(ErrorType::Unavailable, "the query queue is closed".to_string()))?;
    let evaluated = tokio::task::spawn_blocking(move || {
        let _slot = permit;
        work(limits)
    })
    .await
    .map_err(|e| ApiError(ErrorType::Internal, format!("the evaluation failed: {e}")))?;
    Ok(evaluated?)
}

/// Reads every selector of `expr` over the window its evaluation from `range.0` to `range.1`
/// needs, at `granularity`; each selector's series as the engine wants them (its matchers
/// applied here: the store narrows by metric and the entity's equality matchers only).
async fn load(
    service: &QueryService,
    expr: &hotrule_promql_engine::Expr,
    granularity: crate::data::metrics::Granularity,
    range: (i64, i64),
    lookback: i64,
    reach: Reach,
) -> Result<(hotrule_promql_engine::Loaded, Vec<Missing>), ApiError> {
    let mut loaded = hotrule_promql_engine::Loaded::new();
    let mut missing = Vec::new();
    for selection in hotrule_promql_engine::selectors_to_load(expr, range.0, range.1, lookback)? {
        if loaded.contains_key(&selection.key) {
            continue;
        }
        let (series, not_answered) = select(service, &selection, granularity, reach).await?;
        missing.extend(not_answered);
        let series = series.into_iter().map(|s| hotrule_promql_engine::Series { labels: s.labels, samples: s.samples }).collect();
        loaded.insert(selection.key, series);
    }
    Ok((loaded, missing))
}

fn lookback(service: &QueryService, form: &Form) -> Result<i64, ApiError> {
    match form.duration("lookback_delta")? {
        None => Ok(service.settings.lookback_ms),
        Some(ms) if ms > 0 => Ok(ms),
        Some(_) => Err(ApiError::bad("invalid parameter \"lookback_delta\": must be positive")),
    }
}

async fn query_range(State(service): State<Arc<QueryService>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::read(&uri, &headers, &body);
    range_query(&service, &form).await.unwrap_or_else(IntoResponse::into_response)
}

async fn range_query(service: &QueryService, form: &Form) -> Result<Response, ApiError> {
    let start = form.required_time("start")?;
    let end = form.required_time("end")?;
    if end < start {
        return Err(ApiError::bad("end timestamp must not be before start time"));
    }
    let step = match form.get("step") {
        None => return Err(ApiError::bad("invalid parameter \"step\": cannot parse \"\" to a valid duration")),
        Some(text) => parse_duration(text).map_err(|e| ApiError::bad(format!("invalid parameter \"step\": {e}")))?,
    };
    if step <= 0 {
        return Err(ApiError::bad("zero or negative query resolution step widths are not accepted. Try a positive integer"));
    }
    if (end - start) / step > MAX_POINTS_PER_SERIES {
        return Err(ApiError::bad("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"));
    }
    let expr = hotrule_promql_engine::parse(form.get("query").unwrap_or(""))?;
    let granularity = prom_eval::granularity_for_step(step);
    // An hour or day value holds for its whole bucket: up to the next bucket's start, exclusive
    // (the lookback window `[t - lookback, t]` is closed, as in Prometheus 2.x).
    let lookback = lookback(service, form)?.max(granularity.millis() - 1);
    let reach = form.reach(service)?;
    let limit = form.limit()?;
    let (loaded, missing) = load(service, &expr, granularity, (start, end), lookback, reach).await?;
    let evaluated = evaluate(service, move |limits| hotrule_promql_engine::eval_range(&expr, start, end, step, lookback, &loaded, &limits)).await?;
    let EngineValue::Matrix(series) = evaluated else {
        return Err(ApiError(ErrorType::Internal, "a range evaluation gave no matrix".to_string()));
    };
    let mut result: Vec<MatrixSeries> = series.into_iter().map(|s| matrix_series(s.labels, s.samples)).collect();
    let mut warnings = warnings(&missing);
    truncate(&mut result, limit, &mut warnings);
    Ok(success(Matrix { result_type: "matrix", result }, warnings))
}

/// The window of a metadata call: `start`/`end` or the last 24 hours.
fn window(form: &Form) -> Result<(i64, i64), ApiError> {
    let end = form.time("end", now_ms() as i64)?;
    let start = form.time("start", end - 86_400_000)?;
    if end < start {
        return Err(ApiError::bad("end timestamp must not be before start time"));
    }
    Ok((start, end))
}

/// The `match[]` series selectors, parsed as PromQL; each must be a vector selector.
fn selectors(form: &Form) -> Result<Vec<Expr>, ApiError> {
    form.all("match[]")
        .into_iter()
        .map(|text| match hotrule_promql_engine::parse(text) {
            Ok(expr @ Expr::VectorSelector(_)) => Ok(expr),
            Ok(_) => Err(ApiError::bad(format!("invalid parameter \"match[]\": {text:?} is not a vector selector"))),
            Err(e) => Err(ApiError::bad(format!("invalid parameter \"match[]\": {e}"))),
        })
        .collect()
}

/// The label sets of every series `selectors` select in the window (all series without any).
async fn matching(service: &QueryService, form: &Form, selectors: &[Expr]) -> Result<(Vec<Labels>, Vec<Missing>), ApiError> {
    let (start, end) = window(form)?;
    let reach = form.reach(service)?;
    let granularity = prom_eval::granularity_for_window(end - start);
    let mut selections = Vec::new();
    for selector in selectors {
        selections.extend(hotrule_promql_engine::selectors_to_load(selector, start, end, 0)?);
    }
    if selectors.is_empty() {
        selections.push(SelectorLoad::everything(TimeWindow { start_ms: start, end_ms: end }));
    }
    let mut sets = std::collections::BTreeSet::new();
    let mut missing = Vec::new();
    for selection in &selections {
        let (series, not_answered) = select(service, selection, granularity, reach).await?;
        sets.extend(series.into_iter().map(|s| s.labels));
        for m in not_answered {
            if !missing.contains(&m) {
                missing.push(m);
            }
        }
    }
    Ok((sets.into_iter().collect(), missing))
}

async fn series(State(service): State<Arc<QueryService>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::read(&uri, &headers, &body);
    let run = async {
        let selectors = selectors(&form)?;
        if selectors.is_empty() {
            return Err(ApiError::bad("no match[] parameter provided"));
        }
        let limit = form.limit()?;
        let (sets, missing) = matching(&service, &form, &selectors).await?;
        let mut data: Vec<Value> = sets.iter().map(metric_json).collect();
        let mut warnings = warnings(&missing);
        truncate(&mut data, limit, &mut warnings);
        Ok::<_, ApiError>(success(Value::Array(data), warnings))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

async fn labels(State(service): State<Arc<QueryService>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::read(&uri, &headers, &body);
    let run = async {
        let selectors = selectors(&form)?;
        let limit = form.limit()?;
        let (sets, missing) = matching(&service, &form, &selectors).await?;
        let names: std::collections::BTreeSet<&String> = sets.iter().flat_map(|labels| labels.keys()).collect();
        let mut data: Vec<Value> = names.into_iter().map(|n| Value::String(n.clone())).collect();
        let mut warnings = warnings(&missing);
        truncate(&mut data, limit, &mut warnings);
        Ok::<_, ApiError>(success(Value::Array(data), warnings))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// A label name in a path, with Prometheus's `U__` escape (`U__http_2e_status` is `http.status`).
pub fn unescape_label_name(name: &str) -> Option<String> {
    let Some(escaped) = name.strip_prefix("U__") else { return Some(name.to_string()) };
    let mut out = String::new();
    let mut rest = escaped;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            out.push('_');
            rest = after;
        } else if c == '_' {
            let end = rest[1..].find('_')? + 1;
            let code = u32::from_str_radix(&rest[1..end], 16).ok()?;
            out.push(char::from_u32(code)?);
            rest = &rest[end + 1..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Some(out)
}

async fn label_values(State(service): State<Arc<QueryService>>, Path(name): Path<String>, uri: Uri, headers: HeaderMap) -> Response {
    let form = Form::read(&uri, &headers, &[]);
    let run = async {
        let legacy = |n: &str| {
            let mut chars = n.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let label = unescape_label_name(&name)
            .filter(|n| !n.is_empty() && (name.starts_with("U__") || legacy(n)))
            .ok_or_else(|| ApiError::bad(format!("invalid label name: {name:?}")))?;
        let selectors = selectors(&form)?;
        let limit = form.limit()?;
        let mut warnings = Vec::new();
        let mut values: Vec<String> = if label == "__name__" && selectors.is_empty() {
            // Every stored metric's name, without reading series (Grafana's metric browser).
            let gathered = service.list(form.reach(&service)?).await?;
            warnings.extend(gathered.missing.iter().map(Missing::warning));
            gathered.metrics.into_keys().collect()
        } else {
            let (sets, missing) = matching(&service, &form, &selectors).await?;
            warnings.extend(missing.iter().map(Missing::warning));
            let set: std::collections::BTreeSet<String> = sets.into_iter().filter_map(|mut l| l.remove(&label)).filter(|v| !v.is_empty()).collect();
            set.into_iter().collect()
        };
        truncate(&mut values, limit, &mut warnings);
        Ok::<_, ApiError>(success(json!(values), warnings))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// `/api/v1/metadata`: every metric as a gauge, its help naming its function and scope.
async fn metadata(State(service): State<Arc<QueryService>>, uri: Uri, headers: HeaderMap) -> Response {
    let form = Form::read(&uri, &headers, &[]);
    let run = async {
        let gathered = service.list(form.reach(&service)?).await?;
        let only = form.get("metric");
        let data: serde_json::Map<String, Value> = gathered
            .metrics
            .values()
            .filter(|info| only.is_none_or(|name| name == info.name))
            .map(|info| {
                let shape = crate::compiler::MetricShape { scope: info.scope, downsampling: info.downsampling, data_type: info.data_type };
                let help = format!("hotrule MAL metric, stored as {shape}");
                (info.name.clone(), json!([{"type": "gauge", "help": help, "unit": ""}]))
            })
            .collect();
        Ok::<_, ApiError>(success(Value::Object(data), warnings(&gathered.missing)))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// `/api/v1/query_exemplars`: hotrule stores no exemplars (Grafana asks when a panel has them
/// switched on; an empty answer is what Prometheus gives for series without any).
async fn no_exemplars() -> Response {
    success(json!([]), Vec::new())
}

/// `/api/v1/status/buildinfo`: Grafana reads it to tell Prometheus from Mimir (no `features`:
/// Prometheus). The version is hotrule's.
async fn buildinfo() -> Response {
    success(
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "revision": "",
            "branch": "",
            "buildUser": "hotrule",
            "buildDate": "",
            "goVersion": "none (hotrule is written in Rust)",
        }),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(max_concurrency: usize, timeout: Duration) -> QueryService {
        let settings = super::super::QuerySettings { max_concurrency, timeout, ..Default::default() };
        QueryService::new(crate::base::ids::NodeId("n".into()), None, None, settings)
    }

    #[tokio::test]
    async fn a_query_waits_for_a_free_slot_then_times_out_in_the_queue() {
        let service = service(1, Duration::from_millis(200));
        let taken = service.evaluations.clone().acquire_owned().await.expect("the one slot");
        let queued = evaluate(&service, |_| Ok(1)).await;
        assert!(matches!(&queued, Err(ApiError(ErrorType::Timeout, m)) if m == "query timed out in query queue"), "{queued:?}");
        drop(taken);
        assert!(matches!(evaluate(&service, |_| Ok(1)).await, Ok(1)), "a free slot runs the evaluation");
    }

    #[tokio::test]
    async fn the_evaluation_gets_the_configured_limits() {
        let service = service(2, Duration::from_secs(7));
        let limits = evaluate(&service, |limits| Ok((limits.max_samples, limits.default_subquery_step_ms))).await;
        assert!(matches!(limits, Ok((50_000_000, 60_000))), "{limits:?}");
        let failed = evaluate::<()>(&service, |limits| Err(hotrule_promql_engine::Error::TooManySamples { limit: limits.max_samples })).await;
        assert!(matches!(failed, Err(ApiError(ErrorType::Execution, _))), "{failed:?}");
    }

    #[test]
    fn u_escaped_label_names() {
        assert_eq!(unescape_label_name("job").as_deref(), Some("job"));
        assert_eq!(unescape_label_name("U__http_2e_status_5f_code").as_deref(), Some("http.status_code"));
        assert_eq!(unescape_label_name("U__a__b").as_deref(), Some("a_b"));
        assert_eq!(unescape_label_name("U__bad_zz_"), None);
    }

    #[test]
    fn error_types_map_to_statuses() {
        assert_eq!(ErrorType::BadData.status(), StatusCode::BAD_REQUEST);
        assert_eq!(ErrorType::Execution.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(ErrorType::Internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(ErrorType::Unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn form_bodies_come_before_the_query_string() {
        let uri: Uri = "/api/v1/query?query=b&match%5B%5D=x".parse().expect("uri");
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, "application/x-www-form-urlencoded".parse().expect("header"));
        let form = Form::read(&uri, &headers, b"query=a+1&match[]=y");
        assert_eq!(form.get("query"), Some("a 1"));
        assert_eq!(form.all("match[]"), vec!["y", "x"]);
        let no_form = Form::read(&uri, &HeaderMap::new(), b"query=a");
        assert_eq!(no_form.get("query"), Some("b"), "a body that is not a form is not read");
    }
}
