//! The roller's seams on a real node: where reports go ([`GossipBoard`] in a cluster,
//! [`LocalBoard`] for a node alone), what the node runs ([`RuntimeFacts`]) and where the roll
//! records are read ([`StoreRecords`]). Tests use these or their own twins.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::report::{Counters, FileFacts};
use super::{HealthBoard, LocalFacts, RecordSource, RollerError};
use crate::cluster::gossip::Membership;
use crate::data::evaluation::Dispatcher;
use crate::base::ids::{NodeId, RuleKey};
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
        Ok(self.membership.publish_roll_health(reports).await?)
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
