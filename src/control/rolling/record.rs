//! The persisted roll record and the pure reads over it: which content a node runs, how far the
//! roll is, and whether a normal write to the file must wait (409).
//!
//! `index` is the position of the node acting (Exhibitor's rolling index): nodes at positions
//! `0..=index` run the rolling content, the others the master. It equals `nodes.len()` once every
//! node has passed, so "position ≤ index runs the rolling content" holds through completion.
//!
//! The record is stored, so every enum here only ever gains variants at the end.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::health::{HealthFailure, HealthSettings};
use crate::base::ids::{ContentHash, NodeId, Revision, RuleKey};

/// One version of the file's content, with its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollContent {
    pub bytes: Vec<u8>,
    pub hash: ContentHash,
}

impl RollContent {
    pub fn new(bytes: Vec<u8>) -> RollContent {
        RollContent { hash: ContentHash::of(&bytes), bytes }
    }
}

/// Where one node stands in the roll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    /// Not reached yet, or reached and nothing seen of it yet.
    Pending,
    /// Runs the rolling content since `since_ms`; its health window is open.
    RunningRolling { since_ms: u64 },
    /// Proven healthy on the rolling content at `at_ms`.
    Healthy { at_ms: u64 },
    /// Reported unhealthy, continuously since `since_ms`.
    Unhealthy { since_ms: u64, reason: HealthFailure },
    /// Passed over after `tries` ticks on which it was unreachable.
    Skipped { tries: u32 },
    /// Unreachable for `tries` consecutive ticks, since `since_ms`.
    Unreachable { since_ms: u64, tries: u32 },
}

impl NodeState {
    pub fn label(&self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::RunningRolling { .. } => "running_rolling",
            NodeState::Healthy { .. } => "healthy",
            NodeState::Unhealthy { .. } => "unhealthy",
            NodeState::Skipped { .. } => "skipped",
            NodeState::Unreachable { .. } => "unreachable",
        }
    }

    /// Healthy or skipped: the roll has gone past this node.
    pub fn is_settled(&self) -> bool {
        matches!(self, NodeState::Healthy { .. } | NodeState::Skipped { .. })
    }
}

/// One node of the ordered list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRoll {
    pub node: NodeId,
    pub state: NodeState,
}

/// Why a roll stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// The node at the index was not healthy within the step timeout.
    StepTimeout { node: NodeId, waited_ms: u64, last: HealthFailure },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::StepTimeout { node, waited_ms, last } => {
                write!(f, "{node} was not healthy within the step timeout ({waited_ms} ms): {last}")
            }
        }
    }
}

/// The roll as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RollState {
    InProgress,
    /// Every node passed; the rolling content becomes the committed entry.
    Completed,
    /// Frozen: nodes keep what they run until the operator rolls back or force-commits.
    Stopped(StopReason),
    /// Every node returns to the master.
    RolledBack,
    /// The rolling content becomes the committed entry everywhere, whatever the nodes' health.
    ForceCommitted,
}

impl RollState {
    pub fn label(&self) -> &'static str {
        match self {
            RollState::InProgress => "in_progress",
            RollState::Completed => "completed",
            RollState::Stopped(_) => "stopped",
            RollState::RolledBack => "rolled_back",
            RollState::ForceCommitted => "force_committed",
        }
    }

    /// In progress or stopped: nodes may run different contents, and the file is held.
    pub fn holds_the_file(&self) -> bool {
        matches!(self, RollState::InProgress | RollState::Stopped(_))
    }
}

/// The persisted roll of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollRecord {
    pub key: RuleKey,
    /// The committed content when the roll started; `None` for a file with no entry.
    pub master: Option<RollContent>,
    pub rolling: RollContent,
    pub nodes: Vec<NodeRoll>,
    pub index: u32,
    pub step_timeout_ms: u64,
    pub health: HealthSettings,
    pub started_ms: u64,
    pub updated_ms: u64,
    /// When the node at the index became the one acting.
    pub step_started_ms: u64,
    pub finished_ms: Option<u64>,
    pub state: RollState,
    /// Stamped by the writer on every put, for last-write-wins between replicas; the pure
    /// transitions leave it alone.
    pub revision: Revision,
}

/// A request to start a roll, validated and compiled by the caller.
#[derive(Debug, Clone)]
pub struct StartRoll {
    pub key: RuleKey,
    pub master: Option<Vec<u8>>,
    pub rolling: Vec<u8>,
    /// Already ordered ([`super::order_nodes`]).
    pub nodes: Vec<NodeId>,
    pub step_timeout_ms: u64,
    pub health: HealthSettings,
    pub now_ms: u64,
    pub revision: Revision,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("the rolling content is the committed content ({hash}); nothing to roll")]
    NoChange { hash: ContentHash },
    #[error("a roll needs at least one node")]
    NoNodes,
    #[error("node {0} is listed twice")]
    DuplicateNode(NodeId),
    #[error("the step timeout must be above zero")]
    ZeroStepTimeout,
    #[error("the step timeout ({step_timeout_ms} ms) must be longer than the health window ({window_ms} ms)")]
    TimeoutWithinWindow { step_timeout_ms: u64, window_ms: u64 },
}

