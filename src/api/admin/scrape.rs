//! `GET /status/scrape`: the scrape targets of this node's configuration, who owns each among
//! the live nodes (as of its last due time), whether this node scrapes it, and this node's last
//! scrape of it. Every node holds every target, so each can be asked; in a settled cluster they
//! agree on the owners.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AdminState;
use crate::data::ingest::scrape_board::TargetStatus;

pub async fn scrape_status(State(state): State<Arc<AdminState>>) -> Response {
    let targets: Vec<Value> = state.scrape.snapshot().iter().map(target_row).collect();
    axum::Json(json!({"node": state.node_id.0, "targets": targets})).into_response()
}

fn target_row(status: &TargetStatus) -> Value {
    let mut row = json!({
        "job": status.job,
        "target": status.target,
        "url": status.url,
        "owner": status.owner.as_ref().map(|owner| owner.0.clone()),
        "scrapedHere": status.scraped_here,
    });
    if let Some(last) = &status.last_scrape {
        row["lastScrape"] = json!({"result": last.result, "time": last.time_ms, "error": last.error});
    }
    row
}
