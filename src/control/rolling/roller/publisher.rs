//! [`HealthPublisher`]: every node's worker that publishes its health report for each file it
//! rolls, and withdraws the reports of rolls that finished or no longer reach it.
//!
//! One unit of work reads the roll records, picks the files this node reports on
//! (`report::reported_files`), assembles each report from the runtime and dispatch
//! (`report::assemble`, with a baseline kept per file) and publishes the whole set at once. It
//! wakes on a runtime change (a scan applied the rolling content: the baseline is taken at once),
//! a store change (a roll record was put), and every tick (the report's span grows, so the main
//! sees the health window fill).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::report::{Baseline, assemble, next_baseline, reported_files};
use super::{Clock, HealthBoard, LocalFacts, RecordSource};
use crate::base::ids::{NodeId, RuleKey};
use crate::control::rolling::HealthReport;
use crate::base::worker::{Worker, WorkerState};

pub struct HealthPublisher {
    self_id: NodeId,
    records: Arc<dyn RecordSource>,
    facts: Arc<dyn LocalFacts>,
    board: Arc<dyn HealthBoard>,
    clock: Clock,
    baselines: BTreeMap<RuleKey, Baseline>,
    tick: tokio::time::Interval,
    /// Change counters that wake it (the runtime's and the store's); a closed one is dropped.
    changes: Vec<watch::Receiver<u64>>,
}

impl HealthPublisher {
    pub fn new(
        self_id: NodeId,
        records: Arc<dyn RecordSource>,
        facts: Arc<dyn LocalFacts>,
        board: Arc<dyn HealthBoard>,
        tick: Duration,
        clock: Clock,
        changes: Vec<watch::Receiver<u64>>,
    ) -> HealthPublisher {
        // The first unit runs at once (initial state Busy); the first tick comes a period later.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        HealthPublisher { self_id, records, facts, board, clock, baselines: BTreeMap::new(), tick, changes }
    }

    /// One round: the reports of every file this node rolls, published as one set.
    pub async fn publish_once(&mut self) -> Result<BTreeMap<RuleKey, HealthReport>, super::RollerError> {
        let records = self.records.roll_records().await?;
        let now_ms = (self.clock)();
        let mut reports = BTreeMap::new();
        let mut baselines = BTreeMap::new();
        for key in reported_files(&records, &self.self_id) {
            let facts = self.facts.file(key);
            let counters = self.facts.counters(key);
            let baseline = next_baseline(self.baselines.get(key), &facts, counters, now_ms);
            reports.insert(key.clone(), assemble(&facts, baseline.as_ref(), counters, now_ms));
            if let Some(baseline) = baseline {
                baselines.insert(key.clone(), baseline);
            }
        }
        // Files no longer reported lose their baseline: a later roll starts over.
        self.baselines = baselines;
        self.board.publish(&reports).await?;
        Ok(reports)
    }
}

/// Waits for any change counter to move; forever when there is none. A closed one is dropped.
async fn any_change(changes: &mut Vec<watch::Receiver<u64>>) {
    if changes.is_empty() {
        return std::future::pending().await;
    }
    let closed = {
        let waits: Vec<_> = changes
            .iter_mut()
            .enumerate()
            .map(|(i, rx)| Box::pin(async move { (i, rx.changed().await.is_err()) }))
            .collect();
        let (i, closed) = first(waits).await;
        closed.then_some(i)
    };
    if let Some(i) = closed {
        changes.remove(i);
    }
}

/// The output of the first of `futures` to finish (a small `futures::select_all`, which hotrule
/// does not depend on).
async fn first<F: std::future::Future + Unpin>(mut futures: Vec<F>) -> F::Output {
    std::future::poll_fn(move |cx| {
        for future in futures.iter_mut() {
            if let std::task::Poll::Ready(out) = std::pin::Pin::new(future).poll(cx) {
                return std::task::Poll::Ready(out);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[async_trait::async_trait]
impl Worker for HealthPublisher {
    fn name(&self) -> &'static str {
        "roll-health"
    }

    async fn work(&mut self) -> WorkerState {
        if let Err(e) = self.publish_once().await {
            tracing::warn!(node = %self.self_id, error = %e, "cannot publish the roll health reports; retrying on the next tick");
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let HealthPublisher { tick, changes, .. } = self;
        tokio::select! {
            _ = tick.tick() => {}
            () = any_change(changes) => {}
        }
        WorkerState::Busy
    }
}