impl RollRecord {
    /// The step timeout when the start request names none (the health window's default is 30 s).
    pub const DEFAULT_STEP_TIMEOUT_MS: u64 = 300_000;

    /// A new roll at index 0, every node pending.
    pub fn start(request: StartRoll) -> Result<RollRecord, StartError> {
        let rolling = RollContent::new(request.rolling);
        let master = request.master.map(RollContent::new);
        if master.as_ref().is_some_and(|m| m.hash == rolling.hash) {
            return Err(StartError::NoChange { hash: rolling.hash });
        }
        if request.nodes.is_empty() {
            return Err(StartError::NoNodes);
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = request.nodes.iter().find(|n| !seen.insert(*n)) {
            return Err(StartError::DuplicateNode(twice.clone()));
        }
        if request.step_timeout_ms == 0 {
            return Err(StartError::ZeroStepTimeout);
        }
        if request.step_timeout_ms <= request.health.window_ms {
            return Err(StartError::TimeoutWithinWindow {
                step_timeout_ms: request.step_timeout_ms,
                window_ms: request.health.window_ms,
            });
        }
        Ok(RollRecord {
            key: request.key,
            master,
            rolling,
            nodes: request.nodes.into_iter().map(|node| NodeRoll { node, state: NodeState::Pending }).collect(),
            index: 0,
            step_timeout_ms: request.step_timeout_ms,
            health: request.health,
            started_ms: request.now_ms,
            updated_ms: request.now_ms,
            step_started_ms: request.now_ms,
            finished_ms: None,
            state: RollState::InProgress,
            revision: request.revision,
        })
    }

    /// The node acting now, if the roll has not gone past the last one.
    pub fn node_at_index(&self) -> Option<&NodeId> {
        self.nodes.get(self.index as usize).map(|n| &n.node)
    }

    /// The node after the one acting.
    pub fn next_node(&self) -> Option<&NodeId> {
        self.nodes.get(self.index as usize + 1).map(|n| &n.node)
    }

    pub fn position_of(&self, node: &NodeId) -> Option<usize> {
        self.nodes.iter().position(|n| &n.node == node)
    }

    /// The same record with the writer's revision.
    pub fn stamped(mut self, revision: Revision) -> RollRecord {
        self.revision = revision;
        self
    }
}

/// Which content a node runs for the rolled file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment<'a> {
    Rolling(&'a RollContent),
    Master(&'a RollContent),
    /// The master side of a roll of a file that had no entry: the node runs nothing for it.
    NoMaster,
}

/// The content `node` runs: the rolling content at positions ≤ index while the roll holds the
/// file; everywhere once it completed or was force-committed; nowhere once rolled back. A node
/// not in the list (it joined after the start) runs the master until the roll finishes.
pub fn content_for<'a>(record: &'a RollRecord, node: &NodeId) -> Assignment<'a> {
    let master = || record.master.as_ref().map_or(Assignment::NoMaster, Assignment::Master);
    match record.state {
        RollState::Completed | RollState::ForceCommitted => Assignment::Rolling(&record.rolling),
        RollState::RolledBack => master(),
        RollState::InProgress | RollState::Stopped(_) => match record.position_of(node) {
            Some(position) if position <= record.index as usize => Assignment::Rolling(&record.rolling),
            _ => master(),
        },
    }
}

/// How far the roll is, 0..=100: the share of nodes it has passed (healthy or skipped); 100 once
/// completed or force-committed, 0 once rolled back.
pub fn percent_done(record: &RollRecord) -> u8 {
    match record.state {
        RollState::Completed | RollState::ForceCommitted => 100,
        RollState::RolledBack => 0,
        RollState::InProgress | RollState::Stopped(_) => {
            if record.nodes.is_empty() {
                return 100;
            }
            let settled = record.nodes.iter().filter(|n| n.state.is_settled()).count();
            // At most 100 (settled ≤ len), so the narrowing never truncates.
            u8::try_from(settled * 100 / record.nodes.len()).unwrap_or(100)
        }
    }
}

/// Why a normal write (addOrUpdate, inactivate, delete) or a second roll of the file must wait:
/// answered 409 with the roll's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{key} is being rolled out ({state}, at {at}, {percent}% done); roll it back or force-commit it before \
     another write"
)]
pub struct RollConflict {
    pub key: RuleKey,
    pub state: &'static str,
    /// `node k of n: id`, or `past the last node`.
    pub at: String,
    pub percent: u8,
}

/// The 409 rule: a roll in progress or stopped holds its file; a finished roll (completed, rolled
/// back, force-committed) does not.
pub fn write_conflict(record: Option<&RollRecord>) -> Result<(), RollConflict> {
    let Some(record) = record.filter(|r| r.state.holds_the_file()) else { return Ok(()) };
    let at = match record.node_at_index() {
        Some(node) => format!("node {} of {}: {node}", record.index + 1, record.nodes.len()),
        None => "past the last node".to_string(),
    };
    Err(RollConflict { key: record.key.clone(), state: record.state.label(), at, percent: percent_done(record) })
}
