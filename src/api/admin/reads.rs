//! Read routes: one rule (raw YAML or JSON, with ETag), the bundled files, and the list view.
//! Reads are always served from this node's own state.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};
use crate::base::clock::now_ms;
use crate::compiler::LayerDefinition;
use crate::base::ids::{Catalog, ContentHash, RuleKey};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::runtime::RuleRuntime;
use crate::store::{EntryMeta, EntryStatus};

/// What `GET /runtime/rule` serves.
struct Served {
    content: Vec<u8>,
    hash: ContentHash,
    status: &'static str,
    source: &'static str,
    update_time: u64,
}

/// How long a read of one rule waits for a staged write of it to be committed or withdrawn.
const STAGED_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

pub async fn get_rule(State(state): State<Arc<AdminState>>, headers: HeaderMap, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog_echo, name_echo) = params.echo();
    let key = match params.key(None) {
        Ok(key) => key,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, &name_echo),
    };
    let use_runtime = match params.get("source").map(str::trim) {
        None | Some("") | Some("runtime") => true,
        Some("bundled") => false,
        Some(other) => {
            let outcome = Outcome::new(ApplyStatus::InvalidSource, format!("source {other:?} is not runtime or bundled"));
            return outcome_response(&outcome, &catalog_echo, &name_echo);
        }
    };
    let mut served = None;
    if use_runtime {
        // A write the main answered may still be staged here, its commit notice on its way.
        state.store.wait_staged_settled(&key, STAGED_READ_WAIT).await;
        match state.store.get_entry(&key).await {
            Ok(Some(entry)) if entry.is_live() => {
                served = Some(Served {
                    hash: entry.content_hash.clone(),
                    status: entry.status.as_str(),
                    source: "runtime",
                    update_time: entry.update_time_ms,
                    content: entry.content,
                });
            }
            Ok(_) => {}
            Err(e) => {
                let outcome = Outcome::new(ApplyStatus::StorageUnavailable, e.to_string());
                return outcome_response(&outcome, &catalog_echo, &name_echo);
            }
        }
    }
    if served.is_none()
        && let Some(bundled) = state.bundled.get(&key)
    {
        served = Some(Served {
            content: bundled.content.to_vec(),
            hash: bundled.hash.clone(),
            status: "BUNDLED",
            source: "bundled",
            update_time: 0,
        });
    }
    let Some(served) = served else {
        let outcome = Outcome::new(ApplyStatus::RuleNotFound, format!("{key} has neither an entry nor a bundled file"));
        return outcome_response(&outcome, &catalog_echo, &name_echo);
    };
    let etag = format!("\"{}\"", served.hash);
    let mut response_headers = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            response_headers.insert(name, v);
        }
    };
    put("x-sw-content-hash", served.hash.as_str());
    put("x-sw-status", served.status);
    put("x-sw-source", served.source);
    put("x-sw-update-time", &served.update_time.to_string());
    put("etag", &etag);
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if not_modified {
        return (StatusCode::NOT_MODIFIED, response_headers).into_response();
    }
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if wants_json {
        let body = json!({
            "catalog": key.catalog.as_str(),
            "name": key.name.as_str(),
            "status": served.status,
            "source": served.source,
            "contentHash": served.hash.as_str(),
            "updateTime": served.update_time,
            "content": String::from_utf8_lossy(&served.content),
        });
        return (response_headers, axum::Json(body)).into_response();
    }
    response_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-yaml; charset=utf-8"));
    (response_headers, served.content).into_response()
}

pub async fn bundled(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let (catalog_echo, _) = params.echo();
    let catalog = match params.catalog(None) {
        Ok(c) => c,
        Err(outcome) => return outcome_response(&outcome, &catalog_echo, ""),
    };
    let with_content = params.get("withContent").is_none() || params.flag("withContent");
    let rows: Vec<Value> = state
        .bundled
        .iter()
        .filter(|b| b.key.catalog == catalog)
        .map(|b| {
            let overridden = state.store.entry_meta(&b.key).is_some_and(|m| m.status != EntryStatus::Deleted);
            let mut row = json!({
                "name": b.key.name.as_str(),
                "kind": "bundled",
                "contentHash": b.hash.as_str(),
                "overridden": overridden,
            });
            if with_content {
                row["content"] = Value::String(String::from_utf8_lossy(&b.content).into_owned());
            }
            row
        })
        .collect();
    axum::Json(Value::Array(rows)).into_response()
}

pub async fn list(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    if params.flag("cluster") {
        return axum::Json(cluster_list(&state).await).into_response();
    }
    let filter = match params.get("catalog").map(str::trim) {
        None | Some("") => None,
        Some(_) => match params.catalog(None) {
            Ok(c) => Some(c),
            Err(outcome) => return outcome_response(&outcome, &params.echo().0, ""),
        },
    };
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], list_view(&state, filter)).into_response()
}

