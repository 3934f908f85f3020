//! The transitions of a roll: the main's tick ([`advance`]) and the operator's [`rollback`] and
//! [`force_commit`]. Each takes a record and returns the next one; the caller persists it (and
//! stamps its revision) and carries out the decision.
//!
//! One tick judges only the node at the index:
//!
//! | what the main sees of it | node state | decision |
//! |---|---|---|
//! | healthy report | healthy | advance (index + 1), or complete past the last node |
//! | not-yet-healthy report, or no report | running_rolling / pending | wait; stop once the step timeout passed |
//! | unhealthy report | unhealthy (since the first such tick) | wait; stop once the step timeout passed |
//! | unreachable, fewer than `unreachable_tries` ticks in a row | unreachable (tries + 1) | wait |
//! | unreachable, the `unreachable_tries`-th tick | skipped | skip (index + 1), or complete |
//!
//! An unreachable node is bounded by its tries, not by the step timeout: the timeout is for a node
//! that answers and is wrong. A roll that is not in progress is left alone (`Idle`).

use std::collections::BTreeMap;

use super::health::{HealthFailure, HealthReport, Verdict, judge};
use super::record::{NodeState, RollRecord, RollState, StopReason};
use crate::base::ids::NodeId;

/// What the main knows of one node on a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Live in gossip, with its latest report for the file.
    Report(HealthReport),
    /// Live in gossip, but it has published no report for the file yet.
    NoReport,
    /// Not live (gossip says dead, or the main cannot reach it). A node missing from the
    /// observations is unreachable too.
    Unreachable,
}

/// What a tick decided; the record returned with it already reflects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The roll is not in progress: nothing to do.
    Idle,
    /// The node at the index is not proven yet.
    Wait { node: NodeId, reason: HealthFailure },
    /// The node at the index is unreachable; `tries` of `of` so far.
    WaitUnreachable { node: NodeId, tries: u32, of: u32 },
    /// `from` is healthy; `to` acts now.
    Advance { from: NodeId, to: NodeId },
    /// `node` was unreachable for `tries` ticks and is passed over; `to` acts now.
    Skip { node: NodeId, tries: u32, to: NodeId },
    /// Every node passed (the last one healthy, or skipped when `skipped` is set).
    Complete { skipped: Option<NodeId> },
    /// The roll stopped.
    Stop(StopReason),
}

/// One tick of the main over `record`.
pub fn advance(record: &RollRecord, observations: &BTreeMap<NodeId, Observation>, now_ms: u64) -> (RollRecord, Decision) {
    let mut next = record.clone();
    if record.state != RollState::InProgress {
        return (next, Decision::Idle);
    }
    let index = record.index as usize;
    let Some(slot) = record.nodes.get(index) else {
        // Past the last node but not completed (a record written before a crash): finish it.
        finish(&mut next, RollState::Completed, now_ms);
        return (next, Decision::Complete { skipped: None });
    };
    let node = slot.node.clone();
    next.updated_ms = now_ms;
    let observation = observations.get(&node).unwrap_or(&Observation::Unreachable);
    let (state, failure) = match observation {
        Observation::Unreachable => {
            let (since_ms, tries) = match slot.state {
                NodeState::Unreachable { since_ms, tries } => (since_ms, tries.saturating_add(1)),
                _ => (now_ms, 1),
            };
            let of = record.health.unreachable_tries.max(1);
            if tries >= of {
                next.nodes[index].state = NodeState::Skipped { tries };
                return match step(&mut next, now_ms) {
                    Some(to) => (next, Decision::Skip { node, tries, to }),
                    None => (next, Decision::Complete { skipped: Some(node) }),
                };
            }
            next.nodes[index].state = NodeState::Unreachable { since_ms, tries };
            return (next, Decision::WaitUnreachable { node, tries, of });
        }
        Observation::NoReport => (NodeState::Pending, HealthFailure::NoReport),
        Observation::Report(report) => match judge(report, &record.rolling.hash, &record.health) {
            Verdict::Healthy => {
                next.nodes[index].state = NodeState::Healthy { at_ms: now_ms };
                return match step(&mut next, now_ms) {
                    Some(to) => (next, Decision::Advance { from: node, to }),
                    None => (next, Decision::Complete { skipped: None }),
                };
            }
            Verdict::NotYet(failure) => {
                let state = match failure {
                    HealthFailure::NotRunningRolling { .. } => NodeState::Pending,
                    _ => NodeState::RunningRolling { since_ms: report.running_since_ms },
                };
                (state, failure)
            }
            Verdict::Unhealthy(reason) => {
                let since_ms = match slot.state {
                    NodeState::Unhealthy { since_ms, .. } => since_ms,
                    _ => now_ms,
                };
                (NodeState::Unhealthy { since_ms, reason: reason.clone() }, reason)
            }
        },
    };
    next.nodes[index].state = state;
    let waited_ms = now_ms.saturating_sub(record.step_started_ms);
    if waited_ms >= record.step_timeout_ms {
        let reason = StopReason::StepTimeout { node, waited_ms, last: failure };
        next.state = RollState::Stopped(reason.clone());
        return (next, Decision::Stop(reason));
    }
    (next, Decision::Wait { node, reason: failure })
}

/// Moves the index past the node at it; returns the node acting now, or completes the roll.
fn step(record: &mut RollRecord, now_ms: u64) -> Option<NodeId> {
    record.index = record.index.saturating_add(1);
    record.step_started_ms = now_ms;
    match record.node_at_index().cloned() {
        Some(to) => Some(to),
        None => {
            finish(record, RollState::Completed, now_ms);
            None
        }
    }
}

fn finish(record: &mut RollRecord, state: RollState, now_ms: u64) {
    record.index = u32::try_from(record.nodes.len()).unwrap_or(u32::MAX).max(record.index);
    record.state = state;
    record.updated_ms = now_ms;
    record.finished_ms = Some(now_ms);
}

/// Why an operator transition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("the roll of {key} already finished ({state}); there is nothing to {operation}")]
    Finished { key: String, state: &'static str, operation: &'static str },
}

/// `rollback-rolling`: every node returns to the master. Allowed while in progress or stopped.
pub fn rollback(record: &RollRecord, now_ms: u64) -> Result<RollRecord, TransitionError> {
    end_by_operator(record, RollState::RolledBack, "roll back", now_ms)
}

/// `force-commit-rolling`: the rolling content becomes the committed entry everywhere, whatever
/// the nodes' health. Allowed while in progress or stopped. The index stays where the roll was,
/// so the record still shows how far it got on its own.
pub fn force_commit(record: &RollRecord, now_ms: u64) -> Result<RollRecord, TransitionError> {
    end_by_operator(record, RollState::ForceCommitted, "force-commit", now_ms)
}

fn end_by_operator(
    record: &RollRecord,
    state: RollState,
    operation: &'static str,
    now_ms: u64,
) -> Result<RollRecord, TransitionError> {
    if !record.state.holds_the_file() {
        return Err(TransitionError::Finished { key: record.key.to_string(), state: record.state.label(), operation });
    }
    let mut next = record.clone();
    next.state = state;
    next.updated_ms = now_ms;
    next.finished_ms = Some(now_ms);
    Ok(next)
}
