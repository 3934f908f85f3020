//! The IO around rolling changes (issue 15, docs/rolling.md "Who acts"): each node's health
//! report in gossip, and the main's roll worker that advances every roll in progress.
//!
//! - [`report`]: the pure assembly of a node's [`HealthReport`] from its runtime and dispatch
//!   counters, and which files a node reports on;
//! - [`publisher`]: [`HealthPublisher`], on every node: after each runtime or store change (a
//!   scan's apply, a roll record's put) and every tick, publishes its reports and withdraws the
//!   ones of finished rolls;
//! - [`worker`]: [`RollWorker`], on the main only: every tick, `rolling::advance` over the
//!   observations built from the reports, puts the record when it changed, and completes a roll
//!   that passed its last node;
//! - [`config`]: the `rolling` section (`rolling.tick`).
//!
//! The roller writes nothing itself: records go through [`RollActions`], which the workflow (the
//! one writer of records) implements; the worker only decides when to call it. It reads through
//! its own seams ([`HealthBoard`], [`LocalFacts`], [`RecordSource`]); their implementations on a
//! real node (gossip or the node alone, the runtime and dispatch's counters, the stored records)
//! are in the composition root (`node::roll_boards`), so the roller names neither the cluster
//! nor the data plane.

pub mod config;
pub mod publisher;
pub mod report;
pub mod worker;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use config::{RawRolling, RollerSettings};
pub use publisher::HealthPublisher;
pub use report::{Baseline, Counters, FileFacts};
pub use worker::RollWorker;

use crate::base::ids::{NodeId, RuleKey};
use crate::control::rolling::{HealthReport, Observation, RollRecord};

/// Why a roll action or read failed.
#[derive(Debug, thiserror::Error)]
pub enum RollerError {
    /// The workflow refused or failed an action (not the main any more, a storage error, a lock
    /// timeout): the worker logs it and tries again on its next tick.
    #[error("{operation} of {key} failed: {source}")]
    Action {
        operation: &'static str,
        key: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The roll records could not be read.
    #[error("reading the roll records failed: {source}")]
    Records {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The node's reports could not be published (gossip refused them).
    #[error("publishing the roll reports failed: {source}")]
    Publish {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What the main's roll worker asks of the one writer of roll records (the workflow).
#[async_trait::async_trait]
pub trait RollActions: Send + Sync + 'static {
    /// Stamps, persists and replicates `record` (refused when this node is not the main).
    async fn put_roll(&self, record: RollRecord) -> Result<(), RollerError>;

    /// Finishes the roll of `key`: the stored record has passed its last node (`index ==
    /// nodes.len()`, still in progress); the rolling content becomes the committed entry and the
    /// record is marked completed, in one batch (force-commit's structural path). Called again
    /// after a crash or failover between the put and the completion, so it must be idempotent.
    async fn complete_roll(&self, key: &RuleKey) -> Result<(), RollerError>;

    /// Every roll record this node holds.
    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError>;
}

/// Where every node reads the roll records from (its own store; any node, not only the main).
#[async_trait::async_trait]
pub trait RecordSource: Send + Sync + 'static {
    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError>;
}

/// Where reports go and where the main reads them back.
#[async_trait::async_trait]
pub trait HealthBoard: Send + Sync + 'static {
    /// This node is the main now.
    fn is_main(&self) -> bool;

    /// Replaces this node's reports with `reports` (files missing from it are withdrawn).
    async fn publish(&self, reports: &BTreeMap<RuleKey, HealthReport>) -> Result<(), RollerError>;

    /// What the main knows of every node for `key`: live with a report, live without one, or
    /// unreachable. A node missing from the map is unreachable.
    async fn observations(&self, key: &RuleKey) -> BTreeMap<NodeId, Observation>;

    /// Resolves when this node becomes the main (a new main ticks at once instead of a tick
    /// later). Never, by default.
    async fn became_main(&self) {
        std::future::pending().await
    }
}

/// What this node runs for a file, read from its runtime and dispatch.
pub trait LocalFacts: Send + Sync + 'static {
    fn file(&self, key: &RuleKey) -> FileFacts;
    fn counters(&self, key: &RuleKey) -> Counters;
}

/// The clock of the roller, in unix milliseconds (a test passes its own).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(crate::base::clock::now_ms)
}

/// Spawns the roller's workers on `workers`: the publisher on every node, and the main's roll
/// worker when `actions` is given (the workflow's implementation of [`RollActions`]).
pub fn spawn(
    workers: &mut crate::base::worker::WorkerRunner,
    settings: &RollerSettings,
    parts: RollerParts,
    actions: Option<Arc<dyn RollActions>>,
) {
    let RollerParts { self_id, board, records, facts, changes } = parts;
    workers.spawn(HealthPublisher::new(self_id, records, facts, board.clone(), settings.tick, system_clock(), changes));
    match actions {
        Some(actions) => workers.spawn(RollWorker::new(actions, board, settings.tick, system_clock())),
        None => tracing::info!("no roll actions wired: this node publishes its roll health but never advances a roll"),
    }
}

/// What the roller reads on a node.
pub struct RollerParts {
    pub self_id: NodeId,
    pub board: Arc<dyn HealthBoard>,
    pub records: Arc<dyn RecordSource>,
    pub facts: Arc<dyn LocalFacts>,
    /// Change counters that wake the publisher (the runtime's, the store's).
    pub changes: Vec<tokio::sync::watch::Receiver<u64>>,
}
