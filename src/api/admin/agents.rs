//! The agent management API on the admin port: groups, pipeline and instance configs, onetime
//! commands (writes, forwarded to the main like rule writes), and the agents themselves (reads,
//! fanned out to every live node, since each node holds the agents heartbeating it).
//!
//! Every answer is JSON. Writes and failures use the rule API's envelope (`applyStatus`,
//! `catalog`, `name`, `message`, plus `revision` and `version` when a write committed them),
//! with the status mapped by [`super::status_code`].
// Handlers answer early with a ready `Response` as their error: built once per request, it never
// travels far, so its size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::params::{Params, RawQuery};
use super::forward::forward_if_not_main;
use super::{AdminState, outcome_response};
use crate::control::agents::manage::{AgentOp, config_catalog, parse_kind};
use crate::control::agents::model::{AgentGroup, ConfigEntry, ConfigKind, ContentFormat, OnetimeCommand};
use crate::api::agents::snapshot::ConfigSnapshot;
use crate::api::agents::state::{AgentRecord, ApplyStatus as AgentApplyStatus, ConfigStatusRecord};
use crate::cluster::bus::messages::ForwardOp;
use crate::base::ids::Catalog;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::workflow::agent_objects::manage_outcome;

/// The desired state the agent service serves, rebuilt off the async threads when stale.
async fn desired(state: &AdminState) -> Result<Arc<ConfigSnapshot>, crate::api::agents::source::SourceError> {
    state.agents.off_async(|service| service.desired()).await.unwrap_or_else(|| {
        Err(crate::api::agents::source::SourceError::Unavailable { reason: "the node is shutting down".to_string() })
    })
}

fn refuse(status: ApplyStatus, message: impl Into<String>, catalog: &str, name: &str) -> Response {
    outcome_response(&Outcome::new(status, message), catalog, name)
}

/// Runs one management write here on the main, or forwards it there.
async fn run_op(state: &Arc<AdminState>, op: AgentOp) -> Response {
    let key = match op.validate().and_then(|()| op.key()) {
        Ok(key) => key,
        Err(e) => return outcome_response(&manage_outcome(&e), "", ""),
    };
    let (catalog, name) = (key.catalog().as_str(), key.name().to_string());
    let forwarded = forward_if_not_main(state, || ForwardOp::Agent {
        key: key.entry_key(),
        op: serde_json::to_vec(&op).unwrap_or_default(),
    })
    .await;
    if let Some(response) = forwarded {
        return response;
    }
    let outcome = state.workflow.agent_op(&op).await;
    outcome_response(&outcome, catalog, &name)
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &Bytes, what: &str) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|e| {
        refuse(
            ApplyStatus::InvalidParameter,
            format!("the body must be a JSON {what}: {e}"),
            "",
            "",
        )
    })
}

fn kind_of(text: &str) -> Result<ConfigKind, Response> {
    parse_kind(text).ok_or_else(|| {
        refuse(
            ApplyStatus::InvalidParameter,
            format!("config kind {text:?} is not pipeline or instance"),
            "",
            text,
        )
    })
}

// ---- groups ----

pub async fn create_group(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    match parse_body::<AgentGroup>(
        &body,
        "group {name, description, selector: {tags: [{name, value}], ip_cidrs}}",
    ) {
        Ok(group) => run_op(&state, AgentOp::PutGroup { group }).await,
        Err(response) => response,
    }
}