/// One row of `/runtime/rule/list`, serialized straight from borrowed state.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    catalog: &'a str,
    name: &'a str,
    status: &'a str,
    local_state: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspend_origin: Option<&'a str>,
    loader_kind: &'a str,
    content_hash: &'a str,
    bundled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundled_content_hash: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    update_time: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied_content_hash: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied_revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_apply_error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_unregister: Option<bool>,
    /// The runtime layers this file claims (its `layerDefinitions`; none while INACTIVE).
    layers: &'a [LayerDefinition],
}

/// The rendered rows of the list view, valid for one (runtime, store, claims, filter) version.
/// Each row is kept with its key: the live `evaluation` object is added at every request.
pub struct ListCache {
    versions: (u64, u64, u64, Option<Catalog>),
    rows: Arc<Vec<(RuleKey, Vec<u8>)>>,
    active: usize,
    pending: usize,
}

/// The `/runtime/rule/list` envelope for this node, as JSON bytes.
///
/// The rows change only when the runtime or the store does, so they are rendered once per
/// change (versions read *before* rendering, so a concurrent change only makes the next request
/// render again) and the envelope's timestamps are written around them on every request.
pub fn list_view(state: &AdminState, filter: Option<Catalog>) -> Vec<u8> {
    let versions = (state.runtime.version(), state.store.version(), state.runtime.claims.version(), filter);
    let cached = {
        let cache = state.list_cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.as_ref().filter(|c| c.versions == versions).map(|c| (c.rows.clone(), c.active, c.pending))
    };
    let (rows, active, pending) = cached.unwrap_or_else(|| {
        let layers = claimed_layers(state);
        let (rows, active, pending) = state.runtime.with_all(|runtime| {
            state.store.with_entry_index(|index| {
                let (rows, active) = render_rows(state, runtime, index, &layers, filter);
                (rows, active, pending_files(state, runtime, index, filter))
            })
        });
        *state.list_cache.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(ListCache { versions, rows: rows.clone(), active, pending });
        (rows, active, pending)
    });
    let head = json!({
        "generatedAt": now_ms(),
        "node": state.node_id.0,
        "loaderStats": {"active": active, "pending": pending},
        "alarmResets": state.runtime.alarm_reset_count(),
        "lastScanTime": state.scanner.last_scan_ms(),
    })
    .to_string();
    // `head` is a JSON object; reopen it to append the cached rows.
    let mut out = Vec::with_capacity(head.len() + rows.iter().map(|(_, row)| row.len() + 160).sum::<usize>() + 10);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"rules\":[");
    for (i, (key, row)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_row(&mut out, row, state, key);
    }
    out.extend_from_slice(b"]}");
    out
}

/// One cached row, with the file's live evaluation state when dispatch evaluates its catalog.
fn write_row(out: &mut Vec<u8>, row: &[u8], state: &AdminState, key: &RuleKey) {
    if !crate::data::evaluation::evaluates(key.catalog) || row.last() != Some(&b'}') {
        out.extend_from_slice(row);
        return;
    }
    out.extend_from_slice(&row[..row.len() - 1]);
    out.extend_from_slice(b",\"evaluation\":");
    match serde_json::to_writer(&mut *out, &state.dispatcher.evaluation_of(key)) {
        Ok(()) => out.push(b'}'),
        Err(_) => out.extend_from_slice(b"null}"),
    }
}

/// The layers each file claims now (only files that claim any).
fn claimed_layers(state: &AdminState) -> BTreeMap<RuleKey, Vec<LayerDefinition>> {
    state.runtime.claims.with_all(|files| {
        files
            .iter()
            .filter(|(_, held)| !held.inactive && !held.layers.is_empty())
            .map(|(key, held)| (key.clone(), held.layers.clone()))
            .collect()
    })
}

