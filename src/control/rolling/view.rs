//! The JSON shape of a roll as `GET /runtime/rule/rolling` serves it and `hotrule rule roll
//! status` reads it: one type on both sides, so they cannot drift.

use serde::{Deserialize, Serialize};

use super::record::{Assignment, NodeState, RollRecord, RollState, content_for, percent_done};

/// One roll, as served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollView {
    pub catalog: String,
    pub name: String,
    /// `in_progress`, `completed`, `stopped`, `rolled_back` or `force_committed`.
    pub state: String,
    pub stop_reason: Option<String>,
    /// One line in Exhibitor's words: `applying to "a" (next will be "b")`.
    pub status: String,
    pub index: u32,
    pub node_at_index: Option<String>,
    pub percent_done: u8,
    pub nodes: Vec<NodeView>,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
    pub step_started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    pub step_timeout_ms: u64,
    pub health_window_ms: u64,
    pub unreachable_tries: u32,
    pub master_hash: Option<String>,
    pub rolling_hash: String,
    pub revision: String,
}

/// One node of the roll, as served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    pub position: u32,
    /// `pending`, `running_rolling`, `healthy`, `unhealthy`, `skipped` or `unreachable`.
    pub state: String,
    /// What the node is meant to run: `rolling`, `master` or `none`.
    pub content: String,
    pub since_ms: Option<u64>,
    pub tries: Option<u32>,
    pub reason: Option<String>,
}

impl RollView {
    pub fn of(record: &RollRecord) -> RollView {
        let nodes = record
            .nodes
            .iter()
            .enumerate()
            .map(|(position, slot)| {
                let (since_ms, tries, reason) = match &slot.state {
                    NodeState::Pending => (None, None, None),
                    NodeState::RunningRolling { since_ms } => (Some(*since_ms), None, None),
                    NodeState::Healthy { at_ms } => (Some(*at_ms), None, None),
                    NodeState::Unhealthy { since_ms, reason } => (Some(*since_ms), None, Some(reason.to_string())),
                    NodeState::Skipped { tries } => (None, Some(*tries), None),
                    NodeState::Unreachable { since_ms, tries } => (Some(*since_ms), Some(*tries), None),
                };
                let content = match content_for(record, &slot.node) {
                    Assignment::Rolling(_) => "rolling",
                    Assignment::Master(_) => "master",
                    Assignment::NoMaster => "none",
                };
                NodeView {
                    node: slot.node.to_string(),
                    position: u32::try_from(position).unwrap_or(u32::MAX),
                    state: slot.state.label().to_string(),
                    content: content.to_string(),
                    since_ms,
                    tries,
                    reason,
                }
            })
            .collect();
        RollView {
            catalog: record.key.catalog.as_str().to_string(),
            name: record.key.name.as_str().to_string(),
            state: record.state.label().to_string(),
            stop_reason: match &record.state {
                RollState::Stopped(reason) => Some(reason.to_string()),
                _ => None,
            },
            status: status_line(record),
            index: record.index,
            node_at_index: record.node_at_index().map(ToString::to_string),
            percent_done: percent_done(record),
            nodes,
            started_at_ms: record.started_ms,
            updated_at_ms: record.updated_ms,
            step_started_at_ms: record.step_started_ms,
            finished_at_ms: record.finished_ms,
            step_timeout_ms: record.step_timeout_ms,
            health_window_ms: record.health.window_ms,
            unreachable_tries: record.health.unreachable_tries,
            master_hash: record.master.as_ref().map(|m| m.hash.to_string()),
            rolling_hash: record.rolling.hash.to_string(),
            revision: record.revision.to_string(),
        }
    }
}

/// Exhibitor's `getRollingStatus`, plus the final states.
fn status_line(record: &RollRecord) -> String {
    match &record.state {
        RollState::InProgress => match (record.node_at_index(), record.next_node()) {
            (Some(at), Some(next)) => format!("applying to \"{at}\" (next will be \"{next}\")"),
            (Some(at), None) => format!("applying to \"{at}\" (the last node)"),
            (None, _) => "past the last node; completing".to_string(),
        },
        RollState::Completed => "completed: every node runs the rolling content".to_string(),
        RollState::Stopped(reason) => format!("stopped: {reason}"),
        RollState::RolledBack => "rolled back: every node returns to the master".to_string(),
        RollState::ForceCommitted => "force-committed: every node runs the rolling content".to_string(),
    }
}