pub async fn delete_group(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Response {
    run_op(&state, AgentOp::DeleteGroup { name }).await
}

pub async fn list_groups(State(state): State<Arc<AdminState>>) -> Response {
    match desired(&state).await {
        Ok(snapshot) => {
            axum::Json(json!({ "groups": snapshot.groups().collect::<Vec<_>>() })).into_response()
        }
        Err(e) => refuse(
            ApplyStatus::StorageUnavailable,
            e.to_string(),
            Catalog::AgentGroups.as_str(),
            "",
        ),
    }
}

// ---- configs ----

#[derive(Deserialize)]
struct PushBody {
    kind: String,
    name: String,
    content: String,
    #[serde(default)]
    format: Option<ContentFormat>,
}

pub async fn push_config(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    let body = match parse_body::<PushBody>(&body, "config {kind, name, content, format}") {
        Ok(body) => body,
        Err(response) => return response,
    };
    let kind = match kind_of(&body.kind) {
        Ok(kind) => kind,
        Err(response) => return response,
    };
    let format = body.format.unwrap_or(ContentFormat::Yaml);
    run_op(
        &state,
        AgentOp::PushConfig {
            kind,
            name: body.name,
            content: body.content,
            format,
        },
    )
    .await
}

pub async fn delete_config(
    State(state): State<Arc<AdminState>>,
    Path((kind, name)): Path<(String, String)>,
) -> Response {
    match kind_of(&kind) {
        Ok(kind) => run_op(&state, AgentOp::DeleteConfig { kind, name }).await,
        Err(response) => response,
    }
}

fn group_param(raw: RawQuery, name: &str) -> Result<String, Response> {
    let params = Params::from(raw).map_err(|o| outcome_response(&o, "", name))?;
    match params.get("group").map(str::trim) {
        Some(group) if !group.is_empty() => Ok(group.to_string()),
        _ => Err(refuse(
            ApplyStatus::InvalidParameter,
            "query parameter group is required",
            "",
            name,
        )),
    }
}

pub async fn apply_config(
    State(state): State<Arc<AdminState>>,
    path: Path<(String, String)>,
    raw: RawQuery,
) -> Response {
    group_op(&state, path, raw, |kind, name, group| AgentOp::ApplyConfig { kind, name, group }).await
}

pub async fn remove_config(
    State(state): State<Arc<AdminState>>,
    path: Path<(String, String)>,
    raw: RawQuery,
) -> Response {
    group_op(&state, path, raw, |kind, name, group| AgentOp::RemoveConfig { kind, name, group }).await
}

/// Applying a config to, or removing it from, the group named in the query.
async fn group_op(
    state: &Arc<AdminState>,
    Path((kind, name)): Path<(String, String)>,
    raw: RawQuery,
    op: impl FnOnce(ConfigKind, String, String) -> AgentOp,
) -> Response {
    let (kind, group) = match (kind_of(&kind), group_param(raw, &name)) {
        (Ok(kind), Ok(group)) => (kind, group),
        (Err(response), _) | (_, Err(response)) => return response,
    };
    run_op(state, op(kind, name, group)).await
}

/// The live objects of one agent catalog (this node's replica), decoded from their JSON. The
/// storage read runs on the blocking pool.
async fn stored_objects<T: serde::de::DeserializeOwned>(state: &AdminState, catalog: Catalog) -> Result<Vec<T>, Response> {
    let store = state.store.clone();
    let read = tokio::task::spawn_blocking(move || store.read_catalog_now(catalog))
        .await
        .map_err(|e| refuse(ApplyStatus::StorageUnavailable, format!("reading {catalog}: {e}"), catalog.as_str(), ""))?;
    let entries = read.map_err(|e| {
        refuse(
            ApplyStatus::StorageUnavailable,
            e.to_string(),
            catalog.as_str(),
            "",
        )
    })?;
    Ok(entries
        .into_iter()
        .filter(|e| e.is_live())
        .filter_map(|e| serde_json::from_slice(&e.content).ok())
        .collect())
}

/// The stored configs of one kind (this node's replica).
async fn stored_configs(state: &AdminState, kind: ConfigKind) -> Result<Vec<ConfigEntry>, Response> {
    stored_objects(state, config_catalog(kind)).await
}

pub async fn list_configs(State(state): State<Arc<AdminState>>) -> Response {
    let mut rows = Vec::new();
    for kind in [ConfigKind::Pipeline, ConfigKind::Instance] {
        match stored_configs(&state, kind).await {
            Ok(configs) => rows.extend(configs.into_iter().map(|c| {
                json!({"kind": c.kind, "name": c.name, "version": c.version, "format": c.format, "groups": c.groups})
            })),
            Err(response) => return response,
        }
    }
    axum::Json(json!({ "configs": rows })).into_response()
}

pub async fn get_config(
    State(state): State<Arc<AdminState>>,
    Path((kind, name)): Path<(String, String)>,
) -> Response {
    let kind = match kind_of(&kind) {
        Ok(kind) => kind,
        Err(response) => return response,
    };
    match stored_configs(&state, kind).await {
        Ok(configs) => match configs.into_iter().find(|c| c.name == name) {
            Some(config) => axum::Json(json!(config)).into_response(),
            None => refuse(
                ApplyStatus::ConfigNotFound,
                format!("{} {name:?} does not exist", kind.label()),
                config_catalog(kind).as_str(),
                &name,
            ),
        },
        Err(response) => response,
    }
}

/// `GET /agent/configs/{kind}/{name}/status`: which agents (on every live node) applied the
/// config's current version, are still applying it, failed it, or still hold it after removal.
pub async fn config_status(
    State(state): State<Arc<AdminState>>,
    Path((kind, name)): Path<(String, String)>,
) -> Response {
    let kind = match kind_of(&kind) {
        Ok(kind) => kind,
        Err(response) => return response,
    };
    let catalog = config_catalog(kind).as_str();
    let snapshot = match desired(&state).await {
        Ok(snapshot) => snapshot,
        Err(e) => {
            return refuse(
                ApplyStatus::StorageUnavailable,
                e.to_string(),
                catalog,
                &name,
            );
        }
    };
    let Some(config) = snapshot.config(kind, &name) else {
        return refuse(
            ApplyStatus::ConfigNotFound,
            format!("{} {name:?} does not exist", kind.label()),
            catalog,
            &name,
        );
    };
    let (agents, unreachable) = all_agents(&state).await;
    let now = state.agents.now_ms();
    let mut by_state: BTreeMap<&str, Vec<Value>> = ["applied", "applying", "failed", "removing"]
        .into_iter()
        .map(|s| (s, Vec::new()))
        .collect();
    for (node, view) in &agents {
        let Some(record) = record_of(view) else {
            continue;
        };
        let desired = snapshot
            .desired_for(&record.identity(), now)
            .configs(kind)
            .contains_key(&name);
        let reported = reported(&record, kind).iter().find(|c| c.name == name);
        let bucket = match (desired, reported) {
            (true, Some(r))
                if r.version == config.version && r.status == AgentApplyStatus::Applied =>
            {
                "applied"
            }
            (true, Some(r))
                if r.version == config.version && r.status == AgentApplyStatus::Failed =>
            {
                "failed"
            }
            (true, _) => "applying",
            (false, Some(r)) if r.version != crate::control::agents::model::DELETE_VERSION => "removing",
            (false, _) => continue,
        };
        by_state.entry(bucket).or_default().push(json!({
            "instanceId": record.instance_id,
            "node": node,
            "reportedVersion": reported.map(|r| r.version),
            "status": reported.map(|r| r.status),
            "message": reported.map_or("", |r| r.message.as_str()),
        }));
    }
    axum::Json(json!({
        "kind": kind,
        "name": name,
        "version": config.version,
        "groups": config.groups,
        "agents": by_state,
        "unreachableNodes": unreachable,
    }))
    .into_response()
}

// ---- onetime commands ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandBody {
    name: String,
    /// The command's detail (YAML or JSON text).
    #[serde(alias = "detail")]
    content: String,
    #[serde(default)]
    format: Option<ContentFormat>,
    /// Unix seconds.
    #[serde(alias = "expire_time")]
    expire_time: i64,
    group: String,
}