/// The rule files waiting to apply on this node: what the next scan would load or unload
/// (the scan's own plan over the same entries, runtime and bundled files; tombstone purges and
/// self-heals are not applies). Files a roll holds are left out: the roll drives them, and its
/// status says how far it got.
fn pending_files(
    state: &AdminState,
    runtime: &BTreeMap<RuleKey, RuleRuntime>,
    index: &BTreeMap<RuleKey, EntryMeta>,
    filter: Option<Catalog>,
) -> usize {
    use crate::control::scan::plan::{Action, LocalView, PlanInput, plan};
    let wanted = |key: &RuleKey| key.catalog.is_rule() && filter.is_none_or(|c| key.catalog == c);
    let stored: Vec<EntryMeta> = index.values().filter(|m| wanted(&m.key)).cloned().collect();
    let local: BTreeMap<RuleKey, LocalView> = runtime
        .iter()
        .filter(|(key, _)| wanted(key))
        .map(|(key, r)| {
            let loaded = r.loaded.as_ref().map(|l| (l.content_hash.clone(), l.kind));
            (key.clone(), LocalView { loaded, peer_suspended_for: None })
        })
        .collect();
    let bundled: BTreeMap<RuleKey, ContentHash> =
        state.bundled.iter().filter(|b| wanted(&b.key)).map(|b| (b.key.clone(), b.hash.clone())).collect();
    let rolled: Vec<RuleKey> = state.store.roll_hashes().into_iter().map(|(key, _)| key).collect();
    let input = PlanInput {
        stored: &stored,
        local: &local,
        bundled: &bundled,
        now_ms: 0,
        self_heal_after: std::time::Duration::MAX,
        tombstone_retention: std::time::Duration::MAX,
        rolling: &BTreeMap::new(),
    };
    plan(&input)
        .iter()
        .filter_map(|action| match action {
            Action::LoadEntry(key) | Action::LoadBundled(key) | Action::Unload(key) => Some(key),
            Action::SelfHeal(_) | Action::PurgeTombstone(_) | Action::LoadRolling(_) => None,
        })
        .filter(|key| !rolled.contains(key))
        .count()
}

fn render_rows(
    state: &AdminState,
    runtime: &BTreeMap<RuleKey, RuleRuntime>,
    index: &BTreeMap<RuleKey, EntryMeta>,
    layers: &BTreeMap<RuleKey, Vec<LayerDefinition>>,
    filter: Option<Catalog>,
) -> (Arc<Vec<(RuleKey, Vec<u8>)>>, usize) {
    let wanted = |key: &RuleKey| key.catalog.is_rule() && filter.is_none_or(|c| key.catalog == c);
    let layers_of = |key: &RuleKey| layers.get(key).map_or(&[][..], Vec::as_slice);
    let mut rows = Vec::with_capacity(index.len() + state.bundled.len());
    let mut keys: Vec<&RuleKey> = Vec::with_capacity(rows.capacity());
    for meta in index.values() {
        if meta.status == EntryStatus::Deleted || !wanted(&meta.key) {
            continue;
        }
        let local = runtime.get(&meta.key);
        let loaded = local.and_then(|l| l.loaded.as_ref());
        let bundled = state.bundled.get(&meta.key);
        keys.push(&meta.key);
        rows.push(Row {
            catalog: meta.key.catalog.as_str(),
            name: meta.key.name.as_str(),
            status: meta.status.as_str(),
            local_state: local.map_or("NOT_LOADED", |l| l.local_state()),
            suspend_origin: Some(local.map_or("NONE", |l| l.origin.as_str())),
            loader_kind: loaded.map_or("NONE", |l| l.kind.as_str()),
            content_hash: meta.content_hash.as_str(),
            bundled: bundled.is_some(),
            bundled_content_hash: bundled.map(|b| b.hash.as_str()),
            update_time: Some(meta.update_time_ms),
            revision: Some(meta.revision.to_string()),
            applied_content_hash: Some(loaded.map_or("", |l| l.content_hash.as_str())),
            applied_revision: Some(loaded.and_then(|l| l.revision.as_ref()).map_or(String::new(), |r| r.to_string())),
            last_apply_error: Some(local.map_or("", |l| l.last_apply_error.as_str())),
            pending_unregister: None,
            layers: layers_of(&meta.key),
        });
    }
    for b in state.bundled.iter() {
        if index.get(&b.key).is_some_and(|m| m.status != EntryStatus::Deleted) || !wanted(&b.key) {
            continue;
        }
        let local = runtime.get(&b.key);
        keys.push(&b.key);
        rows.push(Row {
            catalog: b.key.catalog.as_str(),
            name: b.key.name.as_str(),
            status: "BUNDLED",
            local_state: local.map_or("NOT_LOADED", |l| l.local_state()),
            suspend_origin: None,
            loader_kind: local.and_then(|l| l.loaded.as_ref()).map_or("NONE", |l| l.kind.as_str()),
            content_hash: b.hash.as_str(),
            bundled: true,
            bundled_content_hash: Some(b.hash.as_str()),
            update_time: None,
            revision: None,
            applied_content_hash: None,
            applied_revision: None,
            last_apply_error: Some(local.map_or("", |l| l.last_apply_error.as_str())),
            pending_unregister: Some(false),
            layers: layers_of(&b.key),
        });
    }
    for (key, local) in runtime {
        let listed = index.get(key).is_some_and(|m| m.status != EntryStatus::Deleted) || state.bundled.contains(key);
        if listed || !wanted(key) {
            continue;
        }
        if let Some(loaded) = &local.loaded {
            keys.push(key);
            rows.push(Row {
                catalog: key.catalog.as_str(),
                name: key.name.as_str(),
                status: "n/a",
                local_state: local.local_state(),
                suspend_origin: None,
                loader_kind: loaded.kind.as_str(),
                content_hash: loaded.content_hash.as_str(),
                bundled: false,
                bundled_content_hash: None,
                update_time: None,
                revision: None,
                applied_content_hash: None,
                applied_revision: None,
                last_apply_error: None,
                pending_unregister: Some(true),
                layers: &[],
            });
        }
    }
    let active = runtime.values().filter(|l| l.loaded.is_some()).count();
    let rendered = keys
        .into_iter()
        .zip(&rows)
        .filter_map(|(key, row)| serde_json::to_vec(row).ok().map(|json| (key.clone(), json)))
        .collect();
    (Arc::new(rendered), active)
}

