//! [`RollWorker`]: the main's roll worker. Every tick (`rolling.tick`, default 5 s), and at once
//! when this node becomes the main, it runs `rolling::advance` over every roll in progress, with
//! the observations the board gives (live with a report, live without, unreachable), and carries
//! out the decision through [`RollActions`]:
//!
//! | decision | the worker |
//! |---|---|
//! | wait, advance, skip, stop | puts the next record when it changed (the `updated_ms` stamp alone is not a change) |
//! | complete | puts the record past its last node, still in progress, then `complete_roll` |
//!
//! A completion is two calls, so it is made restartable: the record put first is "past the
//! last node, in progress", which `advance` answers with `Complete` again. A crash or a failover
//! between the two calls only repeats `complete_roll` on the next main's tick.
//!
//! On a node that is not the main a tick does nothing. A new main continues every roll from the
//! record's index and step timer (`step_started_ms`), which the record carries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Clock, HealthBoard, RollActions, RollerError};
use crate::base::ids::{NodeId, RuleKey};
use crate::control::rolling::{Decision, Observation, RollRecord, RollState, advance};
use crate::base::worker::{Worker, WorkerState};

/// What one tick did to one roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickOutcome {
    pub key: RuleKey,
    pub decision: Decision,
    /// The record was put.
    pub put: bool,
    /// `complete_roll` was called and succeeded.
    pub completed: bool,
}

pub struct RollWorker {
    actions: Arc<dyn RollActions>,
    board: Arc<dyn HealthBoard>,
    clock: Clock,
    tick: tokio::time::Interval,
}

impl RollWorker {
    pub fn new(actions: Arc<dyn RollActions>, board: Arc<dyn HealthBoard>, tick: Duration, clock: Clock) -> RollWorker {
        // The first unit runs at once (initial state Busy); the first tick comes a period later.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        RollWorker { actions, board, clock, tick }
    }

    /// One tick over every roll in progress; nothing on a node that is not the main. A failed
    /// action is logged and leaves that roll for the next tick; the other rolls go on.
    pub async fn tick_once(&self) -> Result<Vec<TickOutcome>, RollerError> {
        if !self.board.is_main() {
            return Ok(Vec::new());
        }
        let records = self.actions.roll_records().await?;
        let mut outcomes = Vec::new();
        for record in records.into_iter().filter(|r| r.state == RollState::InProgress) {
            let observations = self.board.observations(&record.key).await;
            outcomes.push(self.step(record, &observations).await);
        }
        Ok(outcomes)
    }

    async fn step(&self, record: RollRecord, observations: &BTreeMap<NodeId, Observation>) -> TickOutcome {
        let key = record.key.clone();
        let (next, decision) = advance(&record, observations, (self.clock)());
        let next = to_persist(&decision, next);
        let changed = changed(&record, &next);
        log_decision(&key, &decision, changed);
        let mut outcome = TickOutcome { key: key.clone(), decision, put: false, completed: false };
        if changed {
            if let Err(e) = self.actions.put_roll(next).await {
                tracing::warn!(roll = %key, error = %e, "cannot put the roll record; retrying on the next tick");
                return outcome;
            }
            outcome.put = true;
        }
        if matches!(outcome.decision, Decision::Complete { .. }) {
            match self.actions.complete_roll(&key).await {
                Ok(()) => {
                    outcome.completed = true;
                    tracing::info!(roll = %key, "roll completed: the rolling content is the committed entry");
                }
                Err(e) => tracing::warn!(roll = %key, error = %e, "cannot complete the roll; retrying on the next tick"),
            }
        }
        outcome
    }
}

/// The record to store for `decision`: a completion is stored past its last node but still in
/// progress, so that `complete_roll` (which marks it completed with the entry, in one batch) is
/// repeated until it succeeds.
pub fn to_persist(decision: &Decision, mut next: RollRecord) -> RollRecord {
    if matches!(decision, Decision::Complete { .. }) {
        next.state = RollState::InProgress;
        next.finished_ms = None;
    }
    next
}

/// `next` differs from `stored` in more than its `updated_ms` stamp.
pub fn changed(stored: &RollRecord, next: &RollRecord) -> bool {
    RollRecord { updated_ms: stored.updated_ms, ..next.clone() } != *stored
}

/// Every decision at info with the roll and the node, except a wait that changed nothing (debug:
/// it repeats every tick while a node proves itself).
fn log_decision(key: &RuleKey, decision: &Decision, changed: bool) {
    match decision {
        Decision::Idle => {}
        Decision::Wait { node, reason } if changed => tracing::info!(roll = %key, %node, %reason, "roll waits on the node"),
        Decision::Wait { node, reason } => tracing::debug!(roll = %key, %node, %reason, "roll still waits on the node"),
        Decision::WaitUnreachable { node, tries, of } => {
            tracing::info!(roll = %key, %node, tries, of, "roll waits on an unreachable node")
        }
        Decision::Advance { from, to } => tracing::info!(roll = %key, node = %from, next = %to, "node healthy; roll advances"),
        Decision::Skip { node, tries, to } => {
            tracing::warn!(roll = %key, %node, tries, next = %to, "node unreachable; roll skips it")
        }
        Decision::Complete { skipped: Some(node) } => {
            tracing::warn!(roll = %key, %node, "last node unreachable and skipped; roll passed every node")
        }
        Decision::Complete { skipped: None } => tracing::info!(roll = %key, "roll passed every node"),
        Decision::Stop(reason) => tracing::warn!(roll = %key, %reason, "roll stopped"),
    }
}

#[async_trait::async_trait]
impl Worker for RollWorker {
    fn name(&self) -> &'static str {
        "roller"
    }

    async fn work(&mut self) -> WorkerState {
        if let Err(e) = self.tick_once().await {
            tracing::warn!(error = %e, "roll tick failed; retrying on the next tick");
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let board = self.board.clone();
        tokio::select! {
            _ = self.tick.tick() => {}
            () = board.became_main() => {}
        }
        WorkerState::Busy
    }
}
