//! The roller's seams on a real node: where reports go ([`GossipBoard`] in a cluster,
//! [`LocalBoard`] for a node alone), what the node runs ([`RuntimeFacts`]: the runtime, and
//! dispatch's counters read as the roller's [`Counters`]) and where the roll records are read
//! ([`StoreRecords`]). They live in the composition root because they join the control plane's
//! roller to gossip, dispatch and storage, which the roller itself never names. Tests use these
//! or their own twins.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::base::ids::{NodeId, RuleKey};
use crate::cluster::gossip::Membership;
use crate::control::rolling::roller::{Counters, FileFacts, HealthBoard, LocalFacts, RecordSource, RollerError};
use crate::data::evaluation::{Dispatcher, EvaluationView, LogEvaluationView, RuleEvaluation};
use crate::control::rolling::{HealthReport, Observation, RollRecord, codec};
use crate::control::runtime::{Runtime, SuspendOrigin};
use crate::store::Store;

/// Reports in gossip: one `roll/<catalog>/<name>` key per file (see `cluster::gossip::rolling`).
pub struct GossipBoard {
    membership: Arc<Membership>,
}

impl GossipBoard {
    pub fn new(membership: Arc<Membership>) -> GossipBoard {
        GossipBoard { membership }
    }
}

#[async_trait::async_trait]
impl HealthBoard for GossipBoard {
    fn is_main(&self) -> bool {
        self.membership.is_main()
    }

    async fn publish(&self, reports: &BTreeMap<RuleKey, HealthReport>) -> Result<(), RollerError> {
        self.membership.publish_roll_health(reports).await.map_err(|e| RollerError::Publish { source: Box::new(e) })
    }

    async fn observations(&self, key: &RuleKey) -> BTreeMap<NodeId, Observation> {
        self.membership
            .roll_health(key)
            .await
            .into_iter()
            .map(|member| {
                let observation = match (member.live, member.report) {
                    (false, _) => Observation::Unreachable,
                    (true, Some(report)) => Observation::Report(report),
                    (true, None) => Observation::NoReport,
                };
                (member.node, observation)
            })
            .collect()
    }

    async fn became_main(&self) {
        let mut view_rx = self.membership.view();
        let is_main = view_rx.borrow_and_update().is_main();
        // Already the main: first wait to lose it, so this does not resolve at once forever.
        if is_main && view_rx.wait_for(|view| !view.is_main()).await.is_err() {
            return std::future::pending().await;
        }
        if view_rx.wait_for(|view| view.is_main()).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A node alone: it is the main and the only node, and reads its own reports back.
pub struct LocalBoard {
    self_id: NodeId,
    reports: Mutex<BTreeMap<RuleKey, HealthReport>>,
}

impl LocalBoard {
    pub fn new(self_id: NodeId) -> LocalBoard {
        LocalBoard { self_id, reports: Mutex::new(BTreeMap::new()) }
    }
}

#[async_trait::async_trait]
impl HealthBoard for LocalBoard {
    fn is_main(&self) -> bool {
        true
    }

    async fn publish(&self, reports: &BTreeMap<RuleKey, HealthReport>) -> Result<(), RollerError> {
        *self.reports.lock().unwrap_or_else(|p| p.into_inner()) = reports.clone();
        Ok(())
    }

    async fn observations(&self, key: &RuleKey) -> BTreeMap<NodeId, Observation> {
        let report = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned();
        BTreeMap::from([(self.self_id.clone(), report.map_or(Observation::NoReport, Observation::Report))])
    }
}

/// What the node runs: the runtime's loaded content, apply error and gate, and dispatch's
/// per-file counters.
pub struct RuntimeFacts {
    runtime: Arc<Runtime>,
    dispatcher: Arc<Dispatcher>,
}

impl RuntimeFacts {
    pub fn new(runtime: Arc<Runtime>, dispatcher: Arc<Dispatcher>) -> RuntimeFacts {
        RuntimeFacts { runtime, dispatcher }
    }
}

impl LocalFacts for RuntimeFacts {
    fn file(&self, key: &RuleKey) -> FileFacts {
        file_facts(&self.runtime, key)
    }

    fn counters(&self, key: &RuleKey) -> Counters {
        Counters::from(&self.dispatcher.evaluation_of(key))
    }
}

/// Dispatch's counters of a MAL file as the roller reads them.
impl From<&EvaluationView> for Counters {
    fn from(view: &EvaluationView) -> Counters {
        Counters { errors: view.errors, samples_in: view.samples_in, values_out: view.values_out }
    }
}

/// Dispatch's counters of a LAL file: logs in, and kept logs plus emitted samples out.
impl From<&LogEvaluationView> for Counters {
    fn from(view: &LogEvaluationView) -> Counters {
        Counters { errors: view.errors, samples_in: view.logs_in, values_out: view.kept.saturating_add(view.samples_out) }
    }
}

impl From<&RuleEvaluation> for Counters {
    fn from(view: &RuleEvaluation) -> Counters {
        match view {
            RuleEvaluation::Metrics(view) => Counters::from(view),
            RuleEvaluation::Logs(view) => Counters::from(view),
        }
    }
}

/// The runtime's state of `key` as [`FileFacts`].
pub fn file_facts(runtime: &Runtime, key: &RuleKey) -> FileFacts {
    let Some(state) = runtime.get(key) else { return FileFacts::default() };
    FileFacts {
        gate_running: state.loaded.is_some() && state.origin == SuspendOrigin::None,
        loaded: state.loaded.map(|loaded| (loaded.content_hash, loaded.loaded_at_ms)),
        apply_error: state.last_apply_error,
    }
}

/// The roll records of the node's own store. A record that does not decode is skipped and
/// logged: the node cannot act on it, and the others still get their reports.
pub struct StoreRecords {
    store: Arc<Store>,
}

impl StoreRecords {
    pub fn new(store: Arc<Store>) -> StoreRecords {
        StoreRecords { store }
    }
}

#[async_trait::async_trait]
impl RecordSource for StoreRecords {
    async fn roll_records(&self) -> Result<Vec<RollRecord>, RollerError> {
        // The publisher wakes on every runtime change (one per write under load): with no
        // record held (the common case) the answer comes from memory, not an engine scan.
        if self.store.roll_hashes().is_empty() {
            return Ok(Vec::new());
        }
        let stored = self.store.list_rolls().await.map_err(|e| RollerError::Records { source: Box::new(e) })?;
        Ok(stored
            .into_iter()
            .filter_map(|roll| match codec::decode(&roll.bytes) {
                Ok(record) => Some(record),
                Err(e) => {
                    tracing::warn!(key = %roll.key, error = %e, "skipping a roll record that does not decode");
                    None
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod gossip_tests;
#[cfg(test)]
mod node_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lal_file_counts_logs_in_and_kept_logs_and_emitted_samples_out() {
        let view = LogEvaluationView { logs_in: 10, kept: 3, samples_out: 4, errors: 2, aborted: 5, ..LogEvaluationView::default() };
        let counters = Counters::from(&RuleEvaluation::Logs(view));
        assert_eq!(counters, Counters { errors: 2, samples_in: 10, values_out: 7 });
        let mal = EvaluationView { samples_in: 8, values_out: 6, errors: 1, ..EvaluationView::default() };
        assert_eq!(Counters::from(&RuleEvaluation::Metrics(mal)), Counters { errors: 1, samples_in: 8, values_out: 6 });
    }
}