/// `GET /cluster/status`: this node, the main, and every member as gossip sees it.
pub async fn cluster_status(State(state): State<Arc<AdminState>>) -> Response {
    let Some(cluster) = &state.cluster else {
        return axum::Json(json!({
            "self": state.node_id.0,
            "main": state.node_id.0,
            "members": [{"nodeId": state.node_id.0, "live": true, "lastScanTime": state.scanner.last_scan_ms()}],
            "agentConfigsServed": state.agents.serving(),
        }))
        .into_response();
    };
    let view = cluster.view();
    let members: Vec<Value> = view
        .members
        .iter()
        .map(|m| {
            json!({
                "nodeId": m.node_id.0,
                "live": m.live,
                "adminAddr": m.admin_addr,
                "busAddr": m.bus_addr,
                "generation": m.generation,
                "digest": m.digest,
                "ready": m.ready,
                "lastScanTime": m.last_scan_ms,
            })
        })
        .collect();
    axum::Json(json!({
        "self": view.self_id.0,
        "main": view.main.map(|m| m.0),
        "members": members,
        // False until this node's state is confirmed against the cluster (its first sync).
        "agentConfigsServed": state.agents.serving(),
        // What the cluster secret let in and kept out (see docs/security.md).
        "security": {
            "gossip": cluster.membership.gossip_counters(),
            "bus": cluster.bus_gate.snapshot(),
        },
    }))
    .into_response()
}

/// `GET /runtime/rule/list?cluster=true`: every live node's view, a row per rule × node,
/// with whether that node has converged on the main's stored content.
async fn cluster_list(state: &AdminState) -> Value {
    let mut views: Vec<(String, Value)> = vec![(state.node_id.0.clone(), serde_json::from_slice(&list_view(state, None)).unwrap_or(Value::Null))];
    let mut unreachable = Vec::new();
    let main = state.cluster.as_ref().and_then(|c| c.view().main).map(|m| m.0).unwrap_or_else(|| state.node_id.0.clone());
    if let Some(cluster) = &state.cluster {
        // Over the authenticated bus: a peer proves the secret to answer, and the operator's
        // token never leaves this node.
        let answers = crate::cluster::replication::fan_out(cluster, crate::cluster::bus::NodeView::Rules).await;
        for (node, answer) in answers {
            match answer {
                Some(view) => views.push((node.0, view)),
                None => unreachable.push(node.0),
            }
        }
    }
    let main_hashes: BTreeMap<(String, String), String> = views
        .iter()
        .filter(|(node, _)| *node == main)
        .flat_map(|(_, view)| view["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            ((s("catalog"), s("name")), s("contentHash"))
        })
        .collect();
    let mut rows = Vec::new();
    for (node, view) in &views {
        for r in view["rules"].as_array().cloned().unwrap_or_default() {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            let stored_matches = main_hashes.get(&(s("catalog"), s("name"))).is_none_or(|h| *h == s("contentHash"));
            let applied = match s("status").as_str() {
                "ACTIVE" => s("localState") == "RUNNING" && s("appliedContentHash") == s("contentHash"),
                "INACTIVE" => s("localState") == "NOT_LOADED",
                _ => s("localState") == "RUNNING",
            };
            rows.push(json!({
                "node": node,
                "catalog": s("catalog"),
                "name": s("name"),
                "status": s("status"),
                "localState": s("localState"),
                "contentHash": s("contentHash"),
                "appliedContentHash": s("appliedContentHash"),
                "lastApplyError": s("lastApplyError"),
                "converged": stored_matches && applied,
            }));
        }
    }
    json!({"generatedAt": now_ms(), "main": main, "nodes": views.iter().map(|(n, _)| n).collect::<Vec<_>>(), "unreachable": unreachable, "rules": rows})
}