pub async fn create_command(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    match parse_body::<CommandBody>(
        &body,
        "onetime command {name, content, format, expireTime, group}",
    ) {
        Ok(body) => {
            let command = OnetimeCommand {
                name: body.name,
                content: body.content,
                format: body.format.unwrap_or(ContentFormat::Yaml),
                expire_time_s: body.expire_time,
                group: body.group,
            };
            run_op(&state, AgentOp::PutCommand { command }).await
        }
        Err(response) => response,
    }
}

pub async fn delete_command(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Response {
    run_op(&state, AgentOp::DeleteCommand { name }).await
}

pub async fn list_commands(State(state): State<Arc<AdminState>>) -> Response {
    match stored_objects::<OnetimeCommand>(&state, Catalog::AgentCommands).await {
        Ok(commands) => axum::Json(json!({ "commands": commands })).into_response(),
        Err(response) => response,
    }
}

// ---- agents ----

fn record_of(view: &Value) -> Option<AgentRecord> {
    serde_json::from_value(view.clone()).ok()
}

fn reported(record: &AgentRecord, kind: ConfigKind) -> &[ConfigStatusRecord] {
    match kind {
        ConfigKind::Pipeline => &record.pipeline_configs,
        ConfigKind::Instance => &record.instance_configs,
    }
}

/// The agents this node holds, as JSON views.
fn local_agents(state: &AdminState) -> Vec<Value> {
    state
        .agents
        .agents()
        .into_iter()
        .filter_map(|view| serde_json::to_value(view).ok())
        .collect()
}

/// This node's agents as the bus serves them to a peer: `{"node": .., "agents": [..]}`.
pub(super) fn local_agents_view(state: &AdminState) -> Vec<u8> {
    serde_json::to_vec(&json!({ "node": state.node_id.0, "agents": local_agents(state) }))
        .unwrap_or_else(|_| b"null".to_vec())
}

/// Every live node's agents: (node id, agent view), and the nodes that did not answer.
async fn all_agents(state: &AdminState) -> (Vec<(String, Value)>, Vec<String>) {
    let mut agents: Vec<(String, Value)> = local_agents(state)
        .into_iter()
        .map(|a| (state.node_id.0.clone(), a))
        .collect();
    let mut unreachable = Vec::new();
    if let Some(cluster) = &state.cluster {
        // Over the authenticated bus, never with the operator's token.
        let answers = crate::cluster::replication::fan_out(cluster, crate::cluster::bus::NodeView::Agents).await;
        for (node, answer) in answers {
            match answer.and_then(|a| a["agents"].as_array().cloned()) {
                Some(list) => agents.extend(list.into_iter().map(|a| (node.0.clone(), a))),
                None => unreachable.push(node.0),
            }
        }
    }
    (agents, unreachable)
}

/// An agent view with the node holding it and the groups it belongs to (per `snapshot`).
fn decorate(node: &str, mut view: Value, snapshot: &ConfigSnapshot) -> Value {
    let groups: Vec<String> = record_of(&view)
        .map(|r| {
            snapshot
                .groups_of(&r.identity())
                .into_iter()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    view["node"] = Value::String(node.to_string());
    view["groups"] = json!(groups);
    view
}

/// `GET /agent/agents?group=&status=&offline=&local=`: every agent of every live node (`local=true`:
/// this node's only), filtered by group, reported running status, and offline (true/false).
pub async fn list_agents(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    if params.flag("local") {
        return axum::Json(json!({ "node": state.node_id.0, "agents": local_agents(&state) }))
            .into_response();
    }
    let offline = match params.get("offline").map(str::trim) {
        None | Some("") => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return refuse(
                ApplyStatus::InvalidParameter,
                format!("offline={other:?} is not true or false"),
                "",
                "",
            );
        }
    };
    let snapshot = match desired(&state).await {
        Ok(snapshot) => snapshot,
        Err(e) => return refuse(ApplyStatus::StorageUnavailable, e.to_string(), "", ""),
    };
    let group = params.get("group").map(str::trim).filter(|g| !g.is_empty());
    let status = params
        .get("status")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let (agents, unreachable) = all_agents(&state).await;
    let rows: Vec<Value> = agents
        .into_iter()
        .map(|(node, view)| decorate(&node, view, &snapshot))
        .filter(|v| {
            group.is_none_or(|g| {
                v["groups"]
                    .as_array()
                    .is_some_and(|gs| gs.iter().any(|x| x == g))
            })
        })
        .filter(|v| status.is_none_or(|s| v["running_status"] == s))
        .filter(|v| offline.is_none_or(|off| (v["liveness"] != "online") == off))
        .collect();
    axum::Json(json!({ "agents": rows, "unreachableNodes": unreachable })).into_response()
}

/// `GET /agent/agents/{instance_id}`: one agent, with each config it should hold or still holds:
/// the desired version, the version it reported and its status.
pub async fn show_agent(
    State(state): State<Arc<AdminState>>,
    Path(instance_id): Path<String>,
) -> Response {
    let snapshot = match desired(&state).await {
        Ok(snapshot) => snapshot,
        Err(e) => {
            return refuse(
                ApplyStatus::StorageUnavailable,
                e.to_string(),
                "",
                &instance_id,
            );
        }
    };
    let (agents, unreachable) = all_agents(&state).await;
    let Some((node, view)) = agents
        .into_iter()
        .find(|(_, v)| v["instance_id"] == instance_id.as_str())
    else {
        let message = format!(
            "no live node holds agent {instance_id:?} (unreachable nodes: {unreachable:?})"
        );
        return refuse(ApplyStatus::AgentNotFound, message, "", &instance_id);
    };
    let Some(record) = record_of(&view) else {
        return refuse(
            ApplyStatus::ListFailed,
            format!("node {node} answered an unreadable agent record"),
            "",
            &instance_id,
        );
    };
    let desired = snapshot.desired_for(&record.identity(), state.agents.now_ms());
    let mut configs = Vec::new();
    for kind in [ConfigKind::Pipeline, ConfigKind::Instance] {
        let held = reported(&record, kind);
        let mut names: Vec<&str> = desired.configs(kind).keys().map(String::as_str).collect();
        names.extend(held.iter().map(|c| c.name.as_str()));
        names.sort_unstable();
        names.dedup();
        for name in names {
            let want = desired.configs(kind).get(name).map(|c| c.version);
            let got = held.iter().find(|c| c.name == name);
            configs.push(json!({
                "kind": kind,
                "name": name,
                "desiredVersion": want.unwrap_or(crate::control::agents::model::DELETE_VERSION),
                "reportedVersion": got.map(|c| c.version),
                "status": got.map(|c| c.status),
                "message": got.map_or("", |c| c.message.as_str()),
            }));
        }
    }
    let mut body = decorate(&node, view, &snapshot);
    body["configs"] = Value::Array(configs);
    axum::Json(body).into_response()
}
