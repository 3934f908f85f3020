//! The admin HTTP API: one route table, thin handlers, and the single mapping from
//! `applyStatus` to HTTP status.
//!
//! Handlers extract and validate parameters, call the workflow (writes) or read the store,
//! runtime and bundled files (reads), and map the result. Every response is JSON with
//! `applyStatus`, `catalog`, `name` and `message`, except raw rule bodies and dumps.

mod agents;
mod alarm_test;
mod alarms;
mod apply_phase;
mod dump;
mod forward;
mod forwarded;
mod history;
mod layers;
mod self_metrics;
mod params;
mod query;
mod reads;
mod rolling;
mod rule_test;
mod scrape;
mod ui;
pub mod ui_templates;
mod writes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::json;

use crate::control::bundled::Bundled;
use crate::base::ids::NodeId;
use crate::control::runtime::Runtime;
use crate::control::scan::Scanner;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::Store;
use crate::control::workflow::Workflow;
pub use forwarded::ForwardedRequests;

/// The largest body any admin route reads: `rule_test::MAX_TEST_BODY_BYTES` (a candidate file
/// plus its sample batches). Rule contents are held to the smaller `bundled::MAX_CONTENT_BYTES`
/// and the JSON agent routes to axum's 2 MiB default by their routes. A larger declared
/// `Content-Length` is answered 413 by the listener before anything is read.
pub const LARGEST_BODY_BYTES: u64 = rule_test::MAX_TEST_BODY_BYTES as u64;

/// Everything the handlers read or call.
pub struct AdminState {
    pub node_id: NodeId,
    pub workflow: Arc<Workflow>,
    pub store: Arc<Store>,
    pub runtime: Arc<Runtime>,
    pub bundled: Arc<Bundled>,
    pub scanner: Arc<Scanner>,
    /// The bearer token, if any; replaceable at run time (config reload).
    pub admin_token: std::sync::RwLock<Option<String>>,
    pub ready: AtomicBool,
    /// The node's background workers; a dead one makes the node not ready.
    pub workers: Arc<crate::base::worker::WorkerHealth>,
    pub config: Arc<dyn ConfigView>,
    /// Present when the node runs in a cluster.
    pub cluster: Option<Arc<crate::cluster::replication::Cluster>>,
    /// The agent config server of this node (agents it holds, desired state it serves).
    pub agents: Arc<crate::api::agents::AgentService>,
    /// The list view's rendered rows, reused until the runtime or the store changes.
    pub list_cache: std::sync::Mutex<Option<reads::ListCache>>,
    /// The node's own metrics, served by `GET /metrics`.
    pub telemetry: Arc<crate::base::self_metrics::SelfMetrics>,
    /// The data plane's dispatcher: receivers submit batches to it (`BatchSink`); the list
    /// shows its per-file evaluation state.
    pub dispatcher: Arc<crate::data::evaluation::Dispatcher>,
    /// The scrape worker's targets: who owns each, and this node's last scrape of it.
    pub scrape: Arc<crate::data::ingest::ScrapeBoard>,
    /// Metric queries: this node's metric store and the cluster fan-out.
    pub query: Arc<crate::api::query::QueryService>,
    /// SkyWalking's GraphQL query protocol (`POST /graphql`) over `query`.
    pub graphql: Arc<crate::api::graphql::SkyWalkingQuery>,
    /// A built SkyWalking UI served beside `/graphql` (`ui.dir`).
    pub ui_dir: Option<std::path::PathBuf>,
}

/// What `GET /config` shows: the node's effective configuration with secrets redacted. The
/// config module implements it; the admin routes sit below config and read it through this.
pub trait ConfigView: Send + Sync {
    fn view(&self) -> serde_json::Value;
}

impl AdminState {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Replaces the admin token (live configuration reload).
    pub fn set_admin_token(&self, token: Option<String>) {
        *self.admin_token.write().unwrap_or_else(|p| p.into_inner()) = token;
    }

    /// Ready once boot has finished and while every background worker runs (`/readyz`,
    /// `/healthcheck`); otherwise why not.
    pub(crate) fn not_ready(&self) -> Option<NotReady> {
        if !self.ready.load(Ordering::SeqCst) {
            return Some(NotReady::Booting);
        }
        let dead = self.workers.dead();
        (!dead.is_empty()).then_some(NotReady::Dead(dead))
    }

