//! `GET /runtime/layers`: the runtime layers registered on this node, derived from the claims
//! index (every file that is not INACTIVE claims the layers it declares), and with
//! `builtIn=true` SkyWalking's built-in layers too. Served from this node's own state, like the
//! other reads.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_response};
use crate::compiler::layers::BUILT_IN_LAYERS;

pub async fn layers(State(state): State<Arc<AdminState>>, raw: RawQuery) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return outcome_response(&outcome, "", ""),
    };
    let registry = state.runtime.claims.layer_registry();
    let mut layers: Vec<Value> = Vec::new();
    if params.flag("builtIn") {
        layers.extend(BUILT_IN_LAYERS.iter().map(|l| {
            json!({"name": l.name, "ordinal": l.ordinal, "normal": l.normal, "source": "built-in", "declaredBy": []})
        }));
    }
    layers.extend(registry.layers().into_iter().map(|layer| {
        json!({
            "name": layer.name,
            "ordinal": layer.ordinal,
            "normal": layer.normal,
            "source": if layer.bundled { "bundled" } else { "runtime" },
            "declaredBy": layer.declared_by.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })
    }));
    let mut body = json!({"node": state.node_id.0, "layers": layers});
    if !registry.shadowed.is_empty() {
        body["shadowed"] = registry
            .shadowed
            .iter()
            .map(|(key, d)| json!({"file": key.to_string(), "name": d.name, "ordinal": d.ordinal, "normal": d.normal}))
            .collect();
    }
    axum::Json(body).into_response()
}