    pub(crate) fn token(&self) -> Option<String> {
        self.admin_token.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The one place where an `applyStatus` becomes an HTTP status.
pub fn status_code(status: ApplyStatus) -> StatusCode {
    use ApplyStatus::*;
    match status {
        NoChange | Stored | FilterOnlyApplied | FilterOnlyPersisted | StructuralApplied | Inactivated
        | StaticTombstoned | AlreadyInactive | Deleted | RevertedToBundled | NotFound | RollStarted | RollRolledBack
        | RollForceCommitted => StatusCode::OK,
        CompileFailed | EmptyBody | MissingCatalog | InvalidCatalog | MissingName | InvalidName | InvalidMode
        | InvalidSource | InvalidParameter | NoBundledTwin | LayerOrdinalOutOfRange | LayerNameInvalid
        | LayerNameConflict | LayerOrdinalCollision | LayerOverrideForbidden => StatusCode::BAD_REQUEST,
        Unauthorized => StatusCode::UNAUTHORIZED,
        RuleNotFound | GroupNotFound | ConfigNotFound | CommandNotFound | AgentNotFound | RevisionCompacted
        | RevisionNotFound | HistoryNotFound => StatusCode::NOT_FOUND,
        StorageChangeRequiresExplicitApproval | UpdateInProgress | RequiresInactivateFirst
        | RequiresRevertToBundled | DeleteRefused | OriginConflict | SplitBrainDetected | OwnershipConflict
        | RollInProgress | RollFinished => {
            StatusCode::CONFLICT
        }
        PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ClusterViewSplit => StatusCode::MISDIRECTED_REQUEST,
        ForwardFailed => StatusCode::BAD_GATEWAY,
        StorageUnavailable | NotReady => StatusCode::SERVICE_UNAVAILABLE,
        ApplyFailed | PersistFailed | PersistUncertain | CommitDeferred | TeardownDeferred | InactivateFailed | DeleteFailed
        | RevertToBundledFailed | ListFailed | DumpFailed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The JSON body of a write's answer (or a failed read's): `applyStatus`, `catalog`, `name`,
/// `message`, `revision` when the write committed one, and `applyId` for a structural apply.
pub fn outcome_body(outcome: &Outcome, catalog: &str, name: &str) -> serde_json::Value {
    let mut body = json!({
        "applyStatus": outcome.status.as_str(),
        "catalog": catalog,
        "name": name,
        "message": outcome.message,
    });
    if let Some(revision) = &outcome.revision {
        body["revision"] = serde_json::Value::String(revision.to_string());
    }
    if let Some(apply_id) = &outcome.apply_id {
        body["applyId"] = serde_json::Value::String(apply_id.clone());
    }
    if let Some(version) = outcome.version {
        body["version"] = serde_json::Value::from(version);
    }
    body
}

/// The answer of a write, or of a failed read. It carries its `applyStatus` as an extension,
/// for the write counter (`self_metrics::count_writes`).
pub fn outcome_response(outcome: &Outcome, catalog: &str, name: &str) -> Response {
    (status_code(outcome.status), axum::Extension(outcome.status), axum::Json(outcome_body(outcome, catalog, name)))
        .into_response()
}

/// A read-only view of this node, served over the bus to a peer fanning out a cluster-wide read.
pub fn node_view(state: &AdminState, what: crate::cluster::bus::NodeView) -> Vec<u8> {
    match what {
        crate::cluster::bus::NodeView::Rules => reads::list_view(state, None),
        crate::cluster::bus::NodeView::Agents => agents::local_agents_view(state),
    }
}

pub fn router(state: Arc<AdminState>) -> Router {
    // Rule writes, counted by applyStatus (`rule_writes`).
    let rule_writes = Router::new()
        .route("/runtime/rule/addOrUpdate", post(writes::add_or_update))
        .route("/runtime/rule/inactivate", post(writes::inactivate))
        .route("/runtime/rule/delete", post(writes::delete))
        .route("/runtime/rule/rollback-rolling", post(rolling::rollback_rolling))
        .route("/runtime/rule/force-commit-rolling", post(rolling::force_commit_rolling))
        .route("/runtime/mal/otel/addOrUpdate", post(writes::otel_add_or_update))
        .route("/runtime/mal/otel/inactivate", post(writes::otel_inactivate))
        .route("/runtime/mal/otel/delete", post(writes::otel_delete))
        .route("/runtime/mal/log/addOrUpdate", post(writes::log_add_or_update))
        .route("/runtime/mal/log/inactivate", post(writes::log_inactivate))
        .route("/runtime/mal/log/delete", post(writes::log_delete))
        .route("/runtime/lal/addOrUpdate", post(writes::lal_add_or_update))
        .route("/runtime/lal/inactivate", post(writes::lal_inactivate))
        .route("/runtime/lal/delete", post(writes::lal_delete))
        .route("/runtime/rule/restore", post(history::restore))
        .route_layer(middleware::from_fn_with_state(state.clone(), self_metrics::count_writes));
    let rules = Router::new()
        .merge(rule_writes)
        .route("/runtime/rule", get(reads::get_rule))
        .route("/runtime/rule/bundled", get(reads::bundled))
        .route("/runtime/rule/list", get(reads::list))
        .route("/runtime/rule/status", get(apply_phase::rule_status))
        .route("/runtime/rule/rolling", get(rolling::rolling))
        .route("/runtime/rule/test", post(rule_test::test_rule))
        .route("/runtime/rule/history", get(history::history))
        .route("/runtime/rule/history/diff", get(history::diff))
        .route("/runtime/rule/dump", get(dump::dump_all))
        .route("/runtime/rule/dump/{catalog}", get(dump::dump_catalog))
        .route("/runtime/layers", get(layers::layers))
        .route("/runtime/alarm/rules", get(alarms::rules))
        .route("/runtime/alarm/settings", get(alarms::settings).post(alarms::push_settings).delete(alarms::delete_settings))
        .route("/runtime/alarm/test", post(alarm_test::test_rules))
        .route("/readyz", get(readyz))
        .route("/metrics", get(self_metrics::metrics))
        .route("/config", get(config))
        .route("/cluster/status", get(reads::cluster_status))
        .route("/status/scrape", get(scrape::scrape_status))
        .route("/agent/groups", get(agents::list_groups).post(agents::create_group))
        .route("/agent/groups/{name}", delete(agents::delete_group))
        .route("/agent/configs", get(agents::list_configs).post(agents::push_config))
        .route("/agent/configs/{kind}/{name}", get(agents::get_config).delete(agents::delete_config))
        .route("/agent/configs/{kind}/{name}/apply", post(agents::apply_config))
        .route("/agent/configs/{kind}/{name}/remove", post(agents::remove_config))
        .route("/agent/configs/{kind}/{name}/status", get(agents::config_status))
        .route("/agent/commands", get(agents::list_commands).post(agents::create_command))
        .route("/agent/commands/{name}", delete(agents::delete_command))
        .route("/agent/agents", get(agents::list_agents))
        .route("/agent/agents/{instance_id}", get(agents::show_agent))
        .route("/query/metrics", get(query::metrics))
        .route("/query/metrics/list", get(query::list))
        .route("/query/metrics/entities", get(query::entities));
    #[cfg(feature = "failpoints")]
    let rules = rules.route("/debug/failpoints", post(writes::set_failpoint)).route("/debug/drop", post(writes::set_drop));
    // The token is checked first (the last layer added runs first), then repeated parameters.
    let protected = rules
        .route_layer(middleware::from_fn_with_state(state.clone(), scope_caller))
        .route_layer(middleware::from_fn(refuse_repeated_parameters))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    // The Prometheus API takes repeated parameters (`match[]`), so it is outside the
    // repeated-parameter refusal, behind the same token.
    let prometheus = crate::api::query::prom_api::router(state.query.clone())
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    // `/query/logs` and `/query/alarms` take `tag` (and `rule`) repeatedly, so they are outside
    // the repeated-parameter refusal (they refuse other repeats themselves), behind the same token.
    let logs = Router::new()
        .route("/query/logs", get(query::logs))
        .route("/query/alarms", get(query::alarms))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    // SkyWalking's query protocol takes no query parameters; behind the same token.
    let graphql = Router::new()
        .route("/graphql", post(ui::graphql).layer(axum::extract::DefaultBodyLimit::max(ui::MAX_GRAPHQL_BODY_BYTES)))
        .route_layer(middleware::from_fn_with_state(state.clone(), scope_caller))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/healthcheck", get(ui::healthcheck))
        .merge(protected)
        .merge(logs)
        .merge(graphql);
    // With a UI dir, what no route takes is the UI's (its files are public build output).
    let router = match state.ui_dir.clone() {
        Some(dir) => router.fallback(move |request: Request| async move {
            if request.method() == axum::http::Method::GET || request.method() == axum::http::Method::HEAD {
                ui::static_file(dir, request).await
            } else {
                unknown_route(request).await
            }
        }),
        None => router.fallback(unknown_route),
    };
    router.with_state(state).merge(prometheus)
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// Ready once boot has finished, and as long as no worker has died.
async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    let dead = match state.not_ready() {
        None => return axum::Json(json!({"status": "ready", "node": state.node_id.0})).into_response(),
        Some(booting @ NotReady::Booting) => return outcome_response(&Outcome::new(ApplyStatus::NotReady, booting.message()), "", ""),
        Some(dead) => dead,
    };
    let outcome = Outcome::new(ApplyStatus::NotReady, dead.message());
    let mut body = outcome_body(&outcome, "", "");
    if let NotReady::Dead(workers) = &dead {
        body["deadWorkers"] = workers.iter().map(|(name, panic)| (name.to_string(), json!(panic))).collect();
    }
    (status_code(outcome.status), axum::Json(body)).into_response()
}

/// Why the node is not ready: boot has not finished, or background workers died (name, panic).
pub(crate) enum NotReady {
    Booting,
    Dead(Vec<(&'static str, String)>),
}

impl NotReady {
    pub(crate) fn message(&self) -> String {
        match self {
            NotReady::Booting => "boot has not finished".to_string(),
            NotReady::Dead(workers) => {
                let names: Vec<&str> = workers.iter().map(|(name, _)| *name).collect();
                format!("worker died: {}", names.join(", "))
            }
        }
    }
}

async fn config(State(state): State<Arc<AdminState>>) -> Response {
    axum::Json(state.config.view()).into_response()
}

async fn unknown_route(request: Request) -> Response {
    let body = json!({
        "applyStatus": "not_found",
        "catalog": "",
        "name": "",
        "message": format!("no route {} {}", request.method(), request.uri().path()),
    });
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// A query parameter given twice is `400 invalid_parameter` on every route, including those that
/// read no parameter (handlers that do read them check again, through `Params::from`).
async fn refuse_repeated_parameters(request: Request, next: Next) -> Response {
    let pairs = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(request.uri()).map(|q| q.0);
    if let Ok(pairs) = pairs
        && let Err(outcome) = params::Params::from_pairs(pairs)
    {
        return outcome_response(&outcome, "", "");
    }
    next.run(request).await
}

/// Runs the request with its caller (this node, the client's address, the token's fingerprint)
/// in scope, so a write it makes records who asked (`control::history`), here or, forwarded, on
/// the main.
async fn scope_caller(State(state): State<Arc<AdminState>>, headers: HeaderMap, request: Request, next: Next) -> Response {
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|axum::extract::ConnectInfo(addr)| addr.to_string());
    let token = state
        .token()
        .and(headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token))
        .map(crate::control::history::token_fingerprint);
    let caller = crate::control::history::Caller { taken_by: Some(state.node_id.clone()), client, token, restore_of: None };
    crate::control::history::with_caller(caller, next.run(request)).await
}

/// Bearer-token check for every route but `/healthz`.
async fn require_token(State(state): State<Arc<AdminState>>, headers: HeaderMap, request: Request, next: Next) -> Response {
    let Some(expected) = state.token() else { return next.run(request).await };
    let presented = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token);
    match presented {
        Some(token) if tokens_match(token, &expected) => next.run(request).await,
        Some(_) => {
            tracing::warn!(path = %request.uri().path(), "admin request with a wrong token");
            outcome_response(&Outcome::new(ApplyStatus::Unauthorized, "wrong bearer token"), "", "")
        }
        None => outcome_response(
            &Outcome::new(ApplyStatus::Unauthorized, "missing bearer token (Authorization: Bearer <token>)"),
            "",
            "",
        ),
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 7235), and any run of spaces may separate it from the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether the presented token is the expected one, compared in constant time.
fn tokens_match(presented: &str, expected: &str) -> bool {
    crate::base::secret::constant_time_eq(presented.as_bytes(), expected.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(tokens_match("s3cret", "s3cret"));
        assert!(!tokens_match("s3cre", "s3cret"));
        assert!(!tokens_match("s3cret!", "s3cret"));
        assert!(!tokens_match("", "s3cret"));
    }
}
